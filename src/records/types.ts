import type { DataClass } from '../consents/types';

/**
 * Connect record types (records retrieval `type=`) and where each comes from: FHIR searches (one or more),
 * each read through a mapping file. One table: the records route, the summary, the README and the tests use it.
 */
export interface RecordSource {
  resourceType: string;
  /** FHIR search parameters that select the type's resources (the patient is added). */
  query: Record<string, string>;
  /** The search parameter that dates them (newest first), and the record field it fills. */
  dateParam: string;
  dateField: string;
  map: string;
  /** Constant fields of the records from this source (which source a merged type's record came from). */
  tag?: Record<string, string>;
}

export interface RecordType {
  /** The consent data class (README "Consent") that covers it. */
  dataClass: DataClass;
  /** Where the records come from; with several, the shape is the first map's fields (plus tags) and lists merge by date. */
  sources: RecordSource[];
  /** The shape's name in the OpenAPI document and the README. */
  shape: string;
}

const LAB = 'http://terminology.hl7.org/CodeSystem/observation-category|laboratory';
const VITAL = 'http://terminology.hl7.org/CodeSystem/observation-category|vital-signs';

export const RECORD_TYPES = {
  diagnoses: {
    dataClass: 'patients:read',
    shape: 'Diagnosis',
    sources: [{ resourceType: 'Condition', query: {}, dateParam: 'recorded-date', dateField: 'created_at', map: 'diagnosis' }],
  },
  allergies: {
    dataClass: 'patients:read',
    shape: 'AllergyRecord',
    sources: [{ resourceType: 'AllergyIntolerance', query: {}, dateParam: 'date', dateField: 'created_at', map: 'allergy-record' }],
  },
  prescriptions: {
    dataClass: 'prescriptions:read',
    shape: 'Prescription',
    sources: [{ resourceType: 'MedicationRequest', query: {}, dateParam: 'authoredon', dateField: 'authored_at', map: 'prescription' }],
  },
  lab_results: {
    dataClass: 'labs:read',
    shape: 'LabResult',
    sources: [
      { resourceType: 'Observation', query: { category: LAB }, dateParam: 'date', dateField: 'effective_at', map: 'lab-result', tag: { source: 'observation' } },
      {
        // Reports without result Observations: the report is how the result came (a report with results is
        // represented by its Observations, above).
        resourceType: 'DiagnosticReport',
        query: { category: 'http://terminology.hl7.org/CodeSystem/v2-0074|LAB', 'result:missing': 'true' },
        dateParam: 'date',
        dateField: 'effective_at',
        map: 'lab-report',
        tag: { source: 'report' },
      },
    ],
  },
  vitals: {
    dataClass: 'labs:read',
    shape: 'Vital',
    sources: [{ resourceType: 'Observation', query: { category: VITAL }, dateParam: 'date', dateField: 'recorded_at', map: 'vital' }],
  },
  clinical_notes: {
    dataClass: 'documents:read',
    shape: 'ClinicalNote',
    sources: [{ resourceType: 'Composition', query: {}, dateParam: 'date', dateField: 'created_at', map: 'clinical-note' }],
  },
} as const satisfies Record<string, RecordType>;

export type RecordTypeName = keyof typeof RECORD_TYPES;
export const RECORD_TYPE_NAMES = Object.keys(RECORD_TYPES) as RecordTypeName[];
