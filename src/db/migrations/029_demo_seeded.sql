-- What POST /api/demo/reset seeded (src/demo/reset.ts): a reset removes these clients and agents, and never the ones a
-- person made for the demo organisation in the portal or with the CLI (issue 42), whatever their names.
ALTER TABLE oauth_clients ADD COLUMN demo_seeded boolean NOT NULL DEFAULT false;
ALTER TABLE bridge_agents ADD COLUMN demo_seeded boolean NOT NULL DEFAULT false;

-- The demo's clients and agent seeded before this migration: a reset makes them in its one transaction, so they share
-- its start time (now(), their created_at); a client and an agent made one at a time, as the portal and the CLI make
-- them, never do.
UPDATE oauth_clients c SET demo_seeded = true
WHERE c.organization_id = 'org-demo'
  AND EXISTS (SELECT 1 FROM bridge_agents a WHERE a.organization_id = 'org-demo' AND a.created_at = c.created_at);
UPDATE bridge_agents a SET demo_seeded = true
WHERE a.organization_id = 'org-demo'
  AND EXISTS (SELECT 1 FROM oauth_clients c WHERE c.organization_id = 'org-demo' AND c.created_at = a.created_at);
