/// How a push token may appear anywhere but in the request to APNs: in logs, errors, command
/// output and stored delivery records.
///
/// One rule for all of them — `…` and the token's last eight characters — so that a token seen
/// in the worker's log, in an error and in `orderflow deliveries list` is recognisably the same
/// one, and no two places together show more of it than one does.
public enum APNSTokenRedaction {
    /// How many of a token's last characters may be shown.
    public static let visibleCount = 8

    /// The last characters of `token` that may be shown or stored: eight, and at most half of a
    /// token too short to be real, so that no token is ever shown whole.
    public static func visibleSuffix(_ token: String) -> String {
        String(token.suffix(min(visibleCount, token.count / 2)))
    }

    /// `token` as it may be shown: `…3f9a0c1d`.
    public static func redacted(_ token: String) -> String {
        "…" + visibleSuffix(token)
    }

    /// A stored ``visibleSuffix(_:)`` shown like a redacted token.
    public static func redacted(suffix: String) -> String {
        "…" + suffix.suffix(visibleCount)
    }
}
