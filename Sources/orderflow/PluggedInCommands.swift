import ArgumentParser

extension OrderFlowCommand {
    /// Commands defined in their own files by other parts of the project: add `WorkerCommand.self`
    /// (WorkerCommand.swift, `orderflow worker …`) and the like here. They use `CommandContext` for
    /// the database, the engine, output and logging, and throw errors that `FailureReport` maps to
    /// exit codes. `DemoPointer` only says where the demo is: it is the program `orderflow-demo`.
    static let pluggedInCommands: [any ParsableCommand.Type] = [
        WorkerCommand.self, DemoPointer.self, BoardLinkCommand.self, PurgeCommand.self, DeviceCommand.self,
    ]
}
