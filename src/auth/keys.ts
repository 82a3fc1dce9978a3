import { createPrivateKey, createPublicKey, generateKeyPair, type JsonWebKey, type KeyObject } from 'node:crypto';
import { promisify } from 'node:util';
import { calculateJwkThumbprint, type JWK } from 'jose';
import type { Database, Queryable } from '../db/database';
import { NotifiedCache } from '../db/notified-cache';

/** Seconds an access token lives (sections 2.5 and 8). */
export const TOKEN_LIFETIME_SECONDS = 3600;
/** A retired key stays published this much longer than its last token could live (clock skew, in-flight signing). */
const RETIREMENT_GRACE_SECONDS = 60;
/** Serialises key creation and rotation across processes. */
const KEY_LOCK = 727275;
/** Every change to `signing_keys` is announced here, by a trigger, with the kid (migration 019). */
export const KEY_CHANGES_CHANNEL = 'pont_key_changes';
/** Key states kept in memory per process (unknown kids included); the oldest go first. */
const MAX_CACHED_KEYS = 1000;

/** A public key as published in the JWKS (section 2.7). */
export interface PublishedJwk {
  kty: 'RSA';
  use: 'sig';
  alg: 'RS256';
  kid: string;
  n: string;
  e: string;
}

export interface SigningKey {
  kid: string;
  privateKey: KeyObject;
}

interface KeyRow {
  kid: string;
  public_jwk: PublishedJwk;
  private_pem: string;
  created_at: Date | string;
  retired_at: Date | string | null;
  revoked_at: Date | string | null;
}

const generateRsa = promisify(generateKeyPair);

async function newKeyRow(): Promise<Pick<KeyRow, 'kid' | 'public_jwk' | 'private_pem'>> {
  const { publicKey, privateKey } = await generateRsa('rsa', { modulusLength: 2048, publicExponent: 0x10001 });
  const { n, e } = publicKey.export({ format: 'jwk' }) as JWK;
  const kid = await calculateJwkThumbprint({ kty: 'RSA', n, e });
  return {
    kid,
    public_jwk: { kty: 'RSA', use: 'sig', alg: 'RS256', kid, n: n!, e: e! },
    private_pem: privateKey.export({ format: 'pem', type: 'pkcs8' }).toString(),
  };
}

async function insertKey(tx: Queryable, row?: Awaited<ReturnType<typeof newKeyRow>>): Promise<string> {
  row ??= await newKeyRow();
  await tx.query('INSERT INTO signing_keys (kid, public_jwk, private_pem) VALUES ($1, $2, $3)', [
    row.kid,
    JSON.stringify(row.public_jwk),
    row.private_pem,
  ]);
  return row.kid;
}

/** Creates the first signing key unless one is active (safe when several processes start at once). */
export async function ensureSigningKey(db: Database): Promise<void> {
  const { rowCount } = await db.query('SELECT 1 FROM signing_keys WHERE retired_at IS NULL');
  if (rowCount > 0) return;
  await db.transaction(async (tx) => {
    await tx.query('SELECT pg_advisory_xact_lock($1)', [KEY_LOCK]);
    const again = await tx.query('SELECT 1 FROM signing_keys WHERE retired_at IS NULL');
    if (again.rowCount === 0) await insertKey(tx);
  });
}

export interface Rotation {
  kid: string;
  retired: Array<{ kid: string; published_until: string }>;
}

/**
 * `pont keys rotate`: a new key signs from now on; the previous one stops signing at once and stays in the
 * JWKS until the tokens it signed have expired. A token of the old key dated after its retirement is refused
 * (KeyStore.accepts): whoever holds the old private key cannot sign new tokens with it.
 */
export async function rotateSigningKey(db: Database): Promise<Rotation> {
  const next = await newKeyRow(); // before the transaction: the switch itself takes no time
  const rotation = await db.transaction(async (tx) => {
    await tx.query('SELECT pg_advisory_xact_lock($1)', [KEY_LOCK]);
    return retireAndReplace(tx, next);
  });
  await db.listenersCaughtUp(); // this process's key cache has heard the change
  return rotation;
}

/**
 * Retires the signing key and inserts `next`. The retirement is stamped with the clock at this statement (not
 * the transaction's start), and tokens are dated before their key is read (TokenService.issue): a token the old
 * key signed while it was the signing key is never dated after its retirement.
 */
async function retireAndReplace(tx: Queryable, next: Awaited<ReturnType<typeof newKeyRow>>): Promise<Rotation> {
  const retired = await tx.query<{ kid: string; retired_at: Date | string }>(
    'UPDATE signing_keys SET retired_at = clock_timestamp() WHERE retired_at IS NULL RETURNING kid, retired_at',
  );
  const kid = await insertKey(tx, next);
  return {
    kid,
    retired: retired.rows.map((r) => ({ kid: r.kid, published_until: publishedUntil(r.retired_at)!.toISOString() })),
  };
}

export interface Revocation {
  kid: string;
  revoked_at: string;
  /** When the revoked key was the signing key: the key that signs in its place. */
  signing_kid?: string;
}

/**
 * `pont keys revoke KID`: withdraws a key at once (a compromised one): every token it signed is refused at the
 * next request, in every process (they hear the change through pont_key_changes), and it leaves the JWKS.
 * Revoking the signing key rotates first, in the same transaction, so that tokens can still be issued.
 * Revoking a revoked key changes nothing. Undefined for an unknown kid.
 */
export async function revokeSigningKey(db: Database, kid: string): Promise<Revocation | undefined> {
  const next = await newKeyRow();
  const revocation = await db.transaction(async (tx) => {
    await tx.query('SELECT pg_advisory_xact_lock($1)', [KEY_LOCK]);
    const { rows } = await tx.query<Pick<KeyRow, 'retired_at' | 'revoked_at'>>('SELECT retired_at, revoked_at FROM signing_keys WHERE kid = $1', [kid]);
    if (!rows[0]) return undefined;
    if (rows[0].revoked_at !== null) return { kid, revoked_at: new Date(rows[0].revoked_at).toISOString() };
    const rotation = rows[0].retired_at === null ? await retireAndReplace(tx, next) : undefined;
    const revoked = await tx.query<{ revoked_at: Date | string }>('UPDATE signing_keys SET revoked_at = clock_timestamp() WHERE kid = $1 RETURNING revoked_at', [kid]);
    return { kid, revoked_at: new Date(revoked.rows[0]!.revoked_at).toISOString(), ...(rotation ? { signing_kid: rotation.kid } : {}) };
  });
  await db.listenersCaughtUp(); // this process refuses the key's tokens from its very next request
  return revocation;
}

function publishedUntil(retiredAt: Date | string | null): Date | undefined {
  if (retiredAt === null) return undefined;
  return new Date(new Date(retiredAt).getTime() + (TOKEN_LIFETIME_SECONDS + RETIREMENT_GRACE_SECONDS) * 1000);
}

/** In the JWKS: the signing key, and retired keys whose tokens may still be live; never a revoked key. */
const PUBLISHED = `revoked_at IS NULL AND (retired_at IS NULL OR retired_at > now() - make_interval(secs => ${TOKEN_LIFETIME_SECONDS + RETIREMENT_GRACE_SECONDS}))`;

export interface KeyListing {
  kid: string;
  created_at: string;
  status: 'signing' | 'published' | 'expired' | 'revoked';
  published_until: string | null;
  revoked_at: string | null;
}

/** `pont keys list`: every key, newest first. */
export async function listSigningKeys(db: Queryable): Promise<KeyListing[]> {
  const { rows } = await db.query<KeyRow>('SELECT kid, created_at, retired_at, revoked_at FROM signing_keys ORDER BY created_at DESC');
  const now = Date.now();
  return rows.map((r) => {
    const until = r.revoked_at === null ? publishedUntil(r.retired_at) : new Date(r.revoked_at);
    return {
      kid: r.kid,
      created_at: new Date(r.created_at).toISOString(),
      status: r.revoked_at !== null ? 'revoked' : !until ? 'signing' : until.getTime() > now ? 'published' : 'expired',
      published_until: until?.toISOString() ?? null,
      revoked_at: r.revoked_at === null ? null : new Date(r.revoked_at).toISOString(),
    };
  });
}

/** Kids are RFC 7638 thumbprints (base64url SHA-256): anything else cannot be ours. */
const KID = /^[A-Za-z0-9_-]{43}$/;

/** What verification needs of a key: its public key and whether (and since when) it may verify. */
interface KeyState {
  publicKey: KeyObject;
  /** Epoch seconds (rounded down) at which it stopped signing; undefined while it signs. */
  retiredAt?: number;
  /** Epoch ms until which it is published (undefined: signing). */
  publishedUntil?: number;
  revoked: boolean;
}

/**
 * The key set as this process sees it. The signing key is looked up at each issuance (rotation elsewhere takes
 * effect at once). The state of a key (retired, revoked) is cached while the process listens for changes to
 * the table (a trigger notifies each one, on every path: CLI, SQL by hand), so a revocation reaches every
 * process as soon as it commits; while the listening connection is down, every lookup reads the table.
 */
export class KeyStore {
  private readonly privateKeys = new Map<string, KeyObject>();
  /** kid -> state (null: no such key). */
  private readonly states = new NotifiedCache<KeyState | null>(MAX_CACHED_KEYS);
  private started?: Promise<void>;

  constructor(private readonly db: Database) {}

  /** Starts listening for key changes (also done on first use). */
  warmUp(): Promise<void> {
    return (this.started ??= this.states.listen(this.db, KEY_CHANGES_CHANNEL).catch(
      () => undefined, // not listening: nothing is cached, every lookup reads the table
    ));
  }

  async close(): Promise<void> {
    await this.started;
    await this.states.close();
  }

  /** The key that signs new tokens. */
  async signingKey(): Promise<SigningKey> {
    const { rows } = await this.db.query<Pick<KeyRow, 'kid' | 'private_pem'>>(
      'SELECT kid, private_pem FROM signing_keys WHERE retired_at IS NULL',
    );
    const row = rows[0];
    if (!row) throw new Error('No active signing key (the service creates one at start)');
    let privateKey = this.privateKeys.get(row.kid);
    if (!privateKey) {
      privateKey = createPrivateKey(row.private_pem);
      this.privateKeys.set(row.kid, privateKey);
    }
    return { kid: row.kid, privateKey };
  }

  private async state(kid: string): Promise<KeyState | undefined> {
    await this.warmUp();
    if (this.states.has(kid)) return this.states.get(kid) ?? undefined;
    const since = this.states.since();
    const { rows } = await this.db.query<Pick<KeyRow, 'public_jwk' | 'retired_at' | 'revoked_at'>>(
      'SELECT public_jwk, retired_at, revoked_at FROM signing_keys WHERE kid = $1',
      [kid],
    );
    const row = rows[0];
    const state: KeyState | null = row
      ? {
          publicKey: createPublicKey({ key: row.public_jwk as unknown as JsonWebKey, format: 'jwk' }),
          retiredAt: row.retired_at === null ? undefined : Math.floor(new Date(row.retired_at).getTime() / 1000),
          publishedUntil: publishedUntil(row.retired_at)?.getTime(),
          revoked: row.revoked_at !== null,
        }
      : null;
    this.states.set(kid, state, since);
    return state ?? undefined;
  }

  /** The public key for `kid` if it is published (not revoked, not past its publication), else undefined. */
  async verificationKey(kid: unknown): Promise<KeyObject | undefined> {
    if (typeof kid !== 'string' || !KID.test(kid)) return undefined;
    const state = await this.state(kid);
    if (!state || state.revoked || (state.publishedUntil !== undefined && state.publishedUntil <= Date.now())) return undefined;
    return state.publicKey;
  }

  /**
   * Whether a token that `kid` signed, dated `iat`, may be accepted now: the key is not revoked, and it was the
   * signing key at `iat` (a token dated after its retirement was not signed by us). Checked on every request,
   * cached tokens included.
   */
  async accepts(kid: string, iat: number): Promise<boolean> {
    const state = KID.test(kid) ? await this.state(kid) : undefined;
    return !!state && !state.revoked && (state.retiredAt === undefined || iat <= state.retiredAt);
  }

  /** The JWKS document (section 2.7): the signing key and retired keys whose tokens may still be live. */
  async jwks(): Promise<{ keys: PublishedJwk[] }> {
    const { rows } = await this.db.query<Pick<KeyRow, 'public_jwk'>>(
      `SELECT public_jwk FROM signing_keys WHERE ${PUBLISHED} ORDER BY created_at DESC`,
    );
    return { keys: rows.map((r) => r.public_jwk) };
  }
}
