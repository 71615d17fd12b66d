import Foundation

/// Renders values for one transition at one time.
struct Renderer {
    let workflow: Workflow
    let time: Date
    let context: String
    /// Typed values by variable name (`attributes.x`, `input.y`, `previous.z`, `now`); dates as ISO text.
    let variables: [String: JSONValue]

    /// The groups of variables; each is an object in swift-mustache's context, also when empty.
    static let groups = ["attributes", "input", "previous"]

    init(workflow: Workflow, attributes: JSONValue, input: JSONValue, inputSchema: [FieldSpec], previous: JSONValue?,
         time: Date, context: String)
    {
        self.workflow = workflow
        self.time = time
        self.context = context
        var variables: [String: JSONValue] = ["now": .string(DateValues.formatISO8601(time))]
        // A struct's members too, by their full names (`input.leader.name`).
        func add(_ prefix: String, _ value: JSONValue?, schema: [FieldSpec]) {
            for field in schema {
                let fieldValue = Self.templateValue(value?[field.name] ?? .null, type: field.type, time: time)
                variables[prefix + field.name] = fieldValue
                if let structure = field.type.structType {
                    add(prefix + field.name + ".", fieldValue, schema: structure.fields)
                }
            }
        }
        add("attributes.", attributes, schema: workflow.attributesSchema)
        add("input.", input, schema: inputSchema)
        add("previous.", previous, schema: workflow.contentSchema)
        self.variables = variables
    }

    /// The object swift-mustache renders against, built from `variables` for the templates
    /// `Template.renderDirect` leaves to it.
    static func mustacheContext(_ variables: [String: JSONValue]) -> [String: Any] {
        var groups: [String: [String: Any]] = [:]
        for group in Self.groups { groups[group] = [:] }
        var root: [String: Any] = [:]
        for (name, value) in variables {
            guard let any = Self.foundation(value) else { continue }
            if let dot = name.firstIndex(of: "."), groups[String(name[..<dot])] != nil {
                let member = String(name[name.index(after: dot)...])
                // A struct's members are inside the struct's own object already.
                if member.contains(".") { continue }
                groups[String(name[..<dot])]![member] = any
            } else {
                root[name] = any
            }
        }
        for (group, object) in groups { root[group] = object }
        return root
    }

    /// A template rendered against this transition's values.
    func render(_ template: Template) -> String {
        template.renderDirect(variables) ?? template.render(Self.mustacheContext(variables))
    }

    /// A value as templates see it: dates (ISO text, offsets or 2001-based seconds) become ISO
    /// text, date ranges `lower..upper` of ISO text (from text or the app's `[lower, upper]`).
    static func templateValue(_ value: JSONValue, type: FieldType, time: Date) -> JSONValue {
        switch (type.nonOptional, value) {
        case (.daterange, .string(let text)):
            return DateRangeValues.resolve(text, relativeTo: time).map { .string(DateRangeValues.formatISO8601($0.lower, $0.upper)) } ?? value
        case (.daterange, .array):
            guard let bounds = DateRangeValues.appBounds(value) else { return value }
            return .string(DateRangeValues.formatISO8601(Date(timeIntervalSinceReferenceDate: bounds.lower),
                                                         Date(timeIntervalSinceReferenceDate: bounds.upper)))
        case (.date, .string(let text)):
            return DateValues.resolve(text, relativeTo: time).map { .string(DateValues.formatISO8601($0)) } ?? value
        case (.date, .int), (.date, .double):
            return .string(DateValues.formatISO8601(Date(timeIntervalSinceReferenceDate: value.doubleValue!)))
        case (.array(let element, _), .array(let items)):
            return .array(items.map { templateValue($0, type: element, time: time) })
        case (.structure(let structure), .object(var object)):
            for field in structure.fields {
                if let member = object[field.name] { object[field.name] = templateValue(member, type: field.type, time: time) }
            }
            return .object(object)
        default:
            return value
        }
    }

    static func foundation(_ value: JSONValue) -> Any? {
        switch value {
        case .null: return nil
        case .bool(let bool): return bool
        case .int(let int): return int
        case .double(let double): return double
        case .string(let string): return string
        case .array(let items): return items.compactMap(foundation)
        case .object(let object): return object.compactMapValues(foundation)
        }
    }

    // MARK: Content

    func content(_ content: [String: ValueSpec]) throws -> JSONValue {
        var result: [String: JSONValue] = [:]
        for field in workflow.contentSchema {
            result[field.name] = try value(content[field.name] ?? .literal(.null), type: field.type, field: field.name)
        }
        return .object(result)
    }

    func value(_ spec: ValueSpec, type: FieldType, field: String) throws -> JSONValue {
        switch spec {
        case .literal(let literal):
            return try convert(literal, type: type, field: field)
        case .list(let items):
            guard case .array(let element, _) = type.nonOptional else { return try convert(.null, type: type, field: field) }
            return try convert(.array(try items.map { try value($0, type: element, field: field) }), type: type, field: field,
                               elementsConverted: true)
        case .template(let template):
            if let variable = template.singleVariable, variable != "." {
                return try convert(variables[variable] ?? .null, type: type, field: field)
            }
            return try convert(.string(render(template)), type: type, field: field)
        }
    }

    func error(_ code: RenderError.Code, _ field: String, _ message: String) -> RenderError {
        RenderError(code: code, context: context, field: field, message: message)
    }

    /// Converts a template-domain value (dates as text) to `type` in the app's JSON shape.
    func convert(_ value: JSONValue, type: FieldType, field: String, elementsConverted: Bool = false) throws -> JSONValue {
        if case .optional(let wrapped) = type {
            if value.isNull { return .null }
            // An optional field that renders empty (or only whitespace) is null.
            if case .string(let text) = value, text.trimmingWhitespace().isEmpty {
                return .null
            }
            // So does a range both of whose sides render empty (`{{input.from}}..{{input.to}}`).
            if case .daterange = wrapped, let text = value.stringValue, let sides = DateRangeValues.split(text),
                sides.lower.isEmpty, sides.upper.isEmpty
            {
                return .null
            }
            return try convert(value, type: wrapped, field: field, elementsConverted: elementsConverted)
        }
        if value.isNull {
            throw error(.missingValue, field, "required \(type.spelling) rendered no value; give the variable a value or make the field optional")
        }
        let text = value.stringValue?.trimmingWhitespace()
        switch type {
        case .string(let maxLength):
            let string: String
            switch value {
            case .string(let raw): string = raw
            case .int, .double, .bool: string = value.jsonString
            default: throw error(.typeMismatch, field, "expected text, got \(value.typeName)")
            }
            if let maxLength, string.count > maxLength {
                throw error(.valueTooLong, field,
                            "rendered text is \(string.count) characters, over the max length of \(maxLength): \"\(string.prefix(40))…\"; shorten the input or raise the field's max length")
            }
            return .string(string)
        case .int:
            if let int = value.intValue { return .int(int) }
            if let text, let int = Int(text) { return .int(int) }
            throw error(.typeMismatch, field, "expected a whole number, rendered \(value.jsonString)")
        case .double:
            if let double = value.doubleValue { return .double(double) }
            if let text, let double = Double(text), double.isFinite { return .double(double) }
            throw error(.typeMismatch, field, "expected a number, rendered \(value.jsonString)")
        case .bool:
            if let bool = value.boolValue { return .bool(bool) }
            if text == "true" { return .bool(true) }
            if text == "false" { return .bool(false) }
            throw error(.typeMismatch, field, "expected true or false, rendered \(value.jsonString)")
        case .date:
            if let text, let date = DateValues.resolve(text, relativeTo: time) { return DateValues.appJSON(date) }
            // A number is already in the app's shape (seconds since 2001).
            if let seconds = value.doubleValue { return .double(seconds) }
            throw error(.typeMismatch, field,
                        "expected a date (ISO-8601 like 2025-05-01T12:00:00Z or an offset like +15m), rendered \(value.jsonString)")
        case .daterange:
            return try dateRange(value, text: text, field: field)
        case .enumeration(let values):
            guard let text, values.contains(text) else {
                throw error(.typeMismatch, field, "rendered \(value.jsonString), which is not one of \(codeList(values))")
            }
            return .string(text)
        case .optional(let wrapped):
            return try convert(value, type: wrapped, field: field)
        case .array(let element, let maxCount):
            guard let items = value.arrayValue else { throw error(.typeMismatch, field, "expected an array, got \(value.typeName)") }
            if items.count > maxCount {
                throw error(.tooManyElements, field, "\(items.count) elements, at most \(maxCount) allowed")
            }
            if elementsConverted { return value }
            return .array(try items.map { try convert($0, type: element, field: field) })
        case .structure(let structure):
            guard case .object(let object) = value else {
                throw error(.typeMismatch, field, "expected a \(structure.name) object, got \(value.typeName)")
            }
            var result: [String: JSONValue] = [:]
            for member in structure.fields {
                result[member.name] = try convert(object[member.name] ?? member.defaultValue ?? .null, type: member.type,
                                                  field: field + "." + member.name)
            }
            return .object(result)
        }
    }

    /// `lower..upper` text (each side ISO-8601 or an offset), or the app's `[lower, upper]`
    /// already, as `[lower, upper]` seconds since 2001; a range that ends before it starts is
    /// refused, as Swift's `ClosedRange` decoder would refuse it on the phone.
    func dateRange(_ value: JSONValue, text: String?, field: String) throws -> JSONValue {
        let bounds: (lower: Double, upper: Double)
        if let text, let dates = DateRangeValues.resolve(text, relativeTo: time) {
            bounds = (dates.lower.timeIntervalSinceReferenceDate, dates.upper.timeIntervalSinceReferenceDate)
        } else if let app = DateRangeValues.appBounds(value) {
            bounds = app
        } else {
            throw error(.typeMismatch, field,
                        "expected a date range (two times joined by `..`, like \(DateRangeValues.example)), rendered \(value.jsonString)")
        }
        guard bounds.upper >= bounds.lower else {
            throw error(.typeMismatch, field, "the date range \(value.jsonString) ends before it starts; give the earlier time first")
        }
        return .array([.double(bounds.lower), .double(bounds.upper)])
    }

    func alert(_ spec: AlertSpec) throws -> ActivityAlert {
        ActivityAlert(title: text(spec.title), body: text(spec.body), sound: spec.sound)
    }

    func text(_ spec: TextSpec) -> LocalizableText {
        switch spec {
        case .plain(let template): return .plain(render(template))
        case .localized(let key, let args): return .localized(key: key, args: args.map { render($0) })
        }
    }

    /// Normalized data (dates as ISO text) in the app's JSON shape (dates as 2001-based seconds).
    func appShape(_ value: JSONValue, schema: [FieldSpec]) -> JSONValue {
        var result: [String: JSONValue] = [:]
        for field in schema {
            let fieldValue = value[field.name] ?? .null
            result[field.name] = (try? convert(Self.templateValue(fieldValue, type: field.type, time: time), type: field.type,
                                               field: field.name)) ?? fieldValue
        }
        return .object(result)
    }

    static func checkSize(_ payload: LiveActivityPayload, context: String) throws {
        let size = payload.encodedSize
        if size > APNSLimits.maximumPayloadSize {
            throw RenderError(code: .payloadTooLarge, context: context, field: nil,
                              message: "the APNs payload would be \(size) bytes, over the \(APNSLimits.maximumPayloadSize)-byte limit APNs accepts; shorten the text values given (attributes or input)")
        }
    }
}
