// A stub of ActivityKit's API surface that OrderFlowKit and the generated attributes types use,
// for Linux, where ActivityKit does not exist: CI type-checks the ActivityKit adapter
// (Sources/OrderFlowKit/ActivityKitSource.swift) and compiles the generated types against it.
// Declarations and availability as Apple's documentation gives them; the bodies do nothing.
// Never part of a product: Package.swift declares it on Linux only.
import Foundation

/// ActivityKit's protocol for the description of a Live Activity.
public protocol ActivityAttributes: Decodable, Encodable {
    /// The dynamic content of a Live Activity.
    associatedtype ContentState: Decodable, Encodable, Hashable
}

/// The state of a Live Activity in its life cycle.
public enum ActivityState: Equatable, Hashable, Codable, Sendable {
    case active
    case ended
    case dismissed
    case stale
    case pending
}

/// The state and configuration of a Live Activity (Sendable in ActivityKit whatever its state).
@available(iOS 16.2, *)
public struct ActivityContent<State>: @unchecked Sendable where State: Decodable, State: Encodable, State: Hashable {
    public let state: State
    public let staleDate: Date?
    public let relevanceScore: Double

    public init(state: State, staleDate: Date?, relevanceScore: Double = 0.0) {
        self.state = state
        self.staleDate = staleDate
        self.relevanceScore = relevanceScore
    }
}

/// The object that starts, updates and ends a Live Activity.
@available(iOS 16.1, *)
public final class Activity<Attributes> where Attributes: ActivityAttributes {
    public typealias ContentState = Attributes.ContentState

    public final let attributes: Attributes
    public let id: String

    private init(attributes: Attributes, id: String) {
        self.attributes = attributes
        self.id = id
    }

    public static var activities: [Activity<Attributes>] { [] }
    public static var activityUpdates: ActivityUpdates { ActivityUpdates() }
    @available(iOS 17.2, *)
    public static var pushToStartToken: Data? { nil }
    @available(iOS 17.2, *)
    public static var pushToStartTokenUpdates: PushTokenUpdates { PushTokenUpdates() }

    public var activityState: ActivityState { .active }
    public var pushToken: Data? { nil }
    public var pushTokenUpdates: PushTokenUpdates { PushTokenUpdates() }
    public var activityStateUpdates: ActivityStateUpdates { ActivityStateUpdates() }
    @available(iOS 16.2, *)
    public var content: ActivityContent<ContentState> { fatalError("the ActivityKit stub has no activities") }
    @available(iOS 16.2, *)
    public var contentUpdates: ContentUpdates { ContentUpdates() }

    /// Activities that start or are started by a push.
    public struct ActivityUpdates: AsyncSequence {
        public typealias Element = Activity<Attributes>
        public struct Iterator: AsyncIteratorProtocol {
            public mutating func next() async -> Activity<Attributes>? { nil }
        }
        public func makeAsyncIterator() -> Iterator { Iterator() }
    }

    /// A token's changes (an activity's update token, or the type's push-to-start token).
    public struct PushTokenUpdates: AsyncSequence {
        public typealias Element = Data
        public struct Iterator: AsyncIteratorProtocol {
            public mutating func next() async -> Data? { nil }
        }
        public func makeAsyncIterator() -> Iterator { Iterator() }
    }

    /// The activity's state changes.
    public struct ActivityStateUpdates: AsyncSequence {
        public typealias Element = ActivityState
        public struct Iterator: AsyncIteratorProtocol {
            public mutating func next() async -> ActivityState? { nil }
        }
        public func makeAsyncIterator() -> Iterator { Iterator() }
    }

    /// The activity's content changes.
    @available(iOS 16.2, *)
    public struct ContentUpdates: AsyncSequence {
        public typealias Element = ActivityContent<Activity<Attributes>.ContentState>
        public struct Iterator: AsyncIteratorProtocol {
            public mutating func next() async -> Element? { nil }
        }
        public func makeAsyncIterator() -> Iterator { Iterator() }
    }
}
