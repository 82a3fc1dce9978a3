import type { Consent } from '@medplum/fhirtypes';
import { rmSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HEALTH_ID_SYSTEM } from '../src/healthid/healthid';
import { dropCodedOnlyExamples, mapEditor } from './break-map';
import { createTestClient, startTestServer, type TestClient, type TestServer } from './harness';

/**
 * Issue 26, item 4: the Connect shapes beyond the records come from the maps too. The SDK summary's patient block
 * (patient-summary.map.yaml), its blood group (the lab record of the ABO/Rh Observation), the webhook's test_name
 * and flagged (the lab record of the Observation) and the pushed flag_level (lab-result.map.yaml): each agrees with
 * the record of the same resource, and follows a map an informaticist edits, with no TypeScript.
 */
const LOINC = 'http://loinc.org';
const CONSENT_NOTE = 'https://pont.health/fhir/StructureDefinition/consent-note';
const SCT = 'http://snomed.info/sct';
const LAB = { coding: [{ system: 'http://terminology.hl7.org/CodeSystem/observation-category', code: 'laboratory' }] };
/** An ABO/Rh Observation whose text and coding say different groups: which one counts is the lab map's choice. */
const ABO_RH = {
  resourceType: 'Observation',
  status: 'final',
  category: [LAB],
  code: { coding: [{ system: LOINC, code: '882-1', display: 'ABO and Rh group [Type] in Blood' }] },
  effectiveDateTime: '2024-03-12T08:00:00Z',
  valueCodeableConcept: { text: 'Blood group A Rh(D) positive', coding: [{ system: SCT, code: '278148006', display: 'Blood group O Rh(D) negative' }] },
};

interface World {
  pont: TestServer;
  call(client: 'operator' | 'reader' | 'sdk', path: string, init?: RequestInit & { json?: unknown }): Promise<{ status: number; body: any }>;
  post(resource: Record<string, unknown>): Promise<string>;
  record(type: string, id: string): Promise<Record<string, any>>;
  released(observationId: string): Promise<Record<string, unknown>>;
  healthId: string;
  patientId: string;
}

/** A server on `env`'s maps, a patient (official name Ada Ngozi) and a reader with a consent covering everything. */
async function world(env: Record<string, string> = {}): Promise<World> {
  const pont = await startTestServer(env);
  const clients: Record<string, TestClient> = {
    operator: await createTestClient(pont, ['fhir:read', 'fhir:write'], { organizationId: 'org-operator', allPatients: true }),
    reader: await createTestClient(pont, ['consents:write', 'patient:diagnostics:read', 'patients:read', 'labs:read', 'health_id:verify'], { organizationId: 'org-reader' }),
    sdk: await createTestClient(pont, ['labs:write', 'labs:read', 'encounters:write'], { organizationId: 'org-reader' }),
  };
  const call: World['call'] = (client, path, init = {}) => pont.json(path, { ...init, headers: { ...clients[client]!.headers } });
  const created = await call('operator', '/api/fhir/R4/Patient', {
    method: 'POST',
    json: { resourceType: 'Patient', name: [{ use: 'official', family: 'Okafor', given: ['Ada', 'Ngozi'] }], gender: 'female', birthDate: '1980-02-03' },
  });
  expect(created.status).toBe(201);
  const patientId = created.body.id;
  const healthId = created.body.identifier.find((i: any) => i.system === HEALTH_ID_SYSTEM).value;
  const granted = await call('reader', `/api/v1/connect/patient/${healthId}/consent/grant`, {
    method: 'POST',
    json: { consent_type: 'full_record', expires_at: new Date(Date.now() + 365 * 86_400_000).toISOString() },
  });
  expect(granted.status).toBe(201);
  return {
    pont,
    call,
    healthId,
    patientId,
    async post(resource) {
      const res = await call('operator', `/api/fhir/R4/${resource.resourceType}`, { method: 'POST', json: { ...resource, subject: { reference: `Patient/${patientId}` } } });
      expect(res.status, JSON.stringify(res.body)).toBe(201);
      return res.body.id;
    },
    async record(type, id) {
      const res = await call('reader', `/api/v1/connect/patient/${healthId}/records?type=${type}&limit=1000`);
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      const found = res.body.records[type].find((r: any) => r.id === id);
      expect(found, `${type} ${id}`).toBeDefined();
      return found;
    },
    async released(observationId) {
      const { rows } = await pont.services.db.query<{ data: Record<string, unknown> }>(`SELECT data FROM events WHERE type = 'lab_result.released' AND data->>'lab_result_id' = $1`, [observationId]);
      expect(rows).toHaveLength(1);
      return rows[0]!.data;
    },
  };
}

describe('with the repository maps, a shape agrees with the record of the same resource', () => {
  let w: World;
  beforeAll(async () => {
    w = await world();
  }, 120_000);
  afterAll(() => w?.pont.close());

  it("the summary's blood group is read from the ABO/Rh Observation's lab record", async () => {
    const id = await w.post(ABO_RH);
    expect((await w.record('lab_results', id)).value_coded).toBe('Blood group A Rh(D) positive');
    const summary = await w.call('reader', `/api/v1/sdk/patients/${w.healthId}/summary`);
    expect(summary.status, JSON.stringify(summary.body)).toBe(200);
    expect(summary.body.patient).toEqual({ first_name: 'Ada', last_name: 'Okafor', full_name: 'Ada Ngozi Okafor', date_of_birth: '1980-02-03', sex: 'female', deceased: null, deceased_at: null, blood_group: 'A+' });
  });

  it("lab_result.released names the test as the lab record does (a first coding without a code: the next one's)", async () => {
    const id = await w.post({ resourceType: 'Observation', status: 'final', category: [LAB], code: { coding: [{ system: 'urn:oid:1.2.3.4' }, { system: LOINC, code: '718-7' }] } });
    const record = await w.record('lab_results', id);
    expect(record.test_name).toBe('718-7');
    expect(await w.released(id)).toMatchObject({ lab_result_id: id, test_name: '718-7', flagged: false });
  });

  it('flagged is the lab record’s flag: an abnormal interpretation code of the v3 system', async () => {
    const interpretation = (code: string, system?: string) => [{ coding: [{ ...(system ? { system } : {}), code }] }];
    const v3 = 'http://terminology.hl7.org/CodeSystem/v3-ObservationInterpretation';
    const high = await w.post({ resourceType: 'Observation', status: 'final', category: [LAB], code: { text: 'K' }, interpretation: interpretation('HU', v3) });
    expect(await w.record('lab_results', high)).toMatchObject({ flag: 'HU' });
    expect(await w.released(high)).toMatchObject({ flagged: true });
    const local = await w.post({ resourceType: 'Observation', status: 'final', category: [LAB], code: { text: 'K' }, interpretation: interpretation('H', 'urn:oid:1.2.3.4') });
    expect(await w.record('lab_results', local)).toMatchObject({ flag: null });
    expect(await w.released(local)).toMatchObject({ flagged: false });
  });

  it('a pushed flag_level is the lab record’s flag_level, and the answer’s flag its code', async () => {
    const res = await w.call('sdk', '/api/v1/sdk/records/lab-results', {
      method: 'POST',
      json: { health_id: w.healthId, test_name: 'Hemoglobin', result_value: '6.1', unit: 'g/dL', flagged: true, flag_level: 'critical_low' },
    });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    expect(res.body).toMatchObject({ flagged: true, flag: 'LL' });
    expect(await w.record('lab_results', res.body.lab_result_id)).toMatchObject({ flag: 'LL', flag_level: 'critical_low' });
    const unflagged = await w.call('sdk', '/api/v1/sdk/records/lab-results', { method: 'POST', json: { health_id: w.healthId, test_name: 'Hb', result_value: '13', flagged: false, flag_level: 'high' } });
    expect(unflagged.status).toBe(422);
  });

  it('its fields are the map’s (the patient named by Health ID), its states the map’s and the two of no live consent', async () => {
    const doc = (await w.pont.json('/api/openapi.json')).body;
    const schema = doc.components.schemas.ConsentStatus;
    expect(Object.keys(schema.properties).sort()).toEqual(
      ['consent_id', 'health_id', 'organization_id', 'consent_type', 'scopes', 'status', 'purpose', 'granted_at', 'expires_at'].concat(
        // The consent artefact's (issue 43, docs/consent-artefacts.md).
        ['purpose_of_use', 'hi_types', 'date_range', 'erase_at', 'frequency'],
      ).sort(),
    );
    expect([...schema.properties.status.enum].sort()).toEqual(['active', 'denied', 'expired', 'none', 'pending', 'revoked']);
    const answer = await w.call('reader', `/api/v1/connect/patient/${w.healthId}/consent`);
    expect(answer.body).toMatchObject({ health_id: w.healthId, organization_id: 'org-reader', status: 'active', consent_type: 'full_record' });
    expect(answer.body.patient_id).toBeUndefined();
  });
});

describe('with maps an informaticist edited, the shapes follow them (no TypeScript, no new code)', () => {
  const scratch: string[] = [];
  const editMaps = mapEditor(scratch);
  let w: World;
  beforeAll(async () => {
    const dir = editMaps([
      // The summary, resolve and verify show every given name.
      ['patient-summary.map.yaml', "first_name: '%current_name.given[0]'", "first_name: \"%current_name.given.join(' ')\""],
      ['patient-demographics.map.yaml', "first_name: '%current_name.given[0]'", "first_name: \"%current_name.given.join(' ')\""],
      // A coded result is named by its coding's display before its text; a test by its code before its display.
      ['lab-result.map.yaml', '\n  value_coded: valueCodeableConcept.text | valueCodeableConcept.coding.display', '\n  value_coded: valueCodeableConcept.coding.display | valueCodeableConcept.text'],
      ['lab-result.map.yaml', 'test_name: code.text | code.coding.display | code.coding.code', 'test_name: code.text | code.coding.code | code.coding.display'],
      // Alerts are only high or moderate.
      ['cdss-alert.map.yaml', 'values: [high, moderate, low]', 'values: [high, moderate]'],
      // A new flag level.
      ['lab-result.map.yaml', 'values: [normal, abnormal,', 'values: [very_high, normal, abnormal,'],
      ['lab-result.map.yaml', '      normal: N\n', '      normal: N\n      very_high: HU\n'],
      // Pont does not track leave.
      ['visit.map.yaml', 'in-progress, onleave, finished', 'in-progress, finished'],
      // A consent carries a note, and one entered in error reads as withdrawn.
      ['consent.map.yaml', '  expires_at:      { type: date-time, nullable: true }\n', '  expires_at:      { type: date-time, nullable: true }\n  note:            { type: string, nullable: true }\n'],
      ['consent.map.yaml', '  expires_at: provision.period.end\n', `  expires_at: provision.period.end\n  note: extension.where(url='${CONSENT_NOTE}').valueString\n`],
      ['consent.map.yaml', 'values: [pending, active, revoked, denied]', 'values: [pending, active, revoked, denied, withdrawn]'],
      ['consent.map.yaml', '      denied: rejected\n', '      denied: rejected\n      withdrawn: entered-in-error\n'],
      ['consent.examples.yaml', '    expires_at: 2027-11-02T09:30:00Z\n', '    expires_at: 2027-11-02T09:30:00Z\n    note: null\n'],
      ['consent.examples.yaml', '    expires_at: 2027-05-01T00:00:00Z\n', '    expires_at: 2027-05-01T00:00:00Z\n    note: null\n'],
    ]);
    dropCodedOnlyExamples(dir, 'lab-result.examples.yaml');
    w = await world({ PONT_MAPPINGS_DIR: dir });
  }, 120_000);
  afterAll(async () => {
    await w?.pont.close();
    scratch.forEach((dir) => rmSync(dir, { recursive: true, force: true }));
  });

  it("the summary's patient block and blood group", async () => {
    const id = await w.post(ABO_RH);
    expect((await w.record('lab_results', id)).value_coded).toBe('Blood group O Rh(D) negative');
    const summary = await w.call('reader', `/api/v1/sdk/patients/${w.healthId}/summary`);
    expect(summary.status, JSON.stringify(summary.body)).toBe(200);
    expect(summary.body.patient).toMatchObject({ first_name: 'Ada Ngozi', blood_group: 'O-' });
  });

  it("resolve's and verify's patient", async () => {
    const verified = await w.call('reader', `/api/v1/connect/patients/verify/${w.healthId}`);
    expect(verified.status, JSON.stringify(verified.body)).toBe(200);
    expect(verified.body.patient).toEqual({ health_id: w.healthId, first_name: 'Ada Ngozi', last_name: 'Okafor', date_of_birth: '1980-02-03', sex: 'female', country_code: null });
    const resolved = await w.call('reader', '/api/v1/connect/patients/resolve', { method: 'POST', json: { health_id: w.healthId } });
    expect(resolved.body.patient).toMatchObject({ health_id: w.healthId, first_name: 'Ada Ngozi' });
  });

  it("the webhook's test_name", async () => {
    const id = await w.post({ resourceType: 'Observation', status: 'final', category: [LAB], code: { coding: [{ system: LOINC, code: '718-7', display: 'Hemoglobin' }] } });
    expect((await w.record('lab_results', id)).test_name).toBe('718-7');
    expect(await w.released(id)).toMatchObject({ test_name: '718-7' });
  });

  it('the flag levels a push accepts, published in the OpenAPI document', async () => {
    const res = await w.call('sdk', '/api/v1/sdk/records/lab-results', { method: 'POST', json: { health_id: w.healthId, test_name: 'K', result_value: '7.9', flagged: true, flag_level: 'very_high' } });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    expect(res.body.flag).toBe('HU');
    expect(await w.record('lab_results', res.body.lab_result_id)).toMatchObject({ flag: 'HU', flag_level: 'very_high' });
    const doc = (await w.pont.json('/api/openapi.json')).body;
    expect(doc.components.schemas.LabResultPush.properties.flag_level.enum).toContain('very_high');
  });

  it("the severities an alert push accepts and publishes are the alert map's", async () => {
    const alert = (severity: string) =>
      w.call('sdk', '/api/v1/sdk/records/encounters', { method: 'POST', json: { health_id: w.healthId, encounter_type: 'cdss_alert', alert_type: 'drug_interaction', severity } });
    expect((await alert('moderate')).status).toBe(201);
    const low = await alert('low');
    expect(low.status).toBe(422);
    expect(JSON.stringify(low.body)).toContain('severity');
    const doc = (await w.pont.json('/api/openapi.json')).body;
    expect(doc.components.schemas.EncounterPush.properties.severity.enum).toEqual(['high', 'moderate']);
  });

  it("the statuses an encounter push accepts and publishes are the visit map's", async () => {
    const push = (status: string) => w.call('sdk', '/api/v1/sdk/records/encounters', { method: 'POST', json: { health_id: w.healthId, encounter_type: 'consultation', status } });
    expect((await push('in-progress')).status).toBe(201);
    const onLeave = await push('onleave');
    expect(onLeave.status).toBe(422);
    expect(JSON.stringify(onLeave.body)).toContain('status');
    const doc = (await w.pont.json('/api/openapi.json')).body;
    expect(doc.components.schemas.EncounterPush.properties.status.enum).toEqual(['planned', 'arrived', 'triaged', 'in-progress', 'finished', 'cancelled']);
  });

  it("a consent answer has the consent map's fields and states, published in the OpenAPI document", async () => {
    const consentPath = `/api/v1/connect/patient/${w.healthId}/consent`;
    expect((await w.call('reader', consentPath)).body).toMatchObject({ status: 'active', note: null });
    const revoked = await w.call('reader', `${consentPath}/revoke`, { method: 'POST', json: {} });
    expect(revoked.status, JSON.stringify(revoked.body)).toBe(200);
    expect(revoked.body).toMatchObject({ status: 'revoked', note: null });
    // A consent entered in error, with a note, recorded by Pont itself (consents are not written through FHIR).
    const posted = await w.pont.services.fhir.system('test: a consent entered in error').create({
      resourceType: 'Consent',
      extension: [{ url: CONSENT_NOTE, valueString: 'recorded on the wrong patient' }],
      status: 'entered-in-error',
      scope: { coding: [{ system: 'http://terminology.hl7.org/CodeSystem/consentscope', code: 'patient-privacy' }] },
      category: [{ coding: [{ system: 'https://pont.health/fhir/CodeSystem/consent-type', code: 'summary' }] }],
      patient: { reference: `Patient/${w.patientId}` },
      policyRule: { coding: [{ system: 'http://terminology.hl7.org/CodeSystem/v3-ActCode', code: 'OPTIN' }] },
      provision: {
        type: 'permit',
        actor: [
          {
            role: { coding: [{ system: 'http://terminology.hl7.org/CodeSystem/v3-ParticipationType', code: 'IRCP' }] },
            reference: { identifier: { system: 'https://pont.health/fhir/sid/organization-id', value: 'org-reader' } },
          },
        ],
      },
    } as Consent);
    const status = await w.call('reader', consentPath);
    expect(status.status, JSON.stringify(status.body)).toBe(200);
    expect(status.body).toMatchObject({ consent_id: posted.id, status: 'withdrawn', note: 'recorded on the wrong patient', consent_type: 'summary' });
    const schema = (await w.pont.json('/api/openapi.json')).body.components.schemas.ConsentStatus;
    expect(schema.properties.note).toBeDefined();
    expect([...schema.properties.status.enum].sort()).toEqual(['active', 'denied', 'expired', 'none', 'pending', 'revoked', 'withdrawn']);
  });
});
