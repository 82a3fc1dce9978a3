import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import type { Resource } from '@medplum/fhirtypes';
import { describe, expect, it } from 'vitest';
import { CONSENT_TYPES } from '../src/core/data-classes';
import type { EventEnvelope } from '../src/events/outbox';
import { EVENT_RULES, type ResourceChange } from '../src/events/rules';
import { EVENTS, EVENT_TYPES, eventClassOf, type EventDeclaration } from '../src/events/types';
import { loadMappings } from '../src/mapping/index';
import { deliveredEnvelope } from '../src/webhooks/payload';

/**
 * An event type is one entry of EVENTS (src/events/types.ts): who hears it and what a metadata-only delivery keeps
 * are declared there; the rules table raises it. These checks fail when an entry lacks what the rest of Pont needs.
 */

const declarations = Object.entries(EVENTS) as Array<[string, EventDeclaration]>;
const family = (type: string) => type.slice(0, type.indexOf('.'));
const src = new URL('../src/', import.meta.url).pathname;
const files = (dir: string): string[] =>
  readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? files(path) : path.endsWith('.ts') ? [path] : [];
  });

/** A change each rule's `data` can read: the fields its data carries whatever the resource holds. */
function sampleChange(resourceType: string): ResourceChange {
  const resource = { resourceType, id: 'r1', status: 'final', subject: { reference: 'Patient/p1' } } as Resource;
  return { interaction: 'create', after: resource };
}
const maps = loadMappings();
const context = { healthIdOf: () => 'CM-TEST', facilityId: 'fac-1', read: (map: string, r: Resource) => maps.get(map).readFhir(r).connect };

describe('event types (src/events/types.ts)', () => {
  it('each type is raised by a rule of src/events/rules.ts, or declares the operation that records it (raisedBy), not both', () => {
    const ruled = new Set(EVENT_RULES.map((r) => r.event));
    const neither = declarations.filter(([type, d]) => !ruled.has(type as never) && !d.raisedBy).map(([type]) => type);
    const both = declarations.filter(([type, d]) => ruled.has(type as never) && d.raisedBy).map(([type]) => type);
    expect(neither, 'event types no rule raises: add a rule, or `raisedBy` naming the code that records it').toEqual([]);
    expect(both, 'event types with a rule that also declare raisedBy').toEqual([]);
  });

  it('a type declared raisedBy is recorded somewhere in src', () => {
    const code = files(src)
      .filter((f) => !f.endsWith('events/types.ts') && !f.endsWith('.test.ts'))
      .map((f) => readFileSync(f, 'utf8'))
      .join('\n');
    const unrecorded = declarations.filter(([type, d]) => d.raisedBy && !code.includes(`type: '${type}'`)).map(([type]) => type);
    expect(unrecorded, 'types declared raisedBy that no code records (`type: \'…\'`)').toEqual([]);
  });

  it('a patient event names a data class some consent type covers (who else hears it)', () => {
    const covered = new Set(Object.values(CONSENT_TYPES).flatMap((t) => t.classes));
    for (const [type, d] of declarations) {
      if (d.about !== 'patient') continue;
      expect(covered.has(d.dataClass), `${type}: class ${d.dataClass} is covered by no consent type`).toBe(true);
      expect(eventClassOf(type)).toBe(d.dataClass);
    }
    expect(declarations.filter(([type, d]) => d.about !== 'patient' && eventClassOf(type)).map(([type]) => type)).toEqual([]);
  });

  it('the types of one family (`patient.*`, `consent.*`…) have one audience and class, as the README describes them', () => {
    const byFamily = new Map<string, string>();
    for (const [type, d] of declarations) {
      const audience = `${d.about} ${d.about === 'patient' ? d.dataClass : ''}`;
      const first = byFamily.get(family(type)) ?? audience;
      byFamily.set(family(type), first);
      expect(audience, `${type} differs from the rest of ${family(type)}.*`).toBe(first);
    }
  });

  it('the data of each rule carries what delivery and routing read: the published fields, and a consent event its organization_id', () => {
    for (const rule of EVENT_RULES) {
      const keys = Object.keys(rule.data(sampleChange(rule.resource), context));
      const d: EventDeclaration = EVENTS[rule.event];
      for (const field of d.published ?? []) expect(keys, `${rule.event} (${rule.resource}) publishes ${field}, which its data lacks`).toContain(field);
      if (d.about === 'consent') expect(keys, `${rule.event}: consent events go to data.organization_id`).toContain('organization_id');
    }
  });

  it('a metadata-only delivery keeps the identifiers and the published fields of its type, and nothing else', () => {
    for (const type of EVENT_TYPES) {
      const published: readonly string[] = (EVENTS[type] as EventDeclaration).published ?? [];
      const data = { id: 'x', thing_id: 't1', note: 'clinical text', ...Object.fromEntries(published.map((f) => [f, 1])) };
      const meta = { organization_id: 'org-1', facility_id: null, environment: 'development', request_id: null } as const;
      const envelope: EventEnvelope = { id: 'evt_1', type, version: '1.0', created_at: '2026-01-01T00:00:00.000Z', data, meta };
      expect(Object.keys(deliveredEnvelope(envelope, false).data).sort(), type).toEqual([...new Set(['id', 'thing_id', ...published])].sort());
      expect(deliveredEnvelope(envelope, true).data).toEqual(data);
    }
  });
});
