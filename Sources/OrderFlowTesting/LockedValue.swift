import Synchronization

/// A value shared by the tasks of a test scenario, behind a lock. (`Mutex` itself is not
/// copyable, so it cannot be captured by several tasks or kept in a copyable struct.)
public final class LockedValue<Value: Sendable>: Sendable {
    private let storage: Mutex<Value>

    public init(_ value: Value) { storage = Mutex(value) }

    public var value: Value { storage.withLock { $0 } }

    public func withLock<R: Sendable>(_ body: (inout sending Value) throws -> sending R) rethrows -> R {
        try storage.withLock(body)
    }
}
