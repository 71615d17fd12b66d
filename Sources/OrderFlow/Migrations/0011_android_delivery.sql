-- OrderFlow schema, version 11: the worker delivers to Android phones through FCM.
--
-- An order's follower with an FCM registration token gets one data message per merged update,
-- beside (never instead of) whatever its APNs tokens get. Its progress on the Android side is
-- kept on the same `activities` row as the iPhone side's (one row per order and device), in
-- columns of its own, so that the purge and erasure that delete the row take it too.
--
-- Additive only: rows from before this version have sent nothing to Android (defaults), and an
-- older binary never reads these columns; its deliveries are iPhone ones ('ios' by default).
ALTER TABLE activities
    ADD COLUMN fcm_last_seq        integer NOT NULL DEFAULT 0,   -- newest transition FCM accepted
    ADD COLUMN fcm_last_pushed_at  timestamptz,
    ADD COLUMN fcm_next_attempt_at timestamptz,                  -- backoff after a refusal
    ADD COLUMN fcm_failures        integer NOT NULL DEFAULT 0,   -- at the bound: a dead letter
    ADD COLUMN fcm_ended_at        timestamptz;                  -- the end went out: nothing after it

-- Which service carried a delivery: 'ios' (APNs) or 'android' (FCM).
ALTER TABLE deliveries ADD COLUMN platform text NOT NULL DEFAULT 'ios';

-- One OAuth 2 access token per service account key, shared by every worker that sends with it
-- (as apns_provider_tokens is), sealed (AES-GCM) under a key derived from the account's private
-- key: only holders of the key can read it. Workers take it under an advisory lock; the first
-- that finds it due exchanges a new one.
CREATE TABLE fcm_access_tokens (
    client_email    text        NOT NULL,
    key_fingerprint text        NOT NULL,
    token_sealed    bytea       NOT NULL,
    expires_at      timestamptz NOT NULL,
    updated_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (client_email, key_fingerprint)
);
