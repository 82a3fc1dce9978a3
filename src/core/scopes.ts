/**
 * Scopes (section 5.1 plus the forms named in 4.5) and the scope each FHIR resource type needs.
 * One table, used by the FHIR routes, docs/integrators.md and the OpenAPI document.
 */
export const SCOPES = [
  'health_id:verify',
  'patients:read',
  'consents:read',
  'consents:write',
  'encounters:write',
  'labs:read',
  'labs:write',
  'prescriptions:read',
  'prescriptions:write',
  'documents:read',
  'documents:write',
  'appointments:read',
  'appointments:write',
  'pharmacy:write',
  'webhooks:manage',
  'bridge_agent:sync',
  'emergency:access',
  'patient:profile:read',
  'patients:profile:read', // the spelling section 4.5 also uses
  'patient:diagnostics:read',
  'pharmacy:stock:read',
  'blood:inventory:read',
  'payments:read', // ours: payment reconciliation
  // Ours: FHIR writes and operator reads (audit trail, any resource type).
  'fhir:write',
  'fhir:read',
  'audit:read',
  // Ours: the terminology operations (code systems, value sets, concept maps: data about no patient).
  'terminology:read',
] as const;
export type Scope = (typeof SCOPES)[number];

/** How much a scope lets a client do (section 5.1's risk column; ours and the 4.5 forms rated alike), for the portal. */
export const SCOPE_RISK: Record<Scope, 'Low' | 'Medium' | 'High' | 'Critical'> = {
  'health_id:verify': 'Low',
  'patients:read': 'Medium',
  'consents:read': 'Low',
  'consents:write': 'Low',
  'encounters:write': 'High',
  'labs:read': 'Medium',
  'labs:write': 'High',
  'prescriptions:read': 'Medium',
  'prescriptions:write': 'High',
  'documents:read': 'Medium',
  'documents:write': 'High',
  'appointments:read': 'Medium',
  'appointments:write': 'Medium',
  'pharmacy:write': 'Medium',
  'webhooks:manage': 'Medium',
  'bridge_agent:sync': 'High',
  'emergency:access': 'Critical',
  'patient:profile:read': 'Medium',
  'patients:profile:read': 'Medium',
  'patient:diagnostics:read': 'Medium',
  'pharmacy:stock:read': 'Low',
  'blood:inventory:read': 'Low',
  'payments:read': 'Medium',
  'fhir:write': 'High',
  'fhir:read': 'Medium',
  'audit:read': 'Medium',
  'terminology:read': 'Low',
};

/** Read scope per FHIR resource type; types not listed need `fhir:read`. `fhir:read` also reads every type. */
export const FHIR_READ_SCOPES: Record<string, Scope> = {
  // Not listed, so fhir:read: Flag and DetectedIssue (warnings of any kind), and Task: a piece of work about anything
  // (a lab order's fulfilment, a prescription, a document to sign) that names it in its code, focus, inputs and
  // outputs, so no narrower class covers what it reveals.
  Patient: 'patients:read',
  AllergyIntolerance: 'patients:read',
  Condition: 'patients:read',
  Encounter: 'patients:read',
  // A spell of care (a pregnancy, a course of treatment) that groups encounters: beside them.
  EpisodeOfCare: 'patients:read',
  Procedure: 'patients:read',
  // A part of the patient's body recorded on its own (a tumour, a lesion followed): beside the conditions and
  // procedures it locates.
  BodyStructure: 'patients:read',
  Immunization: 'patients:read',
  // The doses due next (a registry's forecast): beside the immunizations given.
  ImmunizationRecommendation: 'patients:read',
  // Whether a dose given counts towards its series (a registry's judgement of an Immunization): beside it.
  ImmunizationEvaluation: 'patients:read',
  CarePlan: 'patients:read',
  // Who cares for the patient (US Core's CareTeam): beside the plan of care.
  CareTeam: 'patients:read',
  Goal: 'patients:read',
  FamilyMemberHistory: 'patients:read',
  Device: 'patients:read',
  DeviceUseStatement: 'patients:read',
  Coverage: 'patients:read',
  // Harm from care (a drug reaction, a fall on the ward): beside the allergies and conditions it may add.
  AdverseEvent: 'patients:read',
  // A clinician's assessment of the patient's problems (findings, prognosis): beside the conditions it weighs.
  ClinicalImpression: 'patients:read',
  // Orders for a device (a wheelchair, home oxygen) or a diet: beside the devices and the plan of care.
  DeviceRequest: 'patients:read',
  NutritionOrder: 'patients:read',
  // Spectacles or contact lenses prescribed: an order for a device, beside the device and diet orders (not a medication).
  VisionPrescription: 'patients:read',
  Observation: 'labs:read',
  DiagnosticReport: 'labs:read',
  // Imaging studies (DICOM series, as a PACS or Synthea writes them): diagnostics, with the reports that read them.
  ImagingStudy: 'labs:read',
  ServiceRequest: 'labs:read',
  Specimen: 'labs:read',
  // Screening and assessment answers (PHQ-9, AUDIT-C): the class of the survey Observations that score them.
  QuestionnaireResponse: 'labs:read',
  // Predicted risks (a 10-year cardiovascular risk, a fall risk): the class of the scores and assessments they rest on.
  RiskAssessment: 'labs:read',
  MedicationRequest: 'prescriptions:read',
  MedicationStatement: 'prescriptions:read',
  MedicationAdministration: 'prescriptions:read',
  MedicationDispense: 'prescriptions:read',
  Medication: 'prescriptions:read',
  DocumentReference: 'documents:read',
  Composition: 'documents:read',
  // Photos, scans, recordings of the patient: held and shared like documents.
  Media: 'documents:read',
  // Messages about the patient (a result sent to the GP, a reminder to the patient): held and shared like documents.
  Communication: 'documents:read',
  // A message asked for (a reminder to send, a letter requested): it says what is to be said, so held like the message.
  CommunicationRequest: 'documents:read',
  Consent: 'consents:read',
  Appointment: 'appointments:read',
  BiologicallyDerivedProduct: 'blood:inventory:read',
  PaymentReconciliation: 'payments:read',
  PaymentNotice: 'payments:read',
  AuditEvent: 'audit:read',
};

/** Scopes any one of which allows reading `resourceType` through /api/fhir/R4. */
export function fhirReadScopes(resourceType: string): Scope[] {
  const specific = FHIR_READ_SCOPES[resourceType];
  // The audit trail is for operators only: fhir:read does not open it.
  if (specific === 'audit:read') return ['audit:read'];
  return specific ? [specific, 'fhir:read'] : ['fhir:read'];
}

/**
 * The terminology operations ($lookup, $validate-code, $subsumes, $expand, $translate on CodeSystem, ValueSet and
 * ConceptMap) need this scope, and only it: terminology holds no patient data, so consent does not apply.
 */
export const TERMINOLOGY_SCOPE: Scope = 'terminology:read';

/** Every FHIR write (create, update, delete, transaction, import over HTTP) needs `fhir:write`. */
export const FHIR_WRITE_SCOPE: Scope = 'fhir:write';

/** The FHIR scope rules as Markdown, for the OpenAPI document (docs/integrators.md carries the same table). */
export function fhirScopeTable(): string {
  const byScope = new Map<string, string[]>();
  for (const [type, scope] of Object.entries(FHIR_READ_SCOPES)) byScope.set(scope, [...(byScope.get(scope) ?? []), type]);
  const rows = [...byScope.values()].map((types) => `| ${types.join(', ')} | ${fhirReadScopes(types[0]!).map((s) => `\`${s}\``).join(' or ')} |`);
  return [
    'FHIR R4 reads (read, vread, search, history) need the read scope of the resource type:',
    '',
    '| Resource types | Scope |',
    '|---|---|',
    ...rows,
    '| every other type | `fhir:read` |',
    '',
    `\`Patient/{id}/$everything\` needs \`patients:read\` or \`fhir:read\`. FHIR writes need \`${FHIR_WRITE_SCOPE}\`. \`GET /api/fhir/R4/metadata\` is public.`,
    `The terminology operations (\`$lookup\`, \`$validate-code\`, \`$subsumes\`, \`$expand\`, \`$translate\` on CodeSystem, ValueSet and ConceptMap) need \`${TERMINOLOGY_SCOPE}\`, and only it; so do the token search modifiers \`:below\`, \`:above\`, \`:in\`, \`:not-in\` (besides the type's read scope). Reading and searching CodeSystem, ValueSet and ConceptMap answers the loaded terminology with \`terminology:read\`, the FHIR store's with \`fhir:read\`.`,
  ].join('\n');
}
