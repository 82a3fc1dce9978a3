import { z } from 'zod';
import { badRequest } from '../core/errors';
import { isResourceType } from '../core/fhir-definitions';
import { isStorableInstant } from '../fhir/dates';
import type { QueryParams } from '../fhir/search/parse';

/**
 * The kick-off parameters of a Bulk Data export (Bulk Data Access IG 2.0, "Query Parameters"), from the query
 * string (GET) or a Parameters resource (POST), checked before any job exists: a bad value is a 400, never ignored.
 */
export interface ExportParameters {
  /** `_type`: the resource types asked for (undefined: every type the caller may read). */
  types?: string[];
  /** `_since`: only resources changed after this instant. */
  since?: string;
  /** `_typeFilter`: `Type?search` criteria, several for one type OR-ed. */
  typeFilters: TypeFilter[];
  /** `patient` (POST, Patient and Group exports): only these patients' data. */
  patients?: string[];
}

export interface TypeFilter {
  type: string;
  query: QueryParams;
  /** As given, stored with the job and shown again by the worker. */
  text: string;
}

/** `_outputFormat` values the IG names for ndjson; the only format served. */
export const OUTPUT_FORMATS = ['application/fhir+ndjson', 'application/ndjson', 'ndjson'];

/** Parameters of the IG that Pont does not support: refused (400) unless `Prefer: handling=lenient`. */
const UNSUPPORTED = ['includeAssociatedData', '_elements'];
const KNOWN = ['_outputFormat', '_since', '_type', '_typeFilter', 'patient'];

const Instant = z.iso.datetime({ offset: true });
const PATIENT_REFERENCE = /^(?:Patient\/)?([A-Za-z0-9\-.]{1,64})$/;

/** At most this many `_type` entries and `_typeFilter` criteria (there are ~150 resource types). */
const MAX_LIST = 200;

/** Values of each parameter, in order: the query string's, or the Parameters resource's. */
export type RawParameters = Map<string, string[]>;

export function parseExportParameters(raw: RawParameters, options: { lenient: boolean; patientAllowed: boolean }): ExportParameters {
  for (const name of raw.keys()) {
    if (KNOWN.includes(name)) continue;
    if (options.lenient) continue; // Prefer: handling=lenient: unknown and unsupported parameters are ignored
    throw badRequest(
      UNSUPPORTED.includes(name) ? `${name} is not supported by this server (send Prefer: handling=lenient to ignore it)` : `Unknown export parameter ${name}`,
    );
  }
  const one = (name: string): string | undefined => {
    const values = raw.get(name);
    if (values && values.length > 1) throw badRequest(`${name} may be given once`);
    return values?.[0];
  };
  const format = one('_outputFormat');
  if (format !== undefined && !OUTPUT_FORMATS.includes(format)) throw badRequest(`_outputFormat must be one of ${OUTPUT_FORMATS.join(', ')}`);
  const since = one('_since');
  if (since !== undefined && !Instant.safeParse(since).success) throw badRequest('_since must be a FHIR instant with a time zone, e.g. 2024-01-01T00:00:00Z');
  if (since !== undefined && !isStorableInstant(Date.parse(since))) throw badRequest('_since must be between 0001-01-01 and 9999-12-31');
  const list = (name: string) => (raw.get(name) ?? []).flatMap((v) => v.split(',')).map((v) => v.trim());

  const typeList = raw.has('_type') ? list('_type') : undefined;
  if (typeList && (typeList.length > MAX_LIST || typeList.some((t) => !isResourceType(t))))
    throw badRequest(`_type is a comma-separated list of resource types${typeList.length > MAX_LIST ? ` (at most ${MAX_LIST})` : `; unknown: ${typeList.find((t) => !isResourceType(t))}`}`);
  const types = typeList && [...new Set(typeList)];

  const filterTexts = list('_typeFilter');
  if (filterTexts.length > MAX_LIST) throw badRequest(`_typeFilter takes at most ${MAX_LIST} criteria`);
  const typeFilters = filterTexts.map((text): TypeFilter => {
    const mark = text.indexOf('?');
    const type = mark < 0 ? text : text.slice(0, mark);
    if (!isResourceType(type) || mark < 0) throw badRequest(`_typeFilter "${text.slice(0, 100)}" is not Type?search-parameters`);
    if (types && !types.includes(type)) throw badRequest(`_typeFilter names ${type}, which _type does not ask for`);
    const query: QueryParams = {};
    for (const [k, v] of new URLSearchParams(text.slice(mark + 1))) {
      if (k.startsWith('_include') || k.startsWith('_revinclude') || ['_sort', '_count', '_cursor', '_summary', '_elements', '_total'].includes(k))
        throw badRequest(`_typeFilter selects resources: ${k} is not allowed in it`);
      query[k] = query[k] === undefined ? v : ([] as string[]).concat(query[k]!, v);
    }
    return { type, query, text };
  });

  const patientValues = raw.get('patient');
  if (patientValues && !options.patientAllowed) throw badRequest('patient is a parameter of Patient and Group exports');
  const patients = patientValues?.map((v) => {
    const m = PATIENT_REFERENCE.exec(v);
    if (!m) throw badRequest(`patient must reference a Patient (Patient/id), got "${v.slice(0, 100)}"`);
    return m[1]!;
  });
  if (patients && patients.length > 10_000) throw badRequest('patient names at most 10000 patients');
  return { types, since, typeFilters, patients: patients && [...new Set(patients)] };
}

/** The query string's parameters (repeated keys kept). */
export function queryParameters(query: Record<string, string | string[] | undefined>): RawParameters {
  const out: RawParameters = new Map();
  for (const [k, v] of Object.entries(query)) if (v !== undefined) out.set(k, ([] as string[]).concat(v));
  return out;
}

/**
 * A POST kick-off's Parameters resource: each `parameter` by name, with its value (valueString, valueInstant,
 * valueReference.reference, valueCode, valueBoolean...). Anything else is a 400.
 */
export function parametersResource(body: unknown): RawParameters {
  if (body === undefined) return new Map();
  const parsed = z
    .object({
      resourceType: z.literal('Parameters'),
      parameter: z
        .array(z.object({ name: z.string().min(1).max(100) }).catchall(z.unknown()))
        .max(20_000)
        .default([]),
    })
    .safeParse(body);
  if (!parsed.success) throw badRequest('The body of a POST kick-off is a FHIR Parameters resource');
  const out: RawParameters = new Map();
  for (const p of parsed.data.parameter) {
    const valueKey = Object.keys(p).find((k) => k.startsWith('value'));
    const value = valueKey === 'valueReference' ? (p.valueReference as { reference?: unknown } | undefined)?.reference : valueKey ? p[valueKey] : undefined;
    if (typeof value !== 'string' && typeof value !== 'boolean') throw badRequest(`Parameter ${p.name} needs a value (valueString, valueInstant, valueReference...)`);
    out.set(p.name, [...(out.get(p.name) ?? []), String(value)]);
  }
  return out;
}
