import Logging
import Synchronization

/// Keeps every record of the loggers it makes, for a test to check what was logged (and that
/// nothing went to standard error instead). In the lowest of the testing modules so that every
/// test target that records logs shares this one.
public final class LogRecorder: Sendable {
    public struct Record: Sendable {
        public var level: Logger.Level
        public var message: String
        /// The logger's metadata merged with the record's own (the record's wins).
        public var metadata: Logger.Metadata
    }

    private let storage = Mutex<[Record]>([])

    public init() {}

    public var records: [Record] { storage.withLock { $0 } }

    /// A logger at `.trace` whose records, and those of its copies, end up here.
    public func logger(label: String) -> Logger {
        Logger(label: label) { _ in RecordingLogHandler(recorder: self) }
    }

    fileprivate func append(_ record: Record) {
        storage.withLock { $0.append(record) }
    }
}

private struct RecordingLogHandler: LogHandler {
    let recorder: LogRecorder
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .trace

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        let merged = metadata.merging(event.metadata ?? [:]) { _, new in new }
        recorder.append(.init(level: event.level, message: event.message.description, metadata: merged))
    }
}
