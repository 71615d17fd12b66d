import Logging
import PGKit
import Synchronization
import WorkflowKit

/// The workflows of the worker's orders: one catalog per merchant, kept for the worker's life
/// (a pinned workflow version never changes).
final class WorkflowCache: Sendable {
    private let pool: PostgresPool
    private let logger: Logger
    private let catalogs = Mutex([String: WorkflowCatalog]())

    init(pool: PostgresPool, logger: Logger) {
        self.pool = pool
        self.logger = logger
    }

    /// The order's pinned workflow version; nil (said so) when it cannot be read.
    func workflow(for order: OutboxOrder) async -> Workflow? {
        let catalog = catalogs.withLock { catalogs in
            if let catalog = catalogs[order.merchantID] { return catalog }
            let catalog = WorkflowCatalog(pool: pool, merchantID: order.merchantID)
            catalogs[order.merchantID] = catalog
            return catalog
        }
        do {
            return try await catalog.workflow(named: order.workflowName, version: order.workflowVersion)
        } catch {
            logger.error("cannot read the workflow of an order; its pushes wait", metadata: [
                "orderflow.order": "\(order.orderID)", "orderflow.workflow": "\(order.workflowName)@\(order.workflowVersion)",
                "orderflow.error": "\(error)",
            ])
            return nil
        }
    }
}
