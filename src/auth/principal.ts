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
}

export interface AgentPrincipal {
  kind: 'bridge-agent';
  agentId: string;
  facilityId: string;
}

export type Principal = ClientPrincipal | AgentPrincipal | SystemPrincipal;

/** Pont itself acting for an operator: `pont import`, the demo reset, start-up upgrades. Sees and writes everything. */
export interface SystemPrincipal {
  kind: 'system';
  /** What is acting, for the audit trail (e.g. `import`). */
  name: string;
}
