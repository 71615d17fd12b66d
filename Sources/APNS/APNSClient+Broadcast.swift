import AsyncHTTPClient
import Foundation
import Logging
import NIOCore
import NIOHTTP1

/// Broadcasts (iOS 18) and the channel management API, over the same client, connection pool and
/// provider token as device pushes. Broadcasts go to the push host
/// (``APNSClientConfiguration/broadcastBaseURL``); channel requests to the management host
/// (``APNSClientConfiguration/channelManagementBaseURL``).
extension APNSClient {
    /// Sends one Live Activity update or end to every device subscribed to the channel.
    ///
    /// - Throws: as ``send(_:)``; ``APNSError`` carries the channel id, and a channel that no
    ///   longer exists answers ``APNSErrorReason/channelNotRegistered``.
    @discardableResult
    public func broadcast(_ request: APNSBroadcastRequest) async throws -> APNSBroadcastResult {
        try request.validate()
        let apnsID = request.apnsID ?? UUID()
        var headers = HTTPHeaders()
        headers.add(name: "apns-channel-id", value: request.channelID)
        headers.add(name: "apns-push-type", value: APNSPushType.liveActivity.rawValue)
        headers.add(name: "apns-priority", value: String(request.priority.rawValue))
        headers.add(name: "apns-expiration", value: String(request.expiration))
        headers.add(name: "apns-id", value: apnsID.uuidString.lowercased())
        headers.add(name: "content-type", value: "application/json")
        let url = configuration.broadcastBaseURL + "/4/broadcasts/apps/" + Self.pathComponent(request.bundleID)
        let (response, _) = try await execute(.POST, url: url, headers: headers, body: request.payload, apnsID: apnsID,
                                              channelID: request.channelID, what: "broadcast")
        let answeredID = response.headers.first(name: "apns-id").flatMap(UUID.init(uuidString:)) ?? apnsID
        return APNSBroadcastResult(apnsID: answeredID, uniqueID: response.headers.first(name: "apns-unique-id"))
    }

    /// Creates a channel for the app's Live Activities and returns its id (`apns-channel-id`).
    /// The storage policy is fixed for the channel's life.
    public func createChannel(bundleID: String, storagePolicy: APNSMessageStoragePolicy) async throws -> String {
        var headers = HTTPHeaders()
        headers.add(name: "content-type", value: "application/json")
        let body = Data(#"{"message-storage-policy":\#(storagePolicy.rawValue),"push-type":"LiveActivity"}"#.utf8)
        let (response, _) = try await execute(.POST, url: channelsURL(bundleID), headers: headers, body: body, apnsID: UUID(),
                                              channelID: nil, what: "channel creation")
        guard let id = response.headers.first(name: "apns-channel-id"), APNSChannelIDs.isWellFormed(id) else {
            throw APNSChannelResponseError(message: "APNs answered the channel creation with \(response.status.code) but no usable apns-channel-id header; the channel may exist without its id, check the app's channels with listChannels(bundleID:).")
        }
        return id
    }

    /// The channel's storage policy, or ``APNSErrorReason/channelNotRegistered`` when it does not exist.
    public func channel(bundleID: String, id: String) async throws -> APNSChannel {
        var headers = HTTPHeaders()
        headers.add(name: "apns-channel-id", value: id)
        let (_, body) = try await execute(.GET, url: channelsURL(bundleID), headers: headers, body: nil, apnsID: UUID(),
                                          channelID: id, what: "channel read")
        let decoded = try? JSONDecoder().decode(ChannelBody.self, from: Data(body.readableBytesView))
        return APNSChannel(id: id, storagePolicy: decoded?.policy.flatMap(APNSMessageStoragePolicy.init(rawValue:)))
    }

    /// Deletes the channel: irreversible; its subscribers get nothing more. Delete a channel when
    /// its event has ended (an app may have 10,000 per environment).
    public func deleteChannel(bundleID: String, id: String) async throws {
        var headers = HTTPHeaders()
        headers.add(name: "apns-channel-id", value: id)
        _ = try await execute(.DELETE, url: channelsURL(bundleID), headers: headers, body: nil, apnsID: UUID(), channelID: id,
                              what: "channel deletion")
    }

    /// The ids of every channel of the app in this environment.
    public func listChannels(bundleID: String) async throws -> [String] {
        let url = configuration.channelManagementBaseURL + "/1/apps/" + Self.pathComponent(bundleID) + "/all-channels"
        let (_, body) = try await execute(.GET, url: url, headers: HTTPHeaders(), body: nil, apnsID: UUID(), channelID: nil,
                                          what: "channel list")
        guard let decoded = try? JSONDecoder().decode(ChannelListBody.self, from: Data(body.readableBytesView)) else {
            throw APNSChannelResponseError(message: "APNs answered the channel list with a body that is not {\"channels\": [...]}.")
        }
        return decoded.channels
    }

    // MARK: -

    private func channelsURL(_ bundleID: String) -> String {
        configuration.channelManagementBaseURL + "/1/apps/" + Self.pathComponent(bundleID) + "/channels"
    }

    /// A bundle id as a path segment (bundle ids are letters, digits, `.` and `-`; anything else is escaped).
    static func pathComponent(_ text: String) -> String {
        text.addingPercentEncoding(withAllowedCharacters: .alphanumerics.union(CharacterSet(charactersIn: ".-_"))) ?? text
    }

    /// One request with the provider token; a non-2xx answer becomes ``APNSError``.
    private func execute(_ method: HTTPMethod, url: String, headers: HTTPHeaders, body: Data?, apnsID: UUID, channelID: String?,
                         what: String) async throws -> (HTTPClientResponse, ByteBuffer)
    {
        var logger = self.logger
        if let channelID { logger[metadataKey: "apns.channel"] = "\(channelID)" }
        logger[metadataKey: "apns.request"] = "\(what)"

        try await self.inFlight.acquire()
        defer { self.inFlight.release() }

        let providerToken = try await self.providerTokens.providerToken()
        var request = HTTPClientRequest(url: url)
        request.method = method
        request.headers = headers
        request.headers.add(name: "authorization", value: "bearer " + providerToken.jwt)
        if let body { request.body = .bytes(ByteBuffer(bytes: body)) }

        let response: HTTPClientResponse
        let responseBody: ByteBuffer
        do {
            response = try await self.httpClient.execute(
                request, deadline: .now() + TimeAmount(self.configuration.timeouts.request), logger: logger)
            responseBody = try await response.body.collect(upTo: 1024 * 1024)
        } catch {
            if Task.isCancelled { throw CancellationError() }
            logger.debug("APNs unreachable", metadata: ["apns.error": "\(error)"])
            throw APNSTransportError(underlying: error, redactedDeviceToken: channelID.map { "channel " + $0 } ?? what)
        }
        guard (200..<300).contains(response.status.code) else {
            let failure = self.failure(
                status: Int(response.status.code), retryAfter: response.headers.first(name: "retry-after"),
                body: responseBody, apnsID: apnsID, providerToken: providerToken,
                redactedToken: "", channelID: channelID ?? "")
            let metadata: Logger.Metadata = ["apns.status": "\(failure.status)", "apns.reason": "\(failure.reason.rawValue)"]
            switch failure.action {
            case .configurationError, .credentialsError:
                logger.info("APNs refused the \(what): \(failure.description)", metadata: metadata)
            default:
                logger.debug("APNs refused the \(what)", metadata: metadata)
            }
            throw failure
        }
        return (response, responseBody)
    }

    private struct ChannelBody: Decodable {
        var policy: Int?

        enum CodingKeys: String, CodingKey {
            case policy = "message-storage-policy"
        }
    }

    private struct ChannelListBody: Decodable {
        var channels: [String]
    }
}

/// APNs accepted a channel request but its answer lacks what it should carry.
public struct APNSChannelResponseError: APNSSendFailure, Hashable {
    public let message: String
    public var action: APNSFailureAction { .retryWithBackoff }
    public var description: String { self.message }
}
