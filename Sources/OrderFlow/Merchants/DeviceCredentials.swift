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

    /// Registers a device on the merchant's own authority (its API key, its operator) and gives
    /// it a credential that later calls changing the device on a client secret's authority must
    /// carry (``authorizeAppDevice(_:credential:)``). The merchant's backend hands it to its app.
    /// (An app registers itself with ``registerAppDevice(forOrder:deviceID:)``.)
    ///
    /// - Parameters:
    ///   - deviceID: the device's id; nil draws a new one that nobody can guess (`dev_…`). Any
    ///     id not registered yet may be claimed, known or not.
    ///   - replacingCredential: a registered device gets a new credential and the old one stops
    ///     working, for an app installation that lost it.
    /// - Throws: `OrderFlowError.conflict` for a registered device without `replacingCredential`.
    public func registerAppDevice(deviceID: String? = nil, replacingCredential: Bool = false) async throws -> RegisteredDevice {
        try await translatingErrors {
            let deviceID = deviceID ?? Self.newDeviceID()
            try Self.validateIdentifier(deviceID, what: "device id")
            let credential = Self.deviceCredentialScheme + Self.randomSecret()
            guard try await deviceStore.issueCredential(
                deviceID: deviceID, hash: Self.secretHash(credential), replacing: replacingCredential)
            else {
                throw OrderFlowError(.conflict,
                    "device \(Self.shown(deviceID)) is registered already and its app holds its credential; replace the credential to give the app a new one")
            }
            return RegisteredDevice(deviceID: deviceID, credential: credential)
        }
    }

    /// Devices one order's client secret may register (a household's phones and tablets).
    public static let devicesPerOrder = 10

    /// Registers a device for the customer's app on an order's client secret: only an id never
    /// seen (nil draws one nobody can guess), and at most ``devicesPerOrder`` per order, so that
    /// a secret makes a few rows, not rows without end.
    /// - Throws: `conflict` for an id already known; `invalidInput` for an order at its limit.
    public func registerAppDevice(forOrder orderID: String, deviceID: String? = nil) async throws -> RegisteredDevice {
        try await translatingErrors {
            try Self.validateIdentifier(orderID, what: "order id")
            let deviceID = deviceID ?? Self.newDeviceID()
            try Self.validateIdentifier(deviceID, what: "device id")
            let credential = Self.deviceCredentialScheme + Self.randomSecret()
            switch try await deviceStore.issueCredential(
                deviceID: deviceID, hash: Self.secretHash(credential), registeredBy: orderID, limit: Self.devicesPerOrder) {
            case true?:
                return RegisteredDevice(deviceID: deviceID, credential: credential)
            case false?:
                throw OrderFlowError(.conflict,
                    "device \(Self.shown(deviceID)) is registered already, or known from the merchant's own calls; an app registers as a new device (leave the id out), and only the merchant's key may claim or replace a known id")
            case nil:
                throw OrderFlowError(.invalidInput,
                    "order \(Self.shown(orderID)) has registered \(Self.devicesPerOrder) devices already, the most one order may; an app keeps the credential it got and registers once per installation")
            }
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
