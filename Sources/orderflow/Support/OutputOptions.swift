import ArgumentParser

/// `--json`, shared by every reading command.
public struct OutputOptions: ParsableArguments, Sendable {
    @Flag(help: "Print JSON for scripts (ISO-8601 times) instead of text for people.")
    public var json = false

    public init() {}
}
