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

export type Principal = ClientPrincipal | AgentPrincipal | PatientPrincipal | SystemPrincipal;

/** Pont itself acting for an operator: `pont import`, the demo reset, start-up upgrades. Sees and writes everything. */
export interface SystemPrincipal {
  kind: 'system';
  /** What is acting, for the audit trail (e.g. `import`). */
  name: string;
}
