-- OrderFlow schema, version 10: Android devices and each merchant's Firebase project.
--
-- An Android phone follows orders as an iPhone does; what reaches it is an FCM data message
-- to its registration token (one per app install; it rotates, the newest replaces the old).
-- A merchant's FCM service account (its JSON key) is sealed under the master key as the APNs
-- keys are, bound to the merchant and the project; only the key's fingerprint is shown.
--
-- Additive only: devices from before this version have no FCM token, merchants no project,
-- and an older binary never reads these columns or this table.
ALTER TABLE devices
    ADD COLUMN fcm_token            text,
    ADD COLUMN fcm_token_updated_at timestamptz,
    -- Set when FCM answers UNREGISTERED: nothing more is sent to that token.
    ADD COLUMN fcm_token_invalid_at timestamptz;

CREATE TABLE merchant_fcm_apps (
    merchant_id      text        NOT NULL REFERENCES merchants (merchant_id),
    project_id       text        NOT NULL,
    client_email     text        NOT NULL,
    token_uri        text        NOT NULL,
    key_sealed       bytea       NOT NULL,        -- AES-GCM (nonce, ciphertext, tag) of the service account JSON
    key_fingerprint  text        NOT NULL,        -- SHA-256 of the private key, shortened: safe to show
    master_key_id    text        NOT NULL,        -- which master key sealed it (a digest, not the key)
    revision         integer     NOT NULL DEFAULT 1,
    updated_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (merchant_id)
);
