import { describe, expect, it } from 'vitest';
import type { Scope } from '../src/core/scopes';
import { grantScopes, isSmartRequest } from '../src/auth/smart-scopes';

const grant = (requested: string, held: Scope[]) => grantScopes(requested.split(' '), held);
const reasons = (requested: string, held: Scope[]) => grant(requested, held).refused.map((r) => `${r.scope}: ${r.reason}`);

describe('SMART system scopes on Pont scopes', () => {
  it('wildcard reads rest on fhir:read, wildcard writes on fhir:write; no type limits', () => {
    expect(grant('system/*.rs', ['fhir:read'])).toEqual({ grant: { scopes: ['fhir:read'] }, refused: [] });
    expect(grant('system/*.read', ['fhir:read', 'labs:read'])).toEqual({ grant: { scopes: ['fhir:read'] }, refused: [] });
    expect(grant('system/*.cud', ['fhir:write'])).toEqual({ grant: { scopes: ['fhir:write'] }, refused: [] });
    expect(grant('system/*.write', ['fhir:write'])).toEqual({ grant: { scopes: ['fhir:write'] }, refused: [] });
    for (const all of ['system/*.cruds', 'system/*.*']) expect(grant(all, ['fhir:read', 'fhir:write']).grant).toEqual({ scopes: ['fhir:read', 'fhir:write'] });
  });

  it("a type's read rests on the type's read scope or fhir:read (whichever the client holds) and limits reads to the type", () => {
    expect(grant('system/Observation.rs', ['labs:read']).grant).toEqual({ scopes: ['labs:read'], limits: { read: ['Observation'] } });
    expect(grant('system/Observation.read', ['fhir:read']).grant).toEqual({ scopes: ['fhir:read'], limits: { read: ['Observation'] } });
    expect(grant('system/Observation.rs', ['labs:read', 'fhir:read']).grant).toEqual({ scopes: ['labs:read', 'fhir:read'], limits: { read: ['Observation'] } });
    expect(grant('system/Observation.rs system/Patient.rs', ['labs:read', 'patients:read']).grant).toEqual({
      scopes: ['labs:read', 'patients:read'],
      limits: { read: ['Observation', 'Patient'] },
    });
    // The audit trail needs audit:read, as through Pont's own scopes.
    expect(grant('system/AuditEvent.rs', ['audit:read']).grant).toEqual({ scopes: ['audit:read'], limits: { read: ['AuditEvent'] } });
    expect(reasons('system/AuditEvent.rs', ['fhir:read'])).toEqual(['system/AuditEvent.rs: needs audit:read, which this client does not hold']);
  });

  it('a wildcard beside a type lifts the limit of that kind only', () => {
    expect(grant('system/Observation.rs system/*.rs', ['fhir:read']).grant).toEqual({ scopes: ['fhir:read'] });
    expect(grant('system/*.rs system/Observation.cud', ['fhir:read', 'fhir:write']).grant).toEqual({ scopes: ['fhir:read', 'fhir:write'], limits: { write: ['Observation'] } });
    expect(grant('system/Observation.cruds', ['labs:read', 'fhir:write']).grant).toEqual({
      scopes: ['labs:read', 'fhir:write'],
      limits: { read: ['Observation'], write: ['Observation'] },
    });
  });

  it('refuses what the client does not hold, and what Pont cannot grant exactly', () => {
    expect(reasons('system/*.rs', ['labs:read'])).toEqual(['system/*.rs: needs fhir:read, which this client does not hold']);
    expect(reasons('system/Patient.rs', ['labs:read'])).toEqual(['system/Patient.rs: needs patients:read or fhir:read, which this client does not hold']);
    expect(reasons('system/*.cruds', ['fhir:read'])).toEqual(['system/*.cruds: needs fhir:write, which this client does not hold']);
    for (const partial of ['system/*.r', 'system/*.s', 'system/*.c', 'system/*.rud', 'system/*.cu', 'system/*.crs'])
      expect(reasons(partial, ['fhir:read', 'fhir:write'])[0]).toMatch(/ask rs, cud or cruds/);
    // Out of order or repeated letters are no SMART permission string.
    for (const bad of ['system/*.sr', 'system/*.rrs', 'system/Observation', 'system/.rs', 'system/*.rs.x', 'system/Observation.RS'])
      expect(reasons(bad, ['fhir:read'])[0]).toMatch(/not a SMART system scope|ask rs, cud or cruds/);
    expect(reasons('system/Observation.rs?category=vital-signs', ['fhir:read'])[0]).toMatch(/parameters/);
    expect(reasons('patient/*.rs', ['fhir:read'])[0]).toMatch(/backend services ask system\/ scopes/);
    expect(reasons('user/Observation.read', ['fhir:read'])[0]).toMatch(/system\/ scopes/);
    expect(reasons('system/Unicorn.rs', ['fhir:read'])[0]).toMatch(/not a FHIR R4 resource type/);
    expect(reasons(`system/${'A'.repeat(10_000)}.rs`, ['fhir:read'])[0]).toMatch(/not a SMART system scope/);
  });

  it('Pont scopes are granted as before, never mixed with SMART scopes', () => {
    expect(grant('patients:read labs:read', ['patients:read', 'labs:read', 'fhir:read'])).toEqual({ grant: { scopes: ['patients:read', 'labs:read'] }, refused: [] });
    expect(reasons('fhir:write', ['fhir:read'])).toEqual(['fhir:write: not granted to this client']);
    expect(reasons('made:up', ['fhir:read'])).toEqual(['made:up: unknown scope']);
    expect(reasons('system/*.rs fhir:read', ['fhir:read'])).toEqual(['fhir:read: Pont scopes and SMART scopes may not be mixed in one request']);
  });

  it('terminology:read (no SMART equivalent) may be asked with SMART scopes, for the terminology search modifiers and operations', () => {
    expect(grant('system/Observation.rs terminology:read', ['fhir:read', 'terminology:read'])).toEqual({
      grant: { scopes: ['fhir:read', 'terminology:read'], limits: { read: ['Observation'] } },
      refused: [],
    });
    expect(reasons('system/*.rs terminology:read', ['fhir:read'])).toEqual(['terminology:read: not granted to this client']);
  });

  it("a token's scopes its client no longer holds drop out (the rest still apply)", () => {
    const { grant: kept, refused } = grant('system/Observation.rs system/Patient.rs', ['labs:read']);
    expect(kept).toEqual({ scopes: ['labs:read'], limits: { read: ['Observation'] } });
    expect(refused.map((r) => r.scope)).toEqual(['system/Patient.rs']);
    expect(isSmartRequest(['patients:read'])).toBe(false);
    expect(isSmartRequest(['system/*.rs'])).toBe(true);
  });
});
