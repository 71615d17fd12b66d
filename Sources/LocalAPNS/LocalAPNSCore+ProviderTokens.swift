import Crypto
import APNSCore
import Foundation
import NIOCore
import NIOHTTP1
import Synchronization

/// Provider tokens as APNs checks them: the JWT's header, claims, age and ES256 signature, each verdict cached per token.
extension LocalAPNSCore {
    enum ProviderTokenVerdict: Sendable {
        case valid(keyID: String)
        case invalid(status: Int, reason: String, detail: String)
    }

    struct VerifiedToken: Sendable {
        var keyID: String
        var issuedAt: Int64
    }

    enum CachedVerdict: Sendable {
        case valid(VerifiedToken)
        case invalid(status: Int, reason: String, detail: String)
    }

    struct ProviderTokenCache {
        var verdicts: [String: CachedVerdict] = [:]
        /// The newest `iat` seen per key id, to notice regeneration faster than allowed.
        var newestIssuedAt: [String: Int64] = [:]
    }

    /// Checks signature, key id, team and `iat`. Signature checks are cached per distinct token
    /// string (a sender reuses one token for many requests); the age is checked every time.
    func verifyProviderToken(_ jwt: String, now: Date) -> ProviderTokenVerdict {
        let cached = self.providerTokens.withLock { $0.verdicts[jwt] }
        let verdict: CachedVerdict
        if let cached {
            verdict = cached
        } else {
            var fresh = self.verifySignature(jwt)
            verdict = self.providerTokens.withLock { cache in
                if case .valid(let token) = fresh, let interval = self.configuration.minimumProviderTokenInterval {
                    if let newest = cache.newestIssuedAt[token.keyID], token.issuedAt > newest,
                        Duration.seconds(token.issuedAt - newest) < interval
                    {
                        fresh = .invalid(
                            status: 429,
                            reason: "TooManyProviderTokenUpdates",
                            detail: "a new provider token for key \(token.keyID) only \(token.issuedAt - newest) s after the previous one"
                        )
                    } else {
                        cache.newestIssuedAt[token.keyID] = max(cache.newestIssuedAt[token.keyID] ?? .min, token.issuedAt)
                    }
                }
                if cache.verdicts.count >= 10_000 {
                    cache.verdicts.removeAll(keepingCapacity: true)
                }
                cache.verdicts[jwt] = fresh
                return fresh
            }
        }
        switch verdict {
        case .invalid(let status, let reason, let detail):
            return .invalid(status: status, reason: reason, detail: detail)
        case .valid(let token):
            let age = Int64(now.timeIntervalSince1970.rounded(.down)) - token.issuedAt
            let maximumAge = self.configuration.maximumProviderTokenAge.components.seconds
            if age > maximumAge {
                return .invalid(status: 403, reason: "ExpiredProviderToken", detail: "the provider token is \(age) s old")
            }
            if age < -maximumAge {
                return .invalid(status: 403, reason: "InvalidProviderToken", detail: "the provider token's iat is \(-age) s in the future")
            }
            return .valid(keyID: token.keyID)
        }
    }

    func verifySignature(_ jwt: String) -> CachedVerdict {
        func invalid(_ detail: String) -> CachedVerdict {
            .invalid(status: 403, reason: "InvalidProviderToken", detail: detail)
        }
        let parts = jwt.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3,
            let headerBytes = Self.base64URLDecode(parts[0]),
            let claimsBytes = Self.base64URLDecode(parts[1]),
            let signatureBytes = Self.base64URLDecode(parts[2]),
            let header = try? JSONValue(parsing: headerBytes),
            let claims = try? JSONValue(parsing: claimsBytes)
        else {
            return invalid("the provider token is not a JWT")
        }
        guard header["alg"]?.stringValue == "ES256" else {
            return invalid("the JWT header's alg must be ES256")
        }
        guard let keyID = header["kid"]?.stringValue else {
            return invalid("the JWT header has no kid")
        }
        guard let key = self.keysByID[keyID] else {
            return invalid("no key with id \(keyID) is known")
        }
        guard let issuer = claims["iss"]?.stringValue, issuer == key.teamID else {
            return invalid("iss must be the team id \(key.teamID)")
        }
        guard let issuedAt = claims["iat"]?.integerValue else {
            return invalid("iat must be an integer number of seconds")
        }
        guard let signature = try? P256.Signing.ECDSASignature(rawRepresentation: signatureBytes),
            key.publicKey.isValidSignature(signature, for: Data("\(parts[0]).\(parts[1])".utf8))
        else {
            return invalid("the signature does not verify with key \(keyID)")
        }
        return .valid(VerifiedToken(keyID: keyID, issuedAt: Int64(issuedAt)))
    }

    static func base64URLDecode(_ text: Substring) -> Data? {
        Base64URL.decode(text)
    }
}
