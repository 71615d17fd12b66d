import APNSCore
import Foundation

/// What the app's door asks of a call that changes a device and carries no device credential.
public enum DeviceCredentialPolicy: String, Sendable, Hashable, CaseIterable {
    /// Every device changed through the app's door must have been registered and its
    /// credential presented: an order's client secret alone never changes a device.
    case required
    /// For apps built before device credentials: a device that was never registered may still
    /// be changed with a client secret alone, as before; a registered device needs its
    /// credential all the same. A transition setting, until every installed app registers.
    case compatible
}

/// A device registered for the app's door, and the credential that now stands for it.
public struct RegisteredDevice: Sendable, Hashable {
    public var deviceID: String
    /// `of_dev_…`: shown once, stored only as its hash. Never log it.
    public var credential: String
}

/// How a caller with an order's client secret was let change a device.
public enum AppDeviceAccess: Sendable, Hashable {
    /// It presented the device's own credential.
    case credential
    /// The device was never registered, and the policy is ``DeviceCredentialPolicy/compatible``.
    case unregistered
}

extension OrderFlowEngine {
    /// Every device credential begins so.
    public static let deviceCredentialScheme = "of_dev_"

    /// Registers a device for the customer's app and gives it a credential: later calls that
    /// change the device on a client secret's authority must carry it
    /// (``authorizeAppDevice(_:credential:)``).
    ///
    /// - Parameters:
    ///   - deviceID: the device's id; nil draws a new one that nobody can guess (`dev_…`), the
    ///     safe choice for an app. An id that was registered already is refused unless
    ///     `replacingCredential`.
    ///   - replacingCredential: on the merchant's own authority (its API key, its operator): a
    ///     registered device gets a new credential and the old one stops working, for an app
    ///     installation that lost it.
    ///   - claimingKnown: whether an id OrderFlow already knows unregistered (its tokens, the
    ///     orders it follows, from before registration or from the merchant's own calls) may be
    ///     claimed: on the merchant's authority, and for apps in the
    ///     ``DeviceCredentialPolicy/compatible`` transition. Otherwise only an id never seen is
    ///     registered: a customer cannot claim another's phone by its id.
    /// - Throws: `OrderFlowError.conflict` for a registered (or, without `claimingKnown`, known)
    ///   device.
    public func registerAppDevice(deviceID: String? = nil, replacingCredential: Bool = false,
                                  claimingKnown: Bool = true) async throws -> RegisteredDevice {
        try await translatingErrors {
            let deviceID = deviceID ?? Self.newDeviceID()
            try Self.validateIdentifier(deviceID, what: "device id")
            let credential = Self.deviceCredentialScheme + Self.randomSecret()
            guard try await deviceStore.issueCredential(
                deviceID: deviceID, hash: Self.secretHash(credential), replacing: replacingCredential, onlyNew: !claimingKnown)
            else {
                throw OrderFlowError(.conflict,
                    "device \(Self.shown(deviceID)) is registered already, or known from the merchant's own calls; an app registers as a new device (leave the id out), and only the merchant's key may claim or replace a known id")
            }
            return RegisteredDevice(deviceID: deviceID, credential: credential)
        }
    }

    /// The device a credential stands for; nil for a malformed or unknown one (or one replaced).
    public func deviceOfCredential(_ credential: String) async throws -> String? {
        try await translatingErrors {
            guard Self.isSecret(credential, scheme: Self.deviceCredentialScheme) else { return nil }
            return try await deviceStore.device(credentialHash: Self.secretHash(credential))
        }
    }

    /// Whether a caller holding only an order's client secret, and `credential` when it sent
    /// one, may change `deviceID` (its tokens, what it follows, its activities' reports).
    ///
    /// A registered device needs its own credential. A device never registered is refused
    /// under ``DeviceCredentialPolicy/required`` (the default) and let through under
    /// ``DeviceCredentialPolicy/compatible``. Nothing is written.
    /// - Throws: `OrderFlowError.forbidden`, saying what the app must do.
    @discardableResult
    public func authorizeAppDevice(_ deviceID: String, credential: String?) async throws -> AppDeviceAccess {
        try await translatingErrors {
            try Self.validateIdentifier(deviceID, what: "device id")
            let stored = try await deviceStore.credentialHash(deviceID: deviceID)
            if let credential {
                guard Self.isSecret(credential, scheme: Self.deviceCredentialScheme) else {
                    throw OrderFlowError(.forbidden,
                        "the device credential is malformed (it may have been cut); send the `of_dev_…` credential the device was registered with")
                }
                guard let stored, Self.constantTimeEqual(stored, Self.secretHash(credential)) else {
                    throw OrderFlowError(.forbidden,
                        "the device credential is not device \(Self.shown(deviceID))'s (it belongs to another device, or was replaced); a client secret may change only the device that presents its own credential")
                }
                return .credential
            }
            if stored != nil {
                throw OrderFlowError(.forbidden,
                    "device \(Self.shown(deviceID)) is registered to an app installation; send its device credential with the call")
            }
            guard configuration.deviceCredentials == .compatible else {
                throw OrderFlowError(.forbidden,
                    "device \(Self.shown(deviceID)) is not registered; the app registers its device once and sends the device credential it got with every call for it")
            }
            return .unregistered
        }
    }

    /// 16 random bytes: an id nobody can guess or pick for another customer's phone.
    static func newDeviceID() -> String {
        var generator = SystemRandomNumberGenerator()
        return "dev_" + Base64URL.encode((0..<16).map { _ in UInt8.random(in: 0...255, using: &generator) })
    }
}
