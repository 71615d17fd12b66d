import Foundation

/// Reads a small text file — a `.p8` key, a CA certificate — after checking that it is one:
/// it exists, is a regular file (a FIFO would make the read wait forever, `/dev/zero` would never
/// end) and is no larger than expected. One reader, so that the CLI's checks and the client's
/// agree; callers turn a ``Problem`` into a message that names their own setting.
public enum SmallTextFile {
    public enum Problem: Error, Sendable, Equatable {
        case missing
        case directory
        /// Not a regular file (a device, a FIFO, a socket).
        case notRegularFile
        /// Larger than the caller's limit; the size in bytes.
        case tooLarge(Int)
        /// It exists, but this user may not read it.
        case unreadable
        /// Readable, but not UTF-8 text.
        case notText
    }

    /// What is wrong with the file at `path` for reading it as text of at most `maximumBytes`,
    /// or nil when nothing is.
    public static func problem(at path: String, maximumBytes: Int) -> Problem? {
        guard FileManager.default.fileExists(atPath: path) else { return .missing }
        let resolved = URL(fileURLWithPath: path).resolvingSymlinksInPath().path
        let attributes = try? FileManager.default.attributesOfItem(atPath: resolved)
        switch attributes?[.type] as? FileAttributeType {
        case .typeRegular?: break
        case .typeDirectory?: return .directory
        default: return .notRegularFile
        }
        if let size = (attributes?[.size] as? NSNumber)?.intValue, size > maximumBytes { return .tooLarge(size) }
        guard FileManager.default.isReadableFile(atPath: path) else { return .unreadable }
        return nil
    }

    /// The file's text, read only after `problem(at:maximumBytes:)` found nothing wrong.
    public static func read(_ path: String, maximumBytes: Int) throws(Problem) -> String {
        if let problem = problem(at: path, maximumBytes: maximumBytes) { throw problem }
        let data: Data
        do {
            data = try Data(contentsOf: URL(fileURLWithPath: path))
        } catch {
            throw .unreadable
        }
        guard let text = String(data: data, encoding: .utf8) else { throw .notText }
        return text
    }
}
