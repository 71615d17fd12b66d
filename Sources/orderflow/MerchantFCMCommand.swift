import APNS
import ArgumentParser
import CommandLineSupport
import ConsoleOutput
import FCM
import OrderFlow

extension MerchantCommand {
    /// `orderflow merchant set-fcm`
    struct SetFCM: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "set-fcm",
            abstract: "Give a merchant its Firebase project for Android Live Updates (again, to rotate its key).",
            discussion: """
                The service account JSON key (Firebase console: Project settings → Service \
                accounts → Generate new private key) is checked for type, project_id, \
                private_key and client_email, sealed under the master key \
                (ORDERFLOW_SECRET_KEY or ORDERFLOW_SECRET_KEY_FILE) and stored; only the key's \
                fingerprint is ever shown. Nothing is stored when a value is wrong.

                Example:
                  ORDERFLOW_SECRET_KEY_FILE=/etc/orderflow/secret.key \\
                  orderflow merchant set-fcm luigis --service-account luigis-firebase.json
                """)

        @Argument(help: ArgumentHelp("The merchant's id.", valueName: "id"))
        var id: String

        @Option(help: ArgumentHelp("The service account's JSON key file.", valueName: "file"))
        var serviceAccount: String

        func run() async throws {
            let context = CommandContext.current()
            let masterKey = try MasterKeySetting.required(context.environment)
            let json: String
            do {
                json = try SmallTextFile.read(serviceAccount, maximumBytes: FCMServiceAccount.maximumFileBytes)
            } catch {
                throw CLIError(.usage, "--service-account names \(serviceAccount), which cannot be read (\(error))",
                               remedy: "give the path of the service account's JSON key file (at most \(FCMServiceAccount.maximumFileBytes / 1024) KB)")
            }
            let stored = try await context.withEngine { engine in
                try await engine.setFCMServiceAccount(merchantID: id, serviceAccountJSON: json, masterKey: masterKey)
            }
            context.terminal.write(Formatting.escaped(
                "merchant \(id) sends to Android through Firebase project \(stored.projectID) (\(stored.clientEmail), key \(stored.keyFingerprint))"))
        }
    }
}
