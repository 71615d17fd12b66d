import CLibPQ
import Foundation
import Logging
import Synchronization

/// Turns for the tasks of one actor: `take` waits, without blocking a thread, until the holder
/// `pass`es; waiters get their turn in arrival order. Confined to its actor (not `Sendable`).
final class Turns {
    private(set) var taken = false
    private var waiting: [CheckedContinuation<Void, Never>] = []

    func take(isolation: isolated (any Actor)? = #isolation) async {
        if taken {
            await withCheckedContinuation(isolation: isolation) { waiting.append($0) }  // handed over still taken
        }
        taken = true
    }

    func pass() {
        if waiting.isEmpty {
            taken = false
        } else {
            waiting.removeFirst().resume()
        }
    }
}

/// Whether a connection is known to be broken, readable from any thread.
final class ConnectionHealth: Sendable {
    let broken = Atomic<Bool>(false)
    var isBroken: Bool { broken.load(ordering: .acquiring) }
}

/// Owns a `PGresult *` (or none): `PQclear` runs here, once, when the owner goes out of scope,
/// on every path, thrown errors included.
struct NativeResult: ~Copyable {
    let pointer: OpaquePointer?

    init(_ pointer: OpaquePointer?) {
        self.pointer = pointer
    }

    var status: ExecStatusType { pointer.map(PQresultStatus) ?? PGRES_EMPTY_QUERY }

    /// A field of the error the result carries (`"C"`: SQLSTATE, `"M"`: message, …), if any.
    func errorField(_ code: Character) -> String? {
        guard let pointer, let value = PQresultErrorField(pointer, Int32(code.asciiValue!)) else { return nil }
        return String(cString: value)
    }

    deinit { PQclear(pointer) }
}

/// Owns a `PGconn *`: `PQfinish` runs here, once, on close or when the connection is dropped.
/// Only its connection actor touches it (and the thread that opens it, before handing it over
/// with `take()`), hence `@unchecked Sendable`.
final class NativeConnection: @unchecked Sendable {
    var pointer: OpaquePointer?
    /// Milliseconds the server gave no sign of progress for while connecting, when it gave up.
    var timedOutAfter: Int32?
    /// The notice receiver's argument: kept until `PQfinish`, after which libpq calls it no more.
    var noticeLog: NoticeLog?

    init(_ pointer: OpaquePointer? = nil) {
        self.pointer = pointer
    }

    /// Hands the pointer, and with it the duty to finish it, to the caller.
    func take() -> OpaquePointer? {
        defer { pointer = nil }
        return pointer
    }

    func finish() {
        if let pointer { PQfinish(pointer) }
        pointer = nil
        noticeLog = nil
    }

    deinit { finish() }
}

/// Where a connection's notices go (NOTICE, WARNING, … that a server sends besides results,
/// from `RAISE NOTICE` or DDL): the connection's logger, at debug (info for a WARNING), with
/// the server's words in metadata. Never stderr, where they would reach a terminal raw.
final class NoticeLog: Sendable {
    let logger: Logger
    let target: String

    init(logger: Logger, target: String) {
        self.logger = logger
        self.target = target
    }

    func log(_ result: OpaquePointer) {
        func field(_ code: Character) -> String? {
            PQresultErrorField(result, Int32(code.asciiValue!)).map { String(cString: $0) }
        }
        // `V`: the severity never translated (`S` may be localized).
        let severity = field("V") ?? field("S") ?? "NOTICE"
        var metadata: Logger.Metadata = ["postgres.target": "\(target)", "postgres.severity": "\(severity)"]
        if let state = field("C") { metadata["postgres.sqlstate"] = "\(state)" }
        if let message = field("M") { metadata["postgres.message"] = "\(message)" }
        logger.log(level: severity == "WARNING" ? .info : .debug, "postgres notice", metadata: metadata)
    }
}
