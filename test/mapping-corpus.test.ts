import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { validateResource } from '@medplum/core';
import type { Bundle, Resource } from '@medplum/fhirtypes';
import { x as extract } from 'tar';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MappingValueError } from '../src/mapping/index';
import { RecordsService } from '../src/records/service';
import { recordTypes, type RecordSource } from '../src/mapping/record-types';
import { backend, startTestServer, type TestServer } from './harness';
import { schemaProblems } from './published-schema';

/**
 * Issue 26, the corpus: every resource of the clinical types among the HL7 R4 specification examples and the
 * Synthea sample (both in samples/) goes through the record map that the records route reads it with. Per
 * resource, an independent reading of the FHIR says what a reader must not lose (value with comparator, unit,
 * the applicable range, status, codes, display from text or coding, date); the record must fit the published
 * shape (the OpenAPI document) and be writable back through the same map as valid FHIR.
 */
const samples = fileURLToPath(new URL('../samples', import.meta.url));
const CLINICAL = ['Observation', 'Condition', 'AllergyIntolerance', 'MedicationRequest', 'DiagnosticReport', 'Encounter', 'Immunization', 'DocumentReference'];
const LOINC = 'http://loinc.org';
const SCT = 'http://snomed.info/sct';
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const SOME_UUID = '5d9f1a2e-8c4b-4f6e-9d3a-2b7c1e0f4a11';

type R = Record<string, any>;
const hasCode = (concept: R | undefined, system?: string) => (concept?.coding ?? []).some((c: R) => c.code && (!system || c.system === system));
const named = (concept: R | undefined) => !!(concept?.text || (concept?.coding ?? []).some((c: R) => c.display || c.code));

/** Does the source's search select the resource? (category tokens and result:missing, as records.test.ts reads them.) */
function selects(source: RecordSource, resource: R): boolean {
  if (resource.resourceType !== source.resourceType) return false;
  for (const [param, value] of Object.entries(source.query)) {
    if (param === 'category' || param === 'category:not') {
      const tokens = value.split(',').map((t) => t.split('|'));
      const any = (resource.category ? [resource.category].flat() : []).some((c: R) => (c.coding ?? []).some((x: R) => tokens.some(([s, code]) => x.system === s && x.code === code)));
      if (any !== (param === 'category')) return false;
    } else if (param === 'result:missing') {
      if ((resource.result ?? []).length > 0 !== (value === 'false')) return false;
    } else throw new Error(`the corpus test does not know the search parameter ${param}`);
  }
  return true;
}

/** The reference range a reader needs: the one in the value's unit (by code, then text), else the first. */
function applicableRange(o: R): R | undefined {
  const q = o.valueQuantity ?? {};
  const ranges: R[] = o.referenceRange ?? [];
  const by = (k: 'code' | 'unit') => q[k] !== undefined && ranges.find((r) => r.low?.[k] === q[k] || r.high?.[k] === q[k]);
  return by('code') || by('unit') || ranges[0];
}

/** What the record must hold, read independently from the FHIR: each a [field, expected] pair or a named check. */
function losses(type: string, r: R, rec: R): string[] {
  const lost: string[] = [];
  const need = (field: string, ok: boolean) => {
    if (!ok) lost.push(`${field}: ${JSON.stringify(rec[field])}`);
  };
  const date = (field: string, present: unknown) => need(field, !present || rec[field] !== null);
  switch (type) {
    case 'lab_results':
    case 'observations':
    case 'vitals': {
      const value = type === 'vitals' ? 'value' : 'value_numeric';
      const nameField = type === 'lab_results' ? 'test_name' : 'name';
      if (r.resourceType === 'DiagnosticReport') {
        need('value', (r.conclusion ?? null) === rec.value);
        need('value_coded', !(r.conclusionCode ?? []).some(named) || rec.value_coded !== null);
      } else {
        const q = r.valueQuantity;
        need(value, (q?.value ?? r.valueInteger ?? null) === rec[value]);
        need('comparator', (q?.comparator ?? null) === rec.comparator);
        need('unit', !q || (q.unit ?? q.code ?? null) === rec.unit);
        need('data_absent_reason', !named(r.dataAbsentReason) || rec.data_absent_reason !== null);
        if (type !== 'vitals') {
          // A value of another kind (range, ratio, boolean, time, period) reads as its text.
          const other = ['valueRange', 'valueRatio', 'valueBoolean', 'valueTime', 'valueDateTime', 'valuePeriod'].some((k) => r[k] !== undefined);
          need('value', r.valueString !== undefined ? r.valueString === rec.value : other ? rec.value !== null : rec.value === null);
          need('value_coded', !named(r.valueCodeableConcept) || rec.value_coded !== null);
          need('components', !(r.component ?? []).length || type !== 'observations' || rec.components !== null);
        }
        if (type === 'lab_results') {
          const range = applicableRange(r);
          need('reference_low', (range?.low?.value ?? null) === rec.reference_low);
          need('reference_high', (range?.high?.value ?? null) === rec.reference_high);
          need('reference_range_text', (range?.text ?? null) === rec.reference_range_text);
          need('flag', !hasCode(r.interpretation?.[0]) || rec.flag !== null);
        } else if (type === 'vitals') {
          for (const [field, code] of [['systolic', '8480-6'], ['diastolic', '8462-4']] as const) {
            const c = (r.component ?? []).find((x: R) => (x.code?.coding ?? []).some((y: R) => y.code === code));
            need(field, (c?.valueQuantity?.value ?? null) === rec[field]);
          }
        }
        date(type === 'vitals' ? 'recorded_at' : 'effective_at', r.effectiveDateTime ?? r.effectivePeriod?.start ?? r.effectiveInstant);
      }
      need(nameField, !named(r.code) || rec[nameField] !== null);
      need('loinc_code' in rec ? 'loinc_code' : 'type', !hasCode(r.code, LOINC) || rec.loinc_code !== null || rec.type !== null);
      need('interpretation', !(r.interpretation ?? []).some(named) || rec.interpretation !== null || rec.flag !== null);
      need('status', rec.status !== null);
      break;
    }
    case 'diagnoses':
      need('display_name', !named(r.code) || rec.display_name !== null);
      need('code', !hasCode(r.code) || rec.code !== null);
      need('snomed_code', !hasCode(r.code, SCT) || rec.snomed_code !== null);
      need('status', !(r.clinicalStatus || r.verificationStatus) || rec.status !== null);
      break;
    case 'allergies':
      need('substance', !named(r.code) || rec.substance !== null);
      need('severity', !(r.reaction ?? []).some((x: R) => x.severity) || rec.severity !== null);
      need('status', !r.clinicalStatus || rec.status !== null);
      break;
    case 'prescriptions':
      // A Medication contained in the request (`#med0301`) names it too.
      const contained = (r.contained ?? []).find((c: R) => `#${c.id}` === r.medicationReference?.reference);
      need('medication', !(named(r.medicationCodeableConcept) || r.medicationReference?.display || named(contained?.code)) || rec.medication !== null);
      need('medication_code', !hasCode(r.medicationCodeableConcept) || rec.medication_code !== null);
      need('dosage', !(r.dosageInstruction ?? []).length || rec.dosage_text !== null || rec.dose !== null || rec.frequency !== null || rec.as_needed !== null);
      need('status', rec.status !== null);
      break;
    case 'immunizations':
      need('vaccine', !named(r.vaccineCode) || rec.vaccine !== null);
      need('cvx_code', !hasCode(r.vaccineCode, 'http://hl7.org/fhir/sid/cvx') || rec.cvx_code !== null);
      need('status', r.status === rec.status);
      need('primary_source', (r.primarySource ?? null) === rec.primary_source);
      date('occurred_at', r.occurrenceDateTime);
      need('occurrence_text', (r.occurrenceString ?? null) === rec.occurrence_text);
      need('dose_quantity', (r.doseQuantity?.value ?? null) === rec.dose_quantity);
      need('is_subpotent', (r.isSubpotent ?? null) === rec.is_subpotent);
      need('reason', !(r.reasonCode ?? []).some(named) || rec.reason !== null);
      break;
    case 'reports':
      need('name', !named(r.code) || rec.name !== null);
      need('status', r.status === rec.status);
      need('conclusion', (r.conclusion ?? null) === rec.conclusion);
      need('conclusion_code', !(r.conclusionCode ?? []).some(named) || rec.conclusion_code !== null);
      need('result_ids', (r.result ?? []).length === rec.result_ids.length);
      need('form', !(r.presentedForm ?? []).some((f: R) => f.contentType || f.url) || rec.form_content_type !== null || rec.form_url !== null);
      date('effective_at', r.effectiveDateTime ?? r.effectivePeriod?.start);
      break;
    case 'documents':
      need('status', r.status === rec.status);
      need('type', !named(r.type) || rec.type !== null);
      need('loinc_code', !hasCode(r.type, LOINC) || rec.loinc_code !== null);
      need('content', (r.content ?? []).some((c: R) => c.attachment?.contentType || c.attachment?.url) === (rec.content_type !== null || rec.url !== null));
      date('created_at', r.date);
      break;
    case 'visits':
      need('reason', !(r.reasonCode ?? []).some(named) || rec.reason !== null);
      need('type', !(r.type ?? []).some(named) || rec.type !== null);
      need('class', !r.class?.code || r.class.system !== 'http://terminology.hl7.org/CodeSystem/v3-ActCode' || rec.class !== null);
      need('status', rec.status !== null);
      date('started_at', r.period?.start);
      break;
  }
  return lost;
}

describe.skipIf(backend !== 'pglite')('the corpus: spec examples and Synthea through their record maps', () => {
  let pont: TestServer;
  let doc: R;
  let records: RecordsService;
  const dirs: string[] = [];
  const corpus: Array<{ from: string; resource: R }> = [];

  beforeAll(async () => {
    pont = await startTestServer();
    doc = (await pont.json('/api/openapi.json')).body;
    records = new RecordsService(pont.services.mappings);
    for (const archive of ['r4-spec-examples.tar.gz', 'synthea-r4-50-patients.tar.gz']) {
      const dir = mkdtempSync(join(tmpdir(), 'pont-corpus-'));
      dirs.push(dir);
      extract({ file: join(samples, archive), cwd: dir, sync: true });
      for (const f of readdirSync(dir).filter((x) => x.endsWith('.json'))) {
        const json = JSON.parse(readFileSync(join(dir, f), 'utf8')) as Resource | Bundle;
        const resources = json.resourceType === 'Bundle' ? (json.entry ?? []).map((e) => e.resource!) : [json];
        for (const resource of resources) if (CLINICAL.includes(resource.resourceType)) corpus.push({ from: archive, resource: resource as R });
      }
    }
  }, 120_000);
  afterAll(async () => {
    await pont?.close();
    dirs.forEach((d) => rmSync(d, { recursive: true, force: true }));
  });

  it('loses nothing clinically meaningful; every record fits the published shape and writes back as valid FHIR', () => {
    const counts: Record<string, { examples: number; records: number; notRecords: number; losses: number; writeBack: number; refused: number }> = {};
    const problems: string[] = [];
    for (const { from, resource } of corpus) {
      const c = (counts[`${from.split('-')[0]} ${resource.resourceType}`] ??= { examples: 0, records: 0, notRecords: 0, losses: 0, writeBack: 0, refused: 0 });
      c.examples++;
      const types = [...recordTypes(pont.services.mappings).values()].flatMap(({ name: type, sources }) => sources.filter((s) => selects(s, resource)).map((source) => ({ type, source })));
      if (!types.length) {
        c.notRecords++;
        problems.push(`${from} ${resource.resourceType}/${resource.id}: no record type reads it`);
      }
      for (const { type, source } of types) {
        c.records++;
        const where = `${from} ${resource.resourceType}/${resource.id} as ${type}`;
        const { record, unread } = records.recordOf(type, source, resource as Resource);
        const lost = [...unread.map((f) => `${f}: unread`), ...losses(type, resource, record), ...schemaProblems({ $ref: recordTypes(pont.services.mappings).get(type)!.shape }, record, doc)];
        if (lost.length) {
          c.losses++;
          problems.push(`${where}: ${lost.join('; ')}`);
        }
        // Written back through the same map (as a Connect client would send it): valid FHIR, or refused for what
        // the Connect contract needs and the source did not record (a required field). Connect ids are uuids: the
        // specification's ids (`example`) are given one, to check everything else.
        const map = pont.services.mappings.get(source.map);
        const asUuid = (v: unknown) => (typeof v === 'string' && !UUID.test(v) ? SOME_UUID : v);
        const sent = Object.fromEntries(
          Object.entries(record).map(([k, v]) => [k, map.declared.find((f) => f.name === k)?.type !== 'uuid' ? v : Array.isArray(v) ? v.map(asUuid) : asUuid(v)]),
        );
        try {
          validateResource(map.toFhir(sent));
        } catch (err) {
          const expected = err instanceof MappingValueError && record[err.field] === null && / is required/.test(err.message);
          if (expected) c.refused++;
          else {
            c.writeBack++;
            problems.push(`${where}: written back: ${(err as Error).message}`);
          }
        }
      }
    }
    console.log(Object.entries(counts).map(([k, v]) => `${k}: ${JSON.stringify(v)}`).join('\n'));
    console.log(problems.slice(0, 60).join('\n'));
    expect(corpus.length).toBeGreaterThan(10_000);
    expect(problems).toEqual([]);
  });
});
