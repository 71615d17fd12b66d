import Foundation

/// Limits on the data callers give, beyond the declared types.
public enum DataLimits {
    /// No text value may be longer than this in UTF-8: it could never fit in an APNs payload.
    /// (`string(N)` counts characters; a "character" with many combining marks is many bytes.)
    public static let maximumTextBytes = APNSLimits.maximumPayloadSize
    /// An input date (an ETA) may lie at most this far ahead of the transition time…
    public static let maximumInputDateAhead: TimeInterval = 366 * 86_400
    /// …and at most this far behind it (clocks differ; an ETA hours old is a mistake).
    public static let maximumInputDateBehind: TimeInterval = 86_400
    /// An attribute date may lie at most this far ahead of the creation time, and not before 1970.
    public static let maximumAttributeDateAhead: TimeInterval = 10 * 366 * 86_400
}

extension Workflow {
    /// Checks static attributes given at order creation against `activity.attributes` and returns
    /// them normalized (dates as ISO-8601 UTC text, integral doubles as ints).
    public func validateAttributes(_ attributes: JSONValue, at time: Date = Date()) throws -> JSONValue {
        try DataNormalizer.normalize(attributes, schema: attributesSchema, subject: "attributes of workflow `\(name)`",
                                     allowRelativeDates: false, reference: time)
    }

    /// Checks a transition's input against its declared `input` and returns it normalized. A date
    /// may be ISO-8601 text or an offset from the transition time like `+15m` (kept as written),
    /// not in the past (a day of clock difference aside) and at most a year ahead of `time`.
    public func validateInput(_ input: JSONValue, for transition: TransitionSpec, at time: Date = Date()) throws -> JSONValue {
        try DataNormalizer.normalize(input, schema: transition.inputs, subject: "input of transition `\(transition.from) -> \(transition.to)`",
                                     allowRelativeDates: true, reference: time)
    }

    /// Checks the data given with order creation against `lifecycle.start-input`.
    public func validateStartInput(_ input: JSONValue, at time: Date = Date()) throws -> JSONValue {
        try DataNormalizer.normalize(input, schema: lifecycle.startInputs, subject: "start input of workflow `\(name)`",
                                     allowRelativeDates: true, reference: time)
    }
}
