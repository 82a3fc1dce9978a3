/**
 * What a Bridge agent may ask of a resource it syncs (docs/integrators.md "Bridge Agent protocol"), shared by Pont's
 * sync (src/bridge/sync.ts) and the HL7 v2 agent Pont ships (src/agent).
 */

/**
 * `meta.tag` of a resource to create only when the facility's resource of that id does not exist yet: an HL7 ORU's
 * PID names who the results are about and is no update of their demographics (an ADT is). Not stored.
 */
export const IF_ABSENT_TAG = { system: 'https://pont.health/fhir/CodeSystem/bridge-write', code: 'if-absent' } as const;

export function isIfAbsentTag(tag: { system?: string; code?: string }): boolean {
  return tag.system === IF_ABSENT_TAG.system && tag.code === IF_ABSENT_TAG.code;
}
