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
import { startTestServer, type TestServer } from './harness';
import { schemaProblems } from './published-schema';

/**
 * Issue 26, the corpus: every resource of the clinical types among the HL7 R4 specification examples and the
 * Synthea sample (both in samples/) goes through the record map that the records route reads it with (issue 39:
 * also the specification's examples of the types read since, samples/r4-spec-examples-clinical.tar.gz, the
 * Devices and Procedures of the Synthea bulk export, and test/other-writers-clinical.json). Per
 * resource, an independent reading of the FHIR says what a reader must not lose (value with comparator, unit,
 * the applicable range, status, codes, display from text or coding, date); the record must fit the published
 * shape (the OpenAPI document) and be writable back through the same map as valid FHIR.
 */
const samples = fileURLToPath(new URL('../samples', import.meta.url));
const CLINICAL = ['Observation', 'Condition', 'AllergyIntolerance', 'MedicationRequest', 'DiagnosticReport', 'Encounter', 'Immunization', 'DocumentReference'];
/** Issue 39: the clinical types read since (procedures, care plans, goals, orders, family history, devices, specimens, dispenses, assessments, media). */
const CLINICAL_39 = ['Procedure', 'CarePlan', 'Goal', 'ServiceRequest', 'FamilyMemberHistory', 'Device', 'DeviceUseStatement', 'Specimen', 'MedicationDispense', 'MedicationStatement', 'QuestionnaireResponse', 'Media', 'Appointment', 'Flag', 'AdverseEvent', 'ClinicalImpression', 'Communication', 'DeviceRequest', 'NutritionOrder', 'ImmunizationRecommendation', 'EpisodeOfCare', 'ImmunizationEvaluation', 'VisionPrescription', 'BodyStructure', 'CommunicationRequest', 'Task'];
/** The archives of samples/ and the types read from each (the bulk export: only the new types, as ndjson). */
const ARCHIVES: Array<[string, string[]]> = [
  ['r4-spec-examples.tar.gz', [...CLINICAL, ...CLINICAL_39]],
  ['r4-spec-examples-clinical.tar.gz', CLINICAL_39],
  // Synthea writes imaging studies (a knee radiograph) too.
  ['synthea-r4-50-patients.tar.gz', [...CLINICAL, ...CLINICAL_39, 'ImagingStudy']],
  ['synthea-bulk-10-patients-ndjson.tar.gz', CLINICAL_39],
];
/** The element naming the patient a resource is about (one without is not patient data: the records route never reads it). */
const PATIENT_OF: Record<string, string> = { Device: 'patient', FamilyMemberHistory: 'patient', Appointment: 'participant', NutritionOrder: 'patient', ImmunizationRecommendation: 'patient', EpisodeOfCare: 'patient', ImmunizationEvaluation: 'patient', VisionPrescription: 'patient', BodyStructure: 'patient', Task: 'for' };
const LOINC = 'http://loinc.org';
const SCT = 'http://snomed.info/sct';

type R = Record<string, any>;
const hasCode = (concept: R | undefined, system?: string) => (concept?.coding ?? []).some((c: R) => c.code && (!system || c.system === system));
const named = (concept: R | undefined) => !!(concept?.text || (concept?.coding ?? []).some((c: R) => c.display || c.code));
/** How many of the References have a reference (text), and whether any has a display. */
const refs = (references: R[] | undefined) => (references ?? []).filter((x) => x?.reference).length;
const displays = (references: R[] | undefined) => (references ?? []).some((x) => x?.display);

/** Whether a concept (any coding) is one of the tokens (`system|code,…`; `system|`: any code of the system). */
const inTokens = (concepts: R[], value: string) => {
  const tokens = value.split(',').map((t) => t.split('|'));
  return concepts.some((c: R) => (c.coding ?? []).some((x: R) => tokens.some(([s, code]) => x.system === s && (code === '' || x.code === code))));
};

/**
 * Does the source's search select the resource? (category and code tokens, category:missing, result:missing, and
 * `_has:DiagnosticReport:result:category` or `:code`, against `reports`, the corpus's DiagnosticReports: as records.test.ts
 * reads them; and none of what it excepts.)
 */
function selects(source: RecordSource, resource: R, reports: R[]): boolean {
  if (resource.resourceType !== source.resourceType) return false;
  if (source.except?.some((query) => selects({ ...source, query, except: undefined }, resource, reports))) return false;
  const categories: R[] = resource.category ? [resource.category].flat() : [];
  for (const [param, value] of Object.entries(source.query)) {
    if (param === 'category' || param === 'category:not') {
      if (inTokens(categories, value) !== (param === 'category')) return false;
    } else if (param === 'code') {
      if (!inTokens([resource.code].filter(Boolean), value)) return false;
    } else if (param === 'category:missing') {
      if ((categories.length === 0) !== (value === 'true')) return false;
    } else if (param === '_has:DiagnosticReport:result:category' || param === '_has:DiagnosticReport:result:code') {
      const listed = (r: R) => (r.result ?? []).some((ref: R) => [`Observation/${resource.id}`, `urn:uuid:${resource.id}`].includes(ref.reference) || ref.reference?.endsWith(`/Observation/${resource.id}`));
      const concepts = (r: R) => (param.endsWith(':code') ? [r.code].filter(Boolean) : r.category ? [r.category].flat() : []);
      if (!reports.some((r) => listed(r) && inTokens(concepts(r), value))) return false;
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
      // What an Observation is about when not the patient (a fetus, a specimen): a reading of the patient's own otherwise.
      if (r.resourceType === 'Observation') {
        need('focus_references', refs(r.focus) === rec.focus_references.length);
        need('focus', !displays(r.focus) || rec.focus !== null);
      }
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
    // Issue 39: the types read since. References are kept as their text (any type, without display); concepts by name.
    case 'procedures':
      need('status', r.status === rec.status);
      need('name', !named(r.code) || rec.name !== null);
      need('code', (r.code?.coding?.[0]?.code ?? null) === rec.code && (r.code?.coding?.[0]?.system ?? null) === rec.code_system);
      date('performed_at', r.performedDateTime ?? r.performedPeriod?.start);
      need('performed_end', (r.performedPeriod?.end ?? null) === rec.performed_end);
      need('performed_text', !(r.performedString || r.performedAge || r.performedRange) || rec.performed_text !== null);
      need('performer', refs(r.performer?.map((p: R) => p.actor)) === rec.performer_references.length && (!displays(r.performer?.map((p: R) => p.actor)) || rec.performer !== null));
      need('reason', !((r.reasonCode ?? []).some(named) || (r.reasonReference ?? []).some((x: R) => x.display)) || rec.reason !== null);
      need('reason_references', refs(r.reasonReference) === rec.reason_references.length);
      need('body_site', !(r.bodySite ?? []).some(named) || rec.body_site !== null);
      need('outcome', !named(r.outcome) || rec.outcome !== null);
      need('complications', !(r.complication ?? []).some(named) || rec.complications !== null);
      need('device_references', refs(r.focalDevice?.map((d: R) => d.manipulated)) === rec.device_references.length);
      need('note', !(r.note ?? []).length || rec.note !== null);
      break;
    case 'care_plans':
      need('status', r.status === rec.status);
      need('intent', r.intent === rec.intent);
      need('title', (r.title ?? null) === rec.title);
      need('category', !(r.category ?? []).some(named) || rec.category !== null);
      date('period_start', r.period?.start);
      need('addresses_references', refs(r.addresses) === rec.addresses_references.length);
      need('goal_references', refs(r.goal) === rec.goal_references.length);
      // Every activity: planned in the plan (in words, with its status) or a request of its own (its reference).
      need('activities', (r.activity ?? []).filter((a: R) => a.detail && (named(a.detail.code) || a.detail.description)).length === rec.activities.length);
      need('activity_references', refs(r.activity?.map((a: R) => a.reference)) === rec.activity_references.length);
      need('activity_status', (r.activity ?? []).every((a: R) => !a.detail?.status || !named(a.detail.code) || rec.activities.some((t: string) => t.endsWith(`(${a.detail.status})`))));
      break;
    case 'goals':
      need('lifecycle_status', r.lifecycleStatus === rec.lifecycle_status);
      need('description', !named(r.description) || rec.description !== null);
      need('achievement_status', !named(r.achievementStatus) || rec.achievement_status !== null);
      date('start_date', r.startDate);
      need('target', !r.target?.length || rec.target_measure !== null || rec.target_value !== null || rec.target_text !== null || rec.target_due_date !== null);
      need('target_value', (r.target?.[0]?.detailQuantity?.value ?? r.target?.[0]?.detailInteger ?? null) === rec.target_value);
      // When it is due: by a date, or within a time (dueDuration), every target.
      need('targets', (r.target ?? []).every((t: R, i: number) => (!t.dueDate || rec.targets[i]?.due_date !== null) && (!t.dueDuration || rec.targets[i]?.due_in !== null)));
      need('addresses_references', refs(r.addresses) === rec.addresses_references.length);
      break;
    case 'orders':
      need('status', r.status === rec.status);
      need('intent', r.intent === rec.intent);
      need('priority', (r.priority ?? null) === rec.priority);
      need('name', !named(r.code) || rec.name !== null);
      need('code', (r.code?.coding?.[0]?.code ?? null) === rec.code);
      need('category', !(r.category ?? []).some(named) || rec.category !== null);
      need('requester', !(r.requester?.reference || r.requester?.display) || (rec.requester_reference ?? rec.requester) !== null);
      need('performer', refs(r.performer) === rec.performer_references.length);
      need('reason', !((r.reasonCode ?? []).some(named) || (r.reasonReference ?? []).some((x: R) => x.display)) || rec.reason !== null);
      need('reason_references', refs(r.reasonReference) === rec.reason_references.length);
      need('specimen_references', refs(r.specimen) === rec.specimen_references.length);
      date('occurrence_at', r.occurrenceDateTime ?? r.occurrencePeriod?.start);
      date('requested_at', r.authoredOn);
      need('do_not_perform', (r.doNotPerform ?? null) === rec.do_not_perform);
      break;
    case 'family_history':
      need('status', r.status === rec.status);
      need('relationship', !named(r.relationship) || rec.relationship !== null);
      need('conditions', (r.condition ?? []).length === rec.conditions.length);
      need('deceased', !(r.deceasedBoolean !== undefined || r.deceasedAge || r.deceasedDate || r.deceasedString || r.deceasedRange) || rec.deceased !== null);
      need('sex', !named(r.sex) || rec.sex !== null);
      break;
    case 'devices':
      if (r.resourceType === 'DeviceUseStatement') {
        need('status', r.status === rec.status);
        need('device', (r.device?.reference ?? null) === rec.device_reference);
        date('used_from', r.timingDateTime ?? r.timingPeriod?.start);
        date('recorded_at', r.recordedOn);
      } else {
        need('device', !((r.deviceName ?? []).length || named(r.type)) || rec.device !== null);
        need('device_status', (r.status ?? null) === rec.device_status);
        need('device_type', !named(r.type) || rec.device_type !== null);
        need('udi_carrier', (r.udiCarrier?.[0]?.carrierHRF ?? null) === rec.udi_carrier);
        need('udi_device_identifier', (r.udiCarrier?.[0]?.deviceIdentifier ?? null) === rec.udi_device_identifier);
        need('serial_number', (r.serialNumber ?? null) === rec.serial_number);
        need('lot_number', (r.lotNumber ?? null) === rec.lot_number);
      }
      break;
    case 'specimens':
      need('type', !named(r.type) || rec.type !== null);
      need('accession', (r.accessionIdentifier?.value ?? null) === rec.accession);
      date('collected_at', r.collection?.collectedDateTime ?? r.collection?.collectedPeriod?.start);
      need('condition', !(r.condition ?? []).some(named) || rec.condition !== null);
      need('request_references', refs(r.request) === rec.request_references.length);
      need('note', !(r.note ?? []).length || rec.note !== null);
      break;
    case 'dispenses': {
      const contained = (r.contained ?? []).find((c: R) => `#${c.id}` === r.medicationReference?.reference);
      need('status', r.status === rec.status);
      need('medication', !(named(r.medicationCodeableConcept) || r.medicationReference?.display || named(contained?.code)) || rec.medication !== null);
      need('medication_code', !hasCode(r.medicationCodeableConcept) || rec.medication_code !== null);
      need('quantity', (r.quantity?.value ?? null) === rec.quantity);
      need('days_supply', (r.daysSupply?.value ?? null) === rec.days_supply);
      date('handed_over_at', r.whenHandedOver);
      need('prescription_ids', (r.authorizingPrescription ?? []).filter((x: R) => /MedicationRequest\//.test(x.reference ?? '')).length === rec.prescription_ids.length);
      need('dosage_text', !(r.dosageInstruction ?? []).some((d: R) => d.text) || rec.dosage_text !== null);
      break;
    }
    case 'medication_statements': {
      const contained = (r.contained ?? []).find((c: R) => `#${c.id}` === r.medicationReference?.reference);
      need('status', r.status === rec.status);
      need('medication', !(named(r.medicationCodeableConcept) || r.medicationReference?.display || named(contained?.code)) || rec.medication !== null);
      need('medication_code', !hasCode(r.medicationCodeableConcept) || rec.medication_code !== null);
      date('effective_at', r.effectiveDateTime ?? r.effectivePeriod?.start);
      need('effective_end', (r.effectivePeriod?.end ?? null) === rec.effective_end);
      need('information_source', !(r.informationSource?.reference || r.informationSource?.display) || (rec.information_source_reference ?? rec.information_source) !== null);
      need('dosage', !(r.dosage ?? []).length || rec.dosage_text !== null || rec.dose !== null || rec.frequency !== null || rec.as_needed !== null);
      need('reason', !((r.reasonCode ?? []).some(named) || (r.reasonReference ?? []).some((x: R) => x.display)) || rec.reason !== null);
      break;
    }
    case 'assessments': {
      need('status', r.status === rec.status);
      date('authored_at', r.authored);
      // Every answered question, at any depth, is in the answers under its linkId.
      const answered = (items: R[] = []): string[] => items.flatMap((i) => [...((i.answer ?? []).length ? [i.linkId] : []), ...answered(i.item), ...(i.answer ?? []).flatMap((a: R) => answered(a.item))]);
      const text = rec.answers.join('\n');
      need('answers', answered(r.item).every((id) => text.includes(`[${id}]`)));
      break;
    }
    case 'media':
      need('status', r.status === rec.status);
      need('content_type', (r.content?.contentType ?? null) === rec.content_type);
      need('url', (r.content?.url ?? null) === rec.url);
      need('size', (r.content?.size ?? null) === rec.size);
      need('inline', !r.content?.data || rec.inline === true);
      need('type', !named(r.type) || rec.type !== null);
      date('created_at', r.createdDateTime ?? r.createdPeriod?.start);
      break;
    case 'appointments': {
      const patients = (r.participant ?? []).filter((p: R) => /^Patient\//.test(p.actor?.reference ?? ''));
      need('patient_id', !patients.length || rec.patient_id === patients[0].actor.reference.slice('Patient/'.length));
      need('status', r.status === rec.status);
      need('participants', (r.participant ?? []).length === rec.participants.length && rec.participants.every((p: R, i: number) => p.status === r.participant[i].status && p.reference === (r.participant[i].actor?.reference ?? null)));
      need('cancelation_reason', !named(r.cancelationReason) || rec.cancelation_reason !== null);
      // A reason by reference without its display is named once resolved (the records route resolves it; not here).
      need('reason', !(r.reasonCode ?? []).some(named) && !(r.reasonReference ?? []).some((x: R) => x.display) || rec.reason !== null);
      need('reason_references', (r.reasonReference ?? []).length === rec.reason_references.length);
      need('reasons', (r.reasonCode ?? []).length === rec.reasons.length);
      need('service_type', !(r.serviceType ?? []).some(named) || rec.service_type !== null);
      need('specialty', !(r.specialty ?? []).some(named) || rec.specialty !== null);
      need('requested_periods', (r.requestedPeriod ?? []).length === rec.requested_periods.length);
      date('start', r.start);
      date('end', r.end);
      break;
    }
    case 'imaging_studies':
      need('status', r.status === rec.status);
      date('started_at', r.started);
      need('series', (r.series ?? []).length === rec.series.length && rec.series.every((x: R, i: number) => x.uid === r.series[i].uid && x.modality === (r.series[i].modality?.code ?? null)));
      need('modalities', !(r.series ?? []).some((x: R) => x.modality?.code) || rec.modalities.length > 0);
      need('study_uid', !(r.identifier ?? []).some((i: R) => /^urn:oid:/.test(i.value ?? '')) || rec.study_uid !== null);
      need('body_site', (r.series ?? []).every((x: R, i: number) => !x.bodySite?.code || rec.series[i].body_site_code === x.bodySite.code));
      break;
    case 'adverse_events':
      need('actuality', r.actuality === rec.actuality);
      need('event', !named(r.event) || rec.event !== null);
      need('seriousness', !named(r.seriousness) || rec.seriousness !== null);
      need('severity', !named(r.severity) || rec.severity !== null);
      need('outcome', !named(r.outcome) || rec.outcome !== null);
      need('resulting_condition_references', refs(r.resultingCondition) === rec.resulting_condition_references.length);
      need('suspects', (r.suspectEntity ?? []).length === rec.suspects.length && rec.suspects.every((x: R, i: number) => x.reference === (r.suspectEntity[i].instance?.reference ?? null)));
      need('recorder_reference', (r.recorder?.reference ?? null) === rec.recorder_reference);
      date('date', r.date);
      break;
    case 'communications': {
      need('status', r.status === rec.status);
      need('category', !(r.category ?? []).some(named) || rec.category !== null);
      need('recipient_references', refs(r.recipient) === rec.recipient_references.length);
      need('sender_reference', (r.sender?.reference ?? null) === rec.sender_reference);
      // Every payload, whatever its kind: its text, an attachment described (never its bytes), a reference.
      const payloads: R[] = r.payload ?? [];
      need('texts', payloads.filter((x) => x.contentString !== undefined).every((x) => rec.texts.includes(x.contentString)));
      need('attachments', payloads.filter((x) => x.contentAttachment).length === rec.attachments.length && rec.attachments.every((a: R) => !('data' in a)));
      need('resources', payloads.filter((x) => x.contentReference?.reference).every((x) => rec.resources.some((y: R) => y.reference === x.contentReference.reference)));
      date('sent', r.sent);
      date('received', r.received);
      break;
    }
    case 'clinical_impressions':
      need('status', r.status === rec.status);
      need('assessment', !named(r.code) || rec.assessment !== null);
      need('problem_references', refs(r.problem) === rec.problem_references.length);
      need('findings', (r.finding ?? []).length === rec.findings.length && rec.findings.every((f: R, i: number) => f.reference === (r.finding[i].itemReference?.reference ?? null) && (!named(r.finding[i].itemCodeableConcept) || f.name !== null)));
      need('investigations', (r.investigation ?? []).length === rec.investigations.length);
      need('summary', (r.summary ?? null) === rec.summary);
      need('prognosis', !(r.prognosisCodeableConcept ?? []).some(named) || rec.prognosis !== null);
      need('assessor_reference', (r.assessor?.reference ?? null) === rec.assessor_reference);
      date('effective_at', r.effectiveDateTime ?? r.effectivePeriod?.start);
      date('date', r.date);
      break;
    case 'immunization_recommendations':
      need('recommendations', (r.recommendation ?? []).length === rec.recommendations.length);
      need('forecast_status', (r.recommendation ?? []).every((x: R, i: number) => !named(x.forecastStatus) || rec.recommendations[i].forecast_status !== null));
      need('vaccine', (r.recommendation ?? []).every((x: R, i: number) => !(x.vaccineCode ?? []).some(named) || rec.recommendations[i].vaccine !== null));
      need('date_criteria', (r.recommendation ?? []).every((x: R, i: number) => (x.dateCriterion ?? []).length === rec.recommendations[i].date_criteria.length));
      need('authority_reference', (r.authority?.reference ?? null) === rec.authority_reference);
      date('date', r.date);
      break;
    case 'immunization_evaluations':
      need('status', r.status === rec.status);
      need('target_disease', !named(r.targetDisease) || rec.target_disease !== null);
      need('dose_status', !named(r.doseStatus) || rec.dose_status !== null);
      need('dose_status_reason', !(r.doseStatusReason ?? []).some(named) || rec.dose_status_reason !== null);
      need('immunization_id', (r.immunizationEvent?.reference ?? null) === (rec.immunization_id === null ? null : `Immunization/${rec.immunization_id}`));
      need('authority_reference', (r.authority?.reference ?? null) === rec.authority_reference);
      need('dose_number', (r.doseNumberPositiveInt ?? null) === rec.dose_number && (r.doseNumberString ?? null) === rec.dose_number_text);
      date('date', r.date);
      break;
    case 'vision_prescriptions':
      need('status', r.status === rec.status);
      need('prescriber_reference', (r.prescriber?.reference ?? null) === rec.prescriber_reference);
      need('lenses', (r.lensSpecification ?? []).length === rec.lenses.length);
      for (const [i, x] of (r.lensSpecification ?? []).entries()) {
        const lens = rec.lenses[i] ?? {};
        need(`lenses[${i}].eye`, x.eye === lens.eye);
        need(`lenses[${i}].product`, !named(x.product) || lens.product !== null);
        for (const [k, f] of [['sphere', 'sphere'], ['cylinder', 'cylinder'], ['axis', 'axis'], ['add', 'add'], ['power', 'power'], ['backCurve', 'back_curve'], ['diameter', 'diameter']])
          need(`lenses[${i}].${f}`, (x[k] ?? null) === lens[f]);
        need(`lenses[${i}].prisms`, (x.prism ?? []).length === (lens.prisms ?? []).length);
      }
      date('date_written', r.dateWritten);
      break;
    case 'body_structures':
      need('morphology', !named(r.morphology) || rec.morphology !== null);
      need('location', !named(r.location) || rec.location !== null);
      need('location_qualifiers', !(r.locationQualifier ?? []).some(named) || rec.location_qualifiers !== null);
      need('description', (r.description ?? null) === rec.description);
      need('images', (r.image ?? []).length === rec.images.length && rec.images.every((a: R) => !('data' in a)));
      need('active', (r.active ?? null) === rec.active);
      break;
    case 'communication_requests': {
      need('status', r.status === rec.status);
      need('category', !(r.category ?? []).some(named) || rec.category !== null);
      need('medium', !(r.medium ?? []).some(named) || rec.medium !== null);
      need('recipient_references', refs(r.recipient) === rec.recipient_references.length);
      need('requester_reference', (r.requester?.reference ?? null) === rec.requester_reference);
      need('sender_reference', (r.sender?.reference ?? null) === rec.sender_reference);
      need('reason_references', refs(r.reasonReference) === rec.reason_references.length);
      const payloads: R[] = r.payload ?? [];
      need('texts', payloads.filter((x) => x.contentString !== undefined).every((x) => rec.texts.includes(x.contentString)));
      need('attachments', payloads.filter((x) => x.contentAttachment).length === rec.attachments.length && rec.attachments.every((a: R) => !('data' in a)));
      need('resources', payloads.filter((x) => x.contentReference?.reference).every((x) => rec.resources.some((y: R) => y.reference === x.contentReference.reference)));
      date('occurrence_at', r.occurrenceDateTime ?? r.occurrencePeriod?.start);
      date('authored_on', r.authoredOn);
      break;
    }
    case 'tasks':
      need('status', r.status === rec.status);
      need('intent', r.intent === rec.intent);
      need('business_status', !named(r.businessStatus) || rec.business_status !== null);
      need('name', !named(r.code) || rec.name !== null);
      need('focus_reference', (r.focus?.reference ?? null) === rec.focus_reference);
      need('based_on_references', refs(r.basedOn) === rec.based_on_references.length);
      need('requester_reference', (r.requester?.reference ?? null) === rec.requester_reference);
      need('owner_reference', (r.owner?.reference ?? null) === rec.owner_reference);
      need('inputs', (r.input ?? []).length === rec.inputs.length && rec.inputs.every((x: R, i: number) => x.reference === (r.input[i].valueReference?.reference ?? null)));
      need('outputs', (r.output ?? []).length === rec.outputs.length && rec.outputs.every((x: R, i: number) => x.reference === (r.output[i].valueReference?.reference ?? null)));
      date('authored_on', r.authoredOn);
      date('execution_start', r.executionPeriod?.start);
      break;
    case 'episodes_of_care':
      need('status', r.status === rec.status);
      need('status_history', (r.statusHistory ?? []).length === rec.status_history.length);
      need('type', !(r.type ?? []).some(named) || rec.type !== null);
      need('diagnoses', (r.diagnosis ?? []).length === rec.diagnoses.length && rec.diagnoses.every((x: R, i: number) => x.condition_reference === (r.diagnosis[i].condition?.reference ?? null)));
      need('managing_organization_reference', (r.managingOrganization?.reference ?? null) === rec.managing_organization_reference);
      need('care_manager_reference', (r.careManager?.reference ?? null) === rec.care_manager_reference);
      date('start', r.period?.start);
      date('end', r.period?.end);
      break;
    case 'device_requests':
      need('status', (r.status ?? null) === rec.status);
      need('intent', r.intent === rec.intent);
      need('device', !named(r.codeCodeableConcept) || rec.device !== null);
      need('device_reference', (r.codeReference?.reference ?? null) === rec.device_reference);
      need('parameters', (r.parameter ?? []).length === rec.parameters.length);
      need('requester_reference', (r.requester?.reference ?? null) === rec.requester_reference);
      need('reason_references', refs(r.reasonReference) === rec.reason_references.length);
      date('authored_on', r.authoredOn);
      break;
    case 'nutrition_orders':
      need('status', r.status === rec.status);
      need('intent', r.intent === rec.intent);
      need('orderer_reference', (r.orderer?.reference ?? null) === rec.orderer_reference);
      need('exclude_foods', (r.excludeFoodModifier ?? []).filter(named).length === rec.exclude_foods.length);
      need('oral_diet', !r.oralDiet || rec.oral_diet !== null);
      need('oral_diet.nutrients', (r.oralDiet?.nutrient ?? []).length === (rec.oral_diet?.nutrients ?? []).length);
      need('supplements', (r.supplement ?? []).length === rec.supplements.length);
      need('enteral_formula', !r.enteralFormula || rec.enteral_formula !== null);
      date('ordered_at', r.dateTime);
      break;
    case 'flags':
      need('status', r.status === rec.status);
      need('text', !named(r.code) || rec.text !== null);
      need('codings', (r.code?.coding ?? []).length === rec.codings.length);
      need('category', !(r.category ?? []).some(named) || rec.category !== null);
      need('author_reference', (r.author?.reference ?? null) === rec.author_reference);
      date('start', r.period?.start);
      date('end', r.period?.end);
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

describe('the corpus: spec examples and Synthea through their record maps', () => {
  let pont: TestServer;
  let doc: R;
  let records: RecordsService;
  const dirs: string[] = [];
  const corpus: Array<{ from: string; resource: R }> = [];
  /** Each archive's DiagnosticReports, for the searches that select by the report listing a result. */
  const reportsOf = new Map<string, R[]>();

  beforeAll(async () => {
    pont = await startTestServer();
    doc = (await pont.json('/api/openapi.json')).body;
    records = new RecordsService(pont.services.mappings);
    // Our corpus of other writers' conventions (references without display, ids not UUIDs, codings without text).
    const otherWriters = JSON.parse(readFileSync(fileURLToPath(new URL('./other-writers-clinical.json', import.meta.url)), 'utf8')) as R[];
    for (const resource of otherWriters) if (CLINICAL_39.includes(resource.resourceType)) corpus.push({ from: 'other-writers-clinical.json', resource });
    for (const [archive, types] of ARCHIVES) {
      const dir = mkdtempSync(join(tmpdir(), 'pont-corpus-'));
      dirs.push(dir);
      extract({ file: join(samples, archive), cwd: dir, sync: true });
      for (const f of readdirSync(dir).filter((x) => x.endsWith('.json') || (x.endsWith('.ndjson') && types.includes(x.split('.')[0]!)))) {
        const text = readFileSync(join(dir, f), 'utf8');
        const jsons = (f.endsWith('.ndjson') ? text.split('\n').filter((l) => l.trim()).map((l) => JSON.parse(l)) : [JSON.parse(text)]) as Array<Resource | Bundle>;
        for (const json of jsons) {
          const resources = json.resourceType === 'Bundle' ? (json.entry ?? []).map((e) => e.resource!) : [json];
          for (const resource of resources) if (types.includes(resource.resourceType)) corpus.push({ from: archive, resource: resource as R });
        }
      }
    }
  }, 120_000);
  afterAll(async () => {
    await pont?.close();
    dirs.forEach((d) => rmSync(d, { recursive: true, force: true }));
  });

  it('loses nothing clinically meaningful; every record fits the published shape and writes back as valid FHIR', () => {
    const counts: Record<string, { examples: number; records: number; notRecords: number; losses: number; writeBack: number; refused: number; notPatientData: number }> = {};
    const problems: string[] = [];
    for (const { from, resource } of corpus) {
      const source = from.replace(/-?(r4-|examples|patients|ndjson|\d+|\.tar\.gz)/g, '') || from;
      const c = (counts[`${source} ${resource.resourceType}`] ??= { examples: 0, records: 0, notRecords: 0, losses: 0, writeBack: 0, refused: 0, notPatientData: 0 });
      c.examples++;
      // A Device of no patient (an analyser), a Specimen of an environment: not a record of anyone.
      if (!resource[PATIENT_OF[resource.resourceType] ?? 'subject'] && CLINICAL_39.includes(resource.resourceType)) {
        c.notPatientData++;
        continue;
      }
      const types = [...recordTypes(pont.services.mappings).values()].flatMap(({ name: type, sources }) => sources.filter((s) => selects(s, resource, reportsOf.get(from) ?? [])).map((source) => ({ type, source })));
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
        // Written back through the same map (as a Connect client would send it), ids as the source wrote them
        // (`example`, `123`): valid FHIR, or refused for what the Connect contract needs and the source did not
        // record (a required field).
        const map = pont.services.mappings.get(source.map);
        const sent = record;
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
    // Issue 39: every resource of the new types, where there are some of each, is a record.
    for (const type of CLINICAL_39) expect(corpus.filter((x) => x.resource.resourceType === type).length, type).toBeGreaterThan(0);
    expect(problems).toEqual([]);
  });
});
