-- OrderFlow schema, version 7: each device's own credential for the app's door.
--
-- A device id is a string the merchant or the app picks (`anna-iphone`); an order's client
-- secret alone must not let one customer change another customer's device. A device registered
-- through the app's door (`POST /v1/devices`) gets a credential (`of_dev_…`) that later token,
-- follow and state calls for it must carry. As with API keys and board sessions, only the
-- credential's SHA-256 is stored; it is looked up by that hash before the device is known (the
-- app's `GET /v1/orders/{id}` names no device), hence the unique index.
--
-- Additive only: devices from before this version have no credential, and an older binary
-- never reads these columns.
ALTER TABLE devices
    ADD COLUMN credential_hash      bytea CHECK (credential_hash IS NULL OR length(credential_hash) = 32),
    ADD COLUMN credential_issued_at timestamptz,
    -- The order whose client secret registered the device (NULL: the merchant's key): an
    -- order's secret registers a few devices, not rows without end.
    ADD COLUMN registered_by_order  text;

CREATE INDEX devices_by_registering_order ON devices (merchant_id, registered_by_order) WHERE registered_by_order IS NOT NULL;

CREATE UNIQUE INDEX devices_by_credential ON devices (credential_hash) WHERE credential_hash IS NOT NULL;

-- An idempotency key names one creation per merchant: the same key sent again for another
-- order id is a conflict, not a second order. Keys reused so before this version keep their
-- first order; the later orders lose only the key (a retry of them is then a conflict too).
UPDATE orders o SET creation_key = NULL
WHERE o.creation_key IS NOT NULL
  AND EXISTS (SELECT 1 FROM orders f
              WHERE f.merchant_id = o.merchant_id AND f.creation_key = o.creation_key
                AND (f.created_at, f.order_id) < (o.created_at, o.order_id));
CREATE UNIQUE INDEX orders_by_creation_key ON orders (merchant_id, creation_key) WHERE creation_key IS NOT NULL;

-- The idempotency keys of calls that keep no exactly-once record of their own (applying a
-- workflow, retrying a dead letter): what the first use asked (a digest) and answered, so that
-- the same key again answers the same and the same key for another request is a conflict.
-- Creations and advances keep their keys on their own rows (orders, order_transitions). Kept
-- for a day, as payment APIs keep theirs.
CREATE TABLE request_keys (
    merchant_id      text        NOT NULL,
    idempotency_key  text        NOT NULL,
    operation        text        NOT NULL,
    request_digest   bytea       NOT NULL,
    result           jsonb       NOT NULL,
    created_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (merchant_id, idempotency_key)
);
CREATE INDEX request_keys_by_age ON request_keys (created_at);

-- Client-secret keys sealed under the operator's master key, as the APNs keys are, and
-- versioned so that a merchant's key can be rotated: a secret names its key's version (one
-- without a version is version 1), new secrets use the newest, and older versions verify until
-- they are retired. `key` holds a key only where no master key was given (its row says
-- master_key_id NULL); `orderflow master-key rotate` seals those too.
ALTER TABLE merchant_client_keys DROP CONSTRAINT merchant_client_keys_pkey;
ALTER TABLE merchant_client_keys
    ADD COLUMN version       integer NOT NULL DEFAULT 1 CHECK (version >= 1),
    ADD COLUMN key_sealed    bytea,
    ADD COLUMN master_key_id text,
    ALTER COLUMN key DROP NOT NULL,
    ADD CONSTRAINT merchant_client_keys_sealed_or_plain
        CHECK ((key IS NULL AND key_sealed IS NOT NULL AND master_key_id IS NOT NULL)
            OR (key IS NOT NULL AND key_sealed IS NULL AND master_key_id IS NULL)),
    ADD PRIMARY KEY (merchant_id, version);
