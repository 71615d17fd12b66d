import ServiceLifecycle

/// The client as a `Service`: run it in the `ServiceGroup` of whatever sends through it, before
/// the senders, so that at graceful shutdown the senders stop first and the client closes its
/// connections last.
extension APNSClient: Service {
    /// Waits for graceful shutdown (or cancellation), then closes the connections.
    public func run() async throws {
        try? await gracefulShutdown()
        try await shutdown()
    }
}
