import Foundation

extension OrderFlowEngine {
    var erasureStore: ErasureStore { ErasureStore(pool: pool, merchantID: configuration.merchantID) }

    /// Forgets a device entirely, on the merchant's authority (a customer's request to the
    /// merchant): its push-to-start and alert tokens, its follows, its activities with their
    /// tokens, its queued pushes and its credential. Its past deliveries stay counted in their
    /// orders' histories, under no device (`(forgotten)`) and no token suffix. A push a worker
    /// had already taken when this is called is awaited (while the worker's lease on the order
    /// lasts, at most a minute), so that nothing is sent to the device, or recorded of it, once
    /// this returns.
    /// - Throws: `notFound` when the merchant has no such device (also when it was forgotten).
    public func forgetDevice(_ deviceID: String) async throws {
        try await translatingErrors {
            try Self.validateIdentifier(deviceID, what: "device id")
            let forgotten = try await erasureStore.forgetDevice(deviceID)
            guard forgotten.existed else { throw Self.unknownDevice(deviceID) }
            guard !forgotten.leasedOrders.isEmpty else { return }
            let deadline = ContinuousClock.now + Self.leaseWait
            while ContinuousClock.now < deadline, try await erasureStore.anyLeased(forgotten.leasedOrders) {
                try await Task.sleep(for: .milliseconds(50))
            }
            try await erasureStore.untieDeliveries(of: deviceID)
        }
    }

    /// Forgets a device on its own authority (the customer's app, with the device's
    /// credential), as ``forgetDevice(_:)`` does. Without that device's credential — none, a
    /// malformed one, another device's — it is refused exactly as an unknown device is, and
    /// nothing changes: a caller cannot tell a device it may not touch from one that does not
    /// exist.
    /// - Throws: `notFound`.
    public func forgetAppDevice(_ deviceID: String, credential: String?) async throws {
        try await translatingErrors {
            try Self.validateIdentifier(deviceID, what: "device id")
            guard let credential, Self.isSecret(credential, scheme: Self.deviceCredentialScheme),
                  let stored = try await deviceStore.credentialHash(deviceID: deviceID),
                  Self.constantTimeEqual(stored, Self.secretHash(credential))
            else { throw Self.unknownDevice(deviceID) }
            try await forgetDevice(deviceID)
        }
    }

    /// Replaces a finished order's personal data with redactions, keeping its shape for the
    /// merchant's statistics: its attributes, content, every transition's input and rendered
    /// content and alert, and its deliveries' alert titles become redactions (strings
    /// "(redacted)", numbers 0; keys, booleans and nulls stay); its activities' update tokens
    /// are dropped and its queued pushes deleted. Its id, states, sequence numbers, times,
    /// actors and counts stay. Redacting twice changes nothing more.
    /// - Throws: `notFound` for an unknown order; `conflict` for an order not in a final state
    ///   (cancel it first: a live order would go on rendering and pushing).
    public func redactOrder(_ orderID: String) async throws {
        try await translatingErrors {
            try Self.validateIdentifier(orderID, what: "order id")
            guard let row = try await orderStore.snapshotRow(orderID: orderID) else { throw Self.orderNotFound(orderID) }
            let workflow = try await workflows.workflow(named: try row.decode("workflow_name"), version: try row.decode("workflow_version"))
            orderCache.forget(orderID)
            let deadline = ContinuousClock.now + Self.leaseWait
            while true {
                switch try await erasureStore.redactOrder(orderID, finalStates: workflow.finalStates) {
                case .redacted:
                    return
                case .notFound:
                    throw Self.orderNotFound(orderID)
                case .live(let state):
                    throw OrderFlowError(.conflict,
                        "order \(Self.shown(orderID)) is \(Self.shown(state)), not finished; nothing was redacted. Cancel it first (or let it finish), then redact it",
                        orderID: orderID, currentState: state)
                case .leased:
                    // A worker is sending the order's last pushes: redacted once it recorded them.
                    guard ContinuousClock.now < deadline else {
                        throw OrderFlowError(.conflict, "a worker is still sending order \(Self.shown(orderID))'s pushes; nothing was redacted. Try again in a minute",
                                             remedy: .retry, orderID: orderID)
                    }
                    try await Task.sleep(for: .milliseconds(50))
                }
            }
        }
    }

    /// How long an erasure waits for a worker's lease on an order: the workers' default lease,
    /// and a little more.
    static let leaseWait: Duration = .seconds(65)

    static func unknownDevice(_ deviceID: String) -> OrderFlowError {
        OrderFlowError(.notFound, "device \(shown(deviceID)) is not known (never registered, or forgotten already); nothing was forgotten")
    }
}
