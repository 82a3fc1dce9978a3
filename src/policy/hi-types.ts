import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parse } from 'yaml';
import { dataClassOf } from '../core/data-classes';

/**
 * The kinds of record a consent artefact names (`hi_types`) and where each resource type records the date of its care
 * (`date_range`): mappings/tables/hi-types.yaml, read once at start. The access policy (./index.ts) is the only reader
 * that decides with it; the consent routes take the codes from here, the docs print the table.
 */

/** The codes of the interface (issue 43), in its order: the file must define each, and nothing else. */
export const HI_TYPES = ['Prescription', 'DiagnosticReport', 'OPConsultation', 'DischargeSummary', 'ImmunizationRecord', 'HealthDocumentRecord', 'WellnessRecord'] as const;
export type HiType = (typeof HI_TYPES)[number];

/** The purposes of use (HL7 v3 ActReason, the ABDM set), with what each means. */
export const PURPOSES_OF_USE = {
  CAREMGT: 'Care management: treating the patient (ABDM "Care Management")',
  BTG: 'Break the glass: an emergency (ABDM "Break the Glass")',
  PUBHLTH: 'Public health (ABDM "Public Health")',
  HPAYMT: 'Healthcare payment: claims and insurance (ABDM "Healthcare Payment")',
  DSRCH: 'Disease-specific healthcare research (ABDM "Disease Specific Healthcare Research")',
  PATRQT: 'Requested by the patient, for themselves (ABDM "Self Requested")',
} as const;
export const PURPOSE_CODES = Object.keys(PURPOSES_OF_USE) as Array<keyof typeof PURPOSES_OF_USE>;
export type PurposeOfUse = keyof typeof PURPOSES_OF_USE;
/** The code system of purposeOfUse codes (FHIR Consent.provision.purpose, AuditEvent.purposeOfEvent). */
export const ACT_REASON_SYSTEM = 'http://terminology.hl7.org/CodeSystem/v3-ActReason';
/** The purpose of a consent that states none (every consent made before issue 43). */
export const DEFAULT_PURPOSE: PurposeOfUse = 'CAREMGT';

export interface HiTypeRow {
  code: HiType;
  description: string;
  classes: string[];
  resources: string[];
}

export interface HiTypeTable {
  /** The type of the resource the records are about (Patient): every kind shows it, whatever the date range. */
  subject: string;
  kinds: HiTypeRow[];
  /** Resource type → the elements (dotted JSON paths) that date its care, tried in order. */
  careDates: Record<string, string[][]>;
}

export const HI_TYPES_FILE = fileURLToPath(new URL('../../mappings/tables/hi-types.yaml', import.meta.url));

/** Reads and checks the table; throws naming the file and the fault. */
export function loadHiTypes(file = HI_TYPES_FILE): HiTypeTable {
  const fail = (message: string): never => {
    throw new Error(`${file}: ${message}`);
  };
  const doc = parse(readFileSync(file, 'utf8')) as { subject?: unknown; hi_types?: Record<string, any>; care_dates?: Record<string, unknown> };
  if (doc?.subject !== 'Patient') fail('subject: Patient (the resource the records are about)');
  const kinds: HiTypeRow[] = [];
  const names = Object.keys(doc?.hi_types ?? {});
  for (const name of names) if (!(HI_TYPES as readonly string[]).includes(name)) fail(`unknown hi_type ${name} (the interface names ${HI_TYPES.join(', ')})`);
  for (const code of HI_TYPES) {
    const row = doc.hi_types?.[code];
    if (!row) fail(`hi_type ${code} is missing`);
    const resources = row.resources;
    if (!Array.isArray(resources) || !resources.length || !resources.every((r: unknown) => typeof r === 'string' && /^[A-Z][A-Za-z]+$/.test(r))) fail(`${code}.resources: a list of FHIR resource types`);
    const classes = [...new Set((resources as string[]).map(dataClassOf))].sort();
    const declared = Array.isArray(row.classes) ? [...row.classes].sort() : [];
    if (classes.join() !== declared.join()) fail(`${code}.classes: the classes of its resources are [${classes.join(', ')}], not [${declared.join(', ')}]`);
    kinds.push({ code, description: String(row.description ?? ''), classes, resources });
  }
  const careDates: Record<string, string[][]> = {};
  for (const [type, paths] of Object.entries(doc.care_dates ?? {})) {
    if (!/^[A-Z][A-Za-z]+$/.test(type)) fail(`care_dates: ${type} is not a resource type`);
    if (!Array.isArray(paths) || !paths.every((p) => typeof p === 'string' && /^[a-zA-Z]+(\.[a-zA-Z]+)*$/.test(p))) fail(`care_dates.${type}: a list of dotted element paths`);
    careDates[type] = (paths as string[]).map((p) => p.split('.'));
  }
  for (const row of kinds) for (const type of row.resources) if (!careDates[type]) fail(`care_dates: ${type} (of ${row.code}) has no care date`);
  return { subject: 'Patient', kinds, careDates };
}

/** The table the running service uses. */
export const hiTypes: HiTypeTable = loadHiTypes();

/** The resource types the kinds cover, and the subject (undefined: no kinds named, every type of the consent's classes). */
export function typesOfHiTypes(codes: readonly string[] | null | undefined): string[] | undefined {
  if (!codes?.length) return undefined;
  return [...new Set([hiTypes.subject, ...hiTypes.kinds.filter((k) => codes.includes(k.code)).flatMap((k) => k.resources)])].sort();
}

/** The classes the kinds cover, and the subject's. */
export function classesOfHiTypes(codes: readonly string[]): Set<string> {
  return new Set([dataClassOf(hiTypes.subject), ...hiTypes.kinds.filter((k) => codes.includes(k.code)).flatMap((k) => k.classes)]);
}
