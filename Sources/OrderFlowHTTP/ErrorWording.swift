import OrderFlow

/// The engine's errors as the HTTP API says them (a problem's `detail`): the engine's
/// sentence, then its remedy as a route to call (the CLI words the same remedies as commands).
/// What only the server's operator can do (merchants, API keys, the schema) is said as such.
extension OrderFlowError {
    var httpSentence: String {
        message + (remedy.map(Self.httpHint) ?? "")
    }

    /// What follows the message, its punctuation included.
    static func httpHint(_ remedy: Remedy) -> String {
        switch remedy {
        case .createOrFindOrder: "; create it first (POST /v1/orders), or check the id with GET /v1/orders"
        case .listWorkflowVersions: " (GET /v1/workflows/{name} shows the newest)"
        case .applyWorkflow: "; apply one with POST /v1/workflows"
        case .listMerchants, .findMerchant, .addMerchant: "; the server's operator manages the merchants"
        case .listAPIKeys: "; the server's operator manages the API keys"
        case .listDeadLetters: "; GET /v1/deliveries?failed=true lists the dead letters"
        case .findDeadLetterIDs: "; GET /v1/deliveries?failed=true lists the dead letters and their ids"
        case .migrate: "; the server's operator must migrate it, retry then"
        case .retry: ", send the request again"
        }
    }
}
