import ArgumentParser
import CommandLineSupport
import ConsoleOutput
import OrderFlow

/// `orderflow device …`
struct DeviceCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "device",
        abstract: "Erase a device on the customer's request.",
        discussion: """
            Example:
              orderflow device forget alice-iphone
            """,
        subcommands: [Forget.self])

    struct Forget: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Forget a device: its tokens, follows, activities and credential.",
            discussion: """
                Deletes the device's push-to-start and alert tokens, the orders it follows, \
                its activities with their tokens, the pushes queued for it and its app \
                credential. Its past deliveries stay counted in their orders, under the \
                device "(forgotten)" with no token suffix. A device forgotten already is \
                unknown (exit code of not found).

                Example:
                  orderflow device forget alice-iphone
                """)

        @Argument(help: ArgumentHelp("The device's id.", valueName: "device"))
        var deviceID: String

        func run() async throws {
            let context = CommandContext.current()
            try await context.withEngine { engine in try await engine.forgetDevice(deviceID) }
            context.terminal.write("device \(Formatting.escaped(deviceID)) is forgotten: its tokens, follows, activities and credential are deleted")
        }
    }
}

/// `orderflow order redact`
struct RedactOrder: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "redact",
        abstract: "Erase a finished order's personal data, keeping its shape.",
        discussion: """
            Replaces the order's attributes, content, its transitions' inputs and rendered \
            content and alerts, and its deliveries' alert titles with redactions (strings \
            "(redacted)", numbers 0); drops its activities' tokens and its queued pushes. Its \
            id, states, times and counts stay for statistics. Only a finished order: cancel a \
            live one first. Redacting twice is harmless.

            Example:
              orderflow order redact 1042
            """)

    @Argument(help: ArgumentHelp("The order's id.", valueName: "order"))
    var orderID: String

    func run() async throws {
        let context = CommandContext.current()
        try await context.withEngine { engine in try await engine.redactOrder(orderID) }
        context.terminal.write("order \(Formatting.escaped(orderID)) is redacted: its states and times remain, its data does not")
    }
}
