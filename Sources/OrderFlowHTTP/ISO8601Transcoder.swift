import Foundation
import OpenAPIRuntime
import Timestamps

/// The API's times: read as every ISO-8601 form a client's language writes (fractional seconds
/// or not — JavaScript's `toISOString()` has milliseconds, Swift's `.iso8601` none — `Z` or an
/// offset), written as UTC with milliseconds when there are any. The runtime's own transcoder
/// takes one fixed form only, so a browser's or a Node backend's times would be refused.
struct ISO8601Transcoder: DateTranscoder {
    func encode(_ date: Date) throws -> String {
        let instant = ISO8601Timestamp.Instant(date)
        return ISO8601Timestamp.format(seconds: instant.seconds, milliseconds: Int(instant.microseconds / 1_000))
    }

    func decode(_ text: String) throws -> Date {
        guard let instant = ISO8601Timestamp.parse(text, zone: .required) else {
            throw DecodingError.dataCorrupted(.init(
                codingPath: [], debugDescription: "\(text.prefix(40)) is not an ISO-8601 time with a zone (like 2026-11-25T10:00:00Z)"))
        }
        return instant.date
    }
}
