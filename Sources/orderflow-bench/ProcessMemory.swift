import Foundation

/// A field of `/proc/<pid>/status` (`VmRSS:`, `VmHWM:`, `RssAnon:`, …) in MB; nil when the
/// process is gone or the field is missing.
func procStatusMegabytes(pid: pid_t, field: String) -> Double? {
    guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
          let line = status.split(separator: "\n").first(where: { $0.hasPrefix(field) }),
          let kilobytes = Double(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "")
    else { return nil }
    return kilobytes / 1024
}
