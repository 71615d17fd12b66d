import Logging

/// Running one commit group on its connection: as its batch form when every statement has the
/// same one, else as a pipeline in one transaction, and on failure each statement alone (see
/// `PostgresPool.queryCommittingTogether`).
enum GroupRun {
    /// Each member's answer, and whether the group ran as its batch form (or tried to).
    static func run(
        _ members: [GroupMember], on connection: PostgresConnection, logger: Logger
    ) async -> (results: [Result<PostgresRows, PostgresError>], batch: BatchOutcome?) {
        let queries = members.map(\.query)
        var batchOutcome: BatchOutcome?
        if queries.count > 1 {
            do throws(PostgresError) {
                if let batch = Self.commonBatch(of: members) {
                    let rows: PostgresRows
                    do throws(PostgresError) {
                        rows = try await connection.queryBatch(try Self.batchQuery(batch, queries))
                    } catch {
                        batchOutcome = .failed
                        // A statement refused for its data (a key taken) is the fallback's
                        // business; any other failure of a batch statement is worth a look: its
                        // groups then all run one statement at a time.
                        if !error.isUniqueViolation {
                            logger.warning("postgres batch statement failed; its statements run one by one", metadata: [
                                "postgres.group.size": "\(queries.count)", "postgres.error": "\(error.message)",
                            ])
                        }
                        throw error
                    }
                    // Committed: from here on nothing runs again, whatever the rows say (a batch
                    // statement without `batch_ordinal` is a mistake in the source, which the
                    // group commit tests catch).
                    do throws(PostgresError) {
                        return (try rows.splitByBatchOrdinal(count: queries.count).map { .success($0) }, .ran)
                    } catch {
                        return (Array(repeating: .failure(error), count: queries.count), .ran)
                    }
                }
                return (try await connection.queryGroup(queries).map { .success($0) }, nil)
            } catch {
                // Nothing of the group was committed: each statement alone gives its own answer.
                logger.debug("postgres group failed; running its statements one by one", metadata: [
                    "postgres.group.size": "\(queries.count)", "postgres.error": "\(error.message)",
                ])
            }
        }
        var results: [Result<PostgresRows, PostgresError>] = []
        results.reserveCapacity(queries.count)
        for query in queries {
            do throws(PostgresError) {
                results.append(.success(try await connection.query(query)))
            } catch {
                results.append(.failure(error))
            }
        }
        return (results, batchOutcome)
    }

    /// The batch form every member of the group has, if they all have the same one.
    private static func commonBatch(of members: [GroupMember]) -> StaticString? {
        guard let batch = members[0].batch, batch.hasPointerRepresentation else { return nil }
        let address = batch.utf8Start
        for member in members.dropFirst() {
            guard let other = member.batch, other.hasPointerRepresentation, other.utf8Start == address else { return nil }
        }
        return batch
    }

    /// The batch statement for `queries`: its parameter `$n` is the array of their `$n`s.
    private static func batchQuery(_ batch: StaticString, _ queries: [PostgresQuery]) throws(PostgresError) -> PostgresQuery {
        let width = queries[0].bindings.count
        var columns = Array(repeating: PostgresArrayLiteral.Builder(), count: width)
        for query in queries {
            guard query.bindings.count == width else {
                throw PostgresError(.invalidParameter, "the statements of a batch must have the same parameters")
            }
            for (index, text) in try PostgresConnection.parameters(of: query).enumerated() {
                columns[index].append(text)
            }
        }
        return PostgresQuery(batch, bindings: columns.map { $0.finished() })
    }
}
