import { isResourceType } from '../core/fhir-definitions';
import type { TypeLimits } from '../core/principal';
import { FHIR_WRITE_SCOPE, fhirReadScopes, SCOPES, TERMINOLOGY_SCOPE, type Scope } from '../core/scopes';

/**
 * SMART App Launch 2.x system scopes (`system/Observation.rs`, `system/*.cruds`, v1 `system/*.read`) on Pont's
 * scope table. ONE table: the token endpoint grants by it, every request's principal is derived by it from the
 * token's scope string, and docs/fhir.md and the OpenAPI document print it.
 *
 * Pont's scopes do not tell read from search, nor create from update and delete: a SMART permission string is
 * granted only whole, `rs` (v1 `read`), `cud` (v1 `write`) or both (`cruds`, v1 `*`); `r` alone, `s` alone,
 * `c` alone... are refused rather than widened.
 */
export const SMART_SCOPE_TABLE = [
  { smart: 'system/*.rs, system/*.read', needs: '`fhir:read`', grants: 'read and search every type fhir:read reads (not AuditEvent)' },
  { smart: 'system/{Type}.rs, system/{Type}.read', needs: "the type's read scope (docs/integrators.md \"Scopes\") or `fhir:read`", grants: 'read and search that type only' },
  { smart: 'system/*.cud, system/*.write', needs: `\`${FHIR_WRITE_SCOPE}\``, grants: 'create, update and delete every type' },
  { smart: 'system/{Type}.cud, system/{Type}.write', needs: `\`${FHIR_WRITE_SCOPE}\``, grants: 'create, update and delete that type only' },
  { smart: 'system/*.cruds, system/*.*, system/{Type}.cruds, system/{Type}.*', needs: 'both of the above', grants: 'both of the above' },
] as const;

/** What the token endpoint announces (`scopes_supported`); any `{Type}` may take the place of `*`. */
export const SMART_SCOPES_SUPPORTED = ['system/*.rs', 'system/*.cud', 'system/*.cruds', 'system/*.read', 'system/*.write', 'system/*.*'];

/** What a set of scopes lets a token do: Pont scopes, narrowed to types when SMART scopes name them. */
export interface ScopeGrant {
  scopes: Scope[];
  limits?: TypeLimits;
}

export interface RefusedScope {
  scope: string;
  reason: string;
}

const SMART_SCOPE = /^system\/(\*|[A-Za-z]{1,64})\.(\*|read|write|[cruds]{1,5})$/;

/** The whole permission strings Pont grants, as (read, write). */
const PERMISSIONS: Record<string, { read: boolean; write: boolean }> = {
  rs: { read: true, write: false },
  read: { read: true, write: false },
  cud: { read: false, write: true },
  write: { read: false, write: true },
  cruds: { read: true, write: true },
  '*': { read: true, write: true },
};

/** Does the request use SMART scopes (a token's scope string too)? Pont's own scopes never hold a `/`. */
export const isSmartRequest = (scopes: readonly string[]) => scopes.some((s) => s.includes('/'));

/** Why a SMART scope is not understood, or its type and permissions. */
function parseSmartScope(scope: string): { type: string; read: boolean; write: boolean } | string {
  if (scope.includes('?')) return 'scope parameters (?…) are not supported';
  if (/^(patient|user)\//.test(scope)) return 'backend services ask system/ scopes';
  const m = SMART_SCOPE.exec(scope);
  if (!m) return 'not a SMART system scope (system/{Type|*}.{rs|cud|cruds|read|write|*})';
  const [, type, permission] = m as unknown as [string, string, string];
  if (type !== '*' && !isResourceType(type)) return `${type} is not a FHIR R4 resource type`;
  const granted = PERMISSIONS[permission];
  if (!granted) return 'Pont grants read with search (rs) and create with update and delete (cud): ask rs, cud or cruds';
  return { type, ...granted };
}

/**
 * The grant for `requested` scopes of a client holding `held`: either Pont's own scopes (each must be held), or
 * SMART system scopes mapped by SMART_SCOPE_TABLE, never a mix. Scopes it may not have come back in `refused`
 * (the token endpoint answers invalid_scope; a token's scopes its client no longer holds are simply dropped).
 */
export function grantScopes(requested: readonly string[], held: readonly Scope[]): { grant: ScopeGrant; refused: RefusedScope[] } {
  const refused: RefusedScope[] = [];
  const scopes = new Set<Scope>();
  const holds = (s: Scope) => held.includes(s);
  if (!isSmartRequest(requested)) {
    for (const scope of requested) {
      if (holds(scope as Scope)) scopes.add(scope as Scope);
      else refused.push({ scope, reason: (SCOPES as readonly string[]).includes(scope) ? 'not granted to this client' : 'unknown scope' });
    }
    return { grant: { scopes: [...scopes] }, refused };
  }
  const read = { all: false, types: new Set<string>() };
  const write = { all: false, types: new Set<string>() };
  for (const scope of requested) {
    // terminology:read has no SMART form (terminology is no FHIR resource read): it may be asked along, as itself.
    if (scope === TERMINOLOGY_SCOPE) {
      if (holds(TERMINOLOGY_SCOPE)) scopes.add(TERMINOLOGY_SCOPE);
      else refused.push({ scope, reason: 'not granted to this client' });
      continue;
    }
    const parsed = parseSmartScope(scope);
    if (typeof parsed === 'string') {
      refused.push({ scope, reason: scope.includes('/') ? parsed : 'Pont scopes and SMART scopes may not be mixed in one request' });
      continue;
    }
    const readScopes = parsed.type === '*' ? (['fhir:read'] as Scope[]) : fhirReadScopes(parsed.type);
    const readable = parsed.read ? readScopes.filter(holds) : [];
    if (parsed.read && !readable.length) {
      refused.push({ scope, reason: `needs ${readScopes.join(' or ')}, which this client does not hold` });
      continue;
    }
    if (parsed.write && !holds(FHIR_WRITE_SCOPE)) {
      refused.push({ scope, reason: `needs ${FHIR_WRITE_SCOPE}, which this client does not hold` });
      continue;
    }
    for (const s of readable) scopes.add(s);
    if (parsed.write) scopes.add(FHIR_WRITE_SCOPE);
    for (const [wanted, into] of [
      [parsed.read, read],
      [parsed.write, write],
    ] as const) {
      if (!wanted) continue;
      if (parsed.type === '*') into.all = true;
      else into.types.add(parsed.type);
    }
  }
  const limit = (access: typeof read) => (access.all || !access.types.size ? undefined : [...access.types].sort());
  const limits: TypeLimits = { read: limit(read), write: limit(write) };
  return { grant: { scopes: [...scopes], ...(limits.read || limits.write ? { limits } : {}) }, refused };
}

/** SMART_SCOPE_TABLE as Markdown (docs/fhir.md and OpenAPI). */
export function smartScopeTable(): string {
  return [
    '| SMART scope | The client must hold | The token may |',
    '|---|---|---|',
    ...SMART_SCOPE_TABLE.map((r) => `| ${r.smart.split(', ').map((s) => `\`${s}\``).join(', ')} | ${r.needs} | ${r.grants} |`),
  ].join('\n');
}
