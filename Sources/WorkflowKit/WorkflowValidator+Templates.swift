/// The content of each place in the file and the templates in it: required fields set, every
/// variable declared where it is used, and of a type that fits the field it fills.
extension WorkflowValidator {
    /// The transition's content over the target state's defaults; reports required fields left unset.
    mutating func effectiveContent(_ own: [String: Located<ValueSpec>], defaults state: ParsedState, label: String,
                                   position: SourcePosition, scope: TemplateScope, report: Bool) -> [String: ValueSpec]
    {
        var result: [String: ValueSpec] = [:]
        var missing: [FieldSpec] = []
        for field in contentSchema {
            if let value = own[field.name] {
                if report {
                    checkValue(value.value, type: field.type, position: value.position, label: "`content.\(field.name)` of \(label)", scope: scope)
                }
                result[field.name] = value.value
            } else if let value = state.content[field.name] {
                if report {
                    checkValue(value.value, type: field.type, position: value.position,
                               label: "`content.\(field.name)` of state `\(state.spec.name)` (used by \(label))", scope: scope)
                }
                result[field.name] = value.value
            } else if field.carriesOver, scope.previousUnavailable == nil {
                // Kept as it was: the same as writing `{{previous.field}}`, which copies the value with its type.
                result[field.name] = .template(Template.previousValue(of: field.name))
            } else if let value = field.defaultValue {
                result[field.name] = .literal(value)
            } else if field.type.isOptional {
                result[field.name] = .literal(.null)
            } else {
                missing.append(field)
            }
        }
        if report, !missing.isEmpty {
            let list = missing.map { "`\($0.name)` (\($0.type.spelling))" }.joined(separator: ", ")
            error("\(label) leaves required ContentState field\(missing.count > 1 ? "s" : "") \(list) unset; set \(missing.count > 1 ? "them" : "it") under its `content`, in state `\(state.spec.name)`'s `content`, or give the field a `default`",
                  at: position)
        }
        return result
    }

    mutating func checkAlert(_ alert: ParsedAlert, scope: TemplateScope) {
        for use in alert.templates {
            checkTemplate(use.template, position: use.position, label: use.label, scope: scope, sectionTypes: [])
        }
    }

    mutating func checkValue(_ value: ValueSpec, type: FieldType, position: SourcePosition, label: String, scope: TemplateScope) {
        switch value {
        case .literal:
            return
        case .list(let items):
            guard case .array(let element, _) = type.nonOptional else { return }
            for item in items { checkValue(item, type: element, position: position, label: label, scope: scope) }
        case .template(let template):
            guard checkTemplate(template, position: position, label: label, scope: scope, sectionTypes: []) else { return }
            if let variable = template.singleVariable, variable != "." {
                guard let source = scope.type(of: variable) else { return }
                if let problem = Self.incompatibility(field: type, source: source) {
                    error("\(label) is \(type.spelling) but `{{\(variable)}}` is \(source.spelling): \(problem)", at: position)
                }
            } else if case .array = type.nonOptional {
                error("\(label) is an array (\(type.spelling)): give a YAML list or exactly one variable naming an array, like \"{{input.items}}\"", at: position)
            }
        }
    }

    /// Why a value of type `source` cannot fill a field of type `field`, or nil when it can
    /// (possibly with a check at render time, e.g. text into an int).
    static func incompatibility(field: FieldType, source: FieldType) -> String? {
        let target = field.nonOptional
        let from = source.nonOptional
        if case .array(let targetElement, _) = target {
            guard case .array(let sourceElement, _) = from else { return "an array field needs an array variable" }
            return incompatibility(field: targetElement, source: sourceElement)
        }
        if case .array = from { return "an array cannot fill a single value" }
        if target.structType != nil || from.structType != nil {
            guard let targetStruct = target.structType, let sourceStruct = from.structType else {
                return "a struct is filled only from a variable of the same struct type"
            }
            return targetStruct.name == sourceStruct.name ? nil : "use a variable of type \(targetStruct.name)"
        }
        switch (target, from) {
        case (.string, _): return nil
        case (_, .string): return nil  // converted and checked at render time
        case (.int, .int), (.double, .int), (.double, .double), (.bool, .bool), (.date, .date): return nil
        case (.enumeration(let values), .enumeration(let sourceValues)):
            let extra = sourceValues.filter { !values.contains($0) }
            return extra.isEmpty ? nil : "values \(codeList(extra)) are not in the field's enum"
        default:
            return "use a variable of a matching type, or a literal"
        }
    }

    /// Checks the variables and transforms a template names; false when it reported a problem.
    @discardableResult
    mutating func checkTemplate(_ template: Template, position: SourcePosition, label: String, scope: TemplateScope,
                                sectionTypes: [FieldType]) -> Bool
    {
        var ok = true
        for variable in template.variables {
            for transform in variable.transforms where !Template.knownTransforms.contains(transform) {
                error("\(label): unknown template transform `\(transform)`\(didYouMean(transform, in: Template.knownTransforms)); known: \(codeList(Template.knownTransforms.sorted()))",
                      at: position)
                ok = false
            }
            let name = variable.name
            if name == "." {
                if !variable.insideSection {
                    error("\(label): `{{.}}` only means something inside a section like `{{#input.items}}…{{/input.items}}`", at: position)
                    ok = false
                }
                continue
            }
            if scope.type(of: name) != nil { continue }
            ok = false
            let parts = name.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
            let suggestion = didYouMean(name, in: scope.allNames)
            if parts.count == 2, parts[0] == "attributes" {
                error("\(label) uses `{{\(name)}}`, but `\(parts[1])` is not in `activity.attributes`\(suggestion); attributes: \(codeList(attributesSchema.map(\.name)))",
                      at: position)
            } else if parts.count == 2, parts[0] == "input" {
                error("\(label) uses `{{\(name)}}`, but \(scope.inputOwner) declares no input `\(parts[1])`\(suggestion); declare it, e.g. `input: {\(parts[1]): string}`",
                      at: position)
            } else if parts.count == 2, parts[0] == "previous" {
                if let reason = scope.previousUnavailable {
                    error("\(label) uses `{{\(name)}}`, but \(reason)", at: position)
                } else {
                    error("\(label) uses `{{\(name)}}`, but `\(parts[1])` is not a ContentState field\(suggestion); fields: \(codeList(contentSchema.map(\.name)))",
                          at: position)
                }
            } else if ["attributes", "input", "previous"].contains(name) {
                error("\(label) uses `{{\(name)}}`, which is a group; name one of its fields, e.g. `{{\(scope.allNames.first { $0.hasPrefix(name + ".") } ?? name + ".x")}}`",
                      at: position)
            } else {
                let bare = scope.allNames.first { $0.hasSuffix("." + name) }
                let hint = bare.map { " (did you mean `\($0)`?)" } ?? suggestion
                error("\(label) uses unknown variable `{{\(name)}}`\(hint); templates can use \(codeList(scope.allNames))", at: position)
            }
        }
        return ok
    }
}
