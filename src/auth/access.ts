import type { Context } from 'koa';
import type { Config } from '../config';
import type { Database } from '../db/database';
import { ApiError, ErrorCode } from '../core/errors';
import { AgentRegistry, BRIDGE_TIMESTAMP_TOLERANCE_SECONDS, timestampIsFresh } from './agents';
import { ClientDirectory, type ActiveClient } from './clients';
import { ensureSigningKey, KeyStore } from './keys';
import type { AccessControl, AgentPrincipal, ClientPrincipal, PatientPrincipal, Security } from '../core/principal';
import { PATIENT_TOKEN_PREFIX, PatientTokens } from '../consents/mobile';
import { RateLimits } from './rate-limits';
import { TokenService } from './tokens';
import { AssertionRefused, AssertionVerifier } from './assertions';
import type { ScopeGrant } from './smart-scopes';
import { PortalAccounts } from './portal-accounts';
import { authorizeSession, portalPrincipal } from './portal-session';
import type { PortalPrincipal } from '../core/principal';

// Pont's tokens (JWTs, pat_ tokens) are base64url without padding: a token with `=` is not one of them (a JWT
// with `==` appended would otherwise verify, its signature decoding the same).
const BEARER = /^Bearer +([A-Za-z0-9\-._~+/]+) *$/i;

interface Unauthenticated {
  /** Credentials were given but are no good (RFC 6750 `error="invalid_token"`). */
  invalidToken?: boolean;
  /** Bridge Agent routes do not take a bearer token, so they get no Bearer challenge. */
  bearerChallenge?: boolean;
  extra?: Record<string, unknown>;
}

/** 401 in the Error shape, with the RFC 6750 challenge on client routes. */
function unauthenticated(message: string, { invalidToken = false, bearerChallenge = true, extra }: Unauthenticated = {}): ApiError {
  const challenge = `Bearer realm="pont"${invalidToken ? ', error="invalid_token"' : ''}`;
  return new ApiError(401, ErrorCode.unauthenticated, message, { extra, headers: bearerChallenge ? { 'WWW-Authenticate': challenge } : undefined });
}

function requiredScopes(security: Extract<Security, { kind: 'client' }>, ctx: Context): string[] {
  const scope = typeof security.scope === 'function' ? security.scope(ctx) : security.scope;
  return scope === undefined ? [] : Array.isArray(scope) ? scope : [scope];
}

/**
 * The access layer: one `authorize` for every route (authentication, rate limit, scope), plus the
 * pieces the OAuth routes use. Built once per process; every check reads the shared database, so
 * revocation, rotation and rate limits hold across processes.
 */
export class Access implements AccessControl {
  readonly clients: ClientDirectory;
  readonly keys: KeyStore;
  readonly tokens: TokenService;
  readonly limits: RateLimits;
  readonly agents: AgentRegistry;
  readonly patientTokens: PatientTokens;
  /** SMART Backend Services: the client assertions of clients registered with public keys. */
  readonly assertions: AssertionVerifier;
  /** Developer-portal people and their sessions (src/portal). */
  readonly portal: PortalAccounts;

  constructor(
    private readonly config: Config,
    private readonly db: Database,
  ) {
    this.clients = new ClientDirectory(db);
    this.keys = new KeyStore(db);
    this.tokens = new TokenService(this.keys, this.clients, () => config.publicUrl);
    this.limits = new RateLimits(db, config.rateLimits);
    this.agents = new AgentRegistry(db);
    this.patientTokens = new PatientTokens(db);
    this.assertions = new AssertionVerifier(db, this.clients, config.environment === 'development');
    this.portal = new PortalAccounts(db, config.portalSessions);
  }

  /**
   * Resolves once this process's caches (clients, keys) have heard every change committed before the call: a
   * client or key just removed is refused from this process's next request.
   */
  caughtUp(): Promise<void> {
    return this.db.listenersCaughtUp();
  }

  /** Stops listening for client changes and sweeping rate-limit windows. */
  async close(): Promise<void> {
    this.limits.close();
    await this.clients.close();
  }

  get issuer(): string {
    return this.config.publicUrl;
  }

  async authorize(ctx: Context, security: Security, routeGroup: string): Promise<ClientPrincipal | AgentPrincipal | PatientPrincipal | PortalPrincipal | undefined> {
    switch (security.kind) {
      case 'public':
        return undefined;
      case 'patient': {
        const token = BEARER.exec(ctx.get('authorization'))?.[1];
        const patient = token ? await this.patientTokens.authenticate(token) : undefined;
        if (!patient) throw unauthenticated('The mobile routes need a patient token: Authorization: Bearer pat_…', { invalidToken: !!token });
        await this.limits.consume(routeGroup, `patient:${patient.patientId}`);
        return patient;
      }
      case 'session': {
        const session = await authorizeSession(ctx, this.portal, this.config, { needed: security.role });
        await this.limits.consume(routeGroup, `portal:${session.user.id}`);
        return portalPrincipal(session);
      }
      case 'bridge-agent': {
        const agent = await this.authenticateAgent(ctx);
        await this.limits.consume(routeGroup, `agent:${agent.agentId}`);
        return agent;
      }
      case 'client': {
        const client = await this.authenticateClient(ctx);
        await this.limits.consume(routeGroup, `client:${client.clientId}`);
        const needed = requiredScopes(security, ctx);
        if (needed.length && !needed.some((s) => client.scopes.includes(s))) {
          throw new ApiError(403, ErrorCode.forbidden, `This operation needs the scope ${needed.join(' or ')}, which the caller does not hold`, {
            extra: { required_scopes: needed },
            headers: { 'WWW-Authenticate': `Bearer realm="pont", error="insufficient_scope", scope="${needed.join(' ')}"` },
          });
        }
        return client;
      }
    }
  }

  /** `Authorization: Bearer <JWT>`, or the X-Client-ID + X-Client-Secret pair. */
  async authenticateClient(ctx: Context): Promise<ClientPrincipal> {
    const authorization = ctx.get('authorization');
    if (authorization) {
      const token = BEARER.exec(authorization)?.[1];
      if (!token) throw unauthenticated('The Authorization header must be "Bearer <access token>"', { invalidToken: true });
      // A patient's token sent to a client route: say so, rather than call it invalid (it may well be valid).
      if (token.startsWith(PATIENT_TOKEN_PREFIX))
        throw unauthenticated('Patient tokens (pat_…) open only the mobile routes (/api/v1/mobile/…); this route needs an integration client\'s access token', { invalidToken: true });
      const verified = await this.tokens.verify(token);
      if (!verified) throw unauthenticated('The access token is invalid, expired or revoked', { invalidToken: true });
      return principalOf(verified.client, verified.grant, { id: verified.claims.jti, expiresAt: verified.claims.exp });
    }
    const clientId = ctx.get('x-client-id');
    const secret = ctx.get('x-client-secret');
    if (clientId || secret) {
      if (!clientId || !secret) throw unauthenticated('X-Client-ID and X-Client-Secret must be sent together');
      const client = await this.checkClientSecret(ctx, clientId, secret);
      if (!client) throw unauthenticated('Invalid client credentials');
      return principalOf(client, { scopes: client.scopes });
    }
    throw unauthenticated('Authentication required: send Authorization: Bearer <access token>');
  }

  /**
   * Checks a client id and secret (token endpoint, introspection, header pair). Failures are counted
   * per source address: each costs an Argon2id hash, so a flood of them is cut off with 429.
   */
  async checkClientSecret(ctx: Context, clientId: string, secret: string): Promise<ActiveClient | undefined> {
    const source = `ip:${ctx.ip}`;
    await this.limits.assertNotExhausted('failed-auth', source);
    const client = await this.clients.authenticate(clientId, secret);
    if (!client) await this.limits.penalize('failed-auth', source);
    return client;
  }

  /**
   * Checks a SMART client assertion for the token endpoint at `audience` (src/auth/assertions.ts); throws
   * AssertionRefused. Failures are counted per source address, as failed secrets are.
   */
  async checkClientAssertion(ctx: Context, assertion: string, audience: string, clientId?: string): Promise<ActiveClient> {
    const source = `ip:${ctx.ip}`;
    await this.limits.assertNotExhausted('failed-auth', source);
    try {
      return await this.assertions.verify(assertion, audience, clientId);
    } catch (err) {
      if (err instanceof AssertionRefused) await this.limits.penalize('failed-auth', source);
      throw err;
    }
  }

  /** X-Bridge-Agent-ID, X-Bridge-Agent-Key and a fresh X-Bridge-Timestamp (section 5.2). */
  private async authenticateAgent(ctx: Context): Promise<AgentPrincipal> {
    const agentId = ctx.get('x-bridge-agent-id');
    const key = ctx.get('x-bridge-agent-key');
    const timestamp = ctx.get('x-bridge-timestamp');
    if (!agentId || !key || !timestamp) {
      throw unauthenticated('Bridge Agent routes need the X-Bridge-Agent-ID, X-Bridge-Agent-Key and X-Bridge-Timestamp headers', {
        bearerChallenge: false,
      });
    }
    if (!timestampIsFresh(timestamp)) {
      throw unauthenticated(`X-Bridge-Timestamp must be Unix seconds within ${BRIDGE_TIMESTAMP_TOLERANCE_SECONDS} s of server time`, {
        bearerChallenge: false,
        extra: { server_time: Math.floor(Date.now() / 1000) },
      });
    }
    const agent = await this.agents.authenticate(agentId, key);
    if (!agent) throw unauthenticated('Invalid Bridge Agent credentials', { bearerChallenge: false });
    return { kind: 'bridge-agent', ...agent };
  }
}

function principalOf(client: ActiveClient, grant: ScopeGrant, token?: { id: string; expiresAt: number }): ClientPrincipal {
  return {
    kind: 'client',
    clientId: client.clientId,
    organizationId: client.organizationId,
    facilityId: client.facilityId,
    scopes: grant.scopes,
    ...(grant.limits ? { typeLimits: grant.limits } : {}),
    allPatients: client.allPatients,
    tokenId: token?.id,
    tokenExpiresAt: token?.expiresAt,
  };
}

/** Builds the access layer; creates the first signing key when the database has none. */
export async function createAccessControl(deps: { config: Config; db: Database }): Promise<Access> {
  await ensureSigningKey(deps.db);
  const access = new Access(deps.config, deps.db);
  await access.clients.warmUp();
  return access;
}
