import { readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadFhirDefinitions } from '../src/core/fhir-definitions';
import { HEALTH_ID_SYSTEM } from '../src/healthid/healthid';
import { checkMappings, defaultMappingsDir, loadMappings } from '../src/mapping/index';
import { MappingHolder } from '../src/mapping/holder';
import { searchProblem } from '../src/fhir/search/parse';
import { mapEditor } from './break-map';
import { cliInProcess } from './cli-in-process';
import { createTestClient, startTestServer, type TestClient, type TestServer } from './harness';

/**
 * Issue 26 item 3: a record type from its map alone. `immunizations` is mappings/immunization.map.yaml and its
 * examples, nothing else: an Immunization posted over FHIR reads back as a Connect record, consent-gated by the
 * class the map declares, in the OpenAPI document; a map declaring what does not exist fails the check.
 */
const inAYear = () => new Date(Date.now() + 365 * 86_400_000).toISOString();
const READ_SCOPES = ['consents:write', 'patient:diagnostics:read', 'patients:read', 'labs:read'] as const;

describe('immunizations, a record type declared by its map', () => {
  let pont: TestServer;
  let clinic: TestClient;
  let healthId: string;
  let immunizationId: string;
  const call = (client: TestClient, path: string, init: RequestInit & { json?: unknown } = {}) => pont.json(path, { ...init, headers: { ...client.headers } });
  const records = (client: TestClient, query: string) => call(client, `/api/v1/connect/patient/${healthId}/records${query}`);
  /** A client of `org` whose patient's consent covers `scopes` (all of full_record when not given). */
  const consented = async (org: string, scopes?: string[]) => {
    const client = await createTestClient(pont, [...READ_SCOPES], { organizationId: org });
    const granted = await call(client, `/api/v1/connect/patient/${healthId}/consent/grant`, { method: 'POST', json: { consent_type: 'full_record', ...(scopes ? { scopes } : {}), expires_at: inAYear() } });
    expect(granted.status, JSON.stringify(granted.body)).toBe(201);
    return client;
  };

  beforeAll(async () => {
    pont = await startTestServer();
    clinic = await createTestClient(pont, ['fhir:write', 'fhir:read'], { organizationId: 'org-clinic', allPatients: true });
    const patient = await call(clinic, '/api/fhir/R4/Patient', { method: 'POST', json: { resourceType: 'Patient', name: [{ family: 'Okafor', given: ['Ada'] }], birthDate: '2019-02-03' } });
    expect(patient.status).toBe(201);
    healthId = patient.body.identifier.find((i: { system: string }) => i.system === HEALTH_ID_SYSTEM).value;
    // As another system writes it: coded only (no text), a CVX code, the dose in protocolApplied.
    const posted = await call(clinic, '/api/fhir/R4/Immunization', {
      method: 'POST',
      json: {
        resourceType: 'Immunization',
        status: 'completed',
        vaccineCode: { coding: [{ system: 'http://hl7.org/fhir/sid/cvx', code: '08', display: 'Hep B, adolescent or pediatric' }] },
        patient: { reference: `Patient/${patient.body.id}` },
        occurrenceDateTime: '2024-05-06T10:20:00Z',
        primarySource: true,
        lotNumber: 'X12',
        route: { coding: [{ system: 'http://terminology.hl7.org/CodeSystem/v3-RouteOfAdministration', code: 'IM', display: 'Injection, intramuscular' }] },
        protocolApplied: [{ doseNumberPositiveInt: 1 }],
      },
    });
    expect(posted.status, JSON.stringify(posted.body)).toBe(201);
    immunizationId = posted.body.id;
  });
  afterAll(async () => {
    await pont?.close();
  });

  it('reads an Immunization posted over FHIR as a Connect record', async () => {
    const reader = await consented('org-reader');
    const res = await records(reader, '?type=immunizations');
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body.records).toEqual({
      immunizations: [
        {
          id: immunizationId,
          patient_id: expect.any(String),
          visit_id: null,
          vaccine: 'Hep B, adolescent or pediatric',
          cvx_code: '08',
          vaccine_code: '08',
          vaccine_code_system: 'http://hl7.org/fhir/sid/cvx',
          status: 'completed',
          status_reason: null,
          status_reason_code: null,
          status_reason_system: null,
          occurred_at: '2024-05-06T10:20:00Z',
          occurrence_text: null,
          primary_source: true,
          report_origin: null,
          report_origin_code: null,
          report_origin_system: null,
          performer: null,
          performers: [],
          location: null,
          lot_number: 'X12',
          dose_number: 1,
          dose_number_text: null,
          series: null,
          series_doses: null,
          target_disease: null,
          target_disease_code: null,
          target_disease_system: null,
          target_disease_codings: [],
          reaction: null,
          reaction_date: null,
          reaction_references: [],
          dose_quantity: null,
          dose_unit: null,
          dose_unit_code: null,
          expiration_date: null,
          manufacturer: null,
          reason: null,
          reason_codings: [],
          reason_references: [],
          is_subpotent: null,
          subpotent_reason: null,
          subpotent_reason_code: null,
          subpotent_reason_system: null,
          site: null,
          site_code: null,
          site_system: null,
          route: 'Injection, intramuscular',
          route_code: 'IM',
          route_system: 'http://terminology.hl7.org/CodeSystem/v3-RouteOfAdministration',
          route_codings: [{ system: 'http://terminology.hl7.org/CodeSystem/v3-RouteOfAdministration', code: 'IM', display: 'Injection, intramuscular' }],
          note: null,
          funding_source: null,
          funding_source_code: null,
          funding_source_system: null,
          program_eligibility: null,
          program_eligibility_codings: [],
          vaccine_codings: [{ system: 'http://hl7.org/fhir/sid/cvx', code: '08', display: 'Hep B, adolescent or pediatric' }],
        },
      ],
    });
    expect(res.body.next_cursor).toBeNull();
    const all = await records(reader, '');
    expect(all.body.records.immunizations.map((r: { id: string }) => r.id)).toEqual([immunizationId]);
    expect(all.body.withheld).toEqual([]);
  });

  it('withholds it from a client whose consent lacks its class (patients:read), like any other type', async () => {
    const labsOnly = await consented('org-labs', ['labs:read']);
    const refused = await records(labsOnly, '?type=immunizations');
    expect(refused.status).toBe(403);
    expect(refused.body.error_code).toBe('CONSENT_REQUIRED');
    const all = await records(labsOnly, '');
    expect(all.status).toBe(200);
    expect(all.body.records.immunizations).toBeUndefined();
    expect(all.body.withheld).toContain('immunizations');
    expect(all.body.withheld).toContain('diagnoses');
    expect(all.body.withheld).not.toContain('lab_results');
    // And an organisation with no consent at all reads nothing.
    const stranger = await createTestClient(pont, [...READ_SCOPES], { organizationId: 'org-stranger' });
    const none = await records(stranger, '?type=immunizations');
    expect(none.status).toBe(403);
    expect(JSON.stringify(none.body)).not.toContain(immunizationId);
  });

  it('is in the OpenAPI document: the type enum and the Immunization shape, from the map', async () => {
    const doc = (await pont.json('/api/openapi.json')).body;
    const get = doc.paths['/api/v1/connect/patient/{health_id}/records'].get;
    const type = get.parameters.find((p: { name: string }) => p.name === 'type');
    expect(type.schema.enum).toContain('immunizations');
    const shape = doc.components.schemas.Immunization;
    expect(Object.keys(shape.properties)).toEqual(loadMappings().get('immunization').fields);
    expect(Object.keys(shape.properties)).toEqual(expect.arrayContaining(['id', 'patient_id', 'vaccine', 'cvx_code', 'status', 'occurred_at', 'occurrence_text', 'lot_number']));
    expect(shape.properties.status.anyOf?.[0]?.enum ?? shape.properties.status.enum).toEqual(['completed', 'entered-in-error', 'not-done']);
    expect(doc.components.schemas.PatientRecords.properties.records.properties.immunizations.items.$ref).toBe('#/components/schemas/Immunization');
  });

  it('refuses an unknown type with the list of the declared ones (422)', async () => {
    const reader = await consented('org-reader-2');
    const res = await records(reader, '?type=immunisations');
    expect(res.status).toBe(422);
    expect(JSON.stringify(res.body)).toContain('immunizations');
  });
});

describe('a record type declared wrongly fails `pont mappings check` at its line and column', () => {
  const scratch: string[] = [];
  beforeAll(() => loadFhirDefinitions());
  afterAll(() => scratch.forEach((d) => rmSync(d, { recursive: true, force: true })));
  const editMaps = mapEditor(scratch);
  /** A copy of the repository's maps with immunization.map.yaml edited. */
  const withEdit = (from: string, to: string) => editMaps([['immunization.map.yaml', from, to]]);
  const problems = (dir: string) => checkMappings(dir).problems.map((p) => p.message.replace(dir, 'D'));
  /** `pont mappings check DIR` as a user runs it (runCli, in this process: test/mapping.test.ts starts the compiled command): its exit code and what it printed. */
  const checkCommand = async (dir: string) => {
    const { code, stdout, stderr } = await cliInProcess('mappings', 'check', dir);
    return { code, stderr: `${stdout}${stderr}` };
  };
  const lineOf = (dir: string, text: string) => readFileSync(join(dir, 'immunization.map.yaml'), 'utf8').split('\n').findIndex((l) => l.includes(text)) + 1;

  it('the repository maps pass', () => {
    expect(checkMappings().problems.map((p) => p.message)).toEqual([]);
  });

  it('an unknown data class, named with the nearest and the list', () => {
    const dir = withEdit('  class: patients:read', '  class: patient:read');
    expect(problems(dir)).toEqual([
      `D/immunization.map.yaml:${lineOf(dir, 'class: patient:read')}:10: unknown data class \`patient:read\` (did you mean \`patients:read\`?); classes: patients:read, labs:read, prescriptions:read, documents:read, appointments:read, fhir:read`,
    ]);
  });

  it('a known class that is not the access policy’s class of the resource', () => {
    const dir = withEdit('  class: patients:read', '  class: labs:read');
    expect(problems(dir)).toEqual([
      `D/immunization.map.yaml:${lineOf(dir, 'class: labs:read')}:10: Immunization is in the class \`patients:read\` (the access policy, src/core/scopes.ts): consent to that class is what covers these records`,
    ]);
  });

  it('an unknown FHIR type, through the command', async () => {
    const dir = withEdit('resource: Immunization', 'resource: Immunisation');
    const result = await checkCommand(dir);
    expect(result.code).toBe(1);
    expect(result.stderr).toContain(`${join(dir, 'immunization.map.yaml')}:${lineOf(dir, 'resource: Immunisation')}:11: unknown FHIR resource type \`Immunisation\` (did you mean \`Immunization\`?)`);
  });

  it('a search the store would refuse (a modifier its parameter does not take, a value it cannot parse): refused by the check, the command and a reload, at the type', async () => {
    const line = (dir: string) => lineOf(dir, 'type: immunizations');
    const modifier = withEdit('  date: { search: date, field: occurred_at }', '  search: { vaccine-code:contains: http://hl7.org/fhir/sid/cvx|08 }\n  date: { search: date, field: occurred_at }');
    expect(checkMappings(modifier, { searchProblem }).problems.map((p) => p.message.replace(modifier, 'D'))).toEqual([
      `D/immunization.map.yaml:${line(modifier)}:9: record type immunizations: its \`search\` is refused by the store: Modifier :contains is not supported for token parameter vaccine-code`,
    ]);
    const value = withEdit('  date: { search: date, field: occurred_at }', "  search: { date: 'last week' }\n  date: { search: date, field: occurred_at }");
    expect(checkMappings(value, { searchProblem }).problems.map((p) => p.message)).toEqual([expect.stringMatching(/its `search` is refused by the store: .*date/)]);
    expect(() => new MappingHolder(modifier, { searchProblem })).toThrow(/Modifier :contains is not supported/);
    const failed = await checkCommand(modifier);
    expect(failed.code).toBe(1);
    expect(failed.stderr).toContain('Modifier :contains is not supported for token parameter vaccine-code');
  });

  it('a map of a type that may give a value its shape does not allow (a report status a lab result cannot have)', () => {
    const dir = editMaps([
      ['lab-report.map.yaml', '[registered, preliminary, final, amended, corrected, cancelled, entered-in-error, unknown]', '[registered, partial, preliminary, final, amended, corrected, cancelled, entered-in-error, unknown]'],
      ['lab-report.map.yaml', '      preliminary: [partial]\n', ''],
      ['lab-report.map.yaml', '      preliminary: preliminary\n', '      preliminary: preliminary\n      partial: partial\n'],
    ]);
    const line = readFileSync(join(defaultMappingsDir, 'lab-report.map.yaml'), 'utf8').split('\n').findIndex((l) => l.startsWith('  type: lab_results')) + 1;
    // The map's problem (its examples of a partial report, read as preliminary before the edit, differ too).
    expect(problems(dir).filter((p) => p.includes('.map.yaml'))).toEqual([
      `D/lab-report.map.yaml:${line}:9: \`status\` may be \`partial\`, which the shape \`LabResult\` (map \`lab-result\`) does not allow: read them as its values (\`read\`) or add them there`,
    ]);
  });

  it('an unknown search parameter, a date parameter or field that is not a date, a second shape, no shape', () => {
    expect(problems(withEdit('  date: { search: date, field: occurred_at }', '  search: { vaccine-cod: http://hl7.org/fhir/sid/cvx|08 }\n  date: { search: date, field: occurred_at }'))).toEqual([
      'D/immunization.map.yaml:12:13: Immunization has no search parameter `vaccine-cod` (did you mean `vaccine-code`?)',
    ]);
    expect(problems(withEdit('  date: { search: date, field: occurred_at }', "  search: { patient: 'Patient/x' }\n  date: { search: date, field: occurred_at }"))).toEqual([
      'D/immunization.map.yaml:12:13: `patient` is set by the records route (the patient, the order, the page): select by what the resources are',
    ]);
    expect(problems(withEdit('  date: { search: date, field: occurred_at }', '  date: { search: lot-number, field: lot_number }'))).toEqual([
      'D/immunization.map.yaml:12:19: Immunization has no date search parameter `lot-number`; its date parameters: _lastUpdated, date, reaction-date',
      'D/immunization.map.yaml:12:38: `lot_number` is a string: records are ordered by a date or date-time field',
    ]);
    expect(problems(withEdit('  shape: Immunization', '  shape: Diagnosis'))).toEqual([
      expect.stringMatching(/^D\/(diagnosis|immunization)\.map\.yaml:\d+:9: the shape `Diagnosis` is already the record type `(diagnoses|immunizations)`'s$/),
    ]);
    expect(problems(withEdit('  shape: Immunization\n', ''))).toEqual([
      'D/immunization.map.yaml:9:9: record type `immunizations`: no map of it gives its `shape` (the name of its fields in the OpenAPI document)',
    ]);
  });

  it('an `except` naming no record type, the type itself, a type that reads another resource, or one that excepts it back', () => {
    const observations = (to: string) => problems(editMaps([['observation.map.yaml', '  except: [lab_results, vitals]', to]]));
    const line = readFileSync(join(defaultMappingsDir, 'observation.map.yaml'), 'utf8').split('\n').findIndex((l) => l.startsWith('  except:')) + 1;
    expect(observations('  except: [lab_result, observations, immunizations]')).toEqual([
      `D/observation.map.yaml:${line}:12: no map declares the record type \`lab_result\` (did you mean \`lab_results\`?)`,
      `D/observation.map.yaml:${line}:24: a record type cannot except itself`,
      `D/observation.map.yaml:${line}:38: the record type \`immunizations\` reads no Observation: there is nothing of it to except`,
    ]);
    // vitals excepting observations, which except vitals: a blood pressure both select would be read by neither.
    const cycle = problems(editMaps([['vital.map.yaml', '  date: { search: date, field: recorded_at }', '  except: observations\n  date: { search: date, field: recorded_at }']]));
    expect(cycle).toEqual([
      expect.stringMatching(/^D\/observation\.map\.yaml:\d+:\d+: `vitals` excepts `observations` \(through the types it excepts\): a resource both select would be read by neither$/),
      expect.stringMatching(/^D\/vital\.map\.yaml:\d+:\d+: `observations` excepts `vitals` \(through the types it excepts\): a resource both select would be read by neither$/),
    ]);
  });
});
