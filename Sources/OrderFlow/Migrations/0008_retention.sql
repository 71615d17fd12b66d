-- OrderFlow schema, version 8: retention, so that tables do not grow forever.
--
-- Finished orders (in a final state of their workflow version) are purged with every row that
-- hangs off them once their finish is older than their merchant's retention; dead letters and
-- devices left without a token are purged after 30 days (the engine's `RetentionPolicy`). The
-- purge deletes in small batches, each its own short transaction (`RetentionStore`).
--
-- Additive only: a binary of the previous release never reads the new column, never calls the
-- new functions, and writes tokens and orders exactly as before.

-- A merchant's own retention of finished orders; NULL: the purge's default (30 days).
ALTER TABLE merchants
    ADD COLUMN retention interval CHECK (retention IS NULL OR retention >= interval '1 minute');

-- History stays append-only for everyone but the purge: a transaction that set
-- `orderflow.purging` (transaction-local, `set_config(…, true)`) may delete whole orders'
-- rows. Updates stay refused to everyone.
CREATE OR REPLACE FUNCTION orderflow_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' AND current_setting('orderflow.purging', true) = 'on' THEN
        RETURN OLD;
    END IF;
    RAISE EXCEPTION '% rows are immutable', TG_TABLE_NAME
        USING ERRCODE = 'restrict_violation',
              HINT = 'apply a new version instead of changing an old one';
END
$$;

-- The finished orders older than their merchant's retention (else `default_retention`) that
-- nothing is still being done for: no live lease, no activity command waiting (an end push in
-- backoff, a broadcast channel waiting to be deleted at APNs). Each final state of each
-- workflow version is one range of the index `orders_by_state`, up to its merchant's cutoff.
-- The purge locks what it takes (`FOR UPDATE SKIP LOCKED`); a dry run counts.
CREATE FUNCTION orderflow_finished_orders(default_retention interval, merchants text[])
RETURNS TABLE (merchant_id text, order_id text)
LANGUAGE sql STABLE AS $$
    SELECT o.merchant_id, o.order_id
    FROM workflow_versions w
    CROSS JOIN LATERAL jsonb_array_elements(w.definition -> 'states') AS s(state)
    CROSS JOIN LATERAL (
        SELECT now() - coalesce((SELECT m.retention FROM merchants m WHERE m.merchant_id = w.merchant_id),
                                default_retention) AS cutoff
    ) r
    -- One index range per final state (OFFSET 0 keeps the probe from being flattened into a
    -- join, which would read every order and only then compare its age with its merchant's).
    CROSS JOIN LATERAL (
        SELECT o.merchant_id, o.order_id FROM orders o
        WHERE o.merchant_id = w.merchant_id AND o.workflow_name = w.name AND o.state = s.state ->> 'name'
          AND o.state_entered_at < r.cutoff AND o.workflow_version = w.version
          AND (o.dispatch_lease_until IS NULL OR o.dispatch_lease_until < now())
          AND NOT EXISTS (SELECT FROM activity_commands c WHERE c.merchant_id = o.merchant_id AND c.order_id = o.order_id)
        OFFSET 0
    ) o
    WHERE (s.state ->> 'final')::boolean
      AND (merchants IS NULL OR w.merchant_id = ANY(merchants))
$$;

-- Devices without a token left since before `cutoff`, and that follow no order: no live alert
-- token, no live push-to-start token, and nothing about their tokens changed since. Computed from
-- the columns every release writes (a token saved clears its `invalid_at` and sets `updated_at`;
-- a dead one gets `invalid_at`), so that a previous release's writes give the same answer as
-- this one's: no column of its own that an older binary would leave unset. A device is a
-- `devices` row, or push-to-start tokens of a device id without one.
CREATE FUNCTION orderflow_tokenless_devices(cutoff timestamptz, merchants text[])
RETURNS TABLE (merchant_id text, device_id text)
LANGUAGE sql STABLE AS $$
    SELECT k.merchant_id, k.device_id
    FROM (
        SELECT d.merchant_id, d.device_id FROM devices d
        WHERE (d.alert_token IS NULL OR d.alert_token_invalid_at IS NOT NULL)
          AND greatest(d.updated_at, d.alert_token_invalid_at) < cutoff
        UNION
        SELECT p.merchant_id, p.device_id FROM push_to_start_tokens p
        WHERE p.invalid_at IS NOT NULL AND p.invalid_at < cutoff
    ) k
    WHERE (merchants IS NULL OR k.merchant_id = ANY(merchants))
      AND NOT EXISTS (SELECT FROM devices d
                      WHERE d.merchant_id = k.merchant_id AND d.device_id = k.device_id
                        AND ((d.alert_token IS NOT NULL AND d.alert_token_invalid_at IS NULL)
                             OR greatest(d.updated_at, d.alert_token_invalid_at, d.credential_issued_at) >= cutoff))
      AND NOT EXISTS (SELECT FROM push_to_start_tokens p
                      WHERE p.merchant_id = k.merchant_id AND p.device_id = k.device_id
                        AND (p.invalid_at IS NULL OR greatest(p.updated_at, p.invalid_at) >= cutoff))
      AND NOT EXISTS (SELECT FROM order_followers f WHERE f.merchant_id = k.merchant_id AND f.device_id = k.device_id)
$$;

-- The device purge's two ways in: devices without a live alert token by when they last changed,
-- and dead push-to-start tokens by when they died.
CREATE INDEX devices_without_alert_token ON devices ((greatest(updated_at, alert_token_invalid_at)))
    WHERE alert_token IS NULL OR alert_token_invalid_at IS NOT NULL;
CREATE INDEX push_to_start_tokens_dead ON push_to_start_tokens (invalid_at) WHERE invalid_at IS NOT NULL;
-- Followers by device: a device that still follows an order is kept.
CREATE INDEX order_followers_by_device ON order_followers (merchant_id, device_id);
