#if canImport(ActivityKit)
import ActivityKit
import Foundation

/// The real ``ActivitySource``: ActivityKit's activities of the attributes types the app declares.
///
/// ```swift
/// ActivityKitSource(.attributes(FoodOrderAttributes.self), .attributes(RideAttributes.self))
/// ```
public struct ActivityKitSource: ActivitySource {
    private let types: [ActivityType]

    /// A source of the given attributes types.
    /// - Parameter types: Each `ActivityAttributes` type the app declares (`orderflow workflow swift` generates them).
    public init(_ types: ActivityType...) { self.types = types }

    /// The names of the declared types.
    public var attributesTypes: [String] { types.map(\.name) }

    /// The push-to-start tokens of one type (iOS 17.2+; earlier, none).
    /// - Parameter attributesType: One of ``attributesTypes``.
    /// - Returns: ActivityKit's `pushToStartTokenUpdates` of that type.
    public func pushToStartTokenUpdates(for attributesType: String) -> AsyncStream<Data> {
        types.first { $0.name == attributesType }?.pushToStart() ?? AsyncStream { $0.finish() }
    }

    /// The activities of every declared type that exist now.
    /// - Returns: ActivityKit's `Activity.activities` of each type.
    public func currentActivities() -> [any ObservedActivity] { types.flatMap { $0.current() } }

    /// The activities of every declared type that start from now on.
    /// - Returns: ActivityKit's `activityUpdates` of each type, merged.
    public func activityUpdates() -> AsyncStream<any ObservedActivity> {
        let types = types
        return AsyncStream { continuation in
            let tasks = types.map { type in
                Task { for await activity in type.updates() { continuation.yield(activity) } }
            }
            continuation.onTermination = { _ in tasks.forEach { $0.cancel() } }
        }
    }
}

/// One `ActivityAttributes` type the app declares, for ``ActivityKitSource``.
public struct ActivityType: Sendable {
    let name: String
    let pushToStart: @Sendable () -> AsyncStream<Data>
    let current: @Sendable () -> [any ObservedActivity]
    let updates: @Sendable () -> AsyncStream<any ObservedActivity>

    /// An attributes type, named as the server knows it (its Swift name).
    /// - Parameters:
    ///   - type: The generated type (`FoodOrderAttributes.self`).
    ///   - order: The order an activity shows, when its attributes say; `nil` lets the kit pick
    ///     the newest followed order that no activity shows yet.
    /// - Returns: The declaration.
    public static func attributes<A: ActivityAttributes>(
        _ type: A.Type, order: @escaping @Sendable (A) -> String? = { _ in nil }
    ) -> ActivityType {
        ActivityType(
            name: String(describing: type),
            pushToStart: {
                AsyncStream { continuation in
                    guard #available(iOS 17.2, *) else { return continuation.finish() }
                    let task = Task {
                        for await token in Activity<A>.pushToStartTokenUpdates { continuation.yield(token) }
                        continuation.finish()
                    }
                    continuation.onTermination = { _ in task.cancel() }
                }
            },
            current: { Activity<A>.activities.map { KitActivity(ActivityBox(activity: $0), order: order) } },
            updates: {
                AsyncStream { continuation in
                    let task = Task {
                        for await activity in Activity<A>.activityUpdates {
                            continuation.yield(KitActivity(ActivityBox(activity: activity), order: order))
                        }
                        continuation.finish()
                    }
                    continuation.onTermination = { _ in task.cancel() }
                }
            }
        )
    }
}

/// ActivityKit's `Activity` is a reference ActivityKit synchronizes itself.
private struct ActivityBox<A: ActivityAttributes>: @unchecked Sendable {
    let activity: Activity<A>
}

private struct KitActivity<A: ActivityAttributes>: ObservedActivity {
    let box: ActivityBox<A>
    let orderID: String?

    init(_ box: ActivityBox<A>, order: @Sendable (A) -> String?) {
        self.box = box
        orderID = order(box.activity.attributes)
    }

    var id: String { box.activity.id }
    var attributesType: String { String(describing: A.self) }

    var pushTokenUpdates: AsyncStream<Data> {
        relay { box, yield in for await token in box.activity.pushTokenUpdates { yield(token) } }
    }

    var stateUpdates: AsyncStream<ActivityLifecycle> {
        relay { box, yield in
            for await state in box.activity.activityStateUpdates {
                switch state {
                case .active: yield(.active)
                case .ended: yield(.ended)
                case .dismissed: yield(.dismissed)
                case .stale: yield(.stale)
                @unknown default: break
                }
            }
        }
    }

    var contentUpdates: AsyncStream<Date> {
        relay { box, yield in for await _ in box.activity.contentUpdates { yield(Date()) } }
    }

    private func relay<T: Sendable>(
        _ body: @escaping @Sendable (ActivityBox<A>, @Sendable (T) -> Void) async -> Void
    ) -> AsyncStream<T> {
        let box = box
        return AsyncStream { continuation in
            let task = Task {
                await body(box) { continuation.yield($0) }
                continuation.finish()
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }
}
#endif
