import Foundation
import OrderFlow

extension OrderFlowHTTPServer {
    /// A new one-time sign-in link to this server's counter board for `merchantID` (the
    /// engine's default merchant when nil), once the server listens: `http://host:port/board?token=…`.
    /// The link works once, for `lifetime` seconds.
    public func boardSignInLink(merchantID: String? = nil, lifetime: Int = OrderFlowEngine.boardSignInLifetime) async throws -> String? {
        guard let port = await listening() else { return nil }
        let token = try await engine.createBoardSignInToken(merchantID: merchantID ?? engine.configuration.merchantID, lifetime: lifetime)
        let board = configuration.publicURL.map { $0.hasSuffix("/") ? $0 + "board" : $0 + "/board" }
            ?? Self.boardURL(host: configuration.host, port: port)
        return board + "?token=" + token.token
    }

    /// The board's address on a server listening on `host`: a wildcard address is reached as
    /// this machine's loopback.
    public static func boardURL(host: String, port: Int) -> String {
        let reachable = ["0.0.0.0", "::", "[::]", ""].contains(host) ? "127.0.0.1" : host
        let shown = reachable.contains(":") && !reachable.hasPrefix("[") ? "[\(reachable)]" : reachable
        return "http://\(shown):\(port)/board"
    }
}
