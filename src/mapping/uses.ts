/**
 * What the code asks of the maps: each map it uses by name, the Connect fields it writes into the pushes' maps and
 * the fields it reads by name. `pont mappings check` fails when a map is missing (renamed), when the code writes or
 * reads a field the map does not declare (its data would be dropped, or read as null), or when the map requires a
 * field the code never writes (every push would fail). test/mapping-uses.test.ts keeps this list in step with the
 * code's `mappings.get('…')` calls.
 */
export const CODE_MAPS = {
  // (Maps read only as record types are not here: the code finds them by their `record:` section.)
  'patient-profile': {},
  // The SDK summary's patient block is all of this map's fields; a measured blood group replaces the map's.
  'patient-summary': { reads: ['blood_group'] },
  // What resolve and verify show of the patient: all of this map's fields.
  'patient-demographics': {},
  // Grants, requests and answers (src/consents/service.ts) write whole consents; the consent answers are the
  // map's record (every field the code does not hide), so a field the map adds is shown.
  consent: { writes: ['consent_id', 'patient_id', 'organization_id', 'consent_type', 'scopes', 'status', 'purpose', 'granted_at', 'expires_at'] },
  'blood-unit': {},
  payment: {},
  'pharmacy-stock': {},
  // The SDK pushes (src/records/service.ts), written field by field.
  visit: { writes: ['id', 'patient_id', 'type', 'class', 'status', 'reason', 'provider_id', 'facility_id', 'started_at', 'ended_at', 'note'] },
  'cdss-alert': { writes: ['id', 'patient_id', 'encounter_id', 'alert_type', 'status', 'severity', 'cdss_rule_id', 'detail', 'identified_at'] },
  'lab-result': {
    writes: [
      'id', 'patient_id', 'visit_id', 'test_name', 'loinc_code', 'value', 'value_numeric', 'comparator', 'value_precision', 'unit', 'unit_code', 'value_coded',
      'reference_ranges', 'flag', 'flag_level', 'interpretation', 'status', 'effective_at', 'issued_at',
    ],
    // lab_result.released (src/events/rules.ts) and the summary's blood group (src/records/service.ts) read the
    // Observation as its lab record; the push's flag_level values are the table of `flag_level`.
    reads: ['test_name', 'flag', 'flag_level', 'value_coded', 'value'],
  },
  'lab-report': { writes: ['id', 'patient_id', 'visit_id', 'test_name', 'loinc_code', 'value', 'value_coded', 'result_ids', 'status', 'effective_at', 'issued_at'] },
} as const satisfies Record<string, { writes?: readonly string[]; reads?: readonly string[] }>;

export type CodeMapName = keyof typeof CODE_MAPS;
type Writes<M extends CodeMapName> = (typeof CODE_MAPS)[M] extends { writes: readonly string[] } ? (typeof CODE_MAPS)[M]['writes'][number] : never;
/** The Connect value the code writes into map M: exactly the fields listed above (TypeScript checks the literal). */
export type WrittenBy<M extends CodeMapName> = Record<Writes<M>, unknown>;

/**
 * The record types the code reads by name (the SDK summary, src/records/service.ts) and the map expected to
 * declare each: `pont mappings check` fails when none does.
 */
export const CODE_RECORD_TYPES: Record<string, string> = {
  prescriptions: 'prescription',
  allergies: 'allergy-record',
  lab_results: 'lab-result',
  visits: 'visit',
  care_plans: 'care-plan',
  goals: 'goal',
  procedures: 'procedure',
  devices: 'device-use',
};
