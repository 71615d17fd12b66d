import OrderFlow

/// Erasure on the customer's request: forgetting a device, redacting a finished order.
extension OrderFlowAPI {
    /// The merchant's key forgets any of its devices; the app only the device whose own
    /// credential it sends, and anything else is the 404 of an unknown device (the app cannot
    /// tell a device it may not touch from one that does not exist).
    func forgetDevice(_ input: Operations.ForgetDevice.Input) async throws -> Operations.ForgetDevice.Output {
        await respond(Operations.ForgetDevice.Output.default, access: .anyOrder) { engine in
            if let scope = RequestScope.current, scope.grantedOrder != nil {
                try await engine.forgetAppDevice(input.path.device, credential: scope.deviceCredential)
            } else {
                try await engine.forgetDevice(input.path.device)
            }
            return .noContent(.init())
        }
    }

    func redactOrder(_ input: Operations.RedactOrder.Input) async throws -> Operations.RedactOrder.Output {
        await respond(Operations.RedactOrder.Output.default) { engine in
            try await engine.redactOrder(input.path.id)
            return .noContent(.init())
        }
    }
}
