/// The APNs payload limit, checked once everything else is sound: the bounds need a whole workflow.
extension WorkflowValidator {
    mutating func checkPayloadSizes(of workflow: Workflow, expanded: [ExpandedTransition], specs: [String: TransitionSpec]) {
        let bounds = PayloadBounds(workflow: workflow)
        for (from, transition) in expanded {
            guard let spec = specs["\(from)->\(transition.to.value)"] else { continue }
            let size = bounds.update(spec)
            if size.total > APNSLimits.maximumPayloadSize {
                error("transition `\(spec.from) -> \(spec.to)` can produce an APNs payload of up to \(size.total) bytes, over the \(APNSLimits.maximumPayloadSize)-byte limit (\(size.breakdown)); \(shrinkAdvice(size)); or shorten alert texts, or send less in the ContentState",
                      at: transition.fromAny ? transition.position : (transition.from.first { $0.value == from }?.position ?? transition.position))
            }
        }
        if lifecycle.start == .pushToStart || lifecycle.onTimeLimit == .restart {
            let size = bounds.start()
            if size.total > APNSLimits.maximumPayloadSize {
                error("the push-to-start can produce an APNs payload of up to \(size.total) bytes, over the \(APNSLimits.maximumPayloadSize)-byte limit (\(size.breakdown)); \(shrinkAdvice(size)); bound the attributes' strings the same way, or shorten the start alert",
                      at: lifecycleStartPosition)
            }
        }
    }

    /// How to make the largest ContentState field smaller, in the format's own syntax: a string's
    /// bound is `string(N)` and an array's `[T; N]` (there is no `max-length` key).
    func shrinkAdvice(_ size: PayloadBounds.Size) -> String {
        let generic = "bound the strings with `string(N)` and the arrays with `[T; N]`"
        guard let name = size.largestField?.name, let field = contentSchema.first(where: { $0.name == name }) else { return generic }
        func advice(_ type: FieldType) -> String {
            switch type.nonOptional {
            case .string(nil):
                return "give `\(name)` a max length, e.g. `\(name): string(60)` (a string without one counts as \(PayloadBounds.defaultStringLength) bytes)"
            case .string(let maxLength?):
                return "lower the max length of `\(name): \(field.type.spelling)` below \(maxLength)"
            case .array(let element, let maxCount):
                let fewer = max(1, maxCount / 2)
                if case .string(nil) = element.nonOptional {
                    return "give the elements of `\(name): \(field.type.spelling)` a max length and declare fewer of them, e.g. `[string(40); \(fewer)]` (a string without a max length counts as \(PayloadBounds.defaultStringLength) bytes)"
                }
                return "declare fewer or smaller elements for `\(name): \(field.type.spelling)`, e.g. `[\(element.spelling); \(fewer)]`"
            default:
                return generic
            }
        }
        return advice(field.type)
    }
}
