import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import argon2 from 'argon2';
import { z } from 'zod';
import type { Database, Queryable } from '../db/database';
import { NotifiedCache, setBounded } from '../db/notified-cache';
import { SCOPES, type Scope } from '../core/scopes';
import { checkRegisteredJwks, parsePublicJwks, type PublicJwks } from './jwks';
import { callbackUrlProblem } from '../webhooks/subscriptions';
import { checkedAddress, DestinationRefused } from '../webhooks/destination';

/**
 * Argon2id at OWASP's recommended minimum (19 MiB, 2 passes, 1 lane): client secrets are 256 random
 * bits, so the hash guards a leaked table, not a guessable password; higher costs would only slow
 * every token request. The parameters live in each PHC string, so raising them later keeps old hashes valid.
 */
const ARGON2_OPTIONS = { type: argon2.argon2id, memoryCost: 19_456, timeCost: 2, parallelism: 1 } as const;
/** Longer presented secrets are refused without hashing them (ours are 47 characters). */
const MAX_SECRET_LENGTH = 256;

/** How long a replaced secret stays valid after a rotation, unless told otherwise; and the most it may. */
export const DEFAULT_SECRET_OVERLAP_SECONDS = 24 * 3600;
export const MAX_SECRET_OVERLAP_SECONDS = 30 * 24 * 3600;

/** The body of a secret rotation (client secrets and webhook signing secrets alike). */
export const SecretRotationRequest = z
  .object({
    overlap_seconds: z
      .number()
      .int()
      .min(0)
      .max(MAX_SECRET_OVERLAP_SECONDS)
      .default(DEFAULT_SECRET_OVERLAP_SECONDS)
      .describe('How long the replaced secret stays valid beside the new one: 0 ends it at once; default 86400 (24 h), at most 30 days'),
  })
  .strict()
  .meta({ id: 'SecretRotationRequest' });

const newSecret = () => `pcs_${randomBytes(32).toString('base64url')}`;

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

/** Longest jwks_uri accepted. */
const MAX_URL_LENGTH = 2048;

/**
 * A client that authenticates with signed assertions (SMART Backend Services): its public JWK Set, inline (only
 * RS384 and ES384 public keys, never private material) or at a jwks_uri (https://, to a public address; http://
 * to loopback only where `allowHttpLoopback`, i.e. development: the webhook destination rules). Parse it with
 * parseAsync (the keys are imported, the URL's name resolved).
 */
export const keyClientInput = (allowHttpLoopback: boolean) =>
  NewClientInput.extend({
    jwks: z
      .unknown()
      .optional()
      .transform(async (value, ctx) => {
        if (value === undefined) return undefined;
        const parsed = parsePublicJwks(value, { registration: true });
        const problem = typeof parsed === 'string' ? parsed : await checkRegisteredJwks(parsed);
        if (problem) ctx.addIssue({ code: 'custom', message: problem });
        return parsed as PublicJwks;
      }),
    jwksUri: z
      .string()
      .max(MAX_URL_LENGTH)
      .optional()
      .superRefine(async (url, ctx) => {
        if (url === undefined) return;
        const problem = callbackUrlProblem(url, allowHttpLoopback);
        if (problem) return ctx.addIssue({ code: 'custom', message: problem });
        // A name that does not resolve yet is checked again at each fetch.
        await checkedAddress(url, allowHttpLoopback, true).catch((err) => {
          if (!(err instanceof DestinationRefused)) throw err;
          ctx.addIssue({ code: 'custom', message: err.message });
        });
      }),
  }).refine((v) => (v.jwks === undefined) !== (v.jwksUri === undefined), { message: 'give the public keys either inline (--jwks) or by URL (--jwks-uri): one of the two', path: ['jwks'] });

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
  /** Until when the secret replaced by the last rotation is still accepted (null: no overlap). */
  previous_secret_expires_at: string | null;
  /** `client_secret` (a secret), or `private_key_jwt` (signed assertions checked against `jwks` or `jwks_uri`). */
  token_endpoint_auth_method: 'client_secret' | 'private_key_jwt';
  jwks: PublicJwks | null;
  jwks_uri: string | null;
}

interface ClientRow extends Omit<ClientRecord, 'created_at' | 'revoked_at' | 'previous_secret_expires_at' | 'token_endpoint_auth_method'> {
  secret_hash: string | null;
  previous_secret_hash: string | null;
  created_at: Date | string;
  revoked_at: Date | string | null;
  previous_secret_expires_at: Date | string | null;
}

const COLUMNS = 'client_id, name, organization_id, facility_id, scopes, all_patients, created_at, revoked_at, previous_secret_expires_at, jwks, jwks_uri';
const iso = (value: Date | string | null) => (value === null ? null : new Date(value).toISOString());

function toRecord(row: Omit<ClientRow, 'secret_hash' | 'previous_secret_hash'>): ClientRecord {
  return {
    client_id: row.client_id,
    name: row.name,
    organization_id: row.organization_id,
    facility_id: row.facility_id,
    scopes: row.scopes,
    all_patients: row.all_patients,
    created_at: new Date(row.created_at).toISOString(),
    revoked_at: iso(row.revoked_at),
    previous_secret_expires_at: iso(row.previous_secret_expires_at),
    token_endpoint_auth_method: row.jwks || row.jwks_uri ? 'private_key_jwt' : 'client_secret',
    jwks: row.jwks,
    jwks_uri: row.jwks_uri,
  };
}

/** Who made a client or an agent, when it is not a person: `demoSeeded`, the demo reset (which removes only those). */
export interface Origin {
  demoSeeded?: boolean;
}

/** Creates a client; the returned secret is the only copy there will ever be. */
export async function createClient(db: Queryable, input: z.input<typeof NewClientInput>, origin: Origin = {}): Promise<ClientRecord & { client_secret: string }> {
  const valid = NewClientInput.parse(input);
  const secret = newSecret();
  const record = await insertClient(db, valid, { secret_hash: await argon2.hash(secret, ARGON2_OPTIONS) }, origin);
  return { ...record, client_secret: secret };
}

export type KeyClientInput = z.output<ReturnType<typeof keyClientInput>>;

/** Creates a client (`keyClientInput` parsed) that authenticates with assertions signed by the keys of its JWK Set: it has no secret. */
export async function createKeyClient(db: Queryable, valid: KeyClientInput): Promise<ClientRecord> {
  return insertClient(db, valid, { jwks: valid.jwks ? JSON.stringify(valid.jwks) : null, jwks_uri: valid.jwksUri ?? null });
}

async function insertClient(
  db: Queryable,
  valid: NewClientInput,
  credential: { secret_hash?: string; jwks?: string | null; jwks_uri?: string | null },
  origin: Origin = {},
): Promise<ClientRecord> {
  const clientId = `cli_${randomBytes(12).toString('hex')}`;
  const { rows } = await db.query<ClientRow>(
    `INSERT INTO oauth_clients (client_id, name, organization_id, facility_id, scopes, all_patients, secret_hash, jwks, jwks_uri, demo_seeded)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) RETURNING ${COLUMNS}`,
    [
      clientId,
      valid.name,
      valid.organizationId,
      valid.facilityId ?? null,
      [...new Set(valid.scopes)],
      valid.allPatients,
      credential.secret_hash ?? null,
      credential.jwks ?? null,
      credential.jwks_uri ?? null,
      origin.demoSeeded === true,
    ],
  );
  return toRecord(rows[0]!);
}

export async function listClients(db: Queryable): Promise<ClientRecord[]> {
  const { rows } = await db.query<ClientRow>(`SELECT ${COLUMNS} FROM oauth_clients ORDER BY created_at, client_id`);
  return rows.map(toRecord);
}

/** One client (revoked or not), never its secret; undefined when there is no such client. */
export async function findClient(db: Queryable, clientId: string): Promise<ClientRecord | undefined> {
  const { rows } = await db.query<ClientRow>(`SELECT ${COLUMNS} FROM oauth_clients WHERE client_id = $1`, [clientId]);
  return rows[0] && toRecord(rows[0]);
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

export interface ClientSecretRotation {
  client_id: string;
  /** The new secret: the only copy there will ever be. */
  client_secret: string;
  /** Until when the replaced secret is still accepted; null when it was refused at once (overlap 0). */
  previous_secret_expires_at: string | null;
}

/**
 * Gives an active client a new secret. The secret it replaces stays valid `overlapSeconds` longer (0: refused
 * at once); a secret replaced by an earlier rotation, even within its overlap, is refused from now on. Both are
 * kept only as Argon2id hashes. Undefined when there is no such active client with a secret (a client of
 * signed assertions has none: its keys change at its jwks_uri, or by registering it anew). Tokens already issued stay
 * valid until they expire (revoke the client to cut them off).
 */
export async function rotateClientSecret(db: Queryable, clientId: string, overlapSeconds: number): Promise<ClientSecretRotation | undefined> {
  const secret = newSecret();
  const hash = await argon2.hash(secret, ARGON2_OPTIONS);
  const { rows } = await db.query<{ client_id: string; previous_secret_expires_at: Date | string | null }>(
    `UPDATE oauth_clients
     SET secret_hash = $2,
         previous_secret_hash = CASE WHEN $3::float8 > 0 THEN secret_hash END,
         previous_secret_expires_at = CASE WHEN $3::float8 > 0 THEN now() + make_interval(secs => $3::float8) END
     WHERE client_id = $1 AND revoked_at IS NULL AND secret_hash IS NOT NULL
     RETURNING client_id, previous_secret_expires_at`,
    [clientId, hash, overlapSeconds],
  );
  const row = rows[0];
  return row && { client_id: row.client_id, client_secret: secret, previous_secret_expires_at: iso(row.previous_secret_expires_at) };
}

/**
 * How the keys of a client registered with a key set are rotated (it has no secret to rotate): at its jwks_uri, by
 * publishing the new key beside the old; an inline set, only by registering the client again, which `registerAgain`
 * says for its reader (the operator's command line, the portal's people). `how` is what to do, one clause (the portal's
 * clients page shows it); `more`, why it works and what comes after. Undefined for a client with a secret.
 */
export function keyRotation(
  client: Pick<ClientRecord, 'jwks' | 'jwks_uri'>,
  registerAgain: string,
): { keySet: string; how: string; more?: string } | undefined {
  if (client.jwks_uri) {
    return {
      keySet: `a key set (jwks_uri ${client.jwks_uri})`,
      how: `publish the new key (a new kid) at ${client.jwks_uri} beside the old one`,
      more: 'Pont reads the set again when an assertion names a kid it has not seen. Remove the old key once the client signs with the new one.',
    };
  }
  if (client.jwks) return { keySet: 'a key set (inline JWKS)', how: registerAgain };
  return undefined;
}

/**
 * Why a client registered with a key set has no secret to rotate, and how its keys are rotated instead (the answer of
 * `pont clients rotate-secret` and of the portal's rotation); undefined for a client with a secret.
 */
export function noSecretToRotate(client: Pick<ClientRecord, 'client_id' | 'jwks' | 'jwks_uri'>, registerAgain: string): string | undefined {
  const keys = keyRotation(client, registerAgain);
  if (!keys) return undefined;
  return `Client ${client.client_id} is registered with ${keys.keySet}, not a secret: it has no secret to rotate. To rotate its keys, ${keys.how}${keys.more ? `: ${keys.more}` : ''}`;
}

/** A client that may act now. */
export interface ActiveClient {
  clientId: string;
  organizationId: string;
  facilityId?: string;
  scopes: Scope[];
  allPatients: boolean;
  /** A client of signed assertions: its public keys, inline or at a URL (one of the two). */
  keys?: { jwks?: PublicJwks; jwksUri?: string };
}

/** Every change to `oauth_clients` is announced here, by a trigger, with the client id (migration 014). */
export const CLIENT_CHANGES_CHANNEL = 'pont_client_changes';
/** Clients kept in memory per process; the oldest go first. */
const MAX_CACHED_CLIENTS = 10_000;

/** The secrets of a client that passed Argon2id in this process: HMACs under the directory's key. */
interface VerifiedSecrets {
  current?: Buffer;
  previous?: Buffer;
}

/**
 * Looks up clients and checks their secrets. Rows are cached in the process while it listens for
 * changes to the table (a trigger notifies each insert, update and delete, on every path: CLI, demo,
 * SQL by hand): a revocation reaches every process as soon as it commits. While the listening
 * connection is down, nothing is cached and every lookup reads the table.
 */
export class ClientDirectory {
  /** Verified against when the client is unknown, so that case costs what a wrong secret costs. */
  private decoyHash?: Promise<string>;
  /** client id -> row (null: no such client); its invalidations also forget what is kept beside it. */
  private readonly rows = new NotifiedCache<ClientRow | null>(MAX_CACHED_CLIENTS, (clientId) => {
    if (clientId === undefined) this.verifiedSecrets.clear();
    else this.verifiedSecrets.delete(clientId);
  });
  /** client id -> HMACs of the secrets that passed Argon2id in this process, under `secretKey`. */
  private readonly verifiedSecrets = new Map<string, VerifiedSecrets>();
  private readonly secretKey = randomBytes(32);

  /**
   * @param now the clock (ms since the epoch) that ends a rotation's overlap; tests move it.
   */
  constructor(
    private readonly db: Queryable,
    public now: () => number = Date.now,
  ) {}

  /** Starts hashing the decoy now, off the request path, and starts listening for changes (with a Database). */
  async warmUp(): Promise<void> {
    await this.decoy();
    const db = this.db as Partial<Database>;
    if (db.listen) await this.rows.listen(db as Database, CLIENT_CHANGES_CHANNEL);
  }

  async close(): Promise<void> {
    await this.rows.close();
  }

  /**
   * Called in a transaction that changes the client (a rotation), before it commits: the client is forgotten
   * and not cached again until this process hears the change announced, so that its very next request after
   * the commit reads the new row (the answer may reach the caller before the announcement reaches us).
   */
  changing(clientId: string): void {
    this.rows.changing(clientId);
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
   * The client when `secret` is its secret, or its previous secret within a rotation's overlap, and it is
   * not revoked. Unknown client, revoked client and wrong secret all run one Argon2id verification and give
   * the same undefined (during an overlap, a secret that is not the new one is checked against the previous
   * one too). A secret that passed once is recognised after that by a constant-time comparison of a keyed
   * hash (until the client changes; the previous secret's only until its overlap ends).
   */
  async authenticate(clientId: string, secret: string): Promise<ActiveClient | undefined> {
    const row = await this.row(clientId);
    if (secret.length > MAX_SECRET_LENGTH) return undefined;
    const live = row !== undefined && row.revoked_at === null;
    const previousLive =
      live && row.previous_secret_hash !== null && row.previous_secret_expires_at !== null && new Date(row.previous_secret_expires_at).getTime() > this.now();
    const mac = createHmac('sha256', this.secretKey).update(secret, 'utf8').digest();
    const known = this.verifiedSecrets.get(clientId);
    if (live && known?.current && timingSafeEqual(known.current, mac)) return toActive(row);
    if (previousLive && known?.previous && timingSafeEqual(known.previous, mac)) return toActive(row);
    const since = this.rows.since();
    let which: keyof VerifiedSecrets | undefined;
    if (await argon2.verify(row?.secret_hash ?? (await this.decoy()), secret)) which = 'current';
    else if (previousLive && (await argon2.verify(row.previous_secret_hash!, secret))) which = 'previous';
    if (!row || !which || !live) return undefined;
    if (this.rows.fresh(clientId, since)) setBounded(this.verifiedSecrets, clientId, { ...this.verifiedSecrets.get(clientId), [which]: mac }, MAX_CACHED_CLIENTS);
    return toActive(row);
  }

  private async row(clientId: string): Promise<ClientRow | undefined> {
    if (clientId.length > 128) return undefined;
    if (this.rows.has(clientId)) return this.rows.get(clientId) ?? undefined;
    const since = this.rows.since();
    const { rows } = await this.db.query<ClientRow>(`SELECT ${COLUMNS}, secret_hash, previous_secret_hash FROM oauth_clients WHERE client_id = $1`, [clientId]);
    this.rows.set(clientId, rows[0] ?? null, since);
    return rows[0];
  }

  /** An organisation's clients (revoked ones too), each with when it last got a token: the developer portal's list. */
  async ofOrganization(organizationId: string): Promise<Array<ClientRecord & { last_used_at: string | null }>> {
    const { rows } = await this.db.query<ClientRow & { last_used_at: Date | string | null }>(
      `SELECT ${COLUMNS.split(', ').map((c) => `c.${c}`).join(', ')}, u.last_used_at FROM oauth_clients c LEFT JOIN oauth_client_usage u USING (client_id)
       WHERE c.organization_id = $1 ORDER BY c.created_at DESC, c.client_id`,
      [organizationId],
    );
    return rows.map((row) => ({ ...toRecord(row), last_used_at: iso(row.last_used_at) }));
  }

  /** The organisation's client, or undefined (another organisation's is answered as missing). */
  async ofOrganizationById(organizationId: string, clientId: string): Promise<ClientRecord | undefined> {
    const row = await this.row(clientId);
    return row && row.organization_id === organizationId ? toRecord(row) : undefined;
  }

  /** Revokes the organisation's client (idempotent); false when it has no such client. Refused in this process at once. */
  async revokeOf(organizationId: string, clientId: string): Promise<boolean> {
    const { rowCount } = await this.db.query('UPDATE oauth_clients SET revoked_at = COALESCE(revoked_at, now()) WHERE client_id = $1 AND organization_id = $2', [
      clientId,
      organizationId,
    ]);
    await (this.db as Partial<Database>).listenersCaughtUp?.(); // this process's cache hears the change before we answer
    return rowCount > 0;
  }

  /** Notes that the client just got a token (the portal shows when each client was last used). */
  async recordUse(clientId: string): Promise<void> {
    await this.db.query(
      `INSERT INTO oauth_client_usage (client_id, last_used_at) VALUES ($1, now()) ON CONFLICT (client_id) DO UPDATE SET last_used_at = now()`,
      [clientId],
    );
  }
}

function toActive(row: ClientRow): ActiveClient {
  return {
    clientId: row.client_id,
    organizationId: row.organization_id,
    facilityId: row.facility_id ?? undefined,
    scopes: row.scopes,
    allPatients: row.all_patients,
    ...(row.jwks || row.jwks_uri ? { keys: { jwks: row.jwks ?? undefined, jwksUri: row.jwks_uri ?? undefined } } : {}),
  };
}
