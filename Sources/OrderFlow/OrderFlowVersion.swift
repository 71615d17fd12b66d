/// The release this build of OrderFlow is: what `orderflow --version` and
/// `orderflow-demo --version` print. `scripts/check-release` holds it to the newest entry of
/// CHANGELOG.md, and every `vX.Y.Z` tag to an entry of its own.
public enum OrderFlowVersion {
    public static let current = "0.10.0"
}
