// A map's `record:` section, compiled (src/mapping/record.ts): apart, so that the runtime and the map types need not
// import the compiler of that section.

/**
 * A map's `record:` section: the Connect record type (records retrieval `type=`) whose records this map reads
 * from its resource. Several maps may read one type (lab results from Observations and from reports); the one
 * that names the `shape` gives the type its fields. Format: mappings/README.md "Record types".
 */
export interface RecordDeclaration {
  type: string;
  /** The shape's name in the OpenAPI document and the documentation; given by exactly one map of the type. */
  shape?: string;
  /** The consent data class that covers the records: the access policy's class of the resource type. */
  dataClass: string;
  /**
   * FHIR searches that select the map's resources (the patient is added): any of them, each a source of the type
   * of its own. In each, a parameter's list of values is OR (`a,b`).
   */
  queries: Array<Record<string, string>>;
  /** The search parameter that names the patient: `patient`, or `subject` where the type has no `patient` (AdverseEvent). */
  patientParam: 'patient' | 'subject';
  /** The search parameter that dates them (newest first), and the Connect field it fills. */
  dateParam: string;
  dateField: string;
  /**
   * Record types (of the same resource) whose searches' selection this map does not read: observations are what
   * neither lab_results nor vitals select, so that no resource is read as two record types.
   */
  except?: Array<{ type: string; at: { file: string; line: number; column: number } }>;
  /** Constant fields of the records read by this map (which source a record of a merged type came from). */
  tag?: Record<string, string>;
  /** Where `type:` is written, for problems about the type as a whole. */
  at: { file: string; line: number; column: number };
}
