import ArgumentParser
import CommandLineSupport
import ConsoleOutput
import OrderFlow

/// `orderflow token …`
struct TokenCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "token",
        abstract: "Register the push tokens a device's app reports.",
        discussion: """
            Normally the app's backend registers tokens through the library; this command does \
            the same by hand, for testing and support. Tokens are never printed whole.

            Example:
              orderflow token register --device alice-iphone \\
                --push-to-start 80f3…e1 --attributes-type FoodOrderAttributes
            """,
        subcommands: [Register.self])

    struct Register: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Register a push-to-start, activity or device token.",
            discussion: """
                Give exactly one kind of token:
                  --push-to-start TOKEN --attributes-type T
                      starts activities of type T on the device
                  --activity TOKEN --order O
                      updates the activity the app runs for order O
                  --device-token TOKEN
                      ordinary alerts when the device shows no activity
                  --fcm TOKEN
                      an Android device's FCM registration token (Live Updates)
                A newer token of the same kind replaces the old one.

                Example:
                  orderflow token register --device alice-iphone --activity 5c1b…9a \\
                    --order 1042
                """)

        @Option(help: ArgumentHelp("The device's id.", valueName: "device"))
        var device: String

        @Option(name: .customLong("push-to-start"), help: ArgumentHelp("A push-to-start token (hex).", valueName: "token"))
        var pushToStart: String?

        @Option(help: ArgumentHelp("The ActivityAttributes type the push-to-start token is for.", valueName: "type"))
        var attributesType: String?

        @Option(help: ArgumentHelp("An activity's update token (hex).", valueName: "token"))
        var activity: String?

        @Option(help: ArgumentHelp("The order the activity token belongs to.", valueName: "order"))
        var order: String?

        @Option(help: ArgumentHelp("The device's APNs token for ordinary notifications (hex).", valueName: "token"))
        var deviceToken: String?

        @Option(help: ArgumentHelp("An Android device's FCM registration token.", valueName: "token"))
        var fcm: String?

        func validate() throws {
            let given = [pushToStart, activity, deviceToken, fcm].compactMap { $0 }.count
            guard given == 1 else {
                throw ValidationError("give exactly one of --push-to-start, --activity, --device-token, --fcm")
            }
            if pushToStart != nil, attributesType == nil {
                throw ValidationError("--push-to-start needs --attributes-type (the app's ActivityAttributes type, e.g. FoodOrderAttributes)")
            }
            if activity != nil, order == nil {
                throw ValidationError("--activity needs --order (the order the activity shows)")
            }
            if pushToStart == nil, attributesType != nil {
                throw ValidationError("--attributes-type goes with --push-to-start")
            }
            if activity == nil, order != nil {
                throw ValidationError("--order goes with --activity")
            }
        }

        func run() async throws {
            let context = CommandContext.current()
            let message = try await context.withEngine { engine -> String in
                if let token = pushToStart, let attributesType {
                    let stored = try await engine.registerPushToStartToken(deviceID: device, attributesType: attributesType, token: token)
                    return "registered push-to-start token \(Formatting.maskedToken(stored)) for \(attributesType) on device \(device)"
                } else if let token = activity, let order {
                    let stored = try await engine.registerActivityToken(orderID: order, deviceID: device, token: token)
                    return "registered activity token \(Formatting.maskedToken(stored)) for order \(order) on device \(device)"
                } else if let token = deviceToken {
                    let stored = try await engine.registerDeviceToken(deviceID: device, token: token)
                    return "registered device token \(Formatting.maskedToken(stored)) for device \(device)"
                } else if let token = fcm {
                    let stored = try await engine.registerFCMToken(deviceID: device, token: token)
                    return "registered FCM token \(Formatting.maskedToken(stored)) for device \(device)"
                }
                throw CLIError(.usage, "no token given", remedy: "give one of --push-to-start, --activity, --device-token, --fcm")
            }
            context.terminal.write(Formatting.escaped(message))
        }
    }
}

/// `orderflow follow`
struct Follow: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Send an order's updates to a device.",
        discussion: """
            The device gets a Live Activity of its own for the order (started by push-to-start \
            when the workflow says so and the device registered a token), or ordinary alerts \
            when it cannot show one. Following twice is harmless.

            Example:
              orderflow follow 1042 alice-iphone
            """)

    @Argument(help: ArgumentHelp("The order's id.", valueName: "order"))
    var orderID: String

    @Argument(help: ArgumentHelp("The device's id.", valueName: "device"))
    var deviceID: String

    func run() async throws {
        let context = CommandContext.current()
        try await context.withEngine { engine in try await engine.follow(orderID: orderID, deviceID: deviceID) }
        context.terminal.write("device \(Formatting.escaped(deviceID)) follows order \(Formatting.escaped(orderID)); a worker sends it the current state")
    }
}

/// `orderflow unfollow`
struct Unfollow: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Stop sending an order's updates to a device.",
        discussion: """
            The device's activity for the order is no longer updated (it ends on the device \
            when the app ends it or the system removes it).

            Example:
              orderflow unfollow 1042 alice-ipad
            """)

    @Argument(help: ArgumentHelp("The order's id.", valueName: "order"))
    var orderID: String

    @Argument(help: ArgumentHelp("The device's id.", valueName: "device"))
    var deviceID: String

    func run() async throws {
        let context = CommandContext.current()
        try await context.withEngine { engine in try await engine.unfollow(orderID: orderID, deviceID: deviceID) }
        context.terminal.write("device \(Formatting.escaped(deviceID)) no longer follows order \(Formatting.escaped(orderID))")
    }
}
