import Foundation

/// Where the kit keeps its state between launches: the device credential, the orders followed,
/// the calls not sent yet and the tokens already sent.
///
/// ``KeychainStore`` on Apple platforms; ``FileStore`` anywhere (Linux, tests).
public protocol KitStore: Sendable {
    /// The state saved last.
    /// - Returns: The saved bytes, or `nil` when nothing was saved yet.
    func load() throws -> Data?
    /// Replaces the saved state.
    /// - Parameter data: The bytes to keep.
    func save(_ data: Data) throws
}

/// Keeps the kit's state in one file, written atomically.
public struct FileStore: KitStore {
    /// The file.
    public let url: URL

    /// A store in a file.
    /// - Parameter url: The file to keep the state in; its directory must exist.
    public init(url: URL) { self.url = url }

    /// Reads the file.
    /// - Returns: Its bytes, or `nil` when it does not exist.
    public func load() throws -> Data? {
        guard FileManager.default.fileExists(atPath: url.path) else { return nil }
        return try Data(contentsOf: url)
    }

    /// Writes the file atomically.
    /// - Parameter data: The bytes to write.
    public func save(_ data: Data) throws { try data.write(to: url, options: .atomic) }
}

#if canImport(Security)
import Security

/// Keeps the kit's state in the Keychain (it holds the device credential), readable after
/// the first unlock so that a push-started activity's token reaches the server from the background.
public struct KeychainStore: KitStore {
    /// The Keychain service name of the item.
    public let service: String

    /// A store in the Keychain.
    /// - Parameter service: The item's service name.
    public init(service: String = "OrderFlowKit") { self.service = service }

    private var query: [String: Any] {
        [kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: service,
         kSecAttrAccount as String: "state"]
    }

    /// Reads the item.
    /// - Returns: Its bytes, or `nil` when there is none.
    public func load() throws -> Data? {
        var request = query
        request[kSecReturnData as String] = true
        var result: AnyObject?
        let status = SecItemCopyMatching(request as CFDictionary, &result)
        if status == errSecItemNotFound { return nil }
        guard status == errSecSuccess else { throw KeychainError(status: status) }
        return result as? Data
    }

    /// Writes the item, replacing the one before.
    /// - Parameter data: The bytes to keep.
    public func save(_ data: Data) throws {
        let update = [kSecValueData as String: data] as CFDictionary
        var status = SecItemUpdate(query as CFDictionary, update)
        if status == errSecItemNotFound {
            var add = query
            add[kSecValueData as String] = data
            add[kSecAttrAccessible as String] = kSecAttrAccessibleAfterFirstUnlock
            status = SecItemAdd(add as CFDictionary, nil)
        }
        guard status == errSecSuccess else { throw KeychainError(status: status) }
    }
}

/// The Keychain refused to read or write the kit's item.
public struct KeychainError: Error, CustomStringConvertible {
    /// The `OSStatus` the Keychain answered.
    public let status: OSStatus
    /// What went wrong, for people.
    public var description: String { "The Keychain refused OrderFlowKit's item (OSStatus \(status)); the device registers again at the next launch if this persists." }
}
#endif
