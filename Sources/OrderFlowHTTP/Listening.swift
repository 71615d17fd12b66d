import NIOCore
import Synchronization

/// The port a listener bound, and a wait for it: set once the server runs, finished whatever
/// ends the server (a port in use, an address not this machine's), so that nobody goes on
/// waiting for a listener that never comes.
final class Listening: Sendable {
    private let port = Mutex<Int?>(nil)
    private let started = AsyncStream<Int>.makeStream()

    /// The port, once the listener is bound.
    var boundPort: Int? { port.withLock { $0 } }

    /// Waits until the listener is bound; its port, or nil when it never was.
    func wait() async -> Int? {
        if let port = boundPort { return port }
        for await port in started.stream { return port }
        return boundPort
    }

    /// For Hummingbird's `onServerRunning`.
    func bound(_ channel: any Channel) {
        let bound = channel.localAddress?.port
        port.withLock { $0 = bound }
        if let bound { started.continuation.yield(bound) }
        started.continuation.finish()
    }

    /// The server ended (or failed to start): waiters stop waiting.
    func ended() {
        started.continuation.finish()
    }
}
