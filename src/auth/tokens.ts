import { createHash, randomUUID } from 'node:crypto';
import { errors, jwtVerify, SignJWT, type JWTHeaderParameters } from 'jose';
import type { ActiveClient, ClientDirectory } from './clients';
import { TOKEN_LIFETIME_SECONDS, type KeyStore } from './keys';
import { grantScopes, type ScopeGrant } from './smart-scopes';

/** RFC 9068 media type of JWT access tokens: a JWT of another kind (an ID token, say) is never accepted as one. */
const ACCESS_TOKEN_TYPE = 'at+jwt';
/** Leeway for clock differences between Pont processes when checking exp, nbf and iat. */
const CLOCK_TOLERANCE_SECONDS = 5;
/** Refused before any parsing: ours are about 900 characters. */
const MAX_TOKEN_LENGTH = 8192;
/** Verified tokens kept per process (by SHA-256 of the token); the oldest go first. */
const MAX_CACHED_TOKENS = 10_000;

/** The claims of a Pont access token (issue 3, section 2.5). */
export interface AccessTokenClaims {
  iss: string;
  sub: string;
  aud: string;
  client_id: string;
  scope: string;
  iat: number;
  exp: number;
  jti: string;
}

/** TokenResponse (section 2.5). */
export interface TokenResponse {
  access_token: string;
  token_type: 'Bearer';
  expires_in: number;
  scope: string;
}

export interface VerifiedToken {
  claims: AccessTokenClaims;
  client: ActiveClient;
  /** What the token's scopes grant of what its client still holds (SMART scopes mapped onto Pont's). */
  grant: ScopeGrant;
  /** The token's scopes, as issued, less those its client no longer holds. */
  scope: string;
}

/** Issues and verifies RS256 access tokens. Issuer and audience are both the public base URL. */
export class TokenService {
  /** SHA-256 of a token -> its verified claims and the kid that signed it, until the token expires. */
  private readonly verified = new Map<string, { claims: AccessTokenClaims; kid: string }>();

  constructor(
    private readonly keys: KeyStore,
    private readonly clients: ClientDirectory,
    /** Read per call: with PORT=0 the public URL is known only once the server listens. */
    private readonly issuer: () => string,
  ) {}

  /** `scopes`: as granted, Pont's or SMART's (src/auth/smart-scopes.ts); the token and its answer carry them so. */
  async issue(client: ActiveClient, scopes: readonly string[]): Promise<TokenResponse> {
    // Dated before the key is read: a key retired after this read is never found to have signed after its retirement.
    const iat = Math.floor(Date.now() / 1000);
    const { kid, privateKey } = await this.keys.signingKey();
    const scope = scopes.join(' ');
    const accessToken = await new SignJWT({ client_id: client.clientId, scope })
      .setProtectedHeader({ alg: 'RS256', kid, typ: ACCESS_TOKEN_TYPE })
      .setIssuer(this.issuer())
      .setSubject(client.clientId)
      .setAudience(this.issuer())
      .setIssuedAt(iat)
      .setExpirationTime(iat + TOKEN_LIFETIME_SECONDS)
      .setJti(randomUUID())
      .sign(privateKey);
    return { access_token: accessToken, token_type: 'Bearer', expires_in: TOKEN_LIFETIME_SECONDS, scope };
  }

  /**
   * The token's claims and client when it is an unexpired access token signed by one of our published
   * keys, for us, of a client that is not revoked; undefined for anything else (never throws for a bad token).
   */
  async verify(token: string): Promise<VerifiedToken | undefined> {
    if (token.length > MAX_TOKEN_LENGTH) return undefined;
    // A token verified before is not verified again until it expires; its key and its client are checked every time.
    const digest = createHash('sha256').update(token).digest('base64url');
    let known = this.verified.get(digest);
    if (known && known.claims.exp + CLOCK_TOLERANCE_SECONDS <= Date.now() / 1000) {
      this.verified.delete(digest);
      return undefined;
    }
    if (!known) {
      known = await this.verifySignature(token);
      if (!known) return undefined;
      if (this.verified.size >= MAX_CACHED_TOKENS) this.verified.delete(this.verified.keys().next().value!);
      this.verified.set(digest, known);
    }
    const { claims, kid } = known;
    // Revoked key, or a token dated after its key stopped signing (forged with a retired key).
    if (!(await this.keys.accepts(kid, claims.iat))) return undefined;
    const client = await this.clients.active(claims.client_id);
    if (!client) return undefined;
    const asked = claims.scope.split(' ').filter(Boolean);
    const { grant, refused } = grantScopes(asked, client.scopes);
    const dropped = new Set(refused.map((r) => r.scope));
    return { claims, client, grant, scope: asked.filter((s) => !dropped.has(s)).join(' ') };
  }

  /** The claims of a token signed by one of our published keys, for us, unexpired, of our shape, and its kid; else undefined. */
  private async verifySignature(token: string): Promise<{ claims: AccessTokenClaims; kid: string } | undefined> {
    let claims: AccessTokenClaims;
    let kid: string;
    try {
      const result = await jwtVerify<AccessTokenClaims>(token, (header: JWTHeaderParameters) => this.key(header), {
        algorithms: ['RS256'],
        typ: ACCESS_TOKEN_TYPE,
        issuer: this.issuer(),
        audience: this.issuer(),
        maxTokenAge: TOKEN_LIFETIME_SECONDS,
        clockTolerance: CLOCK_TOLERANCE_SECONDS,
        requiredClaims: ['exp', 'jti', 'client_id', 'scope'],
      });
      claims = result.payload as AccessTokenClaims;
      kid = result.protectedHeader.kid!; // key() found a key by it
    } catch (err) {
      if (err instanceof errors.JOSEError) return undefined;
      throw err; // the database failing is not the caller's fault
    }
    // Shapes only we sign; a lifetime over ours means the token was not made by this service.
    if (claims.sub !== claims.client_id || typeof claims.scope !== 'string' || typeof claims.jti !== 'string') return undefined;
    if (typeof claims.iat !== 'number' || claims.exp - claims.iat > TOKEN_LIFETIME_SECONDS) return undefined;
    return { claims, kid };
  }

  private async key(header: JWTHeaderParameters) {
    const key = header.alg === 'RS256' ? await this.keys.verificationKey(header.kid) : undefined;
    if (!key) throw new errors.JWKSNoMatchingKey();
    return key;
  }
}
