import APNS
import CommandLineSupport
import Foundation
import Logging
import Metrics
import OrderFlow
import WorkflowKit

/// The APNs settings of `worker run`, from flags or the environment, checked before anything
/// starts so that a missing or unreadable setting fails at once with its name.
struct APNSSettings {
    var client: APNSClientConfiguration
    var bundleID: String
    /// Where the key path came from, for messages: `--apns-key` or `ORDERFLOW_APNS_KEY`.
    var keySource: String
    /// Set when the key file is readable by group or others.
    var keyPermissionWarning: String?

    init(flags: HostOptions, environment: [String: String]) throws {
        func value(_ flag: String?, _ variable: String) -> String? {
            let given = flag ?? environment[variable]
            guard let given = given?.trimmingCharacters(in: .whitespaces), !given.isEmpty else { return nil }
            return given
        }
        func required(_ flag: String?, _ option: String, _ variable: String, _ what: String) throws -> String {
            guard let given = value(flag, variable) else {
                throw CLIError(.usage, "no APNs \(what) given", remedy: "pass \(option) or set \(variable)")
            }
            return given
        }
        let keyPath = try required(flags.apnsKey, "--apns-key FILE", "ORDERFLOW_APNS_KEY", "signing key (.p8 file)")
        let keyID = try required(flags.apnsKeyID, "--apns-key-id ID", "ORDERFLOW_APNS_KEY_ID", "key id")
        let teamID = try required(flags.apnsTeamID, "--apns-team-id ID", "ORDERFLOW_APNS_TEAM_ID", "team id")
        bundleID = try required(flags.apnsTopic, "--apns-topic BUNDLE_ID", "ORDERFLOW_APNS_TOPIC", "topic (the app's bundle id)")

        func source(_ flag: String?, _ option: String, _ variable: String) -> String {
            flag != nil ? option : variable
        }
        // Apple shows both ids as 10 capital letters and digits; anything else is a copying
        // mistake that APNs would only answer with InvalidProviderToken on the first push.
        for (id, option, variable, what) in [
            (keyID, "--apns-key-id", "ORDERFLOW_APNS_KEY_ID", "key id, shown next to the key in the Apple Developer account"),
            (teamID, "--apns-team-id", "ORDERFLOW_APNS_TEAM_ID", "team id, shown in the Apple Developer account's membership details"),
        ] {
            let flag = option == "--apns-key-id" ? flags.apnsKeyID : flags.apnsTeamID
            guard APNSAppIdentifiers.isAppleID(id)
            else {
                throw CLIError(.usage, "\(source(flag, option, variable)) is \"\(MessageText.excerpt(id, limit: 20))\", not an APNs \(what.prefix { $0 != "," })",
                               remedy: "give the 10-character \(what) (capital letters and digits)")
            }
        }
        // A bundle id: letters, digits, hyphens and periods (the worker adds the Live Activity
        // suffix itself).
        if let problem = APNSAppIdentifiers.bundleIDProblem(bundleID) {
            throw CLIError(.usage, "\(source(flags.apnsTopic, "--apns-topic", "ORDERFLOW_APNS_TOPIC")) \(problem)")
        }

        let keySource = source(flags.apnsKey, "--apns-key", "ORDERFLOW_APNS_KEY")
        self.keySource = keySource
        // Checked here, before anything connects, in the words of the setting; the key itself is
        // parsed when the client starts (and its errors name the file too).
        switch SmallTextFile.problem(at: keyPath, maximumBytes: APNSSigningKey.maximumKeyFileBytes) {
        case .missing?:
            throw CLIError(.usage, "\(keySource) names \(keyPath), which does not exist",
                           remedy: "download the key (.p8) from the Apple Developer account and give its path")
        case .directory?:
            throw CLIError(.usage, "\(keySource) names \(keyPath), which is a directory",
                           remedy: "give the path of the .p8 key file itself")
        case .unreadable?:
            throw CLIError(.usage, "\(keySource) names \(keyPath), which this user cannot read",
                           remedy: "make it readable by the user running the worker (and only by it: chmod 600 \(keyPath))")
        case .notRegularFile?, .tooLarge?, .notText?, nil:
            break  // the key's own check, when it is loaded, says exactly what is wrong with it
        }
        keyPermissionWarning = Self.keyPermissionWarning(path: keyPath)

        let environmentName = value(flags.apnsEnvironment, "ORDERFLOW_APNS_ENV")?.lowercased() ?? "production"
        let target: APNSClientConfiguration.Environment
        if let url = value(flags.apnsURL, "ORDERFLOW_APNS_URL") {
            var trustRoots: String?
            if let caPath = value(flags.apnsCA, "ORDERFLOW_APNS_CA") {
                trustRoots = try Self.certificate(at: caPath, setting: flags.apnsCA != nil ? "--apns-ca" : "ORDERFLOW_APNS_CA")
            }
            target = .custom(baseURL: url, trustRootsPEM: trustRoots)
        } else {
            switch environmentName {
            case "production": target = .production
            case "sandbox", "development": target = .sandbox
            default:
                let source = flags.apnsEnvironment != nil ? "--apns-env" : "ORDERFLOW_APNS_ENV"
                throw CLIError(.usage, "\(source) is \"\(environmentName)\"", remedy: "use production or sandbox")
            }
        }
        client = APNSClientConfiguration(
            environment: target, credentials: .init(key: .file(path: keyPath), keyID: keyID, teamID: teamID))
    }

    /// The PEM text of a custom endpoint's CA certificate, named by `setting` in the error.
    static func certificate(at path: String, setting: String) throws -> String {
        // Only a regular file of reasonable size: a FIFO or a device would never end.
        guard let pem = try? SmallTextFile.read(path, maximumBytes: 1_048_576) else {
            throw CLIError(.usage, "\(setting) names \(path), which cannot be read",
                           remedy: "give the path of the endpoint's CA certificate in PEM form")
        }
        return pem
    }

    /// Checks the endpoint and loads the signing key once, so that unusable settings fail
    /// before anything connects, in the words of the setting that named them.
    func check() throws {
        do {
            try client.validate()
        } catch let error as APNSCredentialsError {
            throw CLIError(.usage, "\(keySource): \(error.message)")
        } catch let error as APNSConfigurationError {
            throw CLIError(.usage, "cannot use the APNs settings: \(error)")
        }
    }

    /// The host for these settings; a setting the APNs client refuses is a usage error.
    func makingHost(_ configuration: OrderFlowHostConfiguration, logger: Logger,
                    metricsFactory: (any MetricsFactory)? = nil) throws -> OrderFlowHost {
        do {
            return try OrderFlowHost(configuration: configuration, logger: logger, metricsFactory: metricsFactory)
        } catch let error as APNSCredentialsError {
            throw CLIError(.usage, "\(keySource): \(error.message)")
        } catch let error as APNSConfigurationError {
            throw CLIError(.usage, "cannot use the APNs settings: \(error)")
        }
    }

    /// What to tell the operator when the key file's mode lets users other than its owner read
    /// (or change) it; nil when only the owner can. The worker still runs: the warning names the
    /// file and the fix.
    static func keyPermissionWarning(path: String) -> String? {
        var status = stat()
        guard stat(path, &status) == 0 else { return nil }
        let mode = status.st_mode & 0o777
        guard mode & 0o077 != 0 else { return nil }
        let access = if mode & 0o004 != 0 {
            "is readable by every user of this machine"
        } else if mode & 0o040 != 0 {
            "is readable by its group"
        } else {
            "can be changed by users other than its owner"
        }
        return "the APNs signing key \(path) \(access) (mode \(String(format: "%04o", mode))); "
            + "whoever holds it can send notifications as your team. Run `chmod 600 \(path)`"
    }
}
