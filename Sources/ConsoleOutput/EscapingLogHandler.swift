import Logging

/// The process's log lines on standard error, with every message and metadata value escaped
/// (`Formatting.escaped`) first: records quote what others wrote — a server's notice, an APNs
/// reason, an order's id from old data — and those reach the terminal as text, never as
/// control or direction characters.
public struct EscapingLogHandler: LogHandler {
    private var base: StreamLogHandler

    public init(label: String, level: Logger.Level) {
        // The provider's values are merged (and escaped) here, with the rest.
        base = StreamLogHandler.standardError(label: label, metadataProvider: nil)
        base.logLevel = level
        metadataProvider = LoggingSystem.metadataProvider
    }

    /// Lines to `stream` instead (for tests).
    public init(label: String, level: Logger.Level, stream: any TextOutputStream & Sendable,
                metadataProvider: Logger.MetadataProvider? = nil) {
        base = StreamLogHandler(label: label, stream: stream, metadataProvider: nil)
        base.logLevel = level
        self.metadataProvider = metadataProvider
    }

    public var metadataProvider: Logger.MetadataProvider?

    public var logLevel: Logger.Level {
        get { base.logLevel }
        set { base.logLevel = newValue }
    }

    /// Kept as set and escaped only when a line is written: Hummingbird sets a request id on
    /// every request's logger, and most requests write no line through it (escaping at every
    /// set, and the stream handler's re-rendering of its metadata, would cost every request).
    public var metadata: Logger.Metadata = [:]

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    /// Merged as swift-log's stream handler merges them — the logger's, then the provider's,
    /// then the line's own, then the error's — and every value escaped.
    public func log(event: LogEvent) {
        var event = event
        event.message = "\(Formatting.escaped(event.message.description))"
        let merged = LogMetadataMerge.merged(handler: metadata, provider: metadataProvider, event: event)
        event.error = nil
        event.metadata = merged.isEmpty ? nil : merged.mapValues(Self.escaped)
        base.log(event: event)
    }

    public static func escaped(_ value: Logger.Metadata.Value) -> Logger.Metadata.Value {
        switch value {
        case .string(let text): .string(Formatting.escaped(text))
        case .stringConvertible(let convertible): .string(Formatting.escaped(convertible.description))
        case .array(let values): .array(values.map(escaped))
        case .dictionary(let values): .dictionary(values.mapValues(escaped))
        }
    }
}
