import APNSCore
import Foundation

/// The checks FCM makes of a `messages:send` body, with its words: proto3 JSON (unknown names,
/// wrong types), the target, the data map of strings, its reserved keys and 4096-byte limit, the
/// Android priority and TTL, the registration token's form.
extension LocalFCMCore {
    struct CheckedMessage: Sendable {
        var token: String
        var data: [String: String]
        var priority: String?
        var collapseKey: String?
        var ttl: String?
        var validateOnly: Bool
        var body: JSONValue
    }

    /// A refusal: FCM's message, the field a BadRequest detail names (`nil`: an FcmError
    /// `INVALID_ARGUMENT` detail instead), and the token when the body had one.
    struct Problem: Error, Sendable {
        var message: String
        var field: String?
        var token: String?
    }

    private static let messageFields: Set<String> = [
        "name", "data", "notification", "android", "webpush", "apns", "fcm_options", "fcmOptions", "token", "topic", "condition",
    ]
    private static let androidFields: Set<String> = [
        "collapse_key", "collapseKey", "priority", "ttl", "restricted_package_name", "restrictedPackageName", "data",
        "notification", "fcm_options", "fcmOptions", "direct_boot_ok", "directBootOk", "bandwidth_constrained_ok",
        "bandwidthConstrainedOk", "restricted_satellite_ok", "restrictedSatelliteOk",
    ]

    static func check(_ body: [UInt8]) -> Result<CheckedMessage, Problem> {
        do {
            return .success(try self.checked(body))
        } catch let problem as Problem {
            return .failure(problem)
        } catch {
            return .failure(Problem(message: "\(error)", field: ""))
        }
    }

    private static func checked(_ body: [UInt8]) throws -> CheckedMessage {
        guard let root = try? JSONValue(parsing: body) else {
            throw Problem(message: "Invalid JSON payload received. Unexpected token.", field: "")
        }
        guard let top = root.objectValue else {
            throw Problem(message: "Invalid JSON payload received. Expected an object.", field: "")
        }
        try self.refuseUnknown(top, known: ["message", "validate_only", "validateOnly"], at: nil)
        let validateOnly = try self.typed(top["validate_only"] ?? top["validateOnly"], "validate_only", "TYPE_BOOL") { $0.boolValue } ?? false
        guard let messageValue = top["message"] else {
            throw Problem(message: "Request contains an invalid argument.", field: "message")
        }
        guard let message = messageValue.objectValue else {
            throw Problem(message: "Invalid value at 'message' (type.googleapis.com/google.firebase.fcm.v1.Message), \(messageValue.jsonString)", field: "message")
        }
        try self.refuseUnknown(message, known: self.messageFields, at: "message")
        let targets = ["token", "topic", "condition"].filter { message[$0] != nil }
        guard !targets.isEmpty else { throw Problem(message: "Recipient of the message is not set.", field: "message") }
        guard targets.count == 1 else {
            throw Problem(message: "Invalid JSON payload received. Oneof field 'target' is already set. Cannot set '\(targets[1])'", field: "message")
        }
        guard let token = try self.typed(message["token"], "message.token", "TYPE_STRING", { $0.stringValue }) else {
            // Topics and conditions are FCM's, but this stand-in delivers to single devices only.
            throw Problem(message: "The local FCM stand-in accepts messages to a registration token only, not to a \(targets[0]).", field: "message")
        }
        guard self.isRegistrationToken(token) else {
            throw Problem(message: "The registration token is not a valid FCM registration token", field: nil, token: token)
        }
        do {
            for name in ["notification", "webpush", "apns", "fcm_options", "fcmOptions"] {
                if let value = message[name], value.objectValue == nil {
                    throw Problem(message: "Invalid value at 'message.\(name)', \(value.jsonString)", field: "message.\(name)")
                }
            }
            var data = try self.stringMap(message["data"], at: "message.data")
            var priority: String?, collapseKey: String?, ttl: String?
            if let androidValue = message["android"] {
                guard let android = androidValue.objectValue else {
                    throw Problem(message: "Invalid value at 'message.android' (type.googleapis.com/google.firebase.fcm.v1.AndroidConfig), \(androidValue.jsonString)", field: "message.android")
                }
                try self.refuseUnknown(android, known: self.androidFields, at: "message.android")
                priority = try self.typed(android["priority"], "message.android.priority",
                                          "type.googleapis.com/google.firebase.fcm.v1.AndroidMessagePriority") { value in
                    value.stringValue.flatMap { ["NORMAL", "HIGH"].contains($0) ? $0 : nil }
                }
                collapseKey = try self.typed(android["collapse_key"] ?? android["collapseKey"], "message.android.collapse_key", "TYPE_STRING") { $0.stringValue }
                ttl = try self.typed(android["ttl"], "message.android.ttl", "type.googleapis.com/google.protobuf.Duration") { value in
                    value.stringValue.flatMap { self.isDuration($0) ? $0 : nil }
                }
                _ = try self.typed(android["direct_boot_ok"] ?? android["directBootOk"], "message.android.direct_boot_ok", "TYPE_BOOL") { $0.boolValue }
                // AndroidConfig.data replaces the message's data on Android.
                let androidData = try self.stringMap(android["data"], at: "message.android.data")
                if android["data"] != nil { data = androidData }
            }
            if let key = data.keys.sorted().first(where: { $0 == "from" || $0 == "message_type" || $0.hasPrefix("google") || $0.hasPrefix("gcm") }) {
                throw Problem(message: "Invalid data payload key: \(key)", field: "message.data")
            }
            let size = data.reduce(0) { $0 + $1.key.utf8.count + $1.value.utf8.count }
            guard size <= 4096 else { throw Problem(message: "Android message is too big", field: nil) }
            return CheckedMessage(
                token: token, data: data, priority: priority, collapseKey: collapseKey, ttl: ttl, validateOnly: validateOnly, body: root)
        } catch var problem as Problem {
            problem.token = token
            throw problem
        }
    }

    private static func refuseUnknown(_ object: [String: JSONValue], known: Set<String>, at path: String?) throws {
        guard let unknown = object.keys.sorted().first(where: { !known.contains($0) }) else { return }
        let place = path.map { " at '\($0)'" } ?? ""
        throw Problem(message: "Invalid JSON payload received. Unknown name \"\(unknown)\"\(place): Cannot find field.", field: path ?? "")
    }

    /// `value` converted by `convert`, `nil` when absent, or FCM's "Invalid value" refusal.
    private static func typed<T>(_ value: JSONValue?, _ field: String, _ type: String, _ convert: (JSONValue) -> T?) throws -> T? {
        guard let value else { return nil }
        guard let converted = convert(value) else {
            throw Problem(message: "Invalid value at '\(field)' (\(type)), \(value.jsonString)", field: field)
        }
        return converted
    }

    /// A `map<string, string>`: every value a string. FCM numbers the entries in the order they
    /// came; the parsed object has lost it, so they are numbered in key order (the order
    /// OrderFlow's own client sends, its JSON keys being sorted).
    private static func stringMap(_ value: JSONValue?, at field: String) throws -> [String: String] {
        guard let value else { return [:] }
        guard let object = value.objectValue else {
            throw Problem(message: "Invalid value at '\(field)' (type.googleapis.com/google.protobuf.Struct), \(value.jsonString)", field: field)
        }
        var map: [String: String] = [:]
        for (index, key) in object.keys.sorted().enumerated() {
            guard let text = object[key]?.stringValue else {
                let entry = "\(field)[\(index)].value"
                throw Problem(message: "Invalid value at '\(entry)' (TYPE_STRING), \(object[key]!.jsonString)", field: entry)
            }
            map[key] = text
        }
        return map
    }

    /// A protobuf Duration in JSON: seconds with up to nine decimals, then `s`.
    static func isDuration(_ text: String) -> Bool {
        guard text.hasSuffix("s") else { return false }
        let number = text.dropLast().split(separator: ".", maxSplits: 1, omittingEmptySubsequences: false)
        guard let whole = number.first, !whole.isEmpty, whole.allSatisfy(\.isASCII), whole.allSatisfy(\.isNumber) else { return false }
        guard number.count == 2 else { return true }
        return (1...9).contains(number[1].count) && number[1].allSatisfy { $0.isASCII && $0.isNumber }
    }

    /// The form of the registration tokens FCM issues: an instance id, `:`, and a long
    /// `APA91b…` part, in URL-safe base64 characters.
    static func isRegistrationToken(_ token: String) -> Bool {
        let parts = token.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false)
        guard parts.count == 2, !parts[0].isEmpty, parts[1].hasPrefix("APA91"), token.utf8.count >= 100, token.utf8.count <= 4096 else { return false }
        return token.utf8.allSatisfy { byte in
            (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte)
                || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || byte == UInt8(ascii: "-") || byte == UInt8(ascii: "_")
                || byte == UInt8(ascii: ":")
        }
    }
}
