import Testing

/// The groups of tests that a run selects or leaves out as a whole (`scripts/test` runs the
/// timing and the reliability groups apart from the rest), named where the tests are.
///
/// `swift test` in the toolchain this package builds with selects tests by name only, so a
/// suite carrying one of these tags also has a type name starting with the group's prefix
/// (`Timing…`, `Reliability…`, `BoardBrowser…`), which is what `scripts/test` selects on;
/// `scripts/lib/test-groups.sh` keeps the two in step.
extension Tag {
    /// Measures elapsed time: runs alone, after the other tests, so that load does not skew it.
    @Tag public static var timing: Self
    /// Injects faults under load (a killed server, a failing APNs endpoint, a failover): runs
    /// alone, last, and prints the figures RELIABILITY.md quotes.
    @Tag public static var reliability: Self
    /// Drives the counter board in headless Chromium (`scripts/setup-browser-tests` installs it);
    /// left out of a run with `--skip BoardBrowser`.
    @Tag public static var browser: Self
    /// OrderFlowKit, the app's half (`OrderFlowKit…` suites): runs apart, in a process of its own,
    /// so that the kit cannot take a thread of the cooperative pool from the engine's tests.
    @Tag public static var kit: Self
}
