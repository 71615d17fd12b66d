import Foundation
import NIOCore
import NIOHPACK

/// An answer: the status, the headers (pseudo-headers included) and the body. What the status
/// and body mean is the client's to say.
package struct HTTP2Response: Sendable {
    /// The `:status`, never informational (1xx answers are skipped).
    package var status: Int
    /// Every header of the answer's first HEADERS frame, `:status` included.
    package var headers: HPACKHeaders
    /// The DATA frames' bytes together; nil when there were none.
    package var body: ByteBuffer?
}

extension HTTP2Transport {
    /// Where a transport connects: an `https://host[:port][/path]` URL taken apart.
    package struct Endpoint {
        /// The host name or IP address.
        package var host: String
        /// The TCP port (443 when the URL names none).
        package var port: Int
        /// The URL's path, without a trailing slash ("" for none).
        package var pathPrefix: String

        /// Takes a base URL apart; the client words the refusal in its own terms.
        ///
        /// - Parameter url: an `https://host[:port][/path]` URL.
        /// - Returns: nil for a URL that is not `https://` or has no host.
        package init?(url: String) {
            guard let components = URLComponents(string: url), components.scheme == "https",
                  let host = components.host, !host.isEmpty
            else { return nil }
            var path = components.percentEncodedPath
            while path.hasSuffix("/") { path.removeLast() }
            self.host = host
            self.port = components.port ?? 443
            self.pathPrefix = path
        }
    }
}
