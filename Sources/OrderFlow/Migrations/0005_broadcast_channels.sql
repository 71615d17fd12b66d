-- OrderFlow schema, version 5: broadcast channels (iOS 18).
--
-- An order of a workflow with `audience: broadcast` is a shared event: APNs fans each update
-- out to every device subscribed to one channel. The engine writes the row (state `pending`)
-- in the order's creating transaction and never calls APNs there; the worker creates the
-- channel through the channel management API, stores its id, sends the order's merged updates
-- as broadcasts and deletes the channel after the end. The row is the channel's merge state,
-- like an `activities` row is one device's.
CREATE TABLE order_channels (
    merchant_id      text        NOT NULL,
    order_id         text        NOT NULL,
    -- APNs' message-storage-policy, fixed at creation: 0 stores nothing, 1 the newest message.
    storage_policy   smallint    NOT NULL CHECK (storage_policy IN (0, 1)),
    -- pending: no channel yet; open: created, broadcasts flow; ended: the end was accepted,
    -- the channel is deleted at delete_after; deleted: gone; failed: given up (see reason).
    state            text        NOT NULL DEFAULT 'pending'
                                 CHECK (state IN ('pending', 'open', 'ended', 'deleted', 'failed')),
    channel_id       text,                          -- APNs' id (base64), NULL until created
    bundle_id        text,                          -- the app the channel was created for
    generation       integer     NOT NULL DEFAULT 0, -- channels created (a lost one is recreated)
    last_seq         integer     NOT NULL DEFAULT 0, -- newest transition broadcast
    last_timestamp   bigint      NOT NULL DEFAULT 0, -- newest aps.timestamp broadcast (epoch s)
    last_pushed_at   timestamptz,
    next_attempt_at  timestamptz,                   -- backoff after 429/5xx
    failures         integer     NOT NULL DEFAULT 0,
    reason           text,                          -- the last refusal, for people
    delete_after     timestamptz,                   -- state ended: when the channel is deleted
    created_at       timestamptz NOT NULL DEFAULT now(),
    opened_at        timestamptz,
    deleted_at       timestamptz,
    PRIMARY KEY (merchant_id, order_id),
    FOREIGN KEY (merchant_id, order_id) REFERENCES orders (merchant_id, order_id)
);
