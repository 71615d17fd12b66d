import APNS
import Crypto
import Foundation
import Logging
import Testing

@Suite("Loading the signing key")
struct KeyLoadingTests {
    static func temporaryPath(_ name: String) -> String {
        FileManager.default.temporaryDirectory.appendingPathComponent("apns-tests-\(UUID().uuidString)-\(name)").path
    }

    @Test("a missing key file names the path and where to get the key")
    func missingFile() {
        let path = Self.temporaryPath("AuthKey_MISSING.p8")
        let error = #expect(throws: APNSCredentialsError.self) {
            try APNSSigningKey(contentsOfFile: path, keyID: "KEY1234567", teamID: "TEAM123456")
        }
        #expect(error?.code == .keyFileNotFound)
        #expect(error?.path == path)
        #expect(error?.description.contains(path) == true)
        #expect(error?.description.contains(".p8") == true)
    }

    @Test("a file that is not a P-256 key names the path and never echoes its contents")
    func garbageFile() throws {
        let path = Self.temporaryPath("AuthKey_GARBAGE.p8")
        let secretLooking = "-----BEGIN PRIVATE KEY-----\nc2VjcmV0LW5vdC1hLWtleQ==\n-----END PRIVATE KEY-----\n"
        try secretLooking.write(toFile: path, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let error = #expect(throws: APNSCredentialsError.self) {
            try APNSSigningKey(contentsOfFile: path, keyID: "KEY1234567", teamID: "TEAM123456")
        }
        #expect(error?.code == .invalidKey)
        #expect(error?.description.contains(path) == true)
        #expect(error?.description.contains("c2VjcmV0") == false)
    }

    @Test("a non-P-256 key (P-384) is refused as not a P-256 key")
    func wrongCurve() throws {
        let path = Self.temporaryPath("AuthKey_P384.p8")
        try P384.Signing.PrivateKey().pemRepresentation.write(toFile: path, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let error = #expect(throws: APNSCredentialsError.self) {
            try APNSSigningKey(contentsOfFile: path, keyID: "KEY1234567", teamID: "TEAM123456")
        }
        #expect(error?.code == .invalidKey)
    }

    @Test("a real .p8 file loads, and the client refuses to start without one")
    func validFileAndClient() throws {
        let path = Self.temporaryPath("AuthKey_OK.p8")
        try P256.Signing.PrivateKey().pemRepresentation.write(toFile: path, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let key = try APNSSigningKey(contentsOfFile: path, keyID: "KEY1234567", teamID: "TEAM123456")
        #expect(key.keyID == "KEY1234567")

        let missing = Self.temporaryPath("AuthKey_NONE.p8")
        let configuration = APNSClientConfiguration(
            environment: .sandbox,
            credentials: .init(key: .file(path: missing), keyID: "KEY1234567", teamID: "TEAM123456")
        )
        let error = #expect(throws: APNSCredentialsError.self) {
            _ = try APNSClient(configuration: configuration, logger: Logger(label: "apns-tests"))
        }
        #expect(error?.description.contains(missing) == true)
    }

    @Test("empty key or team ids are refused with a hint")
    func emptyIDs() {
        let pem = P256.Signing.PrivateKey().pemRepresentation
        let noKeyID = #expect(throws: APNSCredentialsError.self) {
            try APNSSigningKey(pemRepresentation: pem, keyID: "", teamID: "TEAM123456")
        }
        #expect(noKeyID?.code == .missingKeyID)
        let noTeam = #expect(throws: APNSCredentialsError.self) {
            try APNSSigningKey(pemRepresentation: pem, keyID: "KEY1234567", teamID: "")
        }
        #expect(noTeam?.code == .missingTeamID)
    }

    @Test("custom trust roots that are not certificates are refused")
    func badTrustRoots() throws {
        let configuration = APNSClientConfiguration(
            environment: .custom(baseURL: "https://127.0.0.1:1", trustRootsPEM: "not a certificate"),
            credentials: .init(key: .pem(P256.Signing.PrivateKey().pemRepresentation), keyID: "K", teamID: "T")
        )
        #expect(throws: APNSConfigurationError.self) {
            _ = try APNSClient(configuration: configuration, logger: Logger(label: "apns-tests"))
        }
    }
}
