import Foundation

/// Checks data callers give (attributes, inputs) against a schema and normalizes it: dates as
/// ISO-8601 UTC text or offsets kept as written (date ranges as `lower..upper` of those),
/// integral doubles as ints, defaults filled in.
enum DataNormalizer {
    static func normalize(_ value: JSONValue, schema: [FieldSpec], subject: String, allowRelativeDates: Bool,
                          reference: Date) throws(DataValidationError) -> JSONValue
    {
        var problems: [DataValidationError.Problem] = []
        let object: [String: JSONValue]
        switch value {
        case .null: object = [:]
        case .object(let fields): object = fields
        default:
            throw DataValidationError(subject: subject, problems: [.init(path: "", message: "expected a JSON object, got \(value.typeName)")])
        }
        var result: [String: JSONValue] = [:]
        let names = schema.map(\.name)
        for key in object.keys.sorted() where !names.contains(key) {
            let hint = didYouMean(key, in: names)
            problems.append(.init(path: excerpt(key), message: "unknown field\(hint); expected fields: \(codeList(names))"))
        }
        normalizeFields(object, schema: schema, path: "", allowRelativeDates: allowRelativeDates, reference: reference,
                        into: &result, problems: &problems)
        guard problems.isEmpty else { throw DataValidationError(subject: subject, problems: problems) }
        return .object(result)
    }

    /// The fields of an object (the top level, or a struct at `path`): a field not given takes
    /// its `default`.
    static func normalizeFields(_ object: [String: JSONValue], schema: [FieldSpec], path: String, allowRelativeDates: Bool,
                                reference: Date, into result: inout [String: JSONValue],
                                problems: inout [DataValidationError.Problem])
    {
        for field in schema {
            var fieldValue = object[field.name] ?? .null
            if fieldValue.isNull, let defaultValue = field.defaultValue { fieldValue = defaultValue }
            if let normalized = normalizeValue(fieldValue, type: field.type, path: path + field.name, allowRelativeDates: allowRelativeDates,
                                               reference: reference, problems: &problems)
            {
                result[field.name] = normalized
            }
        }
    }

    static func normalizeValue(_ value: JSONValue, type: FieldType, path: String, allowRelativeDates: Bool, reference: Date,
                               problems: inout [DataValidationError.Problem]) -> JSONValue?
    {
        func problem(_ message: String) -> JSONValue? {
            problems.append(.init(path: path, message: message))
            return nil
        }
        if value.isNull {
            if type.isOptional { return .null }
            return problem("required \(type.spelling) is missing")
        }
        if case .optional(let wrapped) = type {
            return normalizeValue(value, type: wrapped, path: path, allowRelativeDates: allowRelativeDates, reference: reference,
                                  problems: &problems)
        }
        // Once per value: an optional's text is checked where it is unwrapped, just above.
        if let text = value.stringValue, let message = textProblem(text) { return problem(message) }
        // The value as quoted in a message (computed only for one).
        func shown() -> String { excerpt(value.jsonString) }
        switch type {
        case .optional:
            preconditionFailure("unwrapped above")
        case .string(let maxLength):
            guard let text = value.stringValue else { return problem("expected a string, got \(value.typeName) \(shown())") }
            if let maxLength, text.count > maxLength {
                return problem("at most \(maxLength) characters allowed, got \(text.count); shorten it")
            }
            return value
        case .int:
            guard let int = value.intValue else { return problem("expected a whole number, got \(value.typeName) \(shown())") }
            return .int(int)
        case .double:
            guard let double = value.doubleValue else { return problem("expected a number, got \(value.typeName) \(shown())") }
            // JSON has no NaN or infinity: such a value would be stored as null.
            guard double.isFinite else { return problem("expected a finite number, got \(double)") }
            return .double(double)
        case .bool:
            guard let bool = value.boolValue else { return problem("expected true or false, got \(value.typeName) \(shown())") }
            return .bool(bool)
        case .date:
            guard let text = value.stringValue else {
                return problem("expected a date as ISO-8601 text like \"2025-05-01T12:00:00Z\", got \(value.typeName) \(shown())")
            }
            switch normalizeDate(text, allowRelativeDates: allowRelativeDates, reference: reference) {
            case .success(let date): return .string(date.normalized)
            case .failure(let failure): return problem(failure.message)
            }
        case .daterange:
            switch normalizeDateRange(value, allowRelativeDates: allowRelativeDates, reference: reference) {
            case .success(let range): return range
            case .failure(let failure): return problem(failure.message)
            }
        case .enumeration(let values):
            guard let text = value.stringValue, values.contains(text) else {
                let hint = value.stringValue.map { didYouMean($0, in: values) } ?? ""
                return problem("expected one of \(codeList(values)), got \(shown())\(hint)")
            }
            return value
        case .array(let element, let maxCount):
            guard let items = value.arrayValue else { return problem("expected an array, got \(value.typeName)") }
            if items.count > maxCount { return problem("at most \(maxCount) elements allowed, got \(items.count)") }
            var result: [JSONValue] = []
            for (index, item) in items.enumerated() {
                guard let normalized = normalizeValue(item, type: element, path: "\(path)[\(index)]",
                                                      allowRelativeDates: allowRelativeDates, reference: reference,
                                                      problems: &problems)
                else { continue }
                result.append(normalized)
            }
            return .array(result)
        case .structure(let structure):
            guard case .object(let object) = value else {
                return problem("expected a \(structure.name) object with \(codeList(structure.fields.map(\.name))), got \(value.typeName)")
            }
            let names = structure.fields.map(\.name)
            for key in object.keys.sorted() where !names.contains(key) {
                problems.append(.init(path: "\(path).\(excerpt(key))",
                                      message: "unknown field of \(structure.name)\(didYouMean(key, in: names)); expected fields: \(codeList(names))"))
            }
            var result: [String: JSONValue] = [:]
            normalizeFields(object, schema: structure.fields, path: path + ".", allowRelativeDates: allowRelativeDates,
                            reference: reference, into: &result, problems: &problems)
            return .object(result)
        }
    }

    /// Why a value was refused, for `Result`.
    struct Refusal: Error {
        let message: String
    }

    /// A date given as text: ISO-8601 (normalized to UTC) or, in inputs, an offset such as `+15m`
    /// (kept as written), within the range `dateRangeProblem` allows.
    static func normalizeDate(_ text: String, allowRelativeDates: Bool, reference: Date) -> Result<(date: Date, normalized: String), Refusal> {
        let date: Date
        let normalized: String
        if let absolute = DateValues.parseISO8601(text) {
            date = absolute
            normalized = DateValues.formatISO8601(absolute)
        } else if allowRelativeDates, let offset = DateValues.parseOffset(text) {
            guard offset >= 0 else {
                return .failure(.init(message: "`\(excerpt(text))` lies in the past; give a time from now like \"+15m\", or ISO-8601 like \"2025-05-01T12:00:00Z\""))
            }
            date = reference.addingTimeInterval(offset)
            normalized = text
        } else {
            return .failure(.init(message: "`\(excerpt(text))` is not a date; use ISO-8601 like \"2025-05-01T12:00:00Z\"\(allowRelativeDates ? " or an offset like \"+15m\"" : "")"))
        }
        if let message = dateRangeProblem(text, date, reference: reference, isInput: allowRelativeDates) { return .failure(.init(message: message)) }
        return .success((date, normalized))
    }

    /// A date range given as `lower..upper` text or as an array of two date texts; each side is
    /// checked as a date, and the lower may not lie after the upper. Normalized to `lower..upper`.
    static func normalizeDateRange(_ value: JSONValue, allowRelativeDates: Bool, reference: Date) -> Result<JSONValue, Refusal> {
        let sides: (lower: String, upper: String)
        if let text = value.stringValue {
            guard let split = DateRangeValues.split(text) else {
                return .failure(.init(message: "`\(excerpt(text))` is not a date range; join two times with `..`, like \(DateRangeValues.example)"))
            }
            sides = split
        } else if let items = value.arrayValue, items.count == 2, let lower = items[0].stringValue, let upper = items[1].stringValue {
            sides = (lower.trimmingWhitespace(), upper.trimmingWhitespace())
        } else {
            return .failure(.init(message: "expected a date range as text like \(DateRangeValues.example), or an array of two date texts, got \(value.typeName) \(excerpt(value.jsonString))"))
        }
        let lower: (date: Date, normalized: String)
        let upper: (date: Date, normalized: String)
        switch normalizeDate(sides.lower, allowRelativeDates: allowRelativeDates, reference: reference) {
        case .success(let date): lower = date
        case .failure(let failure): return .failure(.init(message: "the range's start: " + failure.message))
        }
        switch normalizeDate(sides.upper, allowRelativeDates: allowRelativeDates, reference: reference) {
        case .success(let date): upper = date
        case .failure(let failure): return .failure(.init(message: "the range's end: " + failure.message))
        }
        let written = DateRangeValues.join(lower.normalized, upper.normalized)
        guard upper.date >= lower.date else {
            return .failure(.init(message: "`\(excerpt(written))` ends before it starts; give the earlier time first"))
        }
        return .success(.string(written))
    }

    /// What is wrong with a text value whatever its type: a NUL, which PostgreSQL text and jsonb
    /// cannot hold, or more bytes than any APNs payload can carry.
    static func textProblem(_ text: String) -> String? {
        if text.utf8.contains(0) {
            return "contains a NUL character (U+0000), which cannot be stored; remove it"
        }
        let bytes = text.utf8.count
        if bytes > DataLimits.maximumTextBytes {
            return "the text is \(bytes) bytes in UTF-8, more than a whole APNs payload (\(DataLimits.maximumTextBytes) bytes) can carry; shorten it"
        }
        return nil
    }

    /// Dates far from the transition (input) or creation (attributes) time are mistakes: a year-9999
    /// ETA, `+99999d`, an ETA from last week.
    static func dateRangeProblem(_ text: String, _ date: Date, reference: Date, isInput: Bool) -> String? {
        let distance = date.timeIntervalSince(reference)
        guard distance > DataLimits.maximumInputDateAhead || distance < -DataLimits.maximumInputDateBehind
            || date.timeIntervalSince1970 < 0
        else { return nil }
        let shown = "`\(excerpt(text))`"
        func days(_ seconds: TimeInterval) -> String {
            let count = abs(seconds) / 86_400
            return count >= 1e7 ? "millions of days" : "\(Int(count.rounded(.down))) days"
        }
        if isInput {
            if distance > DataLimits.maximumInputDateAhead {
                return "\(shown) is \(days(distance)) ahead; an input time may be at most a year ahead, check the value"
            }
            if distance < -DataLimits.maximumInputDateBehind {
                return "\(shown) lies \(days(distance)) in the past; an input time (an ETA) should be now or later"
            }
        } else if distance > DataLimits.maximumAttributeDateAhead || date.timeIntervalSince1970 < 0 {
            return "\(shown) is out of range; a date may lie between 1970 and 10 years from now, check the value"
        }
        return nil
    }
}
