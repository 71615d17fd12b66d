-- OrderFlow schema: the counter board's staff sign-in (`GET /board`).
--
-- A sign-in link carries a one-time token; opening it consumes the token and starts a session,
-- kept in a cookie. Neither secret is stored: only its SHA-256, the key of its row (both tables
-- are read before the merchant is known, as API keys are by their prefix). Expired rows are
-- deleted whenever a new link is made.
CREATE TABLE board_sign_in_tokens (
    token_hash   bytea       NOT NULL CHECK (length(token_hash) = 32),
    merchant_id  text        NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    expires_at   timestamptz NOT NULL,
    PRIMARY KEY (token_hash)
);

CREATE TABLE board_sessions (
    session_hash  bytea       NOT NULL CHECK (length(session_hash) = 32),
    merchant_id   text        NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    expires_at    timestamptz NOT NULL,
    PRIMARY KEY (session_hash)
);
