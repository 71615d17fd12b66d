import APNS
import ArgumentParser
import CommandLineSupport
import ConsoleOutput
import Foundation
import OrderFlow

/// `orderflow merchant …`
struct MerchantCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "merchant",
        abstract: "Add merchants and give them their own APNs app.",
        discussion: """
            A merchant without an app of its own sends through the worker's default app \
            (ORDERFLOW_APNS_*). An app's .p8 key is stored sealed (AES-GCM) under the master \
            key in ORDERFLOW_SECRET_KEY (base64 of 32 bytes) or ORDERFLOW_SECRET_KEY_FILE; \
            it is never printed, only its fingerprint.

            Example:
              orderflow merchant add luigis --name "Luigi's"
              orderflow merchant set-apns luigis --bundle-id com.luigis.orders \\
                --team-id TEAM123456 --key-id ABC123DEFG --key AuthKey_ABC123DEFG.p8
              orderflow merchant list
              orderflow merchant retention luigis 45d
            """,
        subcommands: [Add.self, List.self, SetAPNS.self, SetFCM.self, RotateClientKey.self, MerchantRetentionCommand.self])

    struct Add: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Add a merchant.",
            discussion: """
                Example:
                  orderflow merchant add luigis --name "Luigi's"
                """)

        @Argument(help: ArgumentHelp("The merchant's id (ORDERFLOW_MERCHANT selects it in other commands).", valueName: "id"))
        var id: String

        @Option(help: ArgumentHelp("A name for people.", valueName: "name"))
        var name: String?

        func run() async throws {
            let context = CommandContext.current()
            let merchant = try await context.withEngine { engine in try await engine.addMerchant(id, name: name) }
            context.terminal.write("added merchant \(merchant.id); it sends through the default app until `orderflow merchant set-apns \(Formatting.shellQuoted(merchant.id)) …`")
        }
    }

    struct RotateClientKey: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "rotate-client-key",
            abstract: "Make a new key for a merchant's client secrets (the customer apps' credentials).",
            discussion: """
                New orders' client secrets are made with the new key; secrets handed out before \
                keep working until --retire-older, which makes them stop at once here and \
                within a minute in running servers. The key is sealed under the master key \
                when one is set (ORDERFLOW_SECRET_KEY or ORDERFLOW_SECRET_KEY_FILE).

                Example:
                  orderflow merchant rotate-client-key luigis
                  orderflow merchant rotate-client-key luigis --retire-older   # once the old orders are done
                """)

        @Argument(help: ArgumentHelp("The merchant's id.", valueName: "id"))
        var id: String

        @Flag(name: .customLong("retire-older"), help: "Delete the older keys: secrets made with them stop working.")
        var retireOlder = false

        func run() async throws {
            let context = CommandContext.current()
            let masterKey = try MasterKeySetting.optional(context.environment)
            let (database, source) = try await context.databaseConfiguration()
            var configuration = OrderFlowConfiguration(database: database, merchantID: try context.checkedMerchantID(), maximumConnections: 1)
            configuration.masterKey = masterKey
            let version = try await context.withEngine(configuration, source: source) { engine in
                try await engine.rotateClientSecretKey(merchantID: id, retiringOlder: retireOlder)
            }
            context.terminal.write("merchant \(id)'s client secrets are now made with key version \(version)"
                + (retireOlder ? "; secrets of older versions no longer work" : "; older secrets keep working until --retire-older")
                + (masterKey == nil ? " (stored unsealed: set ORDERFLOW_SECRET_KEY_FILE to seal it)" : ""))
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List merchants, their apps and whether their pushes flow.",
            discussion: """
                Shows each app's bundle id, team, key id, environment and the key's \
                fingerprint (never the key), and the push state the workers found: ok, \
                paused (APNs refused the credentials or topic) or throttled (429).

                Example:
                  orderflow merchant list --json
                """)

        @OptionGroup var output: OutputOptions

        func run() async throws {
            let context = CommandContext.current()
            let merchants = try await context.withEngine { engine in try await engine.merchants() }
            if output.json {
                try context.terminal.writeJSON(merchants)
                return
            }
            let terminal = context.terminal
            guard !merchants.isEmpty else {
                terminal.write("no merchants yet; add one with `orderflow merchant add ID`")
                return
            }
            var table = TextTable(header: ["MERCHANT", "NAME", "BUNDLE ID", "TEAM", "KEY ID", "ENV", "KEY FINGERPRINT", "PUSHES"])
            for merchant in merchants {
                let app = merchant.app
                table.append([
                    merchant.id, Formatting.escaped(merchant.name ?? ""), app?.bundleID ?? "(default app)", app?.teamID ?? "", app?.keyID ?? "",
                    app?.environment ?? "", app?.keyFingerprint ?? "", Self.pushes(merchant.pushState, terminal),
                ])
            }
            for line in table.render(terminal) { terminal.write(line) }
        }

        static func pushes(_ state: MerchantPushState, _ terminal: Terminal) -> String {
            switch state.status {
            case .ok: return terminal.styled("ok", .green)
            case .paused, .throttled:
                var text = state.status.rawValue
                if let until = state.until { text += " until \(Formatting.shortLocalTime(until))" }
                if let reason = state.reason { text += ": \(Formatting.escaped(reason))" }
                return terminal.styled(text, state.status == .paused ? .red : .yellow)
            }
        }
    }

    struct SetAPNS: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "set-apns",
            abstract: "Give a merchant its own APNs app (again, to rotate its key).",
            discussion: """
                The .p8 key is checked, sealed under the master key (ORDERFLOW_SECRET_KEY or \
                ORDERFLOW_SECRET_KEY_FILE) and stored; workers pick it up within seconds. \
                Pushes in flight finish with the previous key. Nothing is stored when a \
                value is wrong.

                Example:
                  ORDERFLOW_SECRET_KEY_FILE=/etc/orderflow/secret.key \\
                  orderflow merchant set-apns luigis --bundle-id com.luigis.orders \\
                    --team-id TEAM123456 --key-id ABC123DEFG --key AuthKey_ABC123DEFG.p8
                """)

        @Argument(help: ArgumentHelp("The merchant's id.", valueName: "id"))
        var id: String

        @Option(help: ArgumentHelp("The app's bundle id.", valueName: "bundle-id"))
        var bundleID: String

        @Option(help: ArgumentHelp("The Apple developer team id.", valueName: "id"))
        var teamID: String

        @Option(help: ArgumentHelp("The signing key's id.", valueName: "id"))
        var keyID: String

        @Option(help: ArgumentHelp("The .p8 signing key file.", valueName: "file"))
        var key: String

        @Option(help: ArgumentHelp("production (default) or sandbox.", valueName: "env"))
        var environment: String = "production"

        @Option(help: ArgumentHelp("Send to this endpoint instead of Apple's (tests, the demo).", valueName: "url"))
        var url: String?

        @Option(help: ArgumentHelp("The custom endpoint's CA certificate (PEM).", valueName: "file"))
        var ca: String?

        func validate() throws {
            guard ["production", "sandbox"].contains(environment.lowercased()) else {
                throw ValidationError("--environment is \"\(environment)\"; use production or sandbox")
            }
            if ca != nil, url == nil { throw ValidationError("--ca goes with --url (the custom endpoint's certificate)") }
        }

        func run() async throws {
            let context = CommandContext.current()
            let masterKey = try MasterKeySetting.required(context.environment)
            var target: APNSClientConfiguration.Environment = environment.lowercased() == "sandbox" ? .sandbox : .production
            if let url {
                let pem = try ca.map { try APNSSettings.certificate(at: $0, setting: "--ca") }
                target = .custom(baseURL: url, trustRootsPEM: pem)
            }
            let app = MerchantAPNSApp(
                merchantID: id, bundleID: bundleID,
                credentials: .init(key: .file(path: key), keyID: keyID, teamID: teamID), environment: target)
            let stored = try await context.withEngine { engine in try await engine.setAPNSApp(app, masterKey: masterKey) }
            context.terminal.write("merchant \(id) sends through \(stored.bundleID) (team \(stored.teamID), key \(stored.keyID) \(stored.keyFingerprint), \(stored.environment))")
        }
    }
}

/// `orderflow api-key …`
struct APIKeyCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "api-key",
        abstract: "Create, list and revoke a merchant's API keys.",
        discussion: """
            A key is printed once, when it is created; only its hash is stored. Keys are \
            named by their prefix (of_live_PREFIX_…).

            Example:
              orderflow api-key create --merchant luigis --name pos
              orderflow api-key list --merchant luigis
              orderflow api-key revoke --merchant luigis 3kf9x2mqa7
            """,
        subcommands: [Create.self, List.self, Revoke.self])

    struct Create: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Create an API key and print it, once.",
            discussion: """
                Example:
                  orderflow api-key create --merchant luigis --name pos
                """)

        @Option(help: ArgumentHelp("The merchant the key acts for.", valueName: "id"))
        var merchant: String

        @Option(help: ArgumentHelp("A name for people (where the key is used).", valueName: "name"))
        var name: String?

        func run() async throws {
            let context = CommandContext.current()
            let created = try await context.withEngine { engine in try await engine.createAPIKey(merchantID: merchant, name: name) }
            context.terminal.write(created.secret)
            Terminal.writeError("orderflow: API key \(created.key.prefix) created for merchant \(merchant); it is shown only this once, store it now")
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List a merchant's API keys (never their secrets).",
            discussion: """
                Example:
                  orderflow api-key list --merchant luigis
                """)

        @Option(help: ArgumentHelp("The merchant.", valueName: "id"))
        var merchant: String

        @OptionGroup var output: OutputOptions

        func run() async throws {
            let context = CommandContext.current()
            let keys = try await context.withEngine { engine in try await engine.apiKeys(merchantID: merchant) }
            if output.json {
                try context.terminal.writeJSON(keys)
                return
            }
            let terminal = context.terminal
            guard !keys.isEmpty else {
                terminal.write("merchant \(merchant) has no API keys; create one with `orderflow api-key create --merchant \(Formatting.shellQuoted(merchant))`")
                return
            }
            var table = TextTable(header: ["PREFIX", "NAME", "CREATED", "LAST USED", "STATE"])
            for key in keys {
                table.append([
                    key.prefix, Formatting.escaped(key.name ?? ""), Formatting.localTime(key.createdAt), key.lastUsedAt.map(Formatting.localTime) ?? "never",
                    key.revokedAt.map { terminal.styled("revoked \(Formatting.localTime($0))", .red) } ?? terminal.styled("live", .green),
                ])
            }
            for line in table.render(terminal) { terminal.write(line) }
        }
    }

    struct Revoke: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Revoke an API key: every running server refuses it within a second.",
            discussion: """
                Example:
                  orderflow api-key revoke --merchant luigis 3kf9x2mqa7
                """)

        @Option(help: ArgumentHelp("The merchant.", valueName: "id"))
        var merchant: String

        @Argument(help: ArgumentHelp("The key's prefix (from `api-key list`).", valueName: "prefix"))
        var prefix: String

        func run() async throws {
            let context = CommandContext.current()
            try await context.withEngine { engine in try await engine.revokeAPIKey(merchantID: merchant, prefix: prefix) }
            // A whole key given by mistake is named by its prefix only.
            let shown = prefix.hasPrefix(OrderFlowEngine.apiKeyScheme)
                ? String(prefix.dropFirst(OrderFlowEngine.apiKeyScheme.count).prefix(10)) : prefix
            context.terminal.write("API key \(shown) of merchant \(merchant) revoked")
        }
    }
}
