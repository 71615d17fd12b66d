import ArgumentParser

extension OrderFlowCommand {
    /// Commands defined in their own files by other parts of the project: add `WorkerCommand.self`
    /// (WorkerCommand.swift, `orderflow worker …`) and `DemoCommand.self` (DemoCommand.swift,
    /// `orderflow demo`) here. They use `CommandContext` for the database, the engine, output and
    /// logging, and throw errors that `FailureReport` maps to exit codes.
    static let pluggedInCommands: [any ParsableCommand.Type] = [WorkerCommand.self, DemoCommand.self, BoardLinkCommand.self]
}
