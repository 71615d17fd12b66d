-- OrderFlow schema, version 6: the feed's horizon ignores other databases' transactions.
--
-- The feed (FeedStore) reads events only of transactions below a horizon: every transaction
-- of this database below it has ended, so a reader that moved past it can never miss a later
-- commit. Until now the horizon was the snapshot's xmin, the oldest transaction running
-- anywhere on the server: one long transaction in another database (another application's
-- batch job, a migration, an open psql session) held the live feed and the board back until it
-- ended, though it can never write these tables.
--
-- Now: the oldest transaction of the snapshot that pg_stat_activity does not show running in
-- another database, or the snapshot's xmax when there is none. An xid shown for a backend of
-- another database is that backend's: backends never change databases. A transaction that ended
-- between the snapshot and that read, a prepared one (no backend) or one whose backend is hidden
-- still counts: the horizon only ever errs early, never past a transaction of this database.
--
-- STABLE, not VOLATILE: a stable SQL function runs in its caller's snapshot, so the horizon is
-- that of the statement that reads the events (a volatile one would take a newer snapshot and
-- could pass a transaction the caller cannot see yet).
CREATE FUNCTION orderflow_feed_horizon() RETURNS xid8
LANGUAGE sql STABLE PARALLEL RESTRICTED AS $$
    WITH snap AS MATERIALIZED (SELECT pg_current_snapshot() AS s),
    elsewhere AS MATERIALIZED (
        SELECT a.backend_xid AS xid FROM pg_stat_activity a
        WHERE a.backend_xid IS NOT NULL
          AND a.datid <> (SELECT oid FROM pg_database WHERE datname = current_database()))
    SELECT coalesce(
        (SELECT min(x) FROM pg_snapshot_xip(snap.s) AS x WHERE x::xid NOT IN (SELECT xid FROM elsewhere)),
        pg_snapshot_xmax(snap.s))
    FROM snap
$$;
