import CLibPQ
import Foundation

/// Where and how to connect. The connection string is a `postgresql://` URL or a libpq
/// `key=value` conninfo string; libpq parses it.
public struct PostgresConfiguration: Sendable {
    /// The URL or conninfo string, as given. Never logged: it may hold a password.
    public let connectionString: String
    /// Seconds to wait for a connection before giving up (libpq `connect_timeout`), unless the
    /// connection string sets its own. Default 5.
    public var connectTimeoutSeconds: Int = 5
    /// `application_name` shown in `pg_stat_activity`. Default "orderflow".
    public var applicationName: String = "orderflow"

    /// Host, port, database and user, for messages; never the password.
    public let target: Target

    public struct Target: Sendable, Hashable, CustomStringConvertible {
        public var host: String
        public var port: String
        public var database: String
        public var user: String?
        /// "host:port", the part a person checks first when a connection fails.
        public var hostAndPort: String { host.hasPrefix("/") ? "\(host)/.s.PGSQL.\(port)" : "\(host):\(port)" }
        public var description: String { "\(hostAndPort)/\(database)" }
    }

    /// Parses the connection string (with libpq's own parser) without connecting.
    public init(_ connectionString: String) throws(PostgresError) {
        self.connectionString = connectionString
        self.target = try Self.parse(connectionString)
    }

    private static func parse(_ text: String) throws(PostgresError) -> Target {
        if text.utf8.contains(0) {
            throw PostgresError(.invalidConfiguration, "the database URL contains a NUL character")
        }
        var errorMessage: UnsafeMutablePointer<CChar>?
        guard let options = PQconninfoParse(text, &errorMessage) else {
            var reason = "libpq could not parse it"
            if let errorMessage {
                reason = redact(String(cString: errorMessage), in: text)
                    .trimmingCharacters(in: .whitespacesAndNewlines)
                PQfreemem(errorMessage)
            }
            throw PostgresError(
                .invalidConfiguration,
                "invalid database URL: \(reason); expected postgresql://user@host:port/database or \"host=… port=… dbname=…\"")
        }
        defer { PQconninfoFree(options) }
        var values: [String: String] = [:]
        var cursor = options
        while let keyword = cursor.pointee.keyword {
            if let value = cursor.pointee.val { values[String(cString: keyword)] = String(cString: value) }
            cursor += 1
        }
        let env = { (name: String) -> String? in
            guard let value = getenv(name) else { return nil }
            return String(cString: value)
        }
        let host = nonEmpty(values["host"]) ?? nonEmpty(values["hostaddr"]) ?? env("PGHOST") ?? "/var/run/postgresql"
        let port = nonEmpty(values["port"]) ?? env("PGPORT") ?? "5432"
        // libpq would only say so when connecting, as if the server were down.
        for part in port.split(separator: ",", omittingEmptySubsequences: false) {
            guard let number = Int(part.trimmingCharacters(in: .whitespaces)), (1...65535).contains(number) else {
                throw PostgresError(
                    .invalidConfiguration,
                    "invalid database URL: the port \"\(part.prefix(20))\" is not a number from 1 to 65535")
            }
        }
        let user = nonEmpty(values["user"]) ?? env("PGUSER")
        let database = nonEmpty(values["dbname"]) ?? env("PGDATABASE") ?? user ?? "postgres"
        return Target(host: host, port: port, database: database, user: user)
    }

    private static func nonEmpty(_ value: String?) -> String? {
        guard let value, !value.isEmpty else { return nil }
        return value
    }

    /// Removes a URL's password from a message that might quote the URL.
    static func redact(_ message: String, in connectionString: String) -> String {
        guard let scheme = connectionString.range(of: "://"),
              let at = connectionString[scheme.upperBound...].firstIndex(of: "@")
        else { return message }
        let userInfo = connectionString[scheme.upperBound..<at]
        guard let colon = userInfo.firstIndex(of: ":") else { return message }
        let password = String(userInfo[userInfo.index(after: colon)...])
        guard !password.isEmpty else { return message }
        return message.replacingOccurrences(of: password, with: "***")
    }
}
