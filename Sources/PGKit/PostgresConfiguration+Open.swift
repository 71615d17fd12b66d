import CLibPQ
import Foundation
import Logging
import Synchronization

extension PostgresConfiguration {
    /// Starts a libpq connection (blocking: never call it on the concurrency pool). The result
    /// owns the `PGconn *`, also when its status is not `CONNECTION_OK`.
    ///
    /// Started with `PQconnectStartParams` so that `notices` receives what the server says from
    /// the first message on (a notice during the login would otherwise reach stderr raw), then
    /// driven with `PQconnectPoll` — which does not apply `connect_timeout`, so it is applied
    /// here: that long without progress ends the attempt with that server and, as libpq's own
    /// loop does, moves on to the next one the connection string names (a server whose machine
    /// is gone answers nothing at all; the promoted standby may be next in the list).
    func openNativeConnection(notices: NoticeLog, remaining servers: (hosts: String, ports: String)? = nil) -> NativeConnection {
        var keys = ["connect_timeout", "application_name", "dbname"]
        var values = [String(connectTimeoutSeconds), applicationName, connectionString]
        // Defaults come first so that the URL's own settings, expanded from `dbname`, win; the
        // servers still to try, after one timed out, come last and win over the URL's.
        if let servers {
            keys += ["host", "port"]
            values += [servers.hosts, servers.ports]
        }
        let native = NativeConnection(withCStringArray(keys) { keyPointers in
            withCStringArray(values) { valuePointers in
                PQconnectStartParams(keyPointers, valuePointers, 1)
            }
        })
        guard let connection = native.pointer else { return native }
        native.noticeLog = notices
        PQsetNoticeReceiver(connection, { argument, result in
            guard let argument, let result else { return }
            Unmanaged<NoticeLog>.fromOpaque(argument).takeUnretainedValue().log(result)
        }, Unmanaged.passUnretained(notices).toOpaque())
        guard PQstatus(connection) != CONNECTION_BAD else { return native }
        // libpq's documented loop: wait for what the last poll asked for, poll again.
        var state = PGRES_POLLING_WRITING
        let patience = Self.connectTimeoutMilliseconds(connection)
        while state != PGRES_POLLING_OK && state != PGRES_POLLING_FAILED {
            var socket = pollfd(fd: PQsocket(connection), events: Int16(state == PGRES_POLLING_READING ? POLLIN : POLLOUT), revents: 0)
            var ready: Int32
            repeat { ready = poll(&socket, 1, patience) } while ready < 0 && errno == EINTR
            guard ready > 0 else {
                if let next = Self.serversAfterCurrent(connection) {
                    return openNativeConnection(notices: notices, remaining: next)
                }
                native.timedOutAfter = patience
                break
            }
            state = PQconnectPoll(connection)
        }
        return native
    }

    /// The hosts and ports after the one `connection` is trying, in libpq's list form, or nil
    /// when it is the last (or the servers are given as `hostaddr`, left to libpq alone).
    static func serversAfterCurrent(_ connection: OpaquePointer) -> (hosts: String, ports: String)? {
        guard let current = PQhost(connection).map({ String(cString: $0) }),
              let currentPort = PQport(connection).map({ String(cString: $0) }),
              let options = PQconninfo(connection)
        else { return nil }
        defer { PQconninfoFree(options) }
        let values = settings(options)
        guard let hostList = values["host"], (values["hostaddr"] ?? "").isEmpty else { return nil }
        let hosts = hostList.split(separator: ",", omittingEmptySubsequences: false).map(String.init)
        var ports = (values["port"] ?? "").split(separator: ",", omittingEmptySubsequences: false).map(String.init)
        if ports.count != hosts.count { ports = Array(repeating: ports.first ?? "", count: hosts.count) }
        guard let index = hosts.indices.first(where: { hosts[$0] == current && (ports[$0] == currentPort || ports[$0].isEmpty) }),
              index + 1 < hosts.count
        else { return nil }
        return (hosts[(index + 1)...].joined(separator: ","), ports[(index + 1)...].joined(separator: ","))
    }
}

extension PostgresConfiguration {
    /// The connection's `connect_timeout` as libpq reads it (the URL's own, else ours): at
    /// least 2 s, and -1 (wait as long as it takes) for 0 or none, as libpq documents.
    static func connectTimeoutMilliseconds(_ connection: OpaquePointer) -> Int32 {
        guard let options = PQconninfo(connection) else { return 5_000 }
        defer { PQconninfoFree(options) }
        var cursor = options
        while let keyword = cursor.pointee.keyword {
            if String(cString: keyword) == "connect_timeout" {
                guard let value = cursor.pointee.val, let seconds = Int32(String(cString: value)), seconds > 0 else { return -1 }
                return max(2, min(seconds, 86_400)) * 1000
            }
            cursor += 1
        }
        return -1
    }
}

// MARK: - C string arrays whose buffers outlive the call that reads them

func withCStringArray<R>(_ strings: [String], _ body: ([UnsafePointer<CChar>?]) -> R) -> R {
    let duplicates = strings.map { strdup($0) }
    defer { duplicates.forEach { free($0) } }
    return body(duplicates.map { UnsafePointer($0) } + [nil])
}

/// NUL-terminated copies of `strings` (nil stays a null pointer), all in one buffer: a
/// statement's parameters cost one allocation, not one each.
func withOptionalCStringArray<R>(_ strings: [String?], _ body: ([UnsafePointer<CChar>?]) -> R) -> R {
    let size = strings.reduce(0) { $0 + ($1.map { $0.utf8.count + 1 } ?? 0) }
    return withUnsafeTemporaryAllocation(of: UInt8.self, capacity: max(size, 1)) { buffer in
        var pointers: [UnsafePointer<CChar>?] = []
        pointers.reserveCapacity(strings.count)
        var offset = 0
        for string in strings {
            guard let string else {
                pointers.append(nil)
                continue
            }
            let written = UnsafeMutableBufferPointer(rebasing: buffer[offset...]).initialize(from: string.utf8).1
            buffer[offset + written] = 0
            pointers.append(UnsafeRawPointer(buffer.baseAddress! + offset).assumingMemoryBound(to: CChar.self))
            offset += written + 1
        }
        return body(pointers)
    }
}
