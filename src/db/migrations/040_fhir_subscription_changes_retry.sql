-- A queued change the fan-out cannot number (its run fails: a bug, a bad row) is set aside and tried again later, so it
-- does not hold up the changes queued after it (src/subscriptions/fanout.ts). Until retry_at it is not taken.
ALTER TABLE fhir_subscription_changes ADD COLUMN attempts integer NOT NULL DEFAULT 0;
ALTER TABLE fhir_subscription_changes ADD COLUMN retry_at timestamptz;
ALTER TABLE fhir_subscription_changes ADD COLUMN error text;
