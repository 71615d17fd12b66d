import ArgumentParser
import CommandLineSupport
import ConsoleOutput
import Foundation
import OrderFlow

/// `orderflow master-key …`
struct MasterKeyCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "master-key",
        abstract: "Seal the stored secrets under a new master key.",
        discussion: """
            The master key (ORDERFLOW_SECRET_KEY, or ORDERFLOW_SECRET_KEY_FILE) seals the \
            merchants' APNs keys, their Firebase service accounts and the keys their customers' \
            client secrets are made with. \
            It never reaches the database; each sealed secret records the id of the key that \
            sealed it.

            Example:
              openssl rand -base64 32 > new-secret.key && chmod 600 new-secret.key
              ORDERFLOW_SECRET_KEY_FILE=old-secret.key orderflow master-key rotate --new-key-file new-secret.key
            """,
        subcommands: [Rotate.self])

    struct Rotate: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Seal every stored secret anew under a new master key, in one transaction.",
            discussion: """
                Opens the secrets with the current master key (ORDERFLOW_SECRET_KEY or \
                ORDERFLOW_SECRET_KEY_FILE; not needed while nothing is sealed yet) and seals \
                them under the key in --new-key-file; client-secret keys stored unsealed are \
                sealed too. Either all of them are under the new key afterwards, or nothing \
                changed. Then restart every `orderflow serve` and `orderflow worker run` with \
                the new key: those holding the old one can no longer open the secrets.

                Example:
                  ORDERFLOW_SECRET_KEY_FILE=old-secret.key orderflow master-key rotate --new-key-file new-secret.key
                """)

        @Option(name: .customLong("new-key-file"), help: ArgumentHelp(
            "The new master key: a file holding 32 random bytes in base64, readable by its owner alone.", valueName: "file"))
        var newKeyFile: String

        func run() async throws {
            let context = CommandContext.current()
            let current = try MasterKeySetting.optional(context.environment)
            let new = try MasterKeySetting.optional(["ORDERFLOW_SECRET_KEY_FILE": newKeyFile]).map { $0 }
            guard let new else { throw CLIError(.usage, "--new-key-file names no key", remedy: MasterKey.howToMakeOne) }
            if let current, current.id == new.id {
                throw CLIError(.usage, "the new master key is the current one (id \(new.id)); make a new one", remedy: MasterKey.howToMakeOne)
            }
            let rotated = try await context.withEngine { engine in try await engine.rotateMasterKey(current: current, new: new) }
            context.terminal.write(
                "sealed \(Self.count(rotated.apnsKeys, "APNs key")), \(Self.count(rotated.fcmKeys, "Firebase service account")) and \(Self.count(rotated.clientSecretKeys, "client-secret key")) under the master key with id \(new.id); restart every serve and worker with it (ORDERFLOW_SECRET_KEY_FILE=\(Formatting.shellQuoted(newKeyFile)))")
        }

        /// "1 APNs key", "2 APNs keys".
        static func count(_ number: Int, _ thing: String) -> String {
            "\(number) \(thing)\(number == 1 ? "" : "s")"
        }
    }
}
