// The ActivityKit adapter, on iOS. On Linux CI compiles this file a second time, in the
// OrderFlowKitActivityKitCheck target, against a stub of ActivityKit's API (Tests/Stubs), so that
// a signature that does not match ActivityKit's fails there too.
#if canImport(ActivityKit) && (os(iOS) || ORDERFLOWKIT_ACTIVITYKIT_STUB)
import ActivityKit
import Foundation
#if ORDERFLOWKIT_ACTIVITYKIT_STUB
import OrderFlowKit
#endif

/// The real ``ActivitySource``: ActivityKit's activities of the attributes types the app declares.
///
/// ```swift
/// ActivityKitSource(.attributes(FoodOrderAttributes.self), .attributes(RideAttributes.self))
/// ```
@available(iOS 16.2, *)
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

#if compiler(>=6.2)
/// An `ActivityAttributes` type the kit observes from its own tasks: its metatype crosses them
/// (every generated attributes type is one).
public typealias KitActivityAttributes = ActivityAttributes & SendableMetatype
#else
/// An `ActivityAttributes` type the kit observes from its own tasks.
public typealias KitActivityAttributes = ActivityAttributes
#endif

/// One `ActivityAttributes` type the app declares, for ``ActivityKitSource``.
@available(iOS 16.2, *)
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
    public static func attributes<A: KitActivityAttributes>(
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
@available(iOS 16.2, *)
private struct ActivityBox<A: KitActivityAttributes>: @unchecked Sendable {
    let activity: Activity<A>
}

@available(iOS 16.2, *)
private struct KitActivity<A: KitActivityAttributes>: ObservedActivity {
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
            // Compared rather than switched over: ActivityKit adds states (`pending`, for a
            // scheduled start, in later SDKs) that the server is not told about.
            for await state in box.activity.activityStateUpdates {
                if state == .active {
                    yield(.active)
                } else if state == .ended {
                    yield(.ended)
                } else if state == .dismissed {
                    yield(.dismissed)
                } else if state == .stale {
                    yield(.stale)
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
