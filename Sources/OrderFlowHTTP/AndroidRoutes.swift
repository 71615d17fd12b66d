import OrderFlow

/// Android phones: their FCM registration tokens.
extension OrderFlowAPI {
    /// The merchant's key stores any of its devices' tokens; the app only its own device's, and
    /// only with that device's credential: Android apps came after device credentials, so the
    /// `compatible` transition (a client secret alone for a device never registered) does not
    /// reach this route.
    func registerFCMToken(_ input: Operations.RegisterFCMToken.Input) async throws -> Operations.RegisterFCMToken.Output {
        await respond(Operations.RegisterFCMToken.Output.default, access: .anyOrder, device: input.path.device) { engine in
            if let scope = RequestScope.current, scope.grantedOrder != nil, scope.deviceCredential == nil {
                throw AccessDenied(detail: "an app stores its FCM token only with its device's credential; send `OrderFlow-Device-Credential` with the `of_dev_…` credential from `POST /v1/devices`")
            }
            guard case .json(let body) = input.body else { throw OrderFlowError(.invalidInput, "send the token as application/json") }
            let stored = try await engine.registerFCMToken(deviceID: input.path.device, token: body.token)
            return .ok(.init(body: .json(.init(tokenSuffix: Self.suffix(stored)))))
        }
    }
}
