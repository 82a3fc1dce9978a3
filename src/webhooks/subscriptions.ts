import { randomBytes } from 'node:crypto';
import type { Database, Queryable } from '../db/database';
import type { EventType } from '../events/types';
import { encryptSecret, newWebhookSecret } from './secrets';

export interface SubscriptionInput {
  callback_url: string;
  subscribed_events: EventType[];
  description?: string;
}

export interface SubscriptionView {
  id: string;
  callback_url: string;
  subscribed_events: EventType[];
  description: string;
  status: 'active';
  /** Deliveries carry the event's full `data` (an operator switch); otherwise identifiers only. */
  full_payload: boolean;
  created_at: string;
}

export interface Owner {
  organizationId: string;
  facilityId?: string;
}

const LOOPBACK_HOST = /^(localhost|127(\.\d{1,3}){3}|\[::1\])$/i;

/**
 * Why a callback URL is refused, or undefined when it is acceptable: HTTPS always; plain HTTP
 * only to a loopback address, and only where the configuration allows it (never in production).
 */
export function callbackUrlProblem(raw: string, allowHttpLoopback: boolean): string | undefined {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return 'must be an absolute URL';
  }
  if (url.username || url.password) return 'must not carry credentials';
  if (url.hash) return 'must not have a #fragment';
  if (url.protocol === 'https:') return undefined;
  if (url.protocol === 'http:' && allowHttpLoopback) {
    return LOOPBACK_HOST.test(url.hostname) ? undefined : 'may use http:// only for a loopback address (localhost, 127.0.0.0/8, [::1])';
  }
  return 'must use https://';
}

interface SubscriptionRow {
  id: string;
  callback_url: string;
  subscribed_events: EventType[];
  description: string;
  full_payload: boolean;
  created_at: Date | string;
}

const view = (row: SubscriptionRow): SubscriptionView => ({
  id: row.id,
  callback_url: row.callback_url,
  subscribed_events: row.subscribed_events,
  description: row.description,
  status: 'active',
  full_payload: row.full_payload,
  created_at: new Date(row.created_at).toISOString(),
});

const COLUMNS = 'id, callback_url, subscribed_events, description, full_payload, created_at';

/** Rows that carry a FHIR Subscription's rest-hook deliveries (src/subscriptions) are that Subscription's, not webhooks of their own. */
const NOT_FHIR = 'NOT EXISTS (SELECT 1 FROM fhir_subscriptions f WHERE f.webhook_subscription_id = webhook_subscriptions.id)';

/** Creates a subscription; the secret is returned here, once, and stored only encrypted. */
export async function createSubscription(
  db: Queryable,
  secretKey: Buffer,
  owner: Owner,
  input: SubscriptionInput,
): Promise<SubscriptionView & { webhook_secret: string }> {
  const id = `whsub_${randomBytes(12).toString('hex')}`;
  const secret = newWebhookSecret();
  const { rows } = await db.query<SubscriptionRow>(
    `INSERT INTO webhook_subscriptions (id, organization_id, facility_id, callback_url, subscribed_events, description, secret_encrypted)
     VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING ${COLUMNS}`,
    [
      id,
      owner.organizationId,
      owner.facilityId ?? null,
      input.callback_url,
      [...new Set(input.subscribed_events)],
      input.description ?? '',
      encryptSecret(secretKey, id, secret),
    ],
  );
  return { ...view(rows[0]!), webhook_secret: secret };
}

/**
 * Gives a subscription a new signing secret, returned here, once, and stored only encrypted. Until
 * `previous_secret_expires_at` (now + `overlapSeconds`; none when 0) deliveries are signed with both secrets; a
 * secret replaced by an earlier rotation signs nothing more. Undefined when the organisation has no such active
 * subscription.
 */
export async function rotateSubscriptionSecret(
  db: Queryable,
  secretKey: Buffer,
  organizationId: string,
  subscriptionId: string,
  overlapSeconds: number,
): Promise<(SubscriptionView & { webhook_secret: string; previous_secret_expires_at: string | null }) | undefined> {
  const secret = newWebhookSecret();
  // The replaced ciphertext moves as it is: it was sealed to the subscription id, as the new one is.
  const { rows } = await db.query<SubscriptionRow & { previous_secret_expires_at: Date | string | null }>(
    `UPDATE webhook_subscriptions
     SET secret_encrypted = $3,
         previous_secret_encrypted = CASE WHEN $4::float8 > 0 THEN secret_encrypted END,
         previous_secret_expires_at = CASE WHEN $4::float8 > 0 THEN now() + make_interval(secs => $4::float8) END
     WHERE id = $1 AND organization_id = $2 AND deleted_at IS NULL AND ${NOT_FHIR}
     RETURNING ${COLUMNS}, previous_secret_expires_at`,
    [subscriptionId, organizationId, encryptSecret(secretKey, subscriptionId, secret), overlapSeconds],
  );
  const row = rows[0];
  if (!row) return undefined;
  const expires = row.previous_secret_expires_at;
  return { ...view(row), webhook_secret: secret, previous_secret_expires_at: expires === null ? null : new Date(expires).toISOString() };
}

export async function listSubscriptions(db: Database, organizationId: string): Promise<SubscriptionView[]> {
  const { rows } = await db.query<SubscriptionRow>(
    `SELECT ${COLUMNS} FROM webhook_subscriptions WHERE organization_id = $1 AND deleted_at IS NULL AND ${NOT_FHIR} ORDER BY created_at, id`,
    [organizationId],
  );
  return rows.map(view);
}

/** Unsubscribes and cancels its pending deliveries; false when the organisation has no such active subscription. */
export async function unsubscribe(db: Database, organizationId: string, subscriptionId: string): Promise<boolean> {
  return db.transaction(async (tx) => {
    const { rowCount } = await tx.query(
      `UPDATE webhook_subscriptions SET deleted_at = now() WHERE id = $1 AND organization_id = $2 AND deleted_at IS NULL AND ${NOT_FHIR}`,
      [subscriptionId, organizationId],
    );
    if (rowCount === 0) return false;
    await tx.query(
      `UPDATE webhook_deliveries SET status = 'cancelled', lease_token = NULL, next_attempt_at = NULL, updated_at = now()
       WHERE subscription_id = $1 AND status = 'pending'`,
      [subscriptionId],
    );
    return true;
  });
}

/** Operator switch (CLI): full event data in deliveries, or identifiers only. False when no such active subscription. */
export async function setFullPayload(db: Database, subscriptionId: string, on: boolean): Promise<boolean> {
  const { rowCount } = await db.query(
    `UPDATE webhook_subscriptions SET full_payload = $2 WHERE id = $1 AND deleted_at IS NULL AND ${NOT_FHIR}`,
    [subscriptionId, on],
  );
  return rowCount > 0;
}
