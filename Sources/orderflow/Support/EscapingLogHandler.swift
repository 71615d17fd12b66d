import ConsoleOutput
import Logging

/// The process's log lines on standard error, with every message and metadata value escaped
/// (`Formatting.escaped`) first: records quote what others wrote — a server's notice, an APNs
/// reason, an order's id from old data — and those reach the terminal as text, never as
/// control or direction characters.
struct EscapingLogHandler: LogHandler {
    private var base: StreamLogHandler

    init(label: String, level: Logger.Level) {
        base = StreamLogHandler.standardError(label: label)
        base.logLevel = level
    }

    var logLevel: Logger.Level {
        get { base.logLevel }
        set { base.logLevel = newValue }
    }

    var metadata: Logger.Metadata {
        get { base.metadata }
        set { base.metadata = newValue.mapValues(Self.escaped) }
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { base[metadataKey: key] }
        set { base[metadataKey: key] = newValue.map(Self.escaped) }
    }

    func log(event: LogEvent) {
        var event = event
        event.message = "\(Formatting.escaped(event.message.description))"
        event.metadata = event.metadata?.mapValues(Self.escaped)
        base.log(event: event)
    }

    static func escaped(_ value: Logger.Metadata.Value) -> Logger.Metadata.Value {
        switch value {
        case .string(let text): .string(Formatting.escaped(text))
        case .stringConvertible(let convertible): .string(Formatting.escaped(convertible.description))
        case .array(let values): .array(values.map(escaped))
        case .dictionary(let values): .dictionary(values.mapValues(escaped))
        }
    }
}
