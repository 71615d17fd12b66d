/// The canonical form of a workflow: a JSON document with sorted keys, states and transitions
/// sorted by name, and templates by their source text. Formatting, comments and the order of keys
/// or entries in the file do not change it; any change to what the workflow does does.
extension Workflow {
    public var canonicalJSON: String { canonicalValue.jsonString }

    var canonicalValue: JSONValue {
        func fields(_ fields: [FieldSpec]) -> JSONValue {
            .object(Dictionary(uniqueKeysWithValues: fields.map { ($0.name, .string($0.type.spelling)) }))
        }
        func fieldList(_ fields: [FieldSpec]) -> JSONValue {
            // Schema order matters for the generated Swift code, so it is kept. A default and
            // carry-over appear only when set, so that workflows without them keep their form.
            .array(fields.map { field in
                var entry: [String: JSONValue] = ["name": .string(field.name), "type": .string(field.type.spelling)]
                if let value = field.defaultValue { entry["default"] = value }
                if field.carriesOver { entry["carry-over"] = true }
                return .object(entry)
            })
        }
        func value(_ spec: ValueSpec) -> JSONValue {
            switch spec {
            case .literal(let literal): return ["literal": literal]
            case .template(let template): return ["template": .string(template.source)]
            case .list(let items): return ["list": .array(items.map(value))]
            }
        }
        func content(_ content: [String: ValueSpec]) -> JSONValue {
            .object(content.mapValues(value))
        }
        func text(_ spec: TextSpec) -> JSONValue {
            switch spec {
            case .plain(let template): return .string(template.source)
            case .localized(let key, let args): return ["loc-key": .string(key), "loc-args": .array(args.map { .string($0.source) })]
            }
        }
        func alert(_ spec: AlertSpec?) -> JSONValue {
            guard let spec else { return .null }
            return ["title": text(spec.title), "body": text(spec.body), "sound": spec.sound.map(JSONValue.string) ?? .null]
        }
        func optional(_ value: Double?) -> JSONValue { value.map(JSONValue.double) ?? .null }

        let stateValues: [JSONValue] = states.sorted { $0.name < $1.name }.map { state in
            [
                "name": .string(state.name),
                "description": state.description.map(JSONValue.string) ?? .null,
                "initial": .bool(state.isInitial),
                "final": .bool(state.isFinal),
                "content": content(state.content),
                "alert": alert(state.alert),
                "stale-after": state.staleAfter.map { .int($0.seconds) } ?? .null,
                "relevance": optional(state.relevanceScore),
                "priority": state.priority.map(JSONValue.int) ?? .null,
                "dismissal": state.dismissal.map { .string($0.description) } ?? .null,
            ]
        }
        let transitionValues: [JSONValue] = transitions.sorted { $0.id < $1.id }.map { transition in
            [
                "from": .string(transition.from),
                "to": .string(transition.to),
                "event": transition.event.map(JSONValue.string) ?? .null,
                "input": fields(transition.inputs),
                "content": content(transition.content),
                "alert": alert(transition.alert),
                "priority": .int(transition.priority),
                "relevance": optional(transition.relevanceScore),
            ]
        }
        let timerValues: [JSONValue] = timers.sorted { $0.id < $1.id }.map { timer in
            var object: [String: JSONValue] = ["in": .string(timer.state), "after": .int(timer.after.seconds)]
            switch timer.action {
            case .transition(let to): object["go-to"] = .string(to)
            case .markStale: object["mark-stale"] = true
            }
            return .object(object)
        }
        var document: JSONValue = [
            "format": 1,
            "name": .string(name),
            "description": .string(description),
            "attributes-type": .string(attributesType),
            "attributes": fieldList(attributesSchema),
            "content-state": fieldList(contentSchema),
            "initial": .string(initialState),
            "states": .array(stateValues),
            "transitions": .array(transitionValues),
            "timers": .array(timerValues),
            "lifecycle": [
                "start": .string(lifecycle.start.rawValue),
                "start-input": fields(lifecycle.startInputs),
                "start-alert": alert(lifecycle.startAlert),
                "on-time-limit": .string(lifecycle.onTimeLimit.rawValue),
            ],
        ]
        // Per-device workflows leave the audience keys out, so that the form (and checksum) of
        // workflows stored without those keys stays the same.
        if case .broadcast(let storage) = lifecycle.audience, case .object(var object) = document,
           case .object(var lifecycleObject)? = object["lifecycle"]
        {
            lifecycleObject["audience"] = "broadcast"
            lifecycleObject["channel-storage"] = .string(storage.rawValue)
            object["lifecycle"] = .object(lifecycleObject)
            document = .object(object)
        }
        // A struct type is spelled by its name in the schemas; its fields are here.
        if !structTypes.isEmpty, case .object(var object) = document {
            object["types"] = .array(structTypes.map { ["name": .string($0.name), "fields": fieldList($0.fields)] })
            document = .object(object)
        }
        if let android = androidCanonicalValue, case .object(var object) = document {
            object["android"] = android
            document = .object(object)
        }
        return document
    }
}
