/// Worst-case size of the FCM data message a transition can produce, checked against FCM's
/// 4096-byte limit (keys and values together) when a workflow is loaded, as `PayloadBounds` does
/// for the APNs payload and by the same counting rule (docs/workflows.md). Each key of
/// ``Workflow/renderAndroid(_:from:order:attributes:input:previous:)`` is counted with its
/// largest value; render checks the real message against the same limit.
struct AndroidDataBounds {
    /// The engine's longest order id (its identifier limit).
    static let orderIDBytes = 200
    /// Milliseconds since 1970 as digits, with room for a sign.
    static let millisecondsBytes = 14

    let workflow: Workflow
    let bounds: PayloadBounds
    /// The same for every update: computed once, not per transition of a large workflow.
    let segmentsBytes: Int

    init(workflow: Workflow) {
        self.workflow = workflow
        self.bounds = PayloadBounds(workflow: workflow)
        self.segmentsBytes = workflow.androidSegments.utf8.count
    }

    struct Size {
        var total: Int
        var title: Int
        var text: Int
    }

    func update(_ transition: TransitionSpec) -> Size {
        let scope = bounds.scope(inputs: transition.inputs)
        let presentation = workflow.android.presentation(in: transition.to)
        var entries: [(String, Int)] = [
            (AndroidData.format, AndroidData.formatVersion.utf8.count),
            (AndroidData.order, Self.orderIDBytes),
            (AndroidData.workflow, workflow.name.utf8.count),
            (AndroidData.state, transition.to.utf8.count),
            (AndroidData.event, 6),
            (AndroidData.timestamp, Self.millisecondsBytes),
            (AndroidData.segments, segmentsBytes),
            (AndroidData.progress, String(workflow.android.total).utf8.count),
            (AndroidData.channel, (presentation.channel ?? AndroidSpec.defaultChannel).utf8.count),
            (AndroidData.promote, 5),
            (AndroidData.alert, 5),
        ]
        let title: Int
        if let template = presentation.title {
            title = text(template, scope: scope, key: AndroidData.title)
        } else if let alert = transition.alert {
            title = text(alert.title, scope: scope, clippedTo: Workflow.derivedTitleLength, plainKey: AndroidData.title,
                         key: AndroidData.titleKey, args: AndroidData.titleArgs)
        } else {
            title = AndroidData.title.utf8.count + Workflow.displayName(of: transition.to).utf8.count
        }
        var textSize = 0
        if let template = presentation.text {
            textSize = text(template, scope: scope, key: AndroidData.text)
        } else {
            // Whichever text field has a value at render time, or the alert's body.
            for field in workflow.contentSchema {
                if case .string = field.type.nonOptional {
                    let bound = min(PayloadBounds.textBound(field.type), Workflow.derivedTextLength)
                    textSize = max(textSize, PayloadBounds.sum([AndroidData.text.utf8.count, bound]))
                }
            }
            if let alert = transition.alert {
                textSize = max(textSize, text(alert.body, scope: scope, clippedTo: Workflow.derivedTextLength,
                                              plainKey: AndroidData.text, key: AndroidData.textKey, args: AndroidData.textArgs))
            }
        }
        entries.append(("", title))
        entries.append(("", textSize))
        if workflow.android.whenField != nil { entries.append((AndroidData.when, Self.millisecondsBytes)) }
        if let chip = presentation.chip { entries.append(("", text(chip, scope: scope, key: AndroidData.chip))) }
        if let icon = presentation.icon { entries.append((AndroidData.icon, icon.utf8.count)) }
        if transition.endsActivity {
            entries.append((AndroidData.dismiss, 7))
            entries.append((AndroidData.dismissAt, Self.millisecondsBytes))
        }
        let total = PayloadBounds.sum(entries.map { PayloadBounds.sum([$0.0.utf8.count, $0.1]) })
        return Size(total: total, title: title, text: textSize)
    }

    /// A key and the largest rendering of its template.
    func text(_ template: Template, scope: TemplateScope, key: String) -> Int {
        PayloadBounds.sum([key.utf8.count, PayloadBounds.textBound(template.nodes, scope: scope, dot: nil)])
    }

    /// An alert text cut as the renderer cuts it: plain under `plainKey`, or localized under
    /// `key` and `args` (a JSON array of arguments, each cut; 6 bytes each for quotes, a comma
    /// and escaping's slack).
    func text(_ spec: TextSpec, scope: TemplateScope, clippedTo length: Int, plainKey: String, key: String, args: String) -> Int {
        switch spec {
        case .plain(let template):
            return PayloadBounds.sum([plainKey.utf8.count, min(length, PayloadBounds.textBound(template.nodes, scope: scope, dot: nil))])
        case .localized(let resource, let arguments):
            let argumentBytes = arguments.map {
                PayloadBounds.sum([min(Workflow.derivedArgumentLength, PayloadBounds.textBound($0.nodes, scope: scope, dot: nil)), 6])
            }
            return PayloadBounds.sum([key.utf8.count, resource.utf8.count, args.utf8.count, 2, PayloadBounds.sum(argumentBytes)])
        }
    }
}

extension Workflow {
    /// The largest FCM data message, in bytes, that `transition` can produce under the counting
    /// rule of docs/workflows.md; the loader rejects workflows where this exceeds 4096.
    public func maximumAndroidDataSize(for transition: TransitionSpec) -> Int {
        AndroidDataBounds(workflow: self).update(transition).total
    }
}
