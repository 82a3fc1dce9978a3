import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Resource } from '@medplum/fhirtypes';
import { describe, expect, it } from 'vitest';
import { defaultMappingsDir } from '../mapping/index';
import { filterValues, filtersPass, loadTopics, TopicError, topicFires, type Topic } from './topics';

const topics = loadTopics(defaultMappingsDir);
const topic = (id: string) => topics.find((t) => t.id === id) as Topic;
const V3 = 'http://terminology.hl7.org/CodeSystem/v3-ObservationInterpretation';
const observation = (code?: string) =>
  ({ resourceType: 'Observation', id: 'o1', status: 'final', code: { coding: [{ system: 'http://loinc.org', code: '718-7' }] }, subject: { reference: 'Patient/p1' }, ...(code && { interpretation: [{ coding: [{ system: V3, code }] }] }) }) as Resource;

describe('the published topics (mappings/subscriptions/topics.yaml)', () => {
  it('Encounter finished: reaching finished fires, staying finished or another status does not', () => {
    const t = topic('encounter-finished');
    const enc = (status: string) => ({ resourceType: 'Encounter', id: 'e1', status, subject: { reference: 'Patient/p1' }, class: { code: 'AMB' } }) as Resource;
    expect(topicFires(t, { interaction: 'create', after: enc('finished') })).toBe(true);
    expect(topicFires(t, { interaction: 'update', before: enc('in-progress'), after: enc('finished') })).toBe(true);
    expect(topicFires(t, { interaction: 'update', before: enc('finished'), after: enc('finished') })).toBe(false);
    expect(topicFires(t, { interaction: 'create', after: enc('in-progress') })).toBe(false);
    expect(topicFires(t, { interaction: 'delete', before: enc('finished') })).toBe(false);
    expect(filtersPass(t, [{ name: 'patient', value: 'Patient/p1' }, { name: 'class', value: 'AMB' }], enc('finished'))).toBe(true);
    expect(filtersPass(t, [{ name: 'patient', value: 'Patient/p2' }], enc('finished'))).toBe(false);
    expect(filtersPass(t, [{ name: 'location', value: 'Location/1' }], enc('finished'))).toBe(false); // not the topic's filter
    // What a queued change stores, and the fan-out's SQL matches subscriptions' filters against.
    expect(filterValues(t, enc('finished'))).toEqual({ patient: ['Patient/p1'], class: ['AMB'] });
    expect(filterValues(t, { resourceType: 'Encounter', id: 'e2', status: 'finished' } as Resource)).toEqual({ patient: [], class: [] });
  });

  it('Observation abnormal: an abnormal interpretation it did not have fires; normal, or already abnormal, does not', () => {
    const t = topic('observation-abnormal');
    expect(topicFires(t, { interaction: 'create', after: observation('H') })).toBe(true);
    expect(topicFires(t, { interaction: 'create', after: observation('LL') })).toBe(true);
    expect(topicFires(t, { interaction: 'create', after: observation('N') })).toBe(false);
    expect(topicFires(t, { interaction: 'create', after: observation() })).toBe(false);
    expect(topicFires(t, { interaction: 'update', before: observation('N'), after: observation('A') })).toBe(true);
    expect(topicFires(t, { interaction: 'update', before: observation('H'), after: observation('HH') })).toBe(false);
    expect(filtersPass(t, [{ name: 'code', value: '718-7' }], observation('H'))).toBe(true);
  });

  it('DiagnosticReport final: reaching final fires once', () => {
    const t = topic('diagnosticreport-final');
    const report = (status: string) => ({ resourceType: 'DiagnosticReport', id: 'r1', status, code: { text: 'CBC' } }) as Resource;
    expect(topicFires(t, { interaction: 'create', after: report('final') })).toBe(true);
    expect(topicFires(t, { interaction: 'update', before: report('preliminary'), after: report('final') })).toBe(true);
    expect(topicFires(t, { interaction: 'update', before: report('final'), after: report('final') })).toBe(false);
    expect(topicFires(t, { interaction: 'create', after: report('preliminary') })).toBe(false);
    // Another type never fires it.
    expect(topicFires(t, { interaction: 'create', after: { ...report('final'), resourceType: 'Observation' } as Resource })).toBe(false);
  });

  it('a mistake in the file stops the load, naming the topic', () => {
    const dir = mkdtempSync(join(tmpdir(), 'topics-'));
    try {
      mkdirSync(join(dir, 'subscriptions'));
      const write = (text: string) => writeFileSync(join(dir, 'subscriptions', 'topics.yaml'), text);
      write('topics:\n  - id: bad-one\n    title: t\n    description: d\n    resource: Encounterr\n    interactions: [create]\n');
      expect(() => loadTopics(dir)).toThrow(/bad-one: resource must be an R4 resource type/);
      write("topics:\n  - id: bad-path\n    title: t\n    description: d\n    resource: Encounter\n    interactions: [create]\n    fhirPath: \"status = = 'x'\"\n");
      expect(() => loadTopics(dir)).toThrow(TopicError);
      write('topics:\n  - id: twice\n    title: t\n    description: d\n    resource: Encounter\n    interactions: [create]\n  - id: twice\n    title: t\n    description: d\n    resource: Encounter\n    interactions: [create]\n');
      expect(() => loadTopics(dir)).toThrow(/used twice/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
