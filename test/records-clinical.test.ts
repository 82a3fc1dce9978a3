import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { x as extract } from 'tar';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HEALTH_ID_SYSTEM } from '../src/healthid/healthid';
import { createTestClient, startTestServer, type TestClient, type TestServer } from './harness';

/**
 * Issue 39: a record type for every clinical resource. FHIR loaded as an operator loads it (`PUT` with the writer's own
 * ids: `1`, `p1`, `example-implant`), read through `GET …/records?type=<type>` and `type=all`:
 * - the FHIR specification's own examples of each type (samples/r4-spec-examples-clinical.tar.gz), their patient made
 *   ours (also one named by display only) and what they refer to made to exist or left as its display (the store
 *   keeps references whole);
 * - a small corpus written the way other systems write: references without display, ids that are not UUIDs, several
 *   codings and no text, no categories, optional fields missing.
 * Consent: an organisation without one reads none of them; one whose consent lacks a type's class has it withheld.
 */
type R = Record<string, any>;
const samples = fileURLToPath(new URL('../samples', import.meta.url));
/** Our corpus of other writers' conventions; its patient is PATIENT. */
const OTHER_WRITERS = fileURLToPath(new URL('./other-writers-clinical.json', import.meta.url));
const inAYear = () => new Date(Date.now() + 365 * 86_400_000).toISOString();
// Every id is the writer's own ("123", "1", "p1", "e1").
const PATIENT = '123';
const SCT = 'http://snomed.info/sct';
const LOINC = 'http://loinc.org';
/** The record type of each resource type. */
const TYPE_OF: Record<string, string> = {
  Procedure: 'procedures',
  CarePlan: 'care_plans',
  Goal: 'goals',
  ServiceRequest: 'orders',
  FamilyMemberHistory: 'family_history',
  Device: 'devices',
  DeviceUseStatement: 'devices',
  Specimen: 'specimens',
  MedicationDispense: 'dispenses',
  MedicationStatement: 'medication_statements',
  MedicationAdministration: 'administrations',
  QuestionnaireResponse: 'assessments',
  Media: 'media',
  Appointment: 'appointments',
  Flag: 'flags',
  AdverseEvent: 'adverse_events',
  ClinicalImpression: 'clinical_impressions',
  Communication: 'communications',
  DeviceRequest: 'device_requests',
  NutritionOrder: 'nutrition_orders',
  ImmunizationRecommendation: 'immunization_recommendations',
  EpisodeOfCare: 'episodes_of_care',
  ImmunizationEvaluation: 'immunization_evaluations',
  VisionPrescription: 'vision_prescriptions',
  BodyStructure: 'body_structures',
  CommunicationRequest: 'communication_requests',
  Task: 'tasks',
};
const NEW_TYPES = [...new Set(Object.values(TYPE_OF))];
/**
 * Examples the access policy keeps from consent holders: patient data Pont cannot place in a compartment. A contained
 * Provenance naming no patient (ServiceRequest physiotherapy) is read by its author only; a contained Patient
 * (QuestionnaireResponse 3141) is not read as a record by anyone (its author reads it through FHIR).
 */
const authorOnly = (r: R) => (r.contained ?? []).some((c: R) => c.resourceType === 'Provenance');
const unplaced = (r: R) => (r.contained ?? []).some((c: R) => c.resourceType === 'Patient');
/** Types the specification's examples refer to that need nothing but an id to exist. */
const STUBS = ['Practitioner', 'PractitionerRole', 'Organization', 'Location', 'Device', 'Medication', 'RelatedPerson'];

/**
 * A specification example made loadable here: every patient is ours, a reference to a type of STUBS stays (the
 * stub is made), any other reference keeps only its display (dropped when it has none).
 */
function loadable(resource: R, stubs: Set<string>): R {
  const walk = (value: unknown): unknown => {
    if (Array.isArray(value)) {
      const items = value.map(walk).filter((v) => v !== undefined);
      return items.length ? items : undefined;
    }
    if (typeof value !== 'object' || value === null) return value;
    const out: R = {};
    for (const [k, v] of Object.entries(value)) {
      const w = walk(v);
      if (w !== undefined) out[k] = w;
    }
    const m = typeof out.reference === 'string' ? /(^|\/)([A-Z][A-Za-z]+)\/([A-Za-z0-9.-]+)(\/_history\/\w+)?$/.exec(out.reference) : null;
    // Any patient (also on another server: `https://…/Patient/77662`) is ours; a contained CareTeam names it too.
    if (m?.[2] === 'Patient') out.reference = `Patient/${PATIENT}`;
    else if (m && m[2] === resource.resourceType && m[3] === resource.id) {
      // Itself (a contained Provenance's target): it exists.
    } else if (m && !m[1] && !m[4] && STUBS.includes(m[2]!)) stubs.add(out.reference);
    else if (m) delete out.reference;
    if (out.resourceType === 'CareTeam' && !out.subject) out.subject = { reference: `Patient/${PATIENT}` };
    return Object.keys(out).length ? out : undefined;
  };
  const out = walk(resource) as R;
  // A patient named by display only (`subject: {display: "Jane Doe"}`) is ours too.
  for (const key of ['subject', 'patient']) if (out[key] && !out[key].reference) out[key] = { ...out[key], reference: `Patient/${PATIENT}` };
  return out;
}

describe('records of every clinical resource (issue 39)', () => {
  let pont: TestServer;
  let operator: TestClient;
  let healthId: string;
  let dir: string;
  /** Record ids expected in each type: the specification's examples and our corpus; and what only their author reads. */
  const expected: Record<string, string[]> = {};
  const ofAuthor: Record<string, string[]> = {};
  const call = (client: TestClient, path: string, init: RequestInit & { json?: unknown } = {}) => pont.json(path, { ...init, headers: { ...client.headers } });
  const put = async (resource: R) => {
    const res = await call(operator, `/api/fhir/R4/${resource.resourceType}/${resource.id}`, { method: 'PUT', json: resource });
    expect([200, 201], `${resource.resourceType}/${resource.id}: ${JSON.stringify(res.body).slice(0, 400)}`).toContain(res.status);
    return res.body;
  };
  const records = (client: TestClient, query: string) => call(client, `/api/v1/connect/patient/${healthId}/records${query}`);
  /** A client whose consent for the patient is `consent_type`, narrowed to `scopes` when given. */
  const consented = async (org: string, consent_type = 'full_record', scopes?: string[]) => {
    const client = await createTestClient(pont, ['consents:write', 'patient:diagnostics:read'], { organizationId: org });
    const granted = await call(client, `/api/v1/connect/patient/${healthId}/consent/grant`, { method: 'POST', json: { consent_type, ...(scopes ? { scopes } : {}), expires_at: inAYear() } });
    expect(granted.status, JSON.stringify(granted.body)).toBe(201);
    return client;
  };
  const expect_ = (resource: R) => {
    if (unplaced(resource)) return;
    if (!authorOnly(resource)) (expected[TYPE_OF[resource.resourceType]!] ??= []).push(resource.id);
    (ofAuthor[TYPE_OF[resource.resourceType]!] ??= []).push(resource.id);
  };

  beforeAll(async () => {
    pont = await startTestServer();
    operator = await createTestClient(pont, ['fhir:write', 'fhir:read', 'patient:diagnostics:read'], { organizationId: 'org-ehr', allPatients: true });
    const patient = await put({ resourceType: 'Patient', id: PATIENT, name: [{ family: 'Chalmers', given: ['Peter'] }], gender: 'male', birthDate: '1974-12-25' });
    healthId = patient.identifier.find((i: R) => i.system === HEALTH_ID_SYSTEM).value;

    // The specification's examples.
    dir = mkdtempSync(join(tmpdir(), 'pont-spec-'));
    extract({ file: join(samples, 'r4-spec-examples-clinical.tar.gz'), cwd: dir, sync: true });
    const stubs = new Set<string>();
    const spec = readdirSync(dir)
      .sort()
      .map((f) => loadable(JSON.parse(readFileSync(join(dir, f), 'utf8')), stubs))
      // The one invalid example (base64 with spaces) is refused by any FHIR server.
      .filter((r) => !(r.resourceType === 'Media' && r.id === 'example'));
    for (const ref of stubs) {
      const [resourceType, id] = ref.split('/');
      // A RelatedPerson is someone's: ours.
      const of = resourceType === 'RelatedPerson' ? { patient: { reference: `Patient/${PATIENT}` } } : {};
      if (!spec.some((r) => r.resourceType === resourceType && r.id === id)) await put({ resourceType, id, ...of });
    }
    for (const resource of spec) {
      await put(resource);
      // A Device of no patient, a herd's pooled serum (Specimen.subject a Group): no one's record.
      if (resource.subject || resource.patient) expect_(resource);
    }

    // Other writers' conventions (test/other-writers-clinical.json, also read by the corpus test): references without
    // display, ids not UUIDs, codings without text or display, no categories; what they refer to first.
    for (const resource of JSON.parse(readFileSync(OTHER_WRITERS, 'utf8')) as R[]) {
      await put(resource);
      if (TYPE_OF[resource.resourceType]) expect_(resource);
    }
  }, 300_000);
  afterAll(async () => {
    await pont?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('reads every example of the specification and of our corpus, by type and in type=all', async () => {
    const reader = await consented('org-reader');
    const all = await records(reader, '?type=all&limit=1000');
    expect(all.status, JSON.stringify(all.body).slice(0, 400)).toBe(200);
    expect(all.body.withheld).toEqual([]);
    for (const type of NEW_TYPES) {
      const one = await records(reader, `?type=${type}&limit=1000`);
      expect(one.status, type).toBe(200);
      expect(one.body.records[type].map((r: R) => r.id).sort(), type).toEqual(expected[type]!.sort());
      expect(all.body.records[type].map((r: R) => r.id).sort(), `${type} in type=all`).toEqual(expected[type]!.sort());
    }
    // Their author (an operator here) reads every one, those the policy keeps to it too.
    const own = await records(operator, '?type=all&limit=1000');
    expect(own.status, JSON.stringify(own.body).slice(0, 400)).toBe(200);
    for (const type of NEW_TYPES) expect(own.body.records[type].map((r: R) => r.id).sort(), `${type} of its author`).toEqual(ofAuthor[type]!.sort());
    expect(Object.values(ofAuthor).flat().length - Object.values(expected).flat().length).toBe(1);
  });

  it("keeps what other writers' FHIR says: references without display as their text, codes of any system, numbers as numbers", async () => {
    const reader = await consented('org-other-writers');
    const got = async (type: string, id: string) => {
      const res = await records(reader, `?type=${type}&limit=1000`);
      expect(res.status).toBe(200);
      return res.body.records[type].find((r: R) => r.id === id) as R;
    };
    expect(await got('procedures', '1')).toMatchObject({
      patient_id: PATIENT,
      visit_id: 'e1',
      status: 'completed',
      name: 'Colonoscopy',
      code: '73761001',
      code_system: SCT,
      performed_at: '2024-03-12T09:30:00Z',
      performer_references: ['Practitioner/p1'],
      // Given by reference only: the practitioner's name, read from the Practitioner (issue 38's resolve()).
      performer: 'Kwame Osei',
      reason_references: ['Condition/c1'],
    });
    // The patient named second, after the practitioner; the reason given by reference only: the Condition's code read.
    expect(await got('appointments', '15')).toMatchObject({
      patient_id: PATIENT,
      status: 'booked',
      reason: '44054006',
      reason_references: ['Condition/c1'],
      specialty: '394579002',
      specialty_codings: [{ system: SCT, code: '394579002', display: null }],
      appointment_type_code: 'FOLLOWUP',
      start: '2025-03-04T09:30:00-05:00',
      minutes_duration: 20,
      identifiers: [{ system: 'urn:oid:1.2.840.114350.1.13.861.1.7.3.698084.8', value: '40001233', type: null }],
      participants: [
        { reference: 'Practitioner/p1', name: 'Kwame Osei', role: null, required: 'required', status: 'accepted' },
        { reference: `Patient/${PATIENT}`, name: 'Peter Chalmers', role: null, required: null, status: 'accepted' },
      ],
    });
    // A flag coded only, raised by an organisation named by reference: the code as its words, the organisation's name.
    expect(await got('flags', '17')).toMatchObject({ patient_id: PATIENT, status: 'active', text: '129839007', codings: [{ system: SCT, code: '129839007', display: null }], category_code: 'clinical', start: '2025-01-20', visit_id: 'e1', author_reference: 'Organization/lab1' });
    expect((await got('flags', '17')).author).not.toBeNull();
    // Harm from a medication the patient takes, coded only and named by references: the suspect by its medication's code, the recorder's name.
    expect(await got('adverse_events', '18')).toMatchObject({
      patient_id: PATIENT,
      actuality: 'actual',
      event: '271807003',
      event_code: '271807003',
      date: '2025-02-10T14:00:00Z',
      visit_id: 'e1',
      seriousness_code: 'Non-serious',
      severity_code: 'moderate',
      outcome_code: 'resolved',
      resulting_condition_references: ['Condition/c1'],
      resulting_conditions: '44054006',
      recorder: 'Kwame Osei',
      recorder_reference: 'Practitioner/p1',
      suspects: [{ name: '197361', reference: 'MedicationStatement/12', causality: 'Probably/Likely', causality_method: null }],
    });
    // A laboratory's notification to the GP, coded only and named by references: the codes of HL7's code systems as
    // the names Pont ships, the LOINC topic as its code, the reason by its Condition's code; the PDF described, not held.
    expect(await got('communications', '20')).toMatchObject({
      patient_id: PATIENT,
      status: 'completed',
      category: 'Notification',
      category_code: 'notification',
      category_system: 'http://terminology.hl7.org/CodeSystem/communication-category',
      priority: 'urgent',
      medium: 'electronic data',
      topic: '4548-4',
      visit_id: 'e1',
      sent: '2025-03-15T10:20:00Z',
      received: '2025-03-15T10:21:30Z',
      // Given by reference only: the organisation's name, read from Organization/lab1.
      sender: 'Northside Laboratory',
      sender_reference: 'Organization/lab1',
      recipient_references: ['Practitioner/p1'],
      recipients: 'Kwame Osei',
      reason: '44054006',
      reason_code: null,
      reason_references: ['Condition/c1'],
      about_references: ['MedicationRequest/mr1'],
      texts: ["HbA1c 8.1 % (65 mmol/mol), above the patient's target. Please review the diabetes treatment."],
      attachments: [{ content_type: 'application/pdf', url: 'https://lab.example/reports/20/hba1c.pdf', title: 'HbA1c report.pdf', size: 48213, inline: null }],
      resources: [],
    });
    // A device ordered by code only, its setting coded only with a quantity, named by references without display: the
    // code as its words, the setting's code and value in words, the condition's code as the reason.
    expect(await got('device_requests', '21')).toMatchObject({
      patient_id: PATIENT,
      status: 'active',
      intent: 'order',
      priority: 'routine',
      device: '337414009',
      device_code: '337414009',
      device_system: SCT,
      device_reference: null,
      parameters: [{ name: 'STRIPS', value: '100 strips' }],
      visit_id: 'e1',
      occurrence_at: '2024-03-14',
      occurrence_end: null,
      authored_on: '2024-03-12T10:15:00Z',
      requester: 'Kwame Osei',
      requester_reference: 'Practitioner/p1',
      performer: 'Northside Laboratory',
      performer_reference: 'Organization/lab1',
      reason: '44054006',
      reason_references: ['Condition/c1'],
      based_on_references: [],
      identifiers: [{ system: 'urn:oid:1.2.840.114350.1.13.861.1.7.2.798268', value: '981276', type: null }],
    });
    // A diabetic diet coded only: every concept as its code, the nutrient's unit from its UCUM code, the supplement's
    // timing code (BID) in words; no tube feeding.
    expect(await got('nutrition_orders', '22')).toMatchObject({
      patient_id: PATIENT,
      status: 'active',
      intent: 'order',
      ordered_at: '2024-03-12T11:00:00Z',
      visit_id: 'e1',
      orderer: 'Kwame Osei',
      orderer_reference: 'Practitioner/p1',
      allergy_intolerance_references: [],
      food_preference_modifiers: [],
      exclude_foods: ['227493005'],
      oral_diet: {
        types: ['160670007'],
        frequency: 3,
        period: 1,
        period_unit: 'd',
        nutrients: [{ nutrient: '2331003', amount: 75, unit: 'g' }],
        textures: [],
        fluid_consistency: ['439021000124105'],
      },
      supplements: [{ type: '442971000124100', product_name: null, quantity: 237, quantity_unit: 'mL', schedule: 'BID' }],
      enteral_formula: null,
      identifiers: [{ system: 'urn:oid:1.2.840.114350.1.13.861.1.7.2.798269', value: '981277', type: null }],
    });
    // A consultant's review coded only and named by references without display: the kind, the examination, the
    // prognosis and a finding as their codes, the assessor's name read from Practitioner/p1, the problem and the
    // finding given by reference as the Condition's code, the period's end kept.
    expect(await got('clinical_impressions', '19')).toMatchObject({
      patient_id: PATIENT,
      visit_id: 'e1',
      status: 'completed',
      status_reason: null,
      assessment: '11429006',
      code: '11429006',
      code_system: SCT,
      description: null,
      effective_at: '2024-03-12T09:00:00Z',
      effective_end: '2024-03-12T09:30:00Z',
      date: '2024-03-12T10:05:00Z',
      assessor: 'Kwame Osei',
      assessor_reference: 'Practitioner/p1',
      previous_id: null,
      problem_references: ['Condition/c1'],
      problems: '44054006',
      investigations: [{ name: '5880005', code: '5880005', system: SCT, items: null, item_references: [] }],
      summary: 'Diabetes not at target on metformin; blood pressure above target.',
      findings: [
        { name: '44054006', code: null, system: null, reference: 'Condition/c1', basis: 'HbA1c 8.1 % (65 mmol/mol)' },
        { name: '38341003', code: '38341003', system: SCT, reference: null, basis: null },
      ],
      prognosis: '65872000',
      prognosis_code: '65872000',
      prognosis_system: SCT,
      prognosis_references: [],
      supporting_info_references: ['MedicationRequest/mr1'],
      protocols: [],
      note: 'Increase metformin to 1 g twice daily; recheck HbA1c in three months.',
      identifiers: [{ system: 'urn:oid:1.2.840.114350.1.13.861.1.7.2.798273', value: '730046', type: null }],
    });
    // A registry's forecast, coded only, from an organisation named by reference: each vaccine's status in words (HL7's
    // code system), its LOINC dates, a contraindication's reason.
    expect(await got('immunization_recommendations', '23')).toMatchObject({
      id: '23',
      patient_id: '123',
      date: '2025-08-20T10:00:00Z',
      authority: 'Northside Laboratory',
      authority_reference: 'Organization/lab1',
      vaccine: '150',
      forecast_status: 'Due',
      forecast_status_code: 'due',
      due_date: '2025-10-01',
      recommendations: [
        {
          vaccine: '150',
          vaccine_code: '150',
          vaccine_system: 'http://hl7.org/fhir/sid/cvx',
          target_disease: null,
          target_disease_code: null,
          target_disease_system: null,
          contraindicated_vaccines: null,
          forecast_status: 'Due',
          forecast_status_code: 'due',
          forecast_reason: null,
          due_date: '2025-10-01',
          earliest_date: '2025-09-01',
          latest_date: null,
          overdue_date: null,
          date_criteria: [
            { code: '30980-7', system: 'http://loinc.org', name: '30980-7', value: '2025-10-01' },
            { code: '30981-5', system: 'http://loinc.org', name: '30981-5', value: '2025-09-01' },
          ],
          description: null,
          series: null,
          dose_number: 1,
          dose_number_text: null,
          series_doses: 1,
          series_doses_text: null,
          supporting_immunization_references: [],
          supporting_patient_information_references: [],
        },
        {
          vaccine: '08',
          vaccine_code: '08',
          vaccine_system: 'http://hl7.org/fhir/sid/cvx',
          target_disease: null,
          target_disease_code: null,
          target_disease_system: null,
          contraindicated_vaccines: null,
          forecast_status: 'Contraindicated',
          forecast_status_code: 'contraindicated',
          forecast_reason: 'Anaphylaxis to a previous dose',
          due_date: null,
          earliest_date: null,
          latest_date: null,
          overdue_date: null,
          date_criteria: [],
          description: null,
          series: null,
          dose_number: null,
          dose_number_text: null,
          series_doses: null,
          series_doses_text: null,
          supporting_immunization_references: [],
          supporting_patient_information_references: [],
        },
      ],
      identifiers: [{ system: 'urn:oid:2.16.840.1.113883.3.72.5.9.1', value: 'F-23', type: null }],
    });
    // A programme of care from another system: its type and the diagnosis role coded only, read as the names HL7's code
    // systems give them; the organisation, care manager and condition named by what they refer to.
    expect(await got('episodes_of_care', '24')).toMatchObject({
      id: '24',
      patient_id: '123',
      status: 'active',
      status_history: [{ status: 'planned', start: '2025-01-06', end: '2025-01-20' }],
      type: 'Post coordinated diabetes program',
      type_code: 'diab',
      type_system: 'http://terminology.hl7.org/CodeSystem/episodeofcare-type',
      diagnoses: [
        { condition_reference: 'Condition/c1', condition: '44054006', role: 'Chief complaint', role_code: 'CC', rank: 1 },
      ],
      start: '2025-01-20',
      end: null,
      managing_organization: 'Northside Laboratory',
      managing_organization_reference: 'Organization/lab1',
      care_manager: 'Kwame Osei',
      care_manager_reference: 'Practitioner/p1',
      team_references: [],
      referral_request_references: [],
      account_references: [],
      identifiers: [{ system: 'http://northside.example.org/fhir/episodes', value: 'EOC-0024', type: null }],
    });
    // A registry's judgement of a dose given too early, coded only by HL7's systems (read as the names Pont ships), from
    // an organisation named by reference; the dose itself by its id.
    expect(await got('immunization_evaluations', '25')).toMatchObject({
      id: '25',
      patient_id: '123',
      status: 'completed',
      date: '2025-02-21T08:00:00Z',
      authority: 'Northside Laboratory',
      authority_reference: 'Organization/lab1',
      target_disease: '14189004',
      target_disease_code: '14189004',
      target_disease_system: SCT,
      immunization_id: 'i1',
      dose_status: 'Not valid',
      dose_status_code: 'notvalid',
      dose_status_reason: 'Administered outside recommended schedule',
      dose_status_reason_code: 'outsidesched',
      description: null,
      series: null,
      dose_number: 1,
      dose_number_text: null,
      series_doses: 2,
      series_doses_text: null,
      identifiers: [{ system: 'urn:oid:2.16.840.1.113883.3.72.5.9.1', value: 'E-25', type: null }],
    });
    // Spectacles from another eye clinic: the product coded only (HL7's example code read as its name), the prescriber by
    // reference only (named by the Practitioner), one eye, no prism; the wear by its UCUM code alone.
    expect(await got('vision_prescriptions', '26')).toMatchObject({
      id: '26',
      patient_id: PATIENT,
      visit_id: 'e1',
      status: 'draft',
      date_written: '2025-05-06',
      created: '2025-05-06T09:00:00+03:00',
      prescriber: 'Kwame Osei',
      prescriber_reference: 'Practitioner/p1',
      lenses: [
        { product: 'Lens', product_code: 'lens', eye: 'left', sphere: 1.25, cylinder: -0.75, axis: 95, add: null, prisms: [{ amount: 0.5, base: 'in' }], power: null, back_curve: null, diameter: null, duration_value: 12, duration_unit: 'mo', color: null, brand: null, note: null },
        { product: 'Lens', product_code: 'lens', eye: 'right', sphere: 0.75, cylinder: null, axis: null, add: null, prisms: [], power: null, back_curve: null, diameter: null, duration_value: null, duration_unit: null, color: null, brand: null, note: null },
      ],
      identifiers: [{ system: 'urn:oid:1.2.840.114350.1.13.861.1.7.2.798276', value: 'RX-0026', type: null }],
    });
    // A lesion coded only (SNOMED CT without display: its codes as its words), its qualifiers coded only, no description.
    expect(await got('body_structures', '27')).toMatchObject({
      id: '27',
      patient_id: PATIENT,
      active: true,
      morphology: '400096001',
      morphology_code: '400096001',
      morphology_system: SCT,
      location: '14975008',
      location_code: '14975008',
      location_system: SCT,
      location_qualifiers: '7771000; 255549009',
      location_qualifier_codings: [{ system: SCT, code: '7771000', display: null }, { system: SCT, code: '255549009', display: null }],
      description: null,
      images: [],
      identifiers: [{ system: 'urn:oid:1.2.840.114350.1.13.861.1.7.2.798277', value: 'L-27', type: null }],
    });
    expect((await got('body_structures', '27')).recorded_at).toMatch(/^\d{4}-\d{2}-\d{2}T/);
    // A reminder asked of the laboratory, coded only (HL7's category and v3's medium read as the names Pont ships), by
    // references without display (named by what they refer to); what is to be said, in words; when, a period.
    expect(await got('communication_requests', '28')).toMatchObject({
      id: '28',
      patient_id: PATIENT,
      status: 'active',
      category: 'Reminder',
      category_code: 'reminder',
      category_system: 'http://terminology.hl7.org/CodeSystem/communication-category',
      priority: 'routine',
      do_not_perform: null,
      medium: 'written',
      visit_id: 'e1',
      occurrence_at: '2025-06-01',
      occurrence_end: '2025-06-15',
      authored_on: '2025-03-15T09:45:00Z',
      requester: 'Kwame Osei',
      requester_reference: 'Practitioner/p1',
      sender: 'Northside Laboratory',
      sender_reference: 'Organization/lab1',
      recipient_references: [`Patient/${PATIENT}`],
      recipients: 'Peter Chalmers',
      reason: '44054006',
      reason_references: ['Condition/c1'],
      based_on_references: ['CarePlan/2'],
      texts: ['Please book your HbA1c recheck.'],
      attachments: [],
      resources: [],
      identifiers: [{ system: 'urn:oid:1.2.840.114350.1.13.861.1.7.2.798278', value: 'CR-28', type: null }],
    });
    // A laboratory's task fulfilling an order, as a LIMS writes it: references without display (named by what they
    // refer to), the business status coded only, its specimen as an input and its result as an output by reference, each
    // named by what it refers to.
    expect(await got('tasks', '29')).toMatchObject({
      id: '29',
      patient_id: PATIENT,
      status: 'completed',
      business_status: 'RESULTED',
      business_status_code: 'RESULTED',
      intent: 'order',
      priority: 'routine',
      name: '26436-6',
      code: '26436-6',
      code_system: LOINC,
      focus_reference: 'ServiceRequest/4',
      based_on_references: ['ServiceRequest/4'],
      visit_id: 'e1',
      execution_start: '2025-03-12T09:00:00Z',
      execution_end: '2025-03-13T15:30:00Z',
      authored_on: '2025-03-12T08:45:00Z',
      requester: 'Kwame Osei',
      requester_reference: 'Practitioner/p1',
      owner: 'Northside Laboratory',
      owner_reference: 'Organization/lab1',
      reason_reference: 'Condition/c1',
      reason: '44054006',
      inputs: [{ type: 'Specimen', value: 'Whole blood', reference: 'Specimen/5' }],
      outputs: [{ type: 'Result', value: 'Temperature of specimen on arrival', reference: 'Observation/14' }],
      identifiers: [{ system: 'urn:oid:1.2.840.114350.1.13.861.1.7.2.798279', value: 'LIMS-29', type: null }],
      group_identifier: 'REQ-4',
    });
    expect(await got('appointments', '16')).toMatchObject({ patient_id: PATIENT, status: 'cancelled', requested_periods: [{ start: '2025-04-01', end: '2025-04-15' }] });
    expect(await got('care_plans', '2')).toMatchObject({ status: 'active', intent: 'plan', category: null, addresses_references: ['Condition/c1'], goal_references: ['Goal/3'], activities: ['Diabetic diet (in-progress)'], activity_references: ['MedicationRequest/mr1'] });
    // A coding without display reads as its code; the target keeps its comparator.
    expect(await got('goals', '3')).toMatchObject({ lifecycle_status: 'active', description: '281262007', description_code: '281262007', description_code_system: SCT, target_measure: '4548-4', target_value: 7, target_comparator: '<', target_unit: '%' });
    expect(await got('orders', '4')).toMatchObject({
      status: 'active',
      intent: 'order',
      priority: 'stat',
      name: 'Glucose [Mass/volume] in Serum or Plasma',
      code: '2345-7',
      code_system: LOINC,
      visit_id: 'e1',
      requested_at: '2024-03-12T08:45:00Z',
      requester: 'Kwame Osei',
      requester_reference: 'Practitioner/p1',
      performer_references: ['Organization/lab1'],
      reason_references: ['Condition/c1'],
      specimen_references: ['Specimen/5'],
    });
    // The v2 table gives the code's display when the writer gave none.
    expect(await got('specimens', '5')).toMatchObject({ type_code: 'BLD', type_system: 'http://terminology.hl7.org/CodeSystem/v2-0487', collected_at: '2024-03-12T09:00:00Z', collector_reference: 'Practitioner/p1', note: 'Specimen hemolyzed. Results may be affected.' });
    expect((await got('specimens', '5')).condition).not.toBeNull();
    // A fact of the specimen (FHIR's focus), not of the patient: the record says what it is about.
    expect(await got('observations', '14')).toMatchObject({ name: 'Temperature of specimen on arrival', value_numeric: 4, focus_references: ['Specimen/5'], focus: 'Whole blood' });
    expect(await got('family_history', '6')).toMatchObject({ status: 'completed', relationship_code: 'FTH', relationship_system: 'http://terminology.hl7.org/CodeSystem/v3-RoleCode', conditions: ['22298006 (onset 52 years)'] });
    const devices = await records(reader, '?type=devices&limit=1000');
    expect(devices.body.records.devices.find((r: R) => r.id === '7')).toMatchObject({ source: 'device', patient_id: PATIENT, device: 'Cardiac pacemaker', device_status: 'active', device_type_code: '14106009', udi_carrier: '(01)09504000059118(17)141120(10)7654321D(21)10987654d321', udi_device_identifier: '09504000059118', serial_number: '10987654d321', lot_number: '7654321D' });
    expect(devices.body.records.devices.find((r: R) => r.id === '8')).toMatchObject({ source: 'use_statement', status: 'active', device: 'Cardiac pacemaker', device_reference: 'Device/7', used_from: '2019-05-02' });
    expect(await got('dispenses', '9')).toMatchObject({ status: 'completed', medication: '860975', medication_code: '860975', prescription_ids: ['mr1'], performer_references: ['Practitioner/p1'], quantity: 60, quantity_unit: 'tablet', days_supply: 30, handed_over_at: '2024-03-13T15:00:00Z' });
    expect(await got('assessments', '10')).toMatchObject({
      questionnaire: 'http://loinc.org/q/44249-1',
      status: 'completed',
      visit_id: 'e1',
      author_reference: 'Practitioner/p1',
      answers: [
        'Little interest or pleasure in doing things [44250-9]: Several days',
        'Feeling down, depressed, or hopeless [44255-8]: LA6570-1',
        'Patient Health Questionnaire 9 item (PHQ-9) total score [44261-6]: 11',
      ],
      score: 11,
      score_link_id: '44261-6',
    });
    // A statement coded in two systems with no text: the RxNorm code (no display known) names it; a period's start.
    expect(await got('medication_statements', '12')).toMatchObject({ status: 'active', medication: '197361', medication_code: '197361', effective_at: '2023-01-10', effective_end: null, information_source: 'Peter Chalmers', information_source_reference: `Patient/${PATIENT}`, dose: 5, dose_unit: 'mg', frequency: 1, period: 1, period_unit: 'd' });
    // A dose not given (found by an outside probe: no record type read it): why, coded only; who was to give it, by reference.
    expect(await got('administrations', '13')).toMatchObject({ status: 'not-done', status_reason: 'Drug declined by patient', medication: '1361615', medication_code: '1361615', prescription_id: 'mr1', visit_id: 'e1', administered_at: '2024-03-12T08:00:00Z', performer_reference: 'Practitioner/p1', dose: 5000, dose_unit: 'U', route: 'Subcutaneous route' });
    // The content's place, type and size; never the bytes.
    expect(await got('media', '11')).toMatchObject({ status: 'completed', type_code: 'image', content_type: 'image/jpeg', url: 'https://images.example/wound-1.jpg', size: 183_422, inline: null });
  });

  it("reads the specification's examples whole: the pacemaker's device, a relative's conditions, a Glasgow score's answers", async () => {
    const reader = await consented('org-spec');
    const all = (await records(reader, '?type=all&limit=1000')).body.records;
    expect(all.procedures.find((r: R) => r.id === 'example-implant')).toMatchObject({ name: 'Implant Pacemaker', code: '25267002', device_references: ['Device/example-pacemaker'], performer_references: ['Practitioner/example'], performer: 'Dr Cecil Surgeon', follow_up: 'ROS 5 days  - 2013-04-10' });
    expect(all.family_history.find((r: R) => r.id === 'father')).toMatchObject({ relationship: 'father', conditions: ['Heart Attack (onset 74 yr; contributed to death)'] });
    expect(all.assessments.find((r: R) => r.id === 'gcs').answers).toEqual(['[1.1]: Confused', '[1.2]: Localizing pain', '[1.3]: Eyes open spontaneously']);
    expect(all.care_plans.find((r: R) => r.id === 'f201').activities).toEqual(['Potassium supplementation, daily, 80 mmol a day (completed)', 'Echography of kidney (completed)']);
    expect(all.specimens.find((r: R) => r.id === '101')).toMatchObject({ accession: 'X352356', type_code: '122555007' });
    // A Media whose bytes are inline says so; the bytes are read through FHIR.
    for (const media of all.media) expect(JSON.stringify(media)).not.toMatch(/R0lGOD|"data"/);
  });

  it('publishes each type in the OpenAPI document: the type enum, the shapes, the summary sections', async () => {
    const doc = (await pont.json('/api/openapi.json')).body;
    const type = doc.paths['/api/v1/connect/patient/{health_id}/records'].get.parameters.find((p: R) => p.name === 'type');
    expect(type.schema.enum).toEqual(expect.arrayContaining(NEW_TYPES));
    for (const [name, shape] of Object.entries({ procedures: 'Procedure', care_plans: 'CarePlan', goals: 'Goal', orders: 'Order', family_history: 'FamilyHistory', devices: 'MedicalDevice', specimens: 'Specimen', dispenses: 'Dispense', medication_statements: 'MedicationUse', administrations: 'Administration', assessments: 'Assessment', media: 'MediaRecord' }))
      expect(doc.components.schemas.PatientRecords.properties.records.properties[name].items.$ref, name).toBe(`#/components/schemas/${shape}`);
    expect(Object.keys(doc.components.schemas.PatientSummary.properties)).toEqual(expect.arrayContaining(['active_care_plans', 'active_goals', 'recent_procedures', 'active_devices']));
  });

  it('the SDK summary shows the active care plans and goals, the recent procedures and the active devices', async () => {
    await consented('org-sdk'); // the organisation's full-record consent
    const client = await createTestClient(pont, ['patients:read'], { organizationId: 'org-sdk' });
    const res = await call(client, `/api/v1/sdk/patients/${healthId}/summary`);
    expect(res.status, JSON.stringify(res.body).slice(0, 400)).toBe(200);
    const ids = (key: string) => res.body[key].map((r: R) => r.id);
    expect(ids('active_care_plans')).toContain('2');
    expect(res.body.active_care_plans.every((r: R) => r.status === 'active')).toBe(true);
    expect(ids('active_goals')).toContain('3');
    expect(res.body.active_goals.every((r: R) => ['active', 'accepted'].includes(r.lifecycle_status))).toBe(true);
    expect(res.body.recent_procedures.length).toBe(10);
    expect(ids('recent_procedures')[0]).toBe('1'); // the newest (2024)
    expect(res.body.recent_procedures.every((r: R) => ['completed', 'in-progress'].includes(r.status))).toBe(true);
    expect(ids('active_devices')).toEqual(expect.arrayContaining(['7', '8']));
    expect(res.body.active_devices.find((r: R) => r.id === '7')).toMatchObject({ source: 'device', udi_device_identifier: '09504000059118' });
  });

  it('gives an organisation without consent none of them, and withholds the types whose class a consent does not cover', async () => {
    const stranger = await createTestClient(pont, ['patient:diagnostics:read'], { organizationId: 'org-stranger' });
    for (const type of NEW_TYPES) {
      const res = await records(stranger, `?type=${type}`);
      expect(res.status, type).toBe(403);
      expect(res.body.error_code).toBe('CONSENT_REQUIRED');
    }
    expect((await records(stranger, '?type=all')).status).toBe(403);
    // The diagnostics consent (labs:read): orders, specimens and assessments; not the rest.
    const labs = await consented('org-labs', 'diagnostics');
    const all = await records(labs, '?type=all&limit=1000');
    expect(all.status).toBe(200);
    const readable = ['orders', 'specimens', 'assessments'];
    for (const type of NEW_TYPES) {
      if (readable.includes(type)) expect(all.body.records[type].length, type).toBe(expected[type]!.length);
      else {
        expect(all.body.records[type], type).toBeUndefined();
        expect(all.body.withheld, type).toContain(type);
        expect((await records(labs, `?type=${type}`)).status, type).toBe(403);
      }
    }
    // A full record narrowed to documents:read: only media, communications and communication requests.
    const documents = await consented('org-documents', 'full_record', ['documents:read']);
    const docs = await records(documents, '?type=all&limit=1000');
    expect(NEW_TYPES.filter((t) => docs.body.records[t] !== undefined).sort()).toEqual(['communication_requests', 'communications', 'media']);
    // The summary consent (patients:read, prescriptions:read): procedures, care plans, goals, family history, devices,
    // body structures, adverse events, clinical impressions, device, nutrition and vision orders, episodes of care,
    // immunization recommendations and evaluations, dispenses, medication statements and administrations; never tasks
    // (fhir:read) nor communication requests (documents:read).
    const summary = await consented('org-summary', 'summary');
    const got = await records(summary, '?type=all&limit=1000');
    expect(NEW_TYPES.filter((t) => got.body.records[t] !== undefined).sort()).toEqual([
      'administrations', 'adverse_events', 'body_structures', 'care_plans', 'clinical_impressions', 'device_requests', 'devices', 'dispenses', 'episodes_of_care', 'family_history', 'goals', 'immunization_evaluations', 'immunization_recommendations', 'medication_statements', 'nutrition_orders', 'procedures', 'vision_prescriptions',
    ]);
  });
});
