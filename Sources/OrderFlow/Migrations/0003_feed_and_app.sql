-- OrderFlow schema, version 3: the merchant's event feed, and what the customer's app reports.
--
-- The feed (`GET /v1/events`) reads transitions and push attempts in the order their
-- transactions ended, without a table of its own: each row remembers the id of the
-- transaction that wrote it, and a reader only goes as far as the oldest transaction still
-- running (`pg_snapshot_xmin`), so a row that commits late is never skipped.
ALTER TABLE order_transitions ADD COLUMN tx xid8 NOT NULL DEFAULT pg_current_xact_id();
ALTER TABLE deliveries ADD COLUMN tx xid8 NOT NULL DEFAULT pg_current_xact_id();
CREATE INDEX order_transitions_feed ON order_transitions (merchant_id, tx);
CREATE INDEX deliveries_feed ON deliveries (merchant_id, tx);

-- The key of each merchant's order-scoped client secrets (HMAC-SHA256 over merchant and
-- order), made on first use. The secret itself is never stored.
CREATE TABLE merchant_client_keys (
    merchant_id  text        NOT NULL,
    key          bytea       NOT NULL CHECK (length(key) = 32),
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (merchant_id)
);

-- What the customer's app last said about its activity: its state as ActivityKit reports it,
-- and when it applied content (the app's clock, and ours when the report arrived).
ALTER TABLE activities
    ADD COLUMN app_state        text CHECK (app_state IN ('active', 'stale', 'ended', 'dismissed')),
    ADD COLUMN app_reported_at  timestamptz,
    ADD COLUMN app_applied_at   timestamptz,
    ADD COLUMN app_applied_seq  integer;
