import { FHIR_READ_SCOPES } from './scopes';

/**
 * Data classes: what a consent covers. A resource's class is the read scope of its type in the FHIR scope
 * table (src/core/scopes.ts); patient data of any other type is `fhir:read`. One table, used by the access
 * rule (SQL), the consent routes and docs/integrators.md.
 */
export const DATA_CLASSES = ['patients:read', 'labs:read', 'prescriptions:read', 'documents:read', 'appointments:read', 'fhir:read'] as const;
export type DataClass = (typeof DATA_CLASSES)[number];

export function dataClassOf(resourceType: string): string {
  return FHIR_READ_SCOPES[resourceType] ?? 'fhir:read';
}

/** The resource types of a class, for docs/integrators.md. */
export function typesOf(dataClass: DataClass): string[] {
  return Object.entries(FHIR_READ_SCOPES).filter(([, scope]) => scope === dataClass).map(([type]) => type);
}

/**
 * `consent_type` values and the classes each covers. A grant's `scopes` may narrow them, never widen.
 * Consent resources themselves (`consents:read`) and the audit trail are in no class: an organisation
 * sees the consents granted to it, and the patient their own.
 */
export const CONSENT_TYPES: Record<string, { classes: readonly DataClass[]; description: string }> = {
  full_record: { classes: DATA_CLASSES, description: 'The whole record: every class of patient data.' },
  summary: {
    classes: ['patients:read', 'prescriptions:read'],
    description: 'Demographics, allergies, conditions, encounters and episodes of care, procedures, body structures (a lesion, a tumour), immunizations (whether each dose counts, and the doses recommended next), care plans, care teams and goals, clinical assessments, adverse events, family history, devices and device orders, diet orders, spectacle and contact lens prescriptions, coverage, and medications.',
  },
  diagnostics: { classes: ['labs:read'], description: 'Observations (lab results and vital signs), diagnostic reports, imaging studies, orders, specimens, questionnaire responses (screening answers), risk assessments.' },
  prescriptions: { classes: ['prescriptions:read'], description: 'Medication requests, statements, administrations, dispenses and medications.' },
  documents: { classes: ['documents:read'], description: 'Clinical documents and notes (DocumentReference, Composition), media (photos, scans, recordings) and messages about the patient, sent or asked for (Communication, CommunicationRequest).' },
};
export const CONSENT_TYPE_NAMES = Object.keys(CONSENT_TYPES);

/** The classes a consent covers: its type's, narrowed to `scopes` when given. */
export function classesOf(consentType: string, scopes: readonly string[] | undefined): string[] {
  const of = CONSENT_TYPES[consentType]?.classes ?? [];
  return scopes?.length ? of.filter((c) => scopes.includes(c)) : [...of];
}
