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
            } else if case .daterange = type.nonOptional {
                checkDateRangeTemplate(template, position: position, label: label, scope: scope)
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
        case (.int, .int), (.double, .int), (.double, .double), (.bool, .bool), (.date, .date), (.daterange, .daterange): return nil
        case (.daterange, .date):
            return "a date range needs two times: join two dates with `..`, like \"{{input.from}}..{{input.to}}\" or \"{{input.eta}}..+15m\""
        case (.date, .daterange):
            return "a date range cannot fill one date"
        case (.enumeration(let values), .enumeration(let sourceValues)):
            let extra = sourceValues.filter { !values.contains($0) }
            return extra.isEmpty ? nil : "values \(codeList(extra)) are not in the field's enum"
        default:
            return "use a variable of a matching type, or a literal"
        }
    }

    /// A date range's template that is not one variable renders `lower..upper`: its text must
    /// hold the `..`, and each side that is a literal or a single variable must be a time.
    mutating func checkDateRangeTemplate(_ template: Template, position: SourcePosition, label: String, scope: TemplateScope) {
        guard let sides = Self.dateRangeSides(template.source) else {
            error("\(label) is a date range: its template must render two times joined by `..`, like \"{{input.from}}..{{input.to}}\" or \"{{input.eta}}..+15m\"", at: position)
            return
        }
        for side in [sides.lower, sides.upper] {
            guard side.contains("{{") else {
                if !DateValues.isDateLiteral(side.trimmingWhitespace()) {
                    error("\(label): `\(side)` is not a time; each side of `..` is ISO-8601 like `2025-05-01T07:10:00Z`, an offset like `+10m`, `now`, or one date variable", at: position)
                }
                continue
            }
            guard let variable = (try? Template(side))?.singleVariable, let source = scope.type(of: variable) else { continue }
            if let problem = Self.incompatibility(field: .date, source: source) {
                error("\(label): each side of `..` is one time, but `{{\(variable)}}` is \(source.spelling): \(problem)", at: position)
            }
        }
    }

    /// The sides of the first `..` outside the tags of a template's source, or nil when there is none.
    static func dateRangeSides(_ source: String) -> (lower: String, upper: String)? {
        var index = source.startIndex
        while index < source.endIndex {
            if source[index...].hasPrefix("{{") {
                guard let close = source[index...].range(of: "}}") else { return nil }
                index = close.upperBound
                continue
            }
            if source[index...].hasPrefix("..") {
                var upper = source.index(index, offsetBy: 2)
                if upper < source.endIndex, source[upper] == "." { upper = source.index(after: upper) }
                return (String(source[..<index]), String(source[upper...]))
            }
            index = source.index(after: index)
        }
        return nil
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
