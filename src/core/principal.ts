import type { Context } from 'koa';

/** FHIR resource types a token may read and write, when its scopes name types (absent: every type its scopes allow). */
export interface TypeLimits {
  read?: string[];
  write?: string[];
}

/** Who is calling, once authenticated. Routes read it from `ctx.state.principal`. */
export interface ClientPrincipal {
  kind: 'client';
  clientId: string;
  organizationId: string;
  facilityId?: string;
  scopes: string[];
  /** `jti` of the bearer token, when authenticated by token. */
  tokenId?: string;
  /** `exp` of the bearer token (Unix seconds), when authenticated by token. */
  tokenExpiresAt?: number;
  /** An operator client of the deploying institution, created with all-patient access (`pont clients create --all-patients`). */
  allPatients?: boolean;
  /** The only FHIR types it reads or writes, when its token's SMART scopes name types (`system/Observation.rs`). */
  typeLimits?: TypeLimits;
}

/** A patient, through their app, with a `pat_` token: only their own data, only the mobile routes. */
export interface PatientPrincipal {
  kind: 'patient';
  /** FHIR Patient id. */
  patientId: string;
  healthId: string;
  /** The organisation whose pairing code the app exchanged: the app never approves that organisation's requests. */
  pairedBy?: string;
}

export interface AgentPrincipal {
  kind: 'bridge-agent';
  agentId: string;
  facilityId: string;
  /** The organisation the agent's facility belongs to (agents created before organisations: none). */
  organizationId?: string;
}

/** A person of an organisation signed in to the developer portal (src/portal): the organisation's own objects only. */
export interface PortalPrincipal {
  kind: 'portal-user';
  userId: string;
  email: string;
  organizationId: string;
  role: 'admin' | 'developer' | 'viewer';
}

export type Principal = ClientPrincipal | AgentPrincipal | PatientPrincipal | PortalPrincipal | SystemPrincipal;

/** Pont itself acting for an operator: `pont import`, the demo reset, start-up upgrades. Sees and writes everything. */
export interface SystemPrincipal {
  kind: 'system';
  /** What is acting, for the audit trail (e.g. `import`). */
  name: string;
}

/** Who a route admits (RouteSpec.security, src/http/routes.ts). */
export type Security =
  | { kind: 'public' }
  | { kind: 'client'; scope?: string | string[] | ((ctx: Context) => string | string[]) }
  | { kind: 'bridge-agent' }
  | { kind: 'patient' }
  | { kind: 'session'; role?: 'admin' | 'developer' | 'viewer' };

/** Checks a request against a route's Security; throws 401/403 ApiErrors, returns who called. */
export interface AccessControl {
  authorize(ctx: Context, security: Security, routeGroup: string): Promise<Principal | undefined>;
}
