import { createReadStream } from 'node:fs';
import { basename } from 'node:path';
import { createInterface } from 'node:readline';
import type { CodeSystem, CodeSystemConceptProperty } from '@medplum/fhirtypes';
import { badRequest } from '../../core/errors';
import type { ConceptInput } from './concepts';
import type { Loaded, TerminologyLoader } from './load';

/**
 * The official release formats of two code systems, read as they stream (docs/fhir.md "Terminology"):
 * - SNOMED CT RF2 (Snapshot): `sct2_Concept_…txt`, `sct2_Description_…txt` and `sct2_Relationship_…txt` (tab-separated,
 *   a header line); the active "is a" relationships (116680003) are the hierarchy; the display is the preferred
 *   synonym of a `der2_cRefset_Language…txt` when one is given, else the fully specified name.
 * - LOINC: `Loinc.csv` (the table's columns; LOINC_NUM the code, LONG_COMMON_NAME the display, DEPRECATED status inactive).
 */

export const SNOMED = 'http://snomed.info/sct';
export const LOINC = 'http://loinc.org';
const IS_A = '116680003';
const FSN = '900000000000003001';
const PREFERRED = '900000000000548007';

async function* lines(file: string): AsyncGenerator<string[]> {
  const input = createInterface({ input: createReadStream(file, 'utf8'), crlfDelay: Infinity });
  let header: string[] | undefined;
  for await (const line of input) {
    if (!line) continue;
    const cells = line.split('\t');
    if (!header) {
      header = cells;
      continue;
    }
    if (cells.length !== header.length) throw badRequest(`${basename(file)}: a row has ${cells.length} columns, the header ${header.length}`);
    yield cells;
  }
}

/** The columns an RF2 file must have, by name, checked on its header. */
async function columns(file: string, names: string[]): Promise<number[]> {
  const input = createInterface({ input: createReadStream(file, 'utf8'), crlfDelay: Infinity });
  for await (const line of input) {
    input.close();
    const header = line.split('\t');
    return names.map((n) => {
      const i = header.indexOf(n);
      if (i < 0) throw badRequest(`${basename(file)}: no column ${n} (an RF2 file has a header line: ${names.join(', ')}, …)`);
      return i;
    });
  }
  throw badRequest(`${basename(file)} is empty`);
}

export interface Rf2Files {
  concept: string;
  description?: string;
  relationship?: string;
  language?: string;
}

/** Which of `files` are RF2 files, by their release names. */
export function rf2Files(files: string[]): Rf2Files | undefined {
  const find = (re: RegExp) => files.find((f) => re.test(basename(f)));
  const concept = find(/^sct2_Concept_.*\.txt$/i);
  if (!concept) return undefined;
  return { concept, description: find(/^sct2_Description_.*\.txt$/i), relationship: find(/^sct2_Relationship_.*\.txt$/i), language: find(/^der2_cRefset_Language.*\.txt$/i) };
}

/** Loads a SNOMED CT RF2 snapshot; the version is the release date of the concept file's name (`…_20250101.txt`). */
export async function loadRf2(loader: TerminologyLoader, files: Rf2Files): Promise<Loaded> {
  const date = /_(\d{8})\.txt$/i.exec(files.concept)?.[1];
  const header: CodeSystem = {
    resourceType: 'CodeSystem',
    id: 'snomedct',
    url: SNOMED,
    ...(date ? { version: `${SNOMED}/900000000000207008/version/${date}` } : {}),
    name: 'SNOMED_CT',
    title: 'SNOMED CT',
    status: 'active',
    content: 'complete',
    hierarchyMeaning: 'is-a',
  };
  const [cid, cactive] = await columns(files.concept, ['id', 'active']);
  async function* concepts(): AsyncGenerator<ConceptInput> {
    for await (const row of lines(files.concept)) yield { code: row[cid!]!, active: row[cactive!] === '1', parents: [] };
  }
  return loader.loadCodeSystem(header, concepts(), async (writer) => {
    if (files.description) {
      const preferred = new Set<string>();
      if (files.language) {
        const [ref, acc, active] = await columns(files.language, ['referencedComponentId', 'acceptabilityId', 'active']);
        for await (const row of lines(files.language)) if (row[active!] === '1' && row[acc!] === PREFERRED) preferred.add(row[ref!]!);
      }
      const [id, active, conceptId, lang, type, term] = await columns(files.description, ['id', 'active', 'conceptId', 'languageCode', 'typeId', 'term']);
      let batch: Array<{ code: string; display?: string; fallback?: string; designation: { language?: string; use: { system: string; code: string }; value: string } }> = [];
      for await (const row of lines(files.description)) {
        if (row[active!] !== '1') continue;
        const isFsn = row[type!] === FSN;
        const display = (files.language ? preferred.has(row[id!]!) && !isFsn : isFsn) ? row[term!] : undefined;
        const fallback = files.language && isFsn ? row[term!] : undefined; // no preferred synonym: the FSN
        batch.push({ code: row[conceptId!]!, display, fallback, designation: { language: row[lang!], use: { system: SNOMED, code: row[type!]! }, value: row[term!]! } });
        if (batch.length >= 5000) (await writer.describe(batch), (batch = []));
      }
      await writer.describe(batch);
    }
    if (files.relationship) {
      const [active, source, destination, type] = await columns(files.relationship, ['active', 'sourceId', 'destinationId', 'typeId']);
      let parents: string[] = [];
      let children: string[] = [];
      for await (const row of lines(files.relationship)) {
        if (row[active!] !== '1' || row[type!] !== IS_A) continue;
        parents.push(row[destination!]!);
        children.push(row[source!]!);
        if (parents.length >= 10_000) (await writer.edges(parents, children), (parents = []), (children = []));
      }
      await writer.edges(parents, children);
    }
  });
}

/** One CSV record at a time (RFC 4180: quoted fields, doubled quotes, newlines inside quotes). */
async function* csvRecords(file: string): AsyncGenerator<string[]> {
  const input = createInterface({ input: createReadStream(file, 'utf8'), crlfDelay: Infinity });
  let fields: string[] = [];
  let field = '';
  let quoted = false;
  for await (const line of input) {
    for (let i = 0; i < line.length; i++) {
      const c = line[i];
      if (quoted) {
        if (c === '"' && line[i + 1] === '"') (field += '"'), i++;
        else if (c === '"') quoted = false;
        else field += c;
      } else if (c === '"') quoted = true;
      else if (c === ',') (fields.push(field), (field = ''));
      else field += c;
    }
    if (quoted) {
      field += '\n';
      continue;
    }
    fields.push(field);
    if (fields.length > 1 || fields[0] !== '') yield fields;
    fields = [];
    field = '';
  }
  if (quoted) throw badRequest(`${basename(file)}: a quoted field is not closed`);
}

/** The LOINC table's columns kept as properties of each code. */
const LOINC_PROPERTIES = ['COMPONENT', 'PROPERTY', 'TIME_ASPCT', 'SYSTEM', 'SCALE_TYP', 'METHOD_TYP', 'CLASS', 'STATUS'];

export const isLoincTable = (file: string) => /^loinc.*\.csv$/i.test(basename(file));

/** Loads a LOINC table (`Loinc.csv`, or a CSV with its columns: LOINC_NUM and LONG_COMMON_NAME at least). */
export async function loadLoincCsv(loader: TerminologyLoader, file: string, version?: string): Promise<Loaded> {
  const records = csvRecords(file);
  const first = await records.next();
  if (first.done) throw badRequest(`${basename(file)} is empty`);
  const header = first.value.map((h) => h.trim().toUpperCase());
  const at = (name: string) => header.indexOf(name);
  const [code, long, short, status] = [at('LOINC_NUM'), at('LONG_COMMON_NAME'), at('SHORTNAME'), at('STATUS')];
  if (code < 0 || long < 0) throw badRequest(`${basename(file)}: a LOINC table has the columns LOINC_NUM and LONG_COMMON_NAME`);
  const kept = LOINC_PROPERTIES.map((p) => [p, at(p)] as const).filter(([, i]) => i >= 0);
  const cs: CodeSystem = {
    resourceType: 'CodeSystem',
    id: 'loinc',
    url: LOINC,
    ...(version ? { version } : {}),
    name: 'LOINC',
    title: 'LOINC',
    status: 'active',
    content: 'complete',
    property: kept.map(([p]) => ({ code: p, type: 'string' as const })),
  };
  async function* concepts(): AsyncGenerator<ConceptInput> {
    for await (const row of records) {
      if (row.length !== header.length) throw badRequest(`${basename(file)}: a row has ${row.length} columns, the header ${header.length} (LOINC_NUM ${row[code] ?? '?'})`);
      const properties: CodeSystemConceptProperty[] = kept.filter(([, i]) => row[i]).map(([p, i]) => ({ code: p, valueString: row[i]! }));
      yield {
        code: row[code]!,
        display: row[long] || (short >= 0 ? row[short] : undefined) || undefined,
        active: status < 0 || row[status] !== 'DEPRECATED',
        parents: [],
        properties: properties.length ? properties : undefined,
        designations: short >= 0 && row[short] ? [{ use: { system: 'http://loinc.org', code: 'SHORTNAME' }, value: row[short]! }] : undefined,
      };
    }
  }
  return loader.loadCodeSystem(cs, concepts());
}
