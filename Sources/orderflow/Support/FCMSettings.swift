import CommandLineSupport
import Foundation
import OrderFlow
import WorkflowKit

/// Where `worker run` (and `serve`) sends Android followers' FCM messages, from flags or the
/// environment (a flag wins): FCM's own endpoint unless a stand-in is named. Checked before
/// anything connects, in the words of the setting.
enum FCMSettings {
    static func apply(flags: HostOptions, environment: [String: String], to worker: inout WorkerConfiguration) throws {
        func value(_ flag: String?, _ variable: String) -> String? {
            guard let given = (flag ?? environment[variable])?.trimmingCharacters(in: .whitespaces), !given.isEmpty else { return nil }
            return given
        }
        if let url = value(flags.fcmURL, "ORDERFLOW_FCM_URL") {
            let setting = flags.fcmURL != nil ? "--fcm-url" : "ORDERFLOW_FCM_URL"
            guard let parsed = URL(string: url), parsed.scheme == "https", parsed.host != nil else {
                throw CLIError(.usage, "\(setting) is \"\(MessageText.excerpt(url, limit: 60))\", not an https:// URL",
                               remedy: "give the stand-in's https:// address, or leave it out to send to FCM")
            }
            worker.fcmBaseURL = url
        }
        if let caPath = value(flags.fcmCA, "ORDERFLOW_FCM_CA") {
            let setting = flags.fcmCA != nil ? "--fcm-ca" : "ORDERFLOW_FCM_CA"
            let pem = try APNSSettings.certificate(at: caPath, setting: setting)
            guard pem.contains("-----BEGIN CERTIFICATE-----") else {
                throw CLIError(.usage, "\(setting) names \(caPath), which holds no PEM certificate",
                               remedy: "give the endpoint's CA certificate in PEM form (-----BEGIN CERTIFICATE-----)")
            }
            worker.fcmTrustRootsPEM = pem
        }
    }
}
