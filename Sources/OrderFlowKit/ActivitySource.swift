import Foundation

/// What a Live Activity is, as ActivityKit's `ActivityState` says it.
public enum ActivityLifecycle: String, Sendable, Codable, Hashable {
    /// The activity shows and receives updates.
    case active
    /// The activity ended; it may still show on the Lock Screen until dismissed.
    case ended
    /// The customer (or the system) removed the activity: it is sent nothing more.
    case dismissed
    /// The content is out of date (its `staleDate` passed).
    case stale
}

/// One Live Activity the app shows, as the kit observes it.
///
/// The ActivityKit adapter wraps `Activity<Attributes>`; tests play a scripted one.
public protocol ObservedActivity: Sendable {
    /// ActivityKit's `Activity.id`: stable across launches.
    var id: String { get }
    /// The name of the `ActivityAttributes` type, as the server knows it (`FoodOrderAttributes`).
    var attributesType: String { get }
    /// The order the activity shows, when the app can tell from its attributes; `nil` lets the
    /// kit pick the order it followed most recently that has no activity yet.
    var orderID: String? { get }
    /// Each rotation of the activity's update token (ActivityKit's `pushTokenUpdates`).
    var pushTokenUpdates: AsyncStream<Data> { get }
    /// Each change of the activity's state (ActivityKit's `activityStateUpdates`).
    var stateUpdates: AsyncStream<ActivityLifecycle> { get }
    /// When the phone applied new content (one element per element of ActivityKit's `contentUpdates`).
    var contentUpdates: AsyncStream<Date> { get }
}

/// The seam between the kit and ActivityKit: everything the kit reads from it.
///
/// ``ActivityKitSource`` is the real one (iOS 16.2+); a test plays launches, token rotations and
/// dismissals through its own.
public protocol ActivitySource: Sendable {
    /// The names of the `ActivityAttributes` types the app declares.
    var attributesTypes: [String] { get }
    /// The push-to-start tokens of one attributes type (ActivityKit's `pushToStartTokenUpdates`).
    /// - Parameter attributesType: One of ``attributesTypes``.
    /// - Returns: The current token first, then each new one.
    func pushToStartTokenUpdates(for attributesType: String) -> AsyncStream<Data>
    /// The activities that exist now, also those started while the app was not running.
    /// - Returns: ActivityKit's `Activity.activities` of every declared type.
    func currentActivities() -> [any ObservedActivity]
    /// Activities that start from now on (ActivityKit's `activityUpdates`).
    /// - Returns: A stream of each activity that starts while the app runs.
    func activityUpdates() -> AsyncStream<any ObservedActivity>
}
