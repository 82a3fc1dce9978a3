import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Observation, Organization, Patient, Resource } from '@medplum/fhirtypes';
import { ids, startFhirApi, type FhirTestApi } from './fhir-helpers';

let api: FhirTestApi;
let ada: Patient;
let bola: Patient;
let chidi: Patient;
let glucose: Observation;
let weight: Observation;
let bp: Observation;

const loinc = 'http://loinc.org';

beforeAll(async () => {
  api = await startFhirApi();
  const org = await api.create<Organization>({ resourceType: 'Organization', name: 'Hôpital Central' });
  ada = await api.create<Patient>({
    resourceType: 'Patient',
    name: [{ family: 'Okafor', given: ['Ada', 'Ngozi'] }],
    gender: 'female',
    birthDate: '1990-04-12',
    identifier: [{ system: 'urn:pont:test', value: 'A-1' }],
    managingOrganization: { reference: `Organization/${org.id}` },
    address: [{ city: 'Yaoundé', country: 'CM' }],
    active: true,
  });
  bola = await api.create<Patient>({ resourceType: 'Patient', name: [{ family: 'Ogunleye', given: ['Bola'] }], gender: 'male', birthDate: '1985', active: false });
  chidi = await api.create<Patient>({ resourceType: 'Patient', name: [{ family: 'Eze', given: ['Chidi'] }], gender: 'male', birthDate: '2001-12-31' });
  const obs = (subject: Patient, code: string, display: string, effective: string, value?: number, unit?: string): Observation => ({
    resourceType: 'Observation',
    status: 'final',
    code: { coding: [{ system: loinc, code, display }], text: display },
    subject: { reference: `Patient/${subject.id}` },
    effectiveDateTime: effective,
    ...(value !== undefined ? { valueQuantity: { value, unit, system: 'http://unitsofmeasure.org', code: unit } } : {}),
  });
  glucose = await api.create(obs(ada, '2339-0', 'Glucose [Mass/volume] in Blood', '2020-01-15T08:30:00Z', 5.4, 'mmol/L'));
  weight = await api.create(obs(ada, '29463-7', 'Body weight', '2021-06-01T10:00:00+02:00', 72.5, 'kg'));
  bp = await api.create(obs(bola, '85354-9', 'Blood pressure panel', '2019-03-03'));
});
afterAll(async () => {
  await api?.close();
});

async function found(query: string): Promise<string[]> {
  const res = await api.call(query);
  expect(res.status, `${query}: ${JSON.stringify(res.body).slice(0, 300)}`).toBe(200);
  return ids((res.body.entry ?? []).filter((e: any) => e.search.mode === 'match').map((e: any) => e.resource));
}
const sorted = (...rs: Resource[]) => ids(rs);

describe('string parameters', () => {
  it('match the start of any name part, ignoring case and accents', async () => {
    expect(await found('/Patient?name=oka')).toEqual(sorted(ada));
    expect(await found('/Patient?given=NGOZI')).toEqual(sorted(ada));
    expect(await found('/Patient?address-city=yaounde')).toEqual(sorted(ada));
    expect(await found('/Organization?name=hopital')).toHaveLength(1);
  });
  it(':exact and :contains', async () => {
    expect(await found('/Patient?family:exact=Okafor')).toEqual(sorted(ada));
    expect(await found('/Patient?family:exact=okafor')).toEqual([]);
    expect(await found('/Patient?family:contains=gun')).toEqual(sorted(bola));
  });
  it('comma is OR, repetition is AND', async () => {
    expect(await found('/Patient?family=Okafor,Eze')).toEqual(sorted(ada, chidi));
    expect(await found('/Patient?given=ada&given=ngozi')).toEqual(sorted(ada));
    expect(await found('/Patient?given=ada&given=bola')).toEqual([]);
  });
});

describe('token parameters', () => {
  it('code, system|code, |code and system|', async () => {
    expect(await found('/Patient?gender=male')).toEqual(sorted(bola, chidi));
    expect(await found(`/Observation?code=${loinc}|2339-0`)).toEqual(sorted(glucose));
    expect(await found('/Observation?code=2339-0')).toEqual(sorted(glucose));
    expect(await found('/Observation?code=http://snomed.info/sct|2339-0')).toEqual([]);
    expect(await found('/Patient?identifier=urn:pont:test|A-1')).toEqual(sorted(ada));
    expect(await found('/Patient?identifier=|A-1')).toEqual([]);
    expect(await found(`/Observation?code=${loinc}|`)).toEqual(sorted(glucose, weight, bp));
    expect(await found('/Patient?active=true')).toEqual(sorted(ada));
    // A bare code element carries the code system its required value set implies.
    expect(await found('/Patient?gender=http://hl7.org/fhir/administrative-gender|male')).toEqual(sorted(bola, chidi));
    expect(await found('/Observation?status=http://hl7.org/fhir/observation-status|final')).toEqual(sorted(glucose, weight, bp));
    expect(await found('/Patient?gender=http://example.org/other|male')).toEqual([]);
  });
  it(':not, :text and :missing', async () => {
    expect(await found('/Patient?gender:not=male')).toEqual(sorted(ada));
    expect(await found('/Observation?code:text=body')).toEqual(sorted(weight));
    expect(await found('/Observation?code:text=pressure')).toEqual(sorted(bp));
    expect(await found('/Patient?active:missing=true')).toEqual(sorted(chidi));
    expect(await found('/Patient?active:missing=false')).toEqual(sorted(ada, bola));
  });
});

describe('indexed values as written', () => {
  // The index rows reach PostgreSQL as one array per column: a value that looks like array-literal syntax (quotes,
  // backslashes, braces, commas, the word NULL) or holds non-ASCII text is stored and found as it is. Substances: a
  // type the other tests here do not search.
  it('finds codes, identifiers, displays (:text) and quantity units whatever characters they hold', async () => {
    const odd = ['a"b', 'back\\slash', '{x,y}', 'NULL', 'comma, and space', 'é😀'];
    const made: Resource[] = [];
    for (const value of odd) {
      made.push(
        await api.create({
          resourceType: 'Substance',
          code: { coding: [{ system: 'urn:pont:odd', code: value, display: `shown ${value}` }] },
          identifier: [{ system: 'urn:pont:odd-id', value }],
          instance: [{ quantity: { value: 1, unit: value, system: 'urn:pont:odd-units', code: value } }],
        } as Resource),
      );
    }
    for (const [i, value] of odd.entries()) {
      const v = encodeURIComponent(value.replace(/[\\,$|]/g, '\\$&'));
      expect(await found(`/Substance?code=urn:pont:odd|${v}`), value).toEqual(sorted(made[i]!));
      expect(await found(`/Substance?identifier=urn:pont:odd-id|${v}`), value).toEqual(sorted(made[i]!));
      expect(await found(`/Substance?quantity=1|urn:pont:odd-units|${v}`), value).toEqual(sorted(made[i]!));
    }
    expect(await found('/Substance?code=urn:pont:odd|')).toEqual(sorted(...made));
    expect(await found('/Substance?code:text=shown%20NULL')).toEqual(sorted(made[3]!));
  });
});

describe('date parameters', () => {
  it('a date matches everything within its precision', async () => {
    expect(await found('/Observation?date=2020-01-15')).toEqual(sorted(glucose));
    expect(await found('/Observation?date=2020-01')).toEqual(sorted(glucose));
    expect(await found('/Observation?date=2021-06-01T08:00:00Z')).toEqual(sorted(weight));
    expect(await found('/Patient?birthdate=1985')).toEqual(sorted(bola));
    expect(await found('/Patient?birthdate=1985-06')).toEqual([]); // 1985 is wider than June 1985
  });
  it('prefixes', async () => {
    expect(await found('/Observation?date=gt2020-01-15')).toEqual(sorted(weight));
    expect(await found('/Observation?date=ge2020-01-15')).toEqual(sorted(glucose, weight));
    expect(await found('/Observation?date=lt2020-01-15')).toEqual(sorted(bp));
    expect(await found('/Observation?date=le2020-01-15')).toEqual(sorted(glucose, bp));
    expect(await found('/Observation?date=ne2020-01-15')).toEqual(sorted(weight, bp));
    expect(await found('/Observation?date=sa2020-01-15')).toEqual(sorted(weight));
    expect(await found('/Observation?date=eb2020-01-15')).toEqual(sorted(bp));
    expect(await found('/Observation?date=ge2019-01-01&date=lt2021-01-01')).toEqual(sorted(glucose, bp));
    expect(await found('/Observation?date=ap2020-01-14')).toEqual(sorted(glucose));
  });
  it('_lastUpdated', async () => {
    expect(await found('/Patient?_lastUpdated=gt2000-01-01')).toEqual(sorted(ada, bola, chidi));
    expect(await found('/Patient?_lastUpdated=lt2000-01-01')).toEqual([]);
  });
});

describe('quantity parameters', () => {
  it('compare with the precision of the searched value, and filter by system and unit', async () => {
    expect(await found('/Observation?value-quantity=5.4')).toEqual(sorted(glucose));
    expect(await found('/Observation?value-quantity=5')).toEqual(sorted(glucose)); // 5 means [4.5, 5.5)
    expect(await found('/Observation?value-quantity=5.40')).toEqual(sorted(glucose));
    expect(await found('/Observation?value-quantity=5.41')).toEqual([]);
    expect(await found('/Observation?value-quantity=gt10')).toEqual(sorted(weight));
    expect(await found('/Observation?value-quantity=le5.4')).toEqual(sorted(glucose));
    expect(await found('/Observation?value-quantity=ap70')).toEqual(sorted(weight));
    expect(await found('/Observation?value-quantity=72.5|http://unitsofmeasure.org|kg')).toEqual(sorted(weight));
    expect(await found('/Observation?value-quantity=72.5||kg')).toEqual(sorted(weight));
    expect(await found('/Observation?value-quantity=72.5|http://unitsofmeasure.org|g')).toEqual([]);
  });
});

describe('reference parameters and chaining', () => {
  it('Type/id, plain id, :Type, absolute local URL', async () => {
    expect(await found(`/Observation?subject=Patient/${ada.id}`)).toEqual(sorted(glucose, weight));
    expect(await found(`/Observation?subject=${ada.id}`)).toEqual(sorted(glucose, weight));
    expect(await found(`/Observation?subject:Patient=${bola.id}`)).toEqual(sorted(bp));
    expect(await found(`/Observation?patient=${api.pont.url}/api/fhir/R4/Patient/${ada.id}`)).toEqual(sorted(glucose, weight));
    expect(await found(`/Observation?subject=Patient/${ada.id},Patient/${bola.id}`)).toEqual(sorted(glucose, weight, bp));
  });
  it('patient + code and patient + date range together', async () => {
    expect(await found(`/Observation?subject=Patient/${ada.id}&code=${loinc}|29463-7`)).toEqual(sorted(weight));
    expect(await found(`/Observation?subject=Patient/${ada.id}&date=ge2020-01-01&date=lt2021-01-01`)).toEqual(sorted(glucose));
  });
  // Tested on the index rows the patient's reference selects, before any resource row is read (indexProbesSql).
  it('patient with :missing and :not', async () => {
    expect(await found(`/Observation?subject=Patient/${ada.id}&value-quantity:missing=true`)).toEqual([]);
    expect(await found(`/Observation?subject=Patient/${bola.id}&value-quantity:missing=true`)).toEqual(sorted(bp));
    expect(await found(`/Observation?subject=Patient/${ada.id}&value-quantity:missing=false`)).toEqual(sorted(glucose, weight));
    expect(await found(`/Observation?subject=Patient/${ada.id}&code:not=${loinc}|29463-7`)).toEqual(sorted(glucose));
    expect(await found(`/Observation?subject=Patient/${ada.id}&code:not=${loinc}|29463-7&value-quantity:missing=false&date=lt2021`)).toEqual(sorted(glucose));
    expect(await found(`/Observation?subject=Patient/${ada.id}&code:not=${loinc}|29463-7,${loinc}|2339-0`)).toEqual([]);
  });
  it('chains through references', async () => {
    expect(await found('/Observation?subject:Patient.name=okafor')).toEqual(sorted(glucose, weight));
    expect(await found('/Observation?subject.gender=male')).toEqual(sorted(bp));
    expect(await found('/Observation?patient.organization.name=hopital')).toEqual(sorted(glucose, weight));
  });
  it('_has: resources that others matching a filter refer to', async () => {
    expect(await found(`/Patient?_has:Observation:subject:code=${loinc}|29463-7`)).toEqual(sorted(ada));
    expect(await found('/Patient?_has:Observation:subject:code:text=pressure')).toEqual(sorted(bola));
    expect(await found('/Patient?_has:Observation:subject:date=lt2000')).toEqual([]);
    expect(await found('/Organization?_has:Patient:organization:_has:Observation:subject:code=2339-0')).toHaveLength(1);
  });
  it('_id', async () => {
    expect(await found(`/Patient?_id=${ada.id},${chidi.id}`)).toEqual(sorted(ada, chidi));
  });
});

describe('result parameters', () => {
  it('_include and _revinclude add the referenced and referring resources once', async () => {
    const inc = await api.call(`/Observation?subject=Patient/${ada.id}&_include=Observation:subject`);
    const modes = inc.body.entry.map((e: any) => `${e.resource.resourceType}:${e.search.mode}`).sort();
    expect(modes).toEqual(['Observation:match', 'Observation:match', 'Patient:include']);
    const rev = await api.call(`/Patient?_id=${ada.id}&_revinclude=Observation:subject`);
    expect(rev.body.entry.filter((e: any) => e.search.mode === 'include').map((e: any) => e.resource.id).sort()).toEqual(sorted(glucose, weight));
    const iterate = await api.call(`/Observation?_id=${glucose.id}&_include=Observation:subject&_include:iterate=Patient:organization`);
    expect(iterate.body.entry.map((e: any) => e.resource.resourceType).sort()).toEqual(['Observation', 'Organization', 'Patient']);
  });
  it('_sort by parameters, _id and _lastUpdated', async () => {
    const asc = (await api.call('/Patient?_sort=birthdate')).body.entry.map((e: any) => e.resource.id);
    expect(asc).toEqual([bola.id, ada.id, chidi.id]);
    const desc = (await api.call('/Patient?_sort=-birthdate')).body.entry.map((e: any) => e.resource.id);
    expect(desc).toEqual([chidi.id, ada.id, bola.id]);
    const byFamily = (await api.call('/Patient?_sort=family')).body.entry.map((e: any) => e.resource.name[0].family);
    expect(byFamily).toEqual(['Eze', 'Ogunleye', 'Okafor']);
    const lastUpdated = (await api.call('/Patient?_sort=-_lastUpdated')).body.entry.map((e: any) => e.resource.id);
    expect(lastUpdated).toEqual([chidi.id, bola.id, ada.id]);
  });
  it('_total, _summary=count and _count=0', async () => {
    expect((await api.call('/Patient?_summary=count')).body).toMatchObject({ total: 3 });
    expect((await api.call('/Patient?_summary=count')).body.entry).toBeUndefined();
    expect((await api.call('/Patient?_count=0')).body.total).toBe(3);
    expect((await api.call('/Patient?_total=none')).body.total).toBeUndefined();
    // A first page that holds every match, or none: the total is its length (not counted again), the same.
    expect((await api.call('/Patient?_count=10')).body.total).toBe(3);
    expect((await api.call('/Patient?_count=3&_sort=family')).body.total).toBe(3);
    expect((await api.call('/Patient?family=Nobody')).body.total).toBe(0);
    expect((await api.call('/Patient?_count=2')).body.total).toBe(3);
  });
  it('_elements keeps the asked and mandatory elements and marks the result SUBSETTED', async () => {
    const res = await api.call(`/Observation?_id=${glucose.id}&_elements=subject`);
    const r = res.body.entry[0].resource;
    expect(Object.keys(r).sort()).toEqual(['code', 'id', 'meta', 'resourceType', 'status', 'subject']);
    expect(r.meta.tag).toContainEqual(expect.objectContaining({ code: 'SUBSETTED' }));
    const value = (await api.call(`/Observation?_id=${glucose.id}&_elements=value`)).body.entry[0].resource;
    expect(value.valueQuantity.value).toBe(5.4);
  });
  it('pages with next links: every match once, in a stable order', async () => {
    const seen = await api.searchAll('/Observation?_count=1');
    expect(ids(seen)).toEqual(sorted(glucose, weight, bp));
    const first = await api.call('/Observation?_count=2');
    expect(first.body.total).toBe(3);
    expect(first.body.link.find((l: any) => l.relation === 'self').url).toBe(`${api.pont.url}/api/fhir/R4/Observation?_count=2`);
    const next = first.body.link.find((l: any) => l.relation === 'next').url as string;
    const second = await api.call(next.slice(next.indexOf('/Observation')));
    expect(second.body.total).toBe(3);
    expect(second.body.entry).toHaveLength(1);
    expect(second.body.link.find((l: any) => l.relation === 'next')).toBeUndefined();
    const sortedPages = await api.searchAll('/Patient?_sort=family&_count=2');
    expect(sortedPages.map((p: any) => p.name[0].family)).toEqual(['Eze', 'Ogunleye', 'Okafor']);
  });
  it('a match is the resource its read answers, whatever it holds, by every search route', async () => {
    // Sent as stored (its text spliced into the Bundle unparsed): escapes, non-BMP characters, U+2028, numbers.
    const odd = await api.create<Patient>({
      resourceType: 'Patient',
      name: [{ family: 'Zoë "Quote" \\ Back\u2028slash </script>', given: ['😀', 'tab\tthere'] }],
      birthDate: '1950-01-01',
      extension: [{ url: 'https://pont.health/test/number', valueDecimal: 1.10 }],
    });
    const read = (await api.call(`/Patient/${odd.id}`)).body;
    const matchOf = (res: { status: number; body: any }) => {
      expect(res.status).toBe(200);
      return res.body.entry.find((e: any) => e.search.mode === 'match' && e.resource.id === odd.id).resource;
    };
    expect(matchOf(await api.call(`/Patient?_id=${odd.id}`))).toEqual(read);
    expect(matchOf(await api.call(`/Patient?birthdate=1950-01-01&_sort=-birthdate`))).toEqual(read);
    expect(matchOf(await api.call('/Patient/_search', { method: 'POST', body: `_id=${odd.id}`, headers: { 'content-type': 'application/x-www-form-urlencoded' } }))).toEqual(read);
    expect(matchOf(await api.call(`/Patient/${odd.id}/Patient`))).toEqual(read);
    // Shown in part, or with what it refers to: the same resource, as before.
    expect(matchOf(await api.call(`/Patient?_id=${odd.id}&_elements=name`)).name).toEqual(read.name);
    expect(matchOf(await api.call(`/Patient?_id=${odd.id}&_revinclude=Observation:subject`))).toEqual(read);
  });
  it('fullUrl is the absolute URL of each resource', async () => {
    const res = await api.call(`/Patient?_id=${ada.id}`);
    expect(res.body.entry[0].fullUrl).toBe(`${api.pont.url}/api/fhir/R4/Patient/${ada.id}`);
  });
  it('POST _search takes form parameters', async () => {
    const res = await api.call('/Patient/_search', {
      method: 'POST',
      body: 'family=Okafor',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
    });
    expect(res.status).toBe(200);
    expect(ids(res.body.entry.map((e: any) => e.resource))).toEqual(sorted(ada));
  });
  it('Patient/$everything returns the patient, their records and what those reference', async () => {
    const res = await api.call(`/Patient/${ada.id}/$everything`);
    expect(res.status).toBe(200);
    const types = res.body.entry.map((e: any) => `${e.resource.resourceType}:${e.search.mode}`).sort();
    expect(types).toEqual(['Observation:match', 'Observation:match', 'Organization:include', 'Patient:match']);
  });
});

describe('bad searches are 400 OperationOutcomes', () => {
  const bad = [
    '/Patient?shoe-size=42',
    '/Patient?name:fuzzy=x',
    '/Patient?birthdate=1990-02-30',
    '/Patient?birthdate=yesterday',
    '/Observation?value-quantity=lots',
    '/Observation?value-quantity=5|a',
    '/Patient?_count=-5',
    '/Patient?_sort=shoe-size',
    '/Patient?_include=Patient:name',
    '/Observation?_include=Patient:organization',
    '/Patient?_summary=maybe',
    '/Patient?_total=many',
    '/Patient?_cursor=notacursor',
    '/Patient?_has:Observation:encounter:code=1',
    '/Patient?_has:Spaceship:subject:code=1',
    '/Patient?_has:Observation=1',
    '/Patient?active:missing=perhaps',
    '/Observation?subject:Spaceship=1',
    '/Observation?subject.shoe=1',
    '/Patient?gender=a|b|c',
  ];
  for (const query of bad) {
    it(query, async () => {
      const res = await api.call(query);
      expect(res.status).toBe(400);
      expect(res.body.resourceType).toBe('OperationOutcome');
      expect(res.body.issue[0].severity).toBe('error');
      expect(res.body.issue[0].diagnostics).toEqual(expect.any(String));
    });
  }
});
