import { createPrivateKey, createPublicKey, generateKeyPair, type JsonWebKey, type KeyObject } from 'node:crypto';
import { promisify } from 'node:util';
import { calculateJwkThumbprint, type JWK } from 'jose';
import type { Database, Queryable } from '../db/database';

/** Seconds an access token lives (sections 2.5 and 8). */
export const TOKEN_LIFETIME_SECONDS = 3600;
/** A retired key stays published this much longer than its last token could live (clock skew, in-flight signing). */
const RETIREMENT_GRACE_SECONDS = 60;
/** Serialises key creation and rotation across processes. */
const KEY_LOCK = 727275;

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

async function insertKey(tx: Queryable): Promise<string> {
  const row = await newKeyRow();
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
 * `pont keys rotate`: a new key signs from now on; the previous one stops signing but stays in the
 * JWKS until the tokens it signed have expired.
 */
export async function rotateSigningKey(db: Database): Promise<Rotation> {
  return db.transaction(async (tx) => {
    await tx.query('SELECT pg_advisory_xact_lock($1)', [KEY_LOCK]);
    const retired = await tx.query<{ kid: string; retired_at: Date | string }>(
      'UPDATE signing_keys SET retired_at = now() WHERE retired_at IS NULL RETURNING kid, retired_at',
    );
    const kid = await insertKey(tx);
    return {
      kid,
      retired: retired.rows.map((r) => ({ kid: r.kid, published_until: publishedUntil(r.retired_at)!.toISOString() })),
    };
  });
}

function publishedUntil(retiredAt: Date | string | null): Date | undefined {
  if (retiredAt === null) return undefined;
  return new Date(new Date(retiredAt).getTime() + (TOKEN_LIFETIME_SECONDS + RETIREMENT_GRACE_SECONDS) * 1000);
}

const PUBLISHED = `retired_at IS NULL OR retired_at > now() - make_interval(secs => ${TOKEN_LIFETIME_SECONDS + RETIREMENT_GRACE_SECONDS})`;

export interface KeyListing {
  kid: string;
  created_at: string;
  status: 'signing' | 'published' | 'expired';
  published_until: string | null;
}

/** `pont keys list`: every key, newest first. */
export async function listSigningKeys(db: Queryable): Promise<KeyListing[]> {
  const { rows } = await db.query<KeyRow>('SELECT kid, created_at, retired_at FROM signing_keys ORDER BY created_at DESC');
  const now = Date.now();
  return rows.map((r) => {
    const until = publishedUntil(r.retired_at);
    return {
      kid: r.kid,
      created_at: new Date(r.created_at).toISOString(),
      status: !until ? 'signing' : until.getTime() > now ? 'published' : 'expired',
      published_until: until?.toISOString() ?? null,
    };
  });
}

/** Kids are RFC 7638 thumbprints (base64url SHA-256): anything else cannot be ours. */
const KID = /^[A-Za-z0-9_-]{43}$/;

/**
 * The key set as this process sees it. Nothing is cached that could go stale across processes:
 * the signing key is looked up at each issuance (rotation elsewhere takes effect at once), and a
 * kid not seen before is looked up in the database. Parsed keys are cached by kid (they never change).
 */
export class KeyStore {
  private readonly privateKeys = new Map<string, KeyObject>();
  private readonly publicKeys = new Map<string, KeyObject>();

  constructor(private readonly db: Database) {}

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

  /**
   * The public key for `kid` if it is published, else undefined. Once cached it stays: a key leaves
   * the JWKS only after every token it signed has expired, so it cannot verify a live token anyway.
   */
  async verificationKey(kid: unknown): Promise<KeyObject | undefined> {
    if (typeof kid !== 'string' || !KID.test(kid)) return undefined;
    const cached = this.publicKeys.get(kid);
    if (cached) return cached;
    const { rows } = await this.db.query<Pick<KeyRow, 'public_jwk'>>(
      `SELECT public_jwk FROM signing_keys WHERE kid = $1 AND (${PUBLISHED})`,
      [kid],
    );
    if (!rows[0]) return undefined;
    const key = createPublicKey({ key: rows[0].public_jwk as unknown as JsonWebKey, format: 'jwk' });
    this.publicKeys.set(kid, key);
    return key;
  }

  /** The JWKS document (section 2.7): the signing key and retired keys whose tokens may still be live. */
  async jwks(): Promise<{ keys: PublishedJwk[] }> {
    const { rows } = await this.db.query<Pick<KeyRow, 'public_jwk'>>(
      `SELECT public_jwk FROM signing_keys WHERE ${PUBLISHED} ORDER BY created_at DESC`,
    );
    return { keys: rows.map((r) => r.public_jwk) };
  }
}
