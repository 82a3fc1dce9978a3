-- A fetch made of several reads (a bulk export writes a file per type and per page) counts once per consent and
-- window against the consent's frequency: its reads carry the fetch's key (src/policy readFacts), and only the read
-- that records the key first is counted. Dropped with their window (consent-fetches-janitor).
CREATE TABLE consent_fetch_keys (
  consent_id   text        NOT NULL,
  window_start timestamptz NOT NULL,
  fetch_key    text        NOT NULL,
  PRIMARY KEY (consent_id, window_start, fetch_key)
);
CREATE INDEX consent_fetch_keys_window ON consent_fetch_keys (window_start);
