import CLibPQ
import Foundation

/// Where and how to connect. The connection string is a `postgresql://` URL or a libpq
/// `key=value` conninfo string; libpq parses it.
///
/// It may name several servers (`postgresql://db1:5432,db2:5432/orderflow?target_session_attrs=read-write`,
/// or `host=db1,db2 port=5432,5432 target_session_attrs=read-write`): every new connection tries
/// them in order and keeps the first that accepts it (with `read-write`, the primary), so that
/// after a failover new connections find the promoted standby by themselves.
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
        /// As given: one host, or several separated by commas.
        public var host: String
        /// As given: one port (for every host), or one per host separated by commas.
        public var port: String
        public var database: String
        public var user: String?
        /// Every server named, as "host:port", in the order libpq tries them.
        public var servers: [String] {
            let hosts = host.split(separator: ",", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
            let ports = port.split(separator: ",", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
            return hosts.enumerated().map { index, host in
                let port = ports.count == hosts.count ? ports[index] : ports.first ?? "5432"
                return Self.address(host: host.isEmpty ? "/var/run/postgresql" : host, port: port.isEmpty ? "5432" : port)
            }
        }
        /// "host:port" (or "host:port, host:port" for several), the part a person checks first
        /// when a connection fails.
        public var hostAndPort: String { servers.joined(separator: ", ") }

        static func address(host: String, port: String) -> String {
            host.hasPrefix("/") ? "\(host)/.s.PGSQL.\(port)" : "\(host):\(port)"
        }
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
        let values = settings(options)
        let env = { (name: String) -> String? in
            guard let value = getenv(name) else { return nil }
            return String(cString: value)
        }
        let host = nonEmpty(values["host"]) ?? nonEmpty(values["hostaddr"]) ?? env("PGHOST") ?? "/var/run/postgresql"
        let port = nonEmpty(values["port"]) ?? env("PGPORT") ?? "5432"
        // libpq would only say so when connecting, as if the server were down.
        let hostCount = host.split(separator: ",", omittingEmptySubsequences: false).count
        let portCount = port.split(separator: ",", omittingEmptySubsequences: false).count
        if portCount != 1 && portCount != hostCount {
            throw PostgresError(
                .invalidConfiguration,
                "invalid database URL: it names \(hostCount) hosts but \(portCount) ports; give one port for all, or one per host")
        }
        // An empty port in a list is libpq's default (`postgresql://db1,db2:5433/…`).
        for part in port.split(separator: ",", omittingEmptySubsequences: false) where portCount == 1 || !part.isEmpty {
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

    /// The keywords libpq's `PQconninfoOption` list sets, and their values.
    static func settings(_ options: UnsafeMutablePointer<PQconninfoOption>) -> [String: String] {
        var values: [String: String] = [:]
        var cursor = options
        while let keyword = cursor.pointee.keyword {
            if let value = cursor.pointee.val { values[String(cString: keyword)] = String(cString: value) }
            cursor += 1
        }
        return values
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
