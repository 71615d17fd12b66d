import Crypto
import Foundation
import LocalAPNS
import OrderFlowTesting
import Testing

import APNS

@Suite("Provider token (JWT)")
struct ProviderTokenTests {
    let privateKey = P256.Signing.PrivateKey()

    func makeFactory(clock: ManualClock) throws -> APNSProviderTokenFactory {
        let key = try APNSSigningKey(
            pemRepresentation: self.privateKey.pemRepresentation,
            keyID: TestCredentials.keyID,
            teamID: TestCredentials.teamID
        )
        return APNSProviderTokenFactory(signingKey: key, currentTime: clock.read)
    }

    static func decode(_ part: Substring) throws -> Data {
        var text = part.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while text.count % 4 != 0 { text += "=" }
        return try #require(Data(base64Encoded: text))
    }

    @Test("header and claims have the shape APNs expects, iat is an integer, signature verifies")
    func tokenShape() throws {
        let clock = ManualClock(Date(timeIntervalSince1970: 1_700_000_000.75))
        let token = try self.makeFactory(clock: clock).currentToken()
        let parts = token.jwt.split(separator: ".", omittingEmptySubsequences: false)
        #expect(parts.count == 3)
        #expect(!token.jwt.contains("="))

        let header = try JSONValue(parsing: Self.decode(parts[0]))
        #expect(header == .object(["alg": .string("ES256"), "kid": .string(TestCredentials.keyID)]))

        let claimsText = try Self.decode(parts[1])
        let claims = try JSONValue(parsing: claimsText)
        #expect(claims == .object(["iss": .string(TestCredentials.teamID), "iat": .int(1_700_000_000)]))
        #expect(String(decoding: claimsText, as: UTF8.self).contains("\"iat\":1700000000"))
        #expect(token.issuedAt == Date(timeIntervalSince1970: 1_700_000_000))

        let signatureBytes = try Self.decode(parts[2])
        #expect(signatureBytes.count == 64, "ES256 signatures are raw r||s, 64 bytes")
        let signature = try P256.Signing.ECDSASignature(rawRepresentation: signatureBytes)
        #expect(self.privateKey.publicKey.isValidSignature(signature, for: Data("\(parts[0]).\(parts[1])".utf8)))
        #expect(!P256.Signing.PrivateKey().publicKey.isValidSignature(signature, for: Data("\(parts[0]).\(parts[1])".utf8)))
    }

    @Test("one token is reused for 50 minutes, then replaced")
    func reuseAndRefresh() throws {
        let clock = ManualClock()
        let factory = try self.makeFactory(clock: clock)
        let first = try factory.currentToken()
        clock.advance(minutes: 1)
        #expect(try factory.currentToken() == first)
        clock.advance(minutes: 48.9)
        #expect(try factory.currentToken() == first)
        clock.advance(minutes: 0.2)
        let second = try factory.currentToken()
        #expect(second != first)
        #expect(second.issuedAt.timeIntervalSince(first.issuedAt) >= 50 * 60)
        #expect(try factory.currentToken() == second)
    }

    @Test("an ExpiredProviderToken answer renews only a token at least 20 minutes old")
    func expiredRespectsTwentyMinuteFloor() throws {
        let clock = ManualClock()
        let factory = try self.makeFactory(clock: clock)
        let first = try factory.currentToken()

        clock.advance(minutes: 5)
        #expect(factory.providerTokenExpired(first) == false)
        #expect(try factory.currentToken() == first, "a 5-minute-old token must not be replaced")

        clock.advance(minutes: 14.9)
        #expect(factory.providerTokenExpired(first) == false)
        #expect(try factory.currentToken() == first)

        clock.advance(minutes: 0.2)
        #expect(factory.providerTokenExpired(first) == true)
        let second = try factory.currentToken()
        #expect(second != first)

        // Further answers about the old token do not trigger another regeneration.
        #expect(factory.providerTokenExpired(first) == true)
        #expect(try factory.currentToken() == second)
        clock.advance(minutes: 1)
        #expect(factory.providerTokenExpired(second) == false)
        #expect(try factory.currentToken() == second)
    }

    @Test("the refresh interval cannot be set below the 20-minute floor")
    func refreshIntervalClamped() throws {
        let clock = ManualClock()
        let key = try APNSSigningKey(privateKey: self.privateKey, keyID: TestCredentials.keyID, teamID: TestCredentials.teamID)
        let factory = APNSProviderTokenFactory(signingKey: key, refreshInterval: .seconds(60), currentTime: clock.read)
        #expect(factory.refreshInterval == .seconds(20 * 60))
        let first = try factory.currentToken()
        clock.advance(minutes: 10)
        #expect(try factory.currentToken() == first)
        clock.advance(minutes: 10)
        #expect(try factory.currentToken() != first)
    }

    @Test("the signing key never prints its material")
    func keyDescriptionRedacted() throws {
        let pem = self.privateKey.pemRepresentation
        let key = try APNSSigningKey(pemRepresentation: pem, keyID: TestCredentials.keyID, teamID: TestCredentials.teamID)
        let credentials = APNSClientConfiguration.Credentials(key: .pem(pem), keyID: "K", teamID: "T")
        for text in [String(describing: key), String(describing: credentials), String(reflecting: credentials)] {
            #expect(!text.contains("PRIVATE KEY"))
            #expect(!text.contains(String(pem.split(separator: "\n")[1].prefix(20))))
        }
        var dumped = ""
        dump(credentials, to: &dumped)
        #expect(!dumped.contains("PRIVATE KEY"))
    }
}
