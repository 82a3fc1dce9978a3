import { createLocalJWKSet, decodeJwt, decodeProtectedHeader, errors, jwtVerify, type JWTHeaderParameters, type JWTPayload } from 'jose';
import { fetch } from 'undici';
import type { Database, Queryable } from '../db/database';
import type { BackgroundWorker } from '../jobs';
import { periodicJob } from '../jobs';
import type { Logger } from '../log';
import { checkedAddress, DestinationRefused, pinnedAgent } from '../webhooks/destination';
import { callbackUrlProblem } from '../webhooks/subscriptions';
import type { ActiveClient, ClientDirectory } from './clients';
import { ASSERTION_ALGORITHMS, parsePublicJwks, type PublicJwks } from './jwks';

/**
 * SMART Backend Services client authentication (SMART App Launch 2.x, client-confidential-asymmetric; RFC 7523):
 * a client registered with a public JWK Set proves itself at the token endpoint with a JWT it signed.
 */
export const ASSERTION_TYPE = 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer';
/** SMART: `exp` no more than five minutes in the future. */
export const MAX_ASSERTION_LIFETIME_SECONDS = 300;
/** Leeway for the client's clock, on `exp`, `nbf` and the five minutes. */
const CLOCK_TOLERANCE_SECONDS = 5;
const MAX_ASSERTION_LENGTH = 16_384;
const MAX_JTI_LENGTH = 255;
/** A fetched JWK Set larger than this is refused (the key count: src/auth/jwks.ts). */
const MAX_JWKS_BYTES = 64 * 1024;
/** A jwks_uri answer is kept this long; a kid it lacks fetches it again, at most once per cooldown. */
export const JWKS_CACHE_MS = 5 * 60_000;
const JWKS_REFETCH_COOLDOWN_MS = 30_000;
const JWKS_FETCH_TIMEOUT_MS = 5000;
const MAX_CACHED_SETS = 1000;

/** Why an assertion is refused: the token endpoint answers 401 invalid_client with this description. */
export class AssertionRefused extends Error {}

/** GET a client's jwks_uri: through the outbound guard (src/webhooks/destination.ts), bounded in time and size, no redirect. */
async function fetchJwks(url: string, allowHttpLoopback: boolean): Promise<PublicJwks> {
  const problem = callbackUrlProblem(url, allowHttpLoopback);
  if (problem) throw new AssertionRefused(`the client's jwks_uri ${problem}`);
  let target: { address: string; family: 4 | 6 };
  try {
    target = (await checkedAddress(url, allowHttpLoopback))!;
  } catch (err) {
    if (err instanceof DestinationRefused) throw new AssertionRefused(`the client's jwks_uri is refused: ${err.message}`);
    throw err;
  }
  const agent = pinnedAgent(target.address, target.family);
  try {
    const response = await fetch(url, { dispatcher: agent, redirect: 'manual', headers: { accept: 'application/json' }, signal: AbortSignal.timeout(JWKS_FETCH_TIMEOUT_MS) });
    if (response.status !== 200) {
      await response.body?.cancel().catch(() => undefined);
      throw new AssertionRefused(`the client's jwks_uri answered HTTP ${response.status}`);
    }
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const chunk of response.body ?? []) {
      size += (chunk as Uint8Array).length;
      if (size > MAX_JWKS_BYTES) throw new AssertionRefused(`the client's jwks_uri answered more than ${MAX_JWKS_BYTES} bytes`);
      chunks.push(Buffer.from(chunk as Uint8Array));
    }
    let body: unknown;
    try {
      body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
    } catch {
      throw new AssertionRefused("the client's jwks_uri did not answer JSON");
    }
    const jwks = parsePublicJwks(body);
    if (typeof jwks === 'string') throw new AssertionRefused(`the client's jwks_uri: ${jwks}`);
    return jwks;
  } catch (err) {
    if (err instanceof AssertionRefused) throw err;
    throw new AssertionRefused(`the client's jwks_uri could not be read (${err instanceof Error && err.name === 'TimeoutError' ? `no answer within ${JWKS_FETCH_TIMEOUT_MS} ms` : ((err as Error).cause as Error | undefined)?.message ?? String(err)})`);
  } finally {
    void agent.close().catch(() => undefined);
  }
}

/** Accepts an assertion's jti once until `expiresAt`, on every process: false when it was used already. */
async function firstUse(db: Queryable, clientId: string, jti: string, expiresAt: number, now: number): Promise<boolean> {
  // A row whose assertion has expired (not yet purged) frees its jti: "never reused within its lifetime".
  const { rowCount } = await db.query(
    `INSERT INTO used_client_assertions (client_id, jti, expires_at) VALUES ($1, $2, to_timestamp($3::float8))
     ON CONFLICT (client_id, jti) DO UPDATE SET expires_at = EXCLUDED.expires_at WHERE used_client_assertions.expires_at < to_timestamp($4::float8)`,
    [clientId, jti, expiresAt, now / 1000],
  );
  return rowCount === 1;
}

/** Forgets the jti of assertions expired before `now` (ms): they would be refused as expired anyway. */
export async function purgeUsedAssertions(db: Queryable, now: number): Promise<number> {
  const { rowCount } = await db.query('DELETE FROM used_client_assertions WHERE expires_at < to_timestamp($1::float8)', [now / 1000 - CLOCK_TOLERANCE_SECONDS]);
  return rowCount;
}

/** The background job that purges used jti values, every minute. */
export function createAssertionJanitor(db: Queryable, log: Logger, now: () => number = Date.now): BackgroundWorker {
  return periodicJob('assertion-janitor', 60_000, () => purgeUsedAssertions(db, now()), log);
}

/**
 * Verifies client assertions: the client's keys (inline, or its jwks_uri, cached JWKS_CACHE_MS), then the
 * signature and claims by SMART's rules, then the jti's first use. One per process.
 */
export class AssertionVerifier {
  /** jwks_uri -> the set it answered and when; or the fetch in flight. */
  private readonly remote = new Map<string, { jwks: PublicJwks; fetchedAt: number }>();
  private readonly inFlight = new Map<string, Promise<PublicJwks>>();

  /**
   * @param allowHttpLoopback http:// jwks_uri to loopback addresses (development only)
   * @param now the clock (ms since the epoch) for exp, the five minutes and the cache; tests move it.
   */
  constructor(
    private readonly db: Database,
    private readonly clients: ClientDirectory,
    private readonly allowHttpLoopback: boolean,
    public now: () => number = Date.now,
  ) {}

  /**
   * The client an assertion authenticates, for a token endpoint at `audience`; throws AssertionRefused with the
   * reason otherwise. `clientId`: the request's client_id parameter, when it sent one.
   */
  async verify(assertion: string, audience: string, clientId?: string): Promise<ActiveClient> {
    if (assertion.length > MAX_ASSERTION_LENGTH) throw new AssertionRefused(`client_assertion is longer than ${MAX_ASSERTION_LENGTH} characters`);
    let header: JWTHeaderParameters;
    let claims: JWTPayload;
    try {
      header = decodeProtectedHeader(assertion) as JWTHeaderParameters;
      claims = decodeJwt(assertion);
    } catch {
      throw new AssertionRefused('client_assertion is not a signed JWT');
    }
    // The claims reach SQL (client id, jti): the body's no-NUL rule holds inside the base64url parts too.
    if (JSON.stringify([header, claims]).includes('\\u0000')) throw new AssertionRefused('the assertion holds a NUL character');
    const issuer = claims.iss;
    if (typeof issuer !== 'string' || !issuer) throw new AssertionRefused('the assertion needs iss (the client id)');
    if (claims.sub !== issuer) throw new AssertionRefused('the assertion\'s sub must equal its iss (the client id)');
    if (clientId !== undefined && clientId !== issuer) throw new AssertionRefused('client_id differs from the assertion\'s iss');
    if (!ASSERTION_ALGORITHMS.includes(String(header.alg))) throw new AssertionRefused(`the assertion must be signed with ${ASSERTION_ALGORITHMS.join(' or ')}, not ${String(header.alg)}`);
    if (typeof header.kid !== 'string' || !header.kid) throw new AssertionRefused('the assertion header needs the kid of the signing key');
    const client = await this.clients.active(issuer);
    if (!client?.keys) throw new AssertionRefused('unknown client, revoked client, or a client that authenticates with a secret');
    // SMART: a jku names where the key is; only the jwks_uri registered for this client may be it.
    if (header.jku !== undefined && header.jku !== client.keys.jwksUri) throw new AssertionRefused('the assertion\'s jku is not the jwks_uri registered for this client');

    const now = this.now();
    let payload: JWTPayload;
    try {
      ({ payload } = await jwtVerify(assertion, (h: JWTHeaderParameters) => this.key(client, h), {
        algorithms: ASSERTION_ALGORITHMS,
        issuer,
        subject: issuer,
        audience,
        requiredClaims: ['exp', 'jti'],
        clockTolerance: CLOCK_TOLERANCE_SECONDS,
        currentDate: new Date(now),
      }));
    } catch (err) {
      if (err instanceof AssertionRefused) throw err;
      if (err instanceof errors.JWTClaimValidationFailed) throw new AssertionRefused(`the assertion's ${err.claim} claim is wrong: ${err.message}${err.claim === 'aud' ? ` (use ${audience})` : ''}`);
      if (err instanceof errors.JWTExpired) throw new AssertionRefused('the assertion has expired');
      if (err instanceof errors.JOSEError) throw new AssertionRefused(`the assertion does not verify: ${err.message}`);
      throw err;
    }
    const exp = payload.exp!;
    if (exp > now / 1000 + MAX_ASSERTION_LIFETIME_SECONDS + CLOCK_TOLERANCE_SECONDS)
      throw new AssertionRefused(`the assertion's exp must be at most ${MAX_ASSERTION_LIFETIME_SECONDS} s ahead`);
    const jti = payload.jti;
    if (typeof jti !== 'string' || !jti || jti.length > MAX_JTI_LENGTH) throw new AssertionRefused(`the assertion needs a jti of 1-${MAX_JTI_LENGTH} characters`);
    // Kept until jose would refuse the assertion: it compares with the clock in whole seconds (floored), so an exp of
    // T+60.5 verifies until T+60.5+tolerance+1; keeping the jti only to exp+tolerance let it be used twice meanwhile.
    const acceptedUntil = Math.ceil(exp) + CLOCK_TOLERANCE_SECONDS + 1;
    if (!(await firstUse(this.db, client.clientId, jti, acceptedUntil, now))) throw new AssertionRefused('this assertion was used already (its jti is not new)');
    return client;
  }

  /** The key of the client's set the header names (kid, and kty by alg); a jwks_uri's set is fetched again once when the kid is new. */
  private async key(client: ActiveClient, header: JWTHeaderParameters) {
    const { jwks, jwksUri } = client.keys!;
    if (jwks) return this.match(jwks, header);
    let entry = await this.remoteSet(jwksUri!, false);
    try {
      return await this.match(entry, header);
    } catch (err) {
      if (!(err instanceof errors.JWKSNoMatchingKey)) throw err;
      entry = await this.remoteSet(jwksUri!, true);
      return this.match(entry, header);
    }
  }

  private match(jwks: PublicJwks, header: JWTHeaderParameters) {
    return createLocalJWKSet(jwks as Parameters<typeof createLocalJWKSet>[0])(header);
  }

  /** The set at `url`: cached for JWKS_CACHE_MS; `kidMissing` fetches it again when the copy is older than the cooldown. */
  private async remoteSet(url: string, kidMissing: boolean): Promise<PublicJwks> {
    const cached = this.remote.get(url);
    const age = cached ? this.now() - cached.fetchedAt : Infinity;
    if (cached && age < (kidMissing ? JWKS_REFETCH_COOLDOWN_MS : JWKS_CACHE_MS)) return cached.jwks;
    let fetching = this.inFlight.get(url);
    if (!fetching) {
      fetching = fetchJwks(url, this.allowHttpLoopback).finally(() => this.inFlight.delete(url));
      this.inFlight.set(url, fetching);
    }
    const jwks = await fetching;
    this.remote.delete(url);
    if (this.remote.size >= MAX_CACHED_SETS) this.remote.delete(this.remote.keys().next().value!);
    this.remote.set(url, { jwks, fetchedAt: this.now() });
    return jwks;
  }
}
