-- OrderFlow schema, version 2: merchants as tenants.
--
-- A merchant may bring its own APNs app (bundle id, team, key); without one its pushes go
-- through the worker's default app. Keys are stored encrypted (AES-GCM under the operator's
-- master key, which never reaches the database); API keys are stored as hashes only.

CREATE TABLE merchants (
    merchant_id  text        NOT NULL CHECK (length(merchant_id) BETWEEN 1 AND 200),
    name         text,
    created_at   timestamptz NOT NULL DEFAULT now(),
    -- What the workers last found about the merchant's pushes: 'ok', 'paused' (credentials or
    -- topic refused), 'throttled' (APNs answers 429). Said once in the log, shown by
    -- `orderflow merchant list`.
    push_status        text        NOT NULL DEFAULT 'ok' CHECK (push_status IN ('ok', 'paused', 'throttled')),
    push_status_reason text,
    push_status_since  timestamptz,
    push_status_until  timestamptz,
    PRIMARY KEY (merchant_id)
);

-- A merchant's own APNs app. One row per merchant: `set-apns` again replaces it (a key
-- rotation); `revision` tells workers to build a new client.
CREATE TABLE merchant_apps (
    merchant_id      text        NOT NULL REFERENCES merchants (merchant_id),
    bundle_id        text        NOT NULL,
    team_id          text        NOT NULL,
    key_id           text        NOT NULL,
    key_sealed       bytea       NOT NULL,        -- AES-GCM (nonce, ciphertext, tag) of the .p8 PEM
    key_fingerprint  text        NOT NULL,        -- SHA-256 of the public key, shortened: safe to show
    master_key_id    text        NOT NULL,        -- which master key sealed it (a digest, not the key)
    environment      text        NOT NULL CHECK (environment IN ('production', 'sandbox', 'custom')),
    endpoint_url     text,                        -- for 'custom': a stand-in's URL
    endpoint_ca      text,                        -- and its CA certificate (PEM)
    revision         integer     NOT NULL DEFAULT 1,
    updated_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (merchant_id)
);

-- The provider token (JWT) of each (team, key) in use, shared by every worker so that one
-- token is in use at a time: APNs answers 429 TooManyProviderTokenUpdates when several are
-- signed within 20 minutes. Sealed under a key derived from the signing key itself.
CREATE TABLE apns_provider_tokens (
    team_id      text        NOT NULL,
    key_id       text        NOT NULL,
    token_sealed bytea       NOT NULL,
    issued_at    timestamptz NOT NULL,
    PRIMARY KEY (team_id, key_id)
);

-- API keys for the HTTP API: the secret is shown once at creation; only its SHA-256 is kept.
CREATE TABLE merchant_api_keys (
    prefix        text        NOT NULL,           -- the public part, `of_live_<prefix>_…`
    merchant_id   text        NOT NULL REFERENCES merchants (merchant_id),
    name          text,
    secret_hash   bytea       NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    last_used_at  timestamptz,
    revoked_at    timestamptz,
    PRIMARY KEY (prefix)
);

CREATE INDEX merchant_api_keys_by_merchant ON merchant_api_keys (merchant_id, created_at);
