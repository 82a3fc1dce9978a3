import { describe, expect, it } from 'vitest';
import { ApiError } from '../core/errors';
import type { AgentPrincipal, ClientPrincipal, PatientPrincipal, PortalPrincipal, Principal } from '../core/principal';
import { alias, type Sql } from '../db/sql';
import { accessPolicyFor, directoryRows, OWNER_ONLY_TYPES, rowsOfTypes, type AccessPolicy } from './index';

// The access policy's decisions (docs/security.md "The access policy", "Break-glass"; docs/integrators.md "Facility data"), through its public API, with no
// database: the SQL fragments are rendered and read for their meaning (what they bind, which rule they name), never
// compared whole. test/consent-matrix.test.ts and the attack tests run the same rules against a real database.

/** An organisation id no SQL text may contain: it must only ever be bound. */
const ORG = "org-a'; DROP TABLE fhir_resources; --";
const PATIENT = 'patient-1';

const client = (over: Partial<ClientPrincipal> = {}): ClientPrincipal => ({ kind: 'client', clientId: 'c1', organizationId: ORG, scopes: ['fhir:read', 'fhir:write'], ...over });
const agent = (over: Partial<AgentPrincipal> = {}): AgentPrincipal => ({ kind: 'bridge-agent', agentId: 'a1', facilityId: 'fac-1', organizationId: ORG, ...over });
const patient: PatientPrincipal = { kind: 'patient', patientId: PATIENT, healthId: 'CM100000000006' };
const portalUser: PortalPrincipal = { kind: 'portal-user', userId: 'u1', email: 'a@example.org', organizationId: ORG, role: 'admin' };

const render = (fragment: Sql | undefined) => {
  expect(fragment).toBeDefined();
  return fragment!.render();
};
const rowFilter = (policy: AccessPolicy, type?: string) => render(policy.rowFilter?.(alias('r'), type));
/** The `$n` a value is bound as in a rendered fragment. */
const placeholder = (rendered: { values: unknown[] }, value: unknown) => `$${rendered.values.indexOf(value) + 1}`;

describe('operators: every check passes', () => {
  const operators: Array<[string, Principal]> = [
    ['Pont itself (system)', { kind: 'system', name: 'import' }],
    ['an all-patients client', client({ allPatients: true })],
  ];
  for (const [who, principal] of operators) {
    it(`${who} has no row, owner or patient filter and writes any facility's data`, () => {
      const policy = accessPolicyFor(principal, 'fhir');
      expect(policy.operator).toBe(true);
      expect(policy.rowFilter).toBeUndefined();
      expect(policy.ownerFilter).toBeUndefined();
      expect(policy.patientCheck).toBeUndefined();
      expect(policy.mayWriteFacility('fac-9')).toBe(true);
      expect(policy.canRead('Observation') && policy.canWrite('Patient')).toBe(true);
    });
  }

  it('an all-patients client is still held to its scopes and type limits', () => {
    const policy = accessPolicyFor(client({ allPatients: true, scopes: ['labs:read'], typeLimits: { write: ['Observation'] } }), 'fhir');
    expect(policy.canRead('Observation')).toBe(true);
    expect(policy.canRead('Patient')).toBe(false);
    expect(policy.canWrite('Observation')).toBe(true);
    expect(policy.canWrite('Patient')).toBe(false);
  });
});

describe('an organisation client: reads by consent or authorship', () => {
  const policy = accessPolicyFor(client(), 'fhir');

  it('is no operator and is filtered by its organisation', () => {
    expect(policy.operator).toBe(false);
    expect(policy.organizationId).toBe(ORG);
  });

  it('its row filter binds the organisation once, never inlines it, and names the consent rule', () => {
    for (const type of [undefined, 'Observation']) {
      const r = rowFilter(policy, type);
      expect(r.text).not.toContain(ORG);
      expect(r.values.filter((v) => v === ORG)).toHaveLength(1); // one `$n` for every use
      expect(r.text).toContain(`"author_org" IS NOT DISTINCT FROM ${placeholder(r, ORG)}`); // it wrote it
      expect(r.text).toMatch(/FROM consent_access g WHERE g\.organization_id = \$\d/); // or its consent covers it
      expect(r.text).toContain("'{}'::text[]) IS TRUE"); // or the data concerns no patient
      expect(r.text).not.toContain('emergency_access'); // no break-glass unless the request states a reason
    }
  });

  it('a search of one type binds that type’s data class; a mixed one maps each row’s type to its class', () => {
    expect(rowFilter(policy, 'Observation').values).toContain('labs:read');
    expect(rowFilter(policy, 'MedicationRequest').values).toContain('prescriptions:read');
    expect(rowFilter(policy, 'Basic').values).toContain('fhir:read'); // a type outside the table: fhir:read
    const mixed = rowFilter(policy);
    expect(mixed.values).toEqual([ORG]);
    expect(mixed.text).toContain("WHEN 'Observation' THEN 'labs:read'");
  });

  it("a search by patient asks that patient's plain grants once: a test that names nothing of the row, before the rest", () => {
    // Condition has care dates (recordedDate, onset): the grants that judge a row by them name the row's content.
    const r = render(policy.rowFilter?.(alias('r'), 'Condition', PATIENT));
    // IS TRUE: NULL patients leave the rule false, never NULL (a NULL would turn into "allowed" under a NOT).
    const start = r.text.indexOf(`"patients" = ARRAY[${placeholder(r, PATIENT)}]::text[]) IS TRUE AND (`);
    expect(start).toBeGreaterThan(0);
    let depth = 0;
    let end = r.text.indexOf('AND (', start) + 4;
    for (; end < r.text.length; end++) if ((depth += r.text[end] === '(' ? 1 : r.text[end] === ')' ? -1 : 0) === 0) break;
    const known = r.text.slice(start, end + 1);
    expect(known).toContain('g.resource_types IS NULL AND g.data_from IS NULL AND g.data_to IS NULL'); // plain grants only
    expect(known.slice(known.indexOf('EXISTS'))).not.toMatch(/"r\d*"\./); // once per statement: no column of the row
    expect(r.text.indexOf('cardinality(')).toBeGreaterThan(end); // the row-by-row rule after it
    expect(render(policy.rowFilter?.(alias('r'), 'Condition')).text).not.toContain('ARRAY[$'); // no patient, no test
  });

  it('audit and payment rows (OWNER_ONLY_TYPES) are read by their author only, whatever the consent', () => {
    expect(OWNER_ONLY_TYPES).toEqual(['AuditEvent', 'PaymentReconciliation', 'PaymentNotice']);
    for (const type of OWNER_ONLY_TYPES) {
      const r = rowFilter(policy, type);
      expect(r.text).toBe('"r1"."author_org" = $1');
      expect(r.values).toEqual([ORG]);
    }
    // A search over several types applies the same rule to those rows.
    const mixed = rowFilter(policy);
    expect(mixed.text).toMatch(/WHEN "r1"\."resource_type" IN \('AuditEvent', 'PaymentReconciliation', 'PaymentNotice'\) THEN "r1"\."author_org" = \$1 ELSE/);
  });

  it('updates and deletes: its own rows only (owner filter on author_org)', () => {
    const r = render(policy.ownerFilter?.(alias('r')));
    expect(r.text).toBe('"r1"."author_org" = $1');
    expect(r.values).toEqual([ORG]);
  });

  it('patientCheck returns the refused (patient, class) pairs of any number of patients, binding patients, organisation and classes', () => {
    const r = render(policy.patientCheck?.([{ patient: PATIENT, classes: ['labs:read', 'patients:read'] }, { patient: 'patient-2', classes: ['labs:read'] }]));
    expect(r.text).not.toContain(ORG);
    expect(r.text).not.toContain(PATIENT);
    // The pairs as rows (src/db/sql.ts rowsOf): patient and class bound in turn.
    expect(r.values.slice(0, 6)).toEqual([PATIENT, 'labs:read', PATIENT, 'patients:read', 'patient-2', 'labs:read']);
    expect(r.values).toContain(ORG);
    // Refused: the pairs neither a consent (nor break-glass) covers nor the organisation's own standing admits.
    expect(r.text).toMatch(/^SELECT k\.p, k\.c FROM \(VALUES \(\$1::text, \$2::text\), \(\$3::text, \$4::text\), \(\$5::text, \$6::text\)\) AS "k"\("p", "c"\)\s+WHERE NOT \(\([\s\S]*consent_access[\s\S]*AND NOT EXISTS/);
  });

  it('patientCheck: `records` also counts what the organisation wrote; `relationship` only its registration of the patient', () => {
    const records = render(policy.patientCheck?.([{ patient: PATIENT, classes: ['labs:read'] }])).text; // the default
    expect(records).toMatch(/x\.author_org = \$\d+ AND x\.patients @> ARRAY\[k\.p\]::text\[\]/);
    expect(records).not.toContain("x.resource_type = 'Patient'");
    const relationship = render(policy.patientCheck?.([{ patient: PATIENT, classes: ['labs:read'] }], 'relationship')).text;
    expect(relationship).toMatch(/x\.resource_type = 'Patient' AND x\.id = k\.p AND x\.author_org = \$\d+/);
    expect(relationship).not.toContain('x.patients @>');
  });
});

describe('scopes and type limits', () => {
  it('on the FHIR channel a client reads the types its scopes name (fhir:read: all but the audit trail)', () => {
    const labs = accessPolicyFor(client({ scopes: ['labs:read'] }), 'fhir');
    expect(labs.canRead('Observation')).toBe(true);
    expect(labs.canRead('Patient')).toBe(false);
    const all = accessPolicyFor(client({ scopes: ['fhir:read'] }), 'fhir');
    expect(all.canRead('Patient')).toBe(true);
    expect(all.canRead('AuditEvent')).toBe(false);
    expect(accessPolicyFor(client({ scopes: ['audit:read'] }), 'fhir').canRead('AuditEvent')).toBe(true);
  });

  it('other channels declare their own scopes: the FHIR scope table does not apply', () => {
    expect(accessPolicyFor(client({ scopes: ['labs:read'] }), 'connect').canRead('Patient')).toBe(true);
  });

  it('a token whose SMART scopes name types reads and writes those types only, on every channel', () => {
    const policy = accessPolicyFor(client({ typeLimits: { read: ['Observation'], write: ['Observation'] } }), 'sdk');
    expect(policy.canRead('Observation')).toBe(true);
    expect(policy.canRead('Condition')).toBe(false);
    expect(policy.canWrite('Observation')).toBe(true);
    expect(policy.canWrite('Condition')).toBe(false);
    expect(accessPolicyFor(client(), 'sdk').canWrite('Condition')).toBe(true); // no limits: any type
  });
});

describe('break-glass', () => {
  it('needs the scope emergency:access: a reason stated without it is 403', () => {
    for (const principal of [client(), client({ allPatients: true }), patient, agent()] as Principal[]) {
      let error: unknown;
      try {
        accessPolicyFor(principal, 'fhir', 'unconscious in the emergency room');
      } catch (err) {
        error = err;
      }
      expect(error).toBeInstanceOf(ApiError);
      expect(error).toMatchObject({ status: 403, options: { extra: { required_scopes: ['emergency:access'] } } });
    }
  });

  it('with the scope and a reason, an open emergency window of the organisation also admits the patient’s rows', () => {
    const emergency = client({ scopes: ['fhir:read', 'emergency:access'] });
    const r = rowFilter(accessPolicyFor(emergency, 'fhir', 'unconscious'), 'Observation');
    expect(r.text).toMatch(/FROM emergency_access e WHERE e\.organization_id = \$\d+ AND e\.patient_id .* AND e\.expires_at > now\(\)/);
    expect(r.values.filter((v) => v === ORG)).toHaveLength(1);
    expect(render(accessPolicyFor(emergency, 'fhir', 'unconscious').patientCheck?.([{ patient: PATIENT, classes: ['labs:read'] }])).text).toContain('emergency_access');
    // The same client without a reason: the ordinary consent rule, no window.
    expect(rowFilter(accessPolicyFor(emergency, 'fhir'), 'Observation').text).not.toContain('emergency_access');
  });
});

describe("a patient's own token", () => {
  const policy = accessPolicyFor(patient, 'mobile');

  it('sees the rows of that patient only, bound, and owns nothing', () => {
    const r = rowFilter(policy, 'Observation');
    expect(r).toEqual({ text: '$1 = ANY("r1"."patients")', values: [PATIENT] });
    expect(render(policy.ownerFilter?.(alias('r'))).text).toBe('false');
    expect(policy.operator).toBe(false);
    expect(policy.mayWriteFacility('fac-1')).toBe(false);
  });

  it('patientCheck refuses nothing of its own patient and every class of another', () => {
    expect(render(policy.patientCheck?.([{ patient: PATIENT, classes: ['labs:read'] }, { patient: 'patient-2', classes: ['labs:read', 'fhir:read'] }]))).toEqual({
      text: 'SELECT k.p, k.c FROM (VALUES ($1::text, $2::text), ($3::text, $4::text), ($5::text, $6::text)) AS "k"("p", "c") WHERE k.p <> $7',
      values: [PATIENT, 'labs:read', 'patient-2', 'labs:read', 'patient-2', 'fhir:read', PATIENT],
    });
  });
});

describe('a caller with no organisation (an agent created before agents had one)', () => {
  const policy = accessPolicyFor(agent({ organizationId: undefined }), 'bridge');

  it('sees only data about no patient, never the owner-only types, owns nothing and passes no patient check', () => {
    expect(policy.organizationId).toBeUndefined();
    const r = rowFilter(policy);
    expect(r.values).toEqual([]);
    expect(r.text).toBe(`(("r1"."patients" = '{}'::text[]) IS TRUE AND "r1"."resource_type" NOT IN ('AuditEvent', 'PaymentReconciliation', 'PaymentNotice'))`);
    expect(render(policy.ownerFilter?.(alias('r'))).text).toBe('false');
    expect(render(policy.patientCheck?.([{ patient: PATIENT, classes: ['patients:read'] }])).text).toBe('SELECT k.p, k.c FROM (VALUES ($1::text, $2::text)) AS "k"("p", "c")');
  });

  it('still writes its own facility’s data', () => {
    expect(policy.mayWriteFacility('fac-1')).toBe(true);
    expect(policy.mayWriteFacility('fac-2')).toBe(false);
  });
});

describe('facility data: written only by callers bound to that facility', () => {
  it('a client or agent bound to a facility writes that facility’s data only', () => {
    for (const principal of [client({ facilityId: 'fac-1' }), agent()]) {
      const policy = accessPolicyFor(principal, 'bridge');
      expect(policy.mayWriteFacility('fac-1')).toBe(true);
      expect(policy.mayWriteFacility('fac-2')).toBe(false);
      expect(policy.mayWriteFacility(null)).toBe(false);
      expect(policy.mayWriteFacility(undefined)).toBe(false);
    }
  });

  it('a client bound to no facility and a portal user write none', () => {
    for (const principal of [client(), portalUser]) {
      const policy = accessPolicyFor(principal, 'connect');
      expect(policy.mayWriteFacility('fac-1')).toBe(false);
      expect(policy.mayWriteFacility(undefined)).toBe(false);
    }
  });
});

describe('directory data: what any caller reads as the context of a record (the records’ references)', () => {
  it('is the rows about no patient, never the owner-only types (the audit trail, payments), and never NULL', () => {
    const r = render(directoryRows(alias('r')));
    expect(r.values).toEqual([]);
    expect(r.text).toBe(`(("r1"."patients" = '{}'::text[]) IS TRUE AND "r1"."resource_type" NOT IN ('AuditEvent', 'PaymentReconciliation', 'PaymentNotice'))`);
  });
});

describe('rowsOfTypes: the rule over rows of a few known types', () => {
  const policy = accessPolicyFor(client(), 'fhir');
  const of = (types: string[]) => rowsOfTypes(policy.rowFilter, alias('r'), types);

  it("is each type's own rule behind a test of the row's type, far shorter than the rule of any type", () => {
    const typed = render(of(['Encounter', 'Condition', 'Encounter']));
    expect(typed.text).toMatch(/"r\d*"\."resource_type" = 'Condition'\) AND/);
    expect(typed.text).toMatch(/"r\d*"\."resource_type" = 'Encounter'\) AND/);
    // The rule of any type names every type's class; the typed rules name only theirs.
    expect(typed.text).not.toContain('Observation');
    // (A third of it while the rule of any type wrote its dates of care twice; half of it since ed635a8.)
    expect(typed.text.length).toBeLessThan(rowFilter(policy).text.length / 2);
    expect(typed.values).toContain(ORG);
  });

  it('is the type\'s rule for one type, the rule of any type for many, nothing for none, and none for an operator', () => {
    // Rendered with the same alias: each render of a fragment names its own.
    const same = (fragment: Sql | undefined) => render(fragment).text.replace(/"r\d*"/g, '"r"');
    expect(same(of(['Encounter']))).toBe(same(policy.rowFilter!(alias('r'), 'Encounter')));
    const many = ['Encounter', 'Condition', 'Observation', 'Procedure', 'Immunization', 'CarePlan', 'Goal'];
    expect(same(of(many))).toBe(same(policy.rowFilter!(alias('r'))));
    expect(render(of([])).text).toBe('false');
    expect(rowsOfTypes(accessPolicyFor({ kind: 'system', name: 'import' }, 'fhir').rowFilter, alias('r'), ['Encounter'])).toBeUndefined();
  });

  it('keeps the owner-only rule of the audit trail and payments', () => {
    const typed = render(of(['AuditEvent', 'Encounter']));
    expect(typed.text).toMatch(/"r\d*"\."resource_type" = 'AuditEvent'\) AND \("r\d*"\."author_org" = \$\d+\)/);
  });
});

describe('an organisation known to hold plain grants only (ReadLimits: no kinds of record, no period)', () => {
  it('is judged by plain grants alone: nothing of the row but its patient and class, one EXISTS instead of two', () => {
    const scoped = rowFilter(accessPolicyFor(client(), 'fhir'), 'Observation').text;
    const plain = rowFilter(accessPolicyFor(client(), 'fhir', undefined, undefined, false, false), 'Observation').text;
    expect(scoped).toContain('effectiveDateTime');
    expect(plain).not.toContain('effectiveDateTime');
    expect(plain).not.toContain('= ANY(g.resource_types)');
    expect(plain.match(/EXISTS \(/g)).toHaveLength(1);
    expect(plain).toContain('g.resource_types IS NULL AND g.data_from IS NULL AND g.data_to IS NULL');
    expect(plain.length).toBeLessThan(scoped.length / 2);
  });
});
