import WorkflowKit

/// The shapes Apple gives an app's identifiers, checked before anything is stored or sent:
/// a mistake here would otherwise show only as a refusal from APNs on the first push.
public enum APNSAppIdentifiers {
    /// What is wrong with `bundleID` as an app's bundle id (letters, digits, hyphens and
    /// periods, at most 155 characters, no Live Activity suffix), or nil when nothing is.
    public static func bundleIDProblem(_ bundleID: String) -> String? {
        let shown = "\"\(MessageText.excerpt(bundleID, limit: 40))\""
        guard !bundleID.isEmpty, bundleID.unicodeScalars.count <= 155,
              bundleID.unicodeScalars.allSatisfy({ $0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0) || $0 == "-" || $0 == ".") }),
              !bundleID.hasPrefix("."), !bundleID.hasSuffix(".")
        else {
            return "\(shown) is not an app bundle id: give the app's bundle id, like com.example.orders (letters, digits, hyphens and periods)"
        }
        if bundleID.hasSuffix(".push-type.liveactivity") {
            return "\(shown) ends in .push-type.liveactivity: give the app's bundle id alone, like com.example.orders; the worker adds the Live Activity suffix"
        }
        return nil
    }

    /// Whether `id` has the shape of an Apple key id or team id: 10 capital letters and digits.
    public static func isAppleID(_ id: String) -> Bool {
        id.unicodeScalars.count == 10 && id.unicodeScalars.allSatisfy { ("A"..."Z").contains($0) || ("0"..."9").contains($0) }
    }
}
