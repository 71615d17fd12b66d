-- OrderFlow schema, version 1.
--
-- Every table's primary key starts with merchant_id, the key the tables would be distributed
-- by in a sharded PostgreSQL (Citus): all of a merchant's orders, their history, commands,
-- activities and tokens live together, and every hot-path statement filters on it.

-- Workflow definitions: immutable versions. An order is pinned to the version it started with.
CREATE TABLE workflow_versions (
    merchant_id  text        NOT NULL,
    name         text        NOT NULL,
    version      integer     NOT NULL CHECK (version > 0),
    definition   jsonb       NOT NULL,            -- the validated definition, canonical form
    source       text        NOT NULL,            -- the YAML as applied, for `workflow show`
    checksum     text        NOT NULL,            -- sha-256 of the canonical definition
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (merchant_id, name, version)
);

CREATE FUNCTION orderflow_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION '% rows are immutable', TG_TABLE_NAME
        USING ERRCODE = 'restrict_violation',
              HINT = 'apply a new version instead of changing an old one';
END
$$;

CREATE TRIGGER workflow_versions_immutable
    BEFORE UPDATE OR DELETE ON workflow_versions
    FOR EACH ROW EXECUTE FUNCTION orderflow_refuse_change();

-- Orders, named by the merchant's own id ("1042").
CREATE TABLE orders (
    merchant_id          text        NOT NULL,
    order_id             text        NOT NULL CHECK (length(order_id) BETWEEN 1 AND 200),
    workflow_name        text        NOT NULL,
    workflow_version     integer     NOT NULL,
    state                text        NOT NULL,
    seq                  integer     NOT NULL,    -- sequence number of the latest transition
    attributes           jsonb       NOT NULL,    -- the activity's static attributes (as given)
    content              jsonb       NOT NULL,    -- the ContentState the activity shows now
    creation_key         text,                    -- idempotency key of the creation
    created_at           timestamptz NOT NULL,
    updated_at           timestamptz NOT NULL,
    state_entered_at     timestamptz NOT NULL,    -- drives the workflow's durable timers
    dispatch_lease_until timestamptz,             -- a worker is sending this order's commands
    dispatch_owner       text,
    PRIMARY KEY (merchant_id, order_id),
    FOREIGN KEY (merchant_id, workflow_name, workflow_version)
        REFERENCES workflow_versions (merchant_id, name, version)
);

-- The board (`orderflow list`) and timer scans: orders of a workflow in a state, oldest first.
CREATE INDEX orders_by_state ON orders (merchant_id, workflow_name, state, state_entered_at);

-- Append-only history: one row per transition, seq 1 is the creation.
CREATE TABLE order_transitions (
    merchant_id      text        NOT NULL,
    order_id         text        NOT NULL,
    seq              integer     NOT NULL,
    from_state       text,                        -- NULL for the creation
    to_state         text        NOT NULL,
    event            text,
    input            jsonb       NOT NULL DEFAULT '{}',
    rendered         jsonb       NOT NULL,        -- what the activity shows after it: content,
                                                  -- alert, stale date, relevance, priority, event
    actor            text,                        -- who or what caused it ("cli:alice", "timer")
    idempotency_key  text,
    occurred_at      timestamptz NOT NULL,
    PRIMARY KEY (merchant_id, order_id, seq),
    UNIQUE (merchant_id, order_id, idempotency_key),
    FOREIGN KEY (merchant_id, order_id) REFERENCES orders (merchant_id, order_id)
);

CREATE TRIGGER order_transitions_append_only
    BEFORE UPDATE OR DELETE ON order_transitions
    FOR EACH ROW EXECUTE FUNCTION orderflow_refuse_change();

-- The outbox: activity commands committed with the transition that implies them. Workers
-- claim an order's commands together (leasing the order row), merge them and delete them.
CREATE TABLE activity_commands (
    merchant_id   text        NOT NULL,
    order_id      text        NOT NULL,
    id            bigint      GENERATED ALWAYS AS IDENTITY,
    seq           integer     NOT NULL,           -- the transition the command reflects
    kind          text        NOT NULL CHECK (kind IN ('start', 'update', 'end', 'sync', 'retry')),
    device_id     text,                           -- for sync/retry: only this device
    created_at    timestamptz NOT NULL DEFAULT now(),
    available_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (merchant_id, order_id, id),
    FOREIGN KEY (merchant_id, order_id) REFERENCES orders (merchant_id, order_id)
);

CREATE INDEX activity_commands_ready ON activity_commands (available_at, id);

-- Devices: the ordinary APNs device token, for alert notifications when a device has no
-- Live Activity tokens.
CREATE TABLE devices (
    merchant_id     text        NOT NULL,
    device_id       text        NOT NULL,
    alert_token     text,
    alert_token_invalid_at timestamptz,
    updated_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (merchant_id, device_id)
);

-- Push-to-start tokens: one per device and ActivityAttributes type; they may rotate.
CREATE TABLE push_to_start_tokens (
    merchant_id      text        NOT NULL,
    device_id        text        NOT NULL,
    attributes_type  text        NOT NULL,
    token            text        NOT NULL,
    invalid_at       timestamptz,                  -- APNs said the token is dead
    updated_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (merchant_id, device_id, attributes_type)
);

-- Devices following an order (phone and iPad): each gets its own activity.
CREATE TABLE order_followers (
    merchant_id  text        NOT NULL,
    order_id     text        NOT NULL,
    device_id    text        NOT NULL,
    followed_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (merchant_id, order_id, device_id),
    FOREIGN KEY (merchant_id, order_id) REFERENCES orders (merchant_id, order_id)
);

-- One Live Activity per order and device.
CREATE TABLE activities (
    merchant_id        text        NOT NULL,
    order_id           text        NOT NULL,
    device_id          text        NOT NULL,
    status             text        NOT NULL CHECK (status IN ('waiting', 'starting', 'active', 'ended', 'gone', 'alerts')),
    update_token       text,                        -- the activity's newest update token
    token_updated_at   timestamptz,
    started_at         timestamptz,                 -- for the 8-hour limit
    ended_at           timestamptz,
    last_seq           integer     NOT NULL DEFAULT 0,   -- newest transition the device was sent
    last_alert_seq     integer     NOT NULL DEFAULT 0,   -- newest transition whose alert was sent
    last_timestamp     bigint      NOT NULL DEFAULT 0,   -- newest aps.timestamp sent (epoch s)
    last_pushed_at     timestamptz,
    next_attempt_at    timestamptz,                 -- backoff after 429/5xx
    failures           integer     NOT NULL DEFAULT 0,
    PRIMARY KEY (merchant_id, order_id, device_id),
    FOREIGN KEY (merchant_id, order_id) REFERENCES orders (merchant_id, order_id)
);

-- The worker's periodic look for activities near the 8-hour limit: running ones by start time.
CREATE INDEX activities_running ON activities (started_at) WHERE status IN ('active', 'starting');

-- Every push attempt and its APNs outcome; dead letters are the rows with outcome 'dead'.
CREATE TABLE deliveries (
    merchant_id   text        NOT NULL,
    order_id      text        NOT NULL,
    id            bigint      GENERATED ALWAYS AS IDENTITY,
    device_id     text        NOT NULL,
    seq           integer     NOT NULL,             -- newest transition the push carried
    merged        integer     NOT NULL DEFAULT 1,   -- transitions folded into this push
    event         text        NOT NULL,             -- start, update, end, alert
    token_kind    text        NOT NULL,             -- push-to-start, activity, device
    token_suffix  text        NOT NULL,             -- last 8 characters, never the whole token
    priority      smallint    NOT NULL,
    aps_timestamp bigint,
    alert_title   text,
    apns_id       uuid,
    status        smallint,                          -- HTTP status, NULL when it never got one
    reason        text,                              -- APNs reason or transport error
    outcome       text        NOT NULL CHECK (outcome IN ('sent', 'retry', 'dead', 'token_dead', 'rejected')),
    attempted_at  timestamptz NOT NULL DEFAULT now(),
    latency_ms    double precision,                  -- transition commit to APNs answer
    retried_at    timestamptz,                       -- an operator re-queued this dead letter
    PRIMARY KEY (merchant_id, order_id, id),
    FOREIGN KEY (merchant_id, order_id) REFERENCES orders (merchant_id, order_id)
);

CREATE INDEX deliveries_dead ON deliveries (attempted_at) WHERE outcome = 'dead' AND retried_at IS NULL;
