import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import argon2 from 'argon2';
import { z } from 'zod';
import type { Database, Queryable } from '../db/database';
import { SCOPES, type Scope } from './scopes';

/**
 * Argon2id at OWASP's recommended minimum (19 MiB, 2 passes, 1 lane): client secrets are 256 random
 * bits, so the hash guards a leaked table, not a guessable password; higher costs would only slow
 * every token request. The parameters live in each PHC string, so raising them later keeps old hashes valid.
 */
const ARGON2_OPTIONS = { type: argon2.argon2id, memoryCost: 19_456, timeCost: 2, parallelism: 1 } as const;
/** Longer presented secrets are refused without hashing them (ours are 47 characters). */
const MAX_SECRET_LENGTH = 256;

/** Organisation and facility ids: opaque, URL- and header-safe. */
export const EntityId = z.string().regex(/^[A-Za-z0-9._:-]{1,64}$/, 'use 1-64 letters, digits, . _ : -');

export const NewClientInput = z.object({
  name: z.string().trim().min(1).max(200),
  organizationId: EntityId,
  facilityId: EntityId.optional(),
  scopes: z.array(z.enum(SCOPES)).min(1, 'give at least one scope'),
  /** Reads every patient's data without consent: for the deploying institution's own systems only. */
  allPatients: z.boolean().default(false),
});
export type NewClientInput = z.infer<typeof NewClientInput>;

/** A client as operators see it (never its secret). */
export interface ClientRecord {
  client_id: string;
  name: string;
  organization_id: string;
  facility_id: string | null;
  scopes: Scope[];
  /** Reads every patient without consent (an operator client of the deploying institution). */
  all_patients: boolean;
  created_at: string;
  revoked_at: string | null;
}

interface ClientRow extends Omit<ClientRecord, 'created_at' | 'revoked_at'> {
  secret_hash: string;
  created_at: Date | string;
  revoked_at: Date | string | null;
}

const COLUMNS = 'client_id, name, organization_id, facility_id, scopes, all_patients, created_at, revoked_at';

function toRecord(row: Omit<ClientRow, 'secret_hash'>): ClientRecord {
  return {
    client_id: row.client_id,
    name: row.name,
    organization_id: row.organization_id,
    facility_id: row.facility_id,
    scopes: row.scopes,
    all_patients: row.all_patients,
    created_at: new Date(row.created_at).toISOString(),
    revoked_at: row.revoked_at === null ? null : new Date(row.revoked_at).toISOString(),
  };
}

/** Creates a client; the returned secret is the only copy there will ever be. */
export async function createClient(db: Queryable, input: z.input<typeof NewClientInput>): Promise<ClientRecord & { client_secret: string }> {
  const valid = NewClientInput.parse(input);
  const clientId = `cli_${randomBytes(12).toString('hex')}`;
  const secret = `pcs_${randomBytes(32).toString('base64url')}`;
  const hash = await argon2.hash(secret, ARGON2_OPTIONS);
  const { rows } = await db.query<ClientRow>(
    `INSERT INTO oauth_clients (client_id, name, organization_id, facility_id, scopes, secret_hash, all_patients)
     VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING ${COLUMNS}`,
    [clientId, valid.name, valid.organizationId, valid.facilityId ?? null, [...new Set(valid.scopes)], hash, valid.allPatients],
  );
  return { ...toRecord(rows[0]!), client_secret: secret };
}

export async function listClients(db: Queryable): Promise<ClientRecord[]> {
  const { rows } = await db.query<ClientRow>(`SELECT ${COLUMNS} FROM oauth_clients ORDER BY created_at, client_id`);
  return rows.map(toRecord);
}

/** Revokes a client (idempotent); undefined when there is no such client. */
export async function revokeClient(db: Database, clientId: string): Promise<ClientRecord | undefined> {
  const { rows } = await db.query<ClientRow>(
    `UPDATE oauth_clients SET revoked_at = COALESCE(revoked_at, now()) WHERE client_id = $1 RETURNING ${COLUMNS}`,
    [clientId],
  );
  // This process's next request must be refused too: its client cache hears the trigger's NOTIFY first.
  await db.listenersCaughtUp();
  return rows[0] && toRecord(rows[0]);
}

/** A client that may act now. */
export interface ActiveClient {
  clientId: string;
  organizationId: string;
  facilityId?: string;
  scopes: Scope[];
  allPatients: boolean;
}

/** Every change to `oauth_clients` is announced here, by a trigger, with the client id (migration 014). */
export const CLIENT_CHANGES_CHANNEL = 'pont_client_changes';
/** Clients kept in memory per process; the oldest go first. */
const MAX_CACHED_CLIENTS = 10_000;

/**
 * Looks up clients and checks their secrets. Rows are cached in the process while it listens for
 * changes to the table (a trigger notifies each insert, update and delete, on every path: CLI, demo,
 * SQL by hand): a revocation reaches every process as soon as it commits. While the listening
 * connection is down, nothing is cached and every lookup reads the table.
 */
export class ClientDirectory {
  /** Verified against when the client is unknown, so that case costs what a wrong secret costs. */
  private decoyHash?: Promise<string>;
  /** client id -> row (null: no such client). Trusted only while `listening`. */
  private readonly rows = new Map<string, ClientRow | null>();
  /** client id -> HMAC of the secret that passed Argon2id in this process, under `secretKey`. */
  private readonly verifiedSecrets = new Map<string, Buffer>();
  private readonly secretKey = randomBytes(32);
  private listening = false;
  /** Bumped by every invalidation: a lookup that began before one must not fill the cache. */
  private generation = 0;
  private stopListening?: () => Promise<void>;

  constructor(private readonly db: Queryable) {}

  /** Starts hashing the decoy now, off the request path, and starts listening for changes (with a Database). */
  async warmUp(): Promise<void> {
    await this.decoy();
    const db = this.db as Partial<Database>;
    if (!db.listen) return;
    this.stopListening = await db.listen(CLIENT_CHANGES_CHANNEL, {
      notify: (clientId) => this.forget(clientId),
      ready: () => {
        this.forgetAll();
        this.listening = true;
      },
      lost: () => {
        this.listening = false;
        this.forgetAll();
      },
    });
  }

  async close(): Promise<void> {
    this.listening = false;
    await this.stopListening?.();
  }

  private forget(clientId: string): void {
    this.generation++;
    this.rows.delete(clientId);
    this.verifiedSecrets.delete(clientId);
  }

  private forgetAll(): void {
    this.generation++;
    this.rows.clear();
    this.verifiedSecrets.clear();
  }

  private decoy(): Promise<string> {
    return (this.decoyHash ??= argon2.hash(randomBytes(32).toString('base64url'), ARGON2_OPTIONS));
  }

  /** The client if it exists and is not revoked (checked on every request: revocation is immediate). */
  async active(clientId: string): Promise<ActiveClient | undefined> {
    const row = await this.row(clientId);
    return row && row.revoked_at === null ? toActive(row) : undefined;
  }

  /**
   * The client when `secret` is its secret and it is not revoked. Unknown client, revoked client and
   * wrong secret all run one Argon2id verification and give the same undefined. A secret that passed
   * once is recognised after that by a constant-time comparison of a keyed hash (until the client changes).
   */
  async authenticate(clientId: string, secret: string): Promise<ActiveClient | undefined> {
    const row = await this.row(clientId);
    if (secret.length > MAX_SECRET_LENGTH) return undefined;
    const live = row && row.revoked_at === null;
    const mac = createHmac('sha256', this.secretKey).update(secret, 'utf8').digest();
    const known = this.verifiedSecrets.get(clientId);
    if (live && known && timingSafeEqual(known, mac)) return toActive(row);
    const generation = this.generation;
    const matches = await argon2.verify(row?.secret_hash ?? (await this.decoy()), secret);
    if (!row || !matches || !live) return undefined;
    if (this.listening && generation === this.generation) this.remember(this.verifiedSecrets, clientId, mac);
    return toActive(row);
  }

  private async row(clientId: string): Promise<ClientRow | undefined> {
    if (clientId.length > 128) return undefined;
    if (this.listening && this.rows.has(clientId)) return this.rows.get(clientId) ?? undefined;
    const generation = this.generation;
    const { rows } = await this.db.query<ClientRow>(`SELECT ${COLUMNS}, secret_hash FROM oauth_clients WHERE client_id = $1`, [clientId]);
    if (this.listening && generation === this.generation) this.remember(this.rows, clientId, rows[0] ?? null);
    return rows[0];
  }

  private remember<V>(map: Map<string, V>, key: string, value: V): void {
    if (map.size >= MAX_CACHED_CLIENTS) map.delete(map.keys().next().value!);
    map.set(key, value);
  }
}

function toActive(row: ClientRow): ActiveClient {
  return {
    clientId: row.client_id,
    organizationId: row.organization_id,
    facilityId: row.facility_id ?? undefined,
    scopes: row.scopes,
    allPatients: row.all_patients,
  };
}
