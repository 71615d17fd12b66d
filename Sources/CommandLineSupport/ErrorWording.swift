import OrderFlow
import WorkflowKit

/// The engine's errors as the CLI says them: the engine's sentence, then its remedy as a
/// command to run (the HTTP API words the same remedies as routes).
extension OrderFlowError {
    public var commandLineSentence: String {
        message + (remedy.map(Self.commandLineHint) ?? "")
    }

    /// What follows the message, its punctuation included.
    static func commandLineHint(_ remedy: Remedy) -> String {
        switch remedy {
        case .createOrFindOrder: "; create it first, or check the id with `orderflow list`"
        case .listWorkflowVersions: " (see `orderflow workflow list`)"
        case .applyWorkflow: "; apply one with `orderflow workflow apply FILE`"
        case .listMerchants: "; `orderflow merchant list` shows the merchants"
        case .findMerchant: "; `orderflow merchant list` shows it"
        case .addMerchant(let id): "; add it with `orderflow merchant add \(MessageText.excerpt(id))`"
        case .listAPIKeys(let merchantID): "; `orderflow api-key list --merchant \(MessageText.excerpt(merchantID))` shows its keys"
        case .listDeadLetters: "; see `orderflow deliveries list --failed`"
        case .findDeadLetterIDs: "; see `orderflow deliveries list --failed` for the ids of dead letters"
        case .migrate: ": run `orderflow migrate`"
        case .retry: ", run the command again"
        }
    }
}
