-- Bridge sync (issue 11): an agent belongs to its facility's organisation (whose patients it writes, and which
-- receives its events), and the answers to its batches are kept so that a resend gets the same answer.
ALTER TABLE bridge_agents ADD COLUMN organization_id text;

CREATE TABLE bridge_batches (
  agent_id     text        NOT NULL,
  batch_id     text        NOT NULL,
  content_hash text        NOT NULL,   -- SHA-256 of the batch's resources
  answer       jsonb       NOT NULL,
  created_at   timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (agent_id, batch_id)
);
