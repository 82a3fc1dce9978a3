import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { evalFhirPathTyped, parseFhirPath, toJsBoolean, toTypedValue, type FhirPathAtom, type TypedValue } from '@medplum/core';
import type { Resource } from '@medplum/fhirtypes';
import { parse } from 'yaml';
import { isResourceType } from '../core/fhir-definitions';
import type { ResourceChange } from '../events/rules';

/**
 * The SubscriptionTopics Pont publishes (FHIR Subscriptions R5 Backport IG STU 1.1): data, read from
 * `mappings/subscriptions/topics.yaml` beside the maps (its header says what a topic holds). Nothing here decides
 * access: the policy does, at fan-out and at delivery (src/subscriptions/service.ts).
 */

export const TOPICS_FILE = 'subscriptions/topics.yaml';
/** The IG's canonical base (extension URLs, profiles). */
export const BACKPORT = 'http://hl7.org/fhir/uv/subscriptions-backport';

export interface TopicFilter {
  name: string;
  description: string;
  /** FHIRPath on the resource: a value of it must equal the filter's value. */
  path: FhirPathAtom;
  fhirPath: string;
}

export interface Topic {
  id: string;
  title: string;
  description: string;
  resource: string;
  interactions: Array<ResourceChange['interaction']>;
  fhirPath?: string;
  criterion?: FhirPathAtom;
  filters: TopicFilter[];
}

export class TopicError extends Error {}

const ID = /^[a-z0-9][a-z0-9-]{0,62}$/;
const INTERACTIONS = new Set(['create', 'update', 'delete']);

function compile(expression: string, where: string): FhirPathAtom {
  try {
    return parseFhirPath(expression);
  } catch (err) {
    throw new TopicError(`${where}: not a FHIRPath expression: ${(err as Error).message}`);
  }
}

/** Reads and checks the topics file of `dir`; a mistake throws a TopicError naming the topic (start and reload stop). */
export function loadTopics(dir: string): Topic[] {
  let raw: unknown;
  try {
    raw = parse(readFileSync(join(dir, TOPICS_FILE), 'utf8'));
  } catch (err) {
    if ((err as { code?: string }).code === 'ENOENT') return [];
    throw new TopicError(`${TOPICS_FILE}: ${(err as Error).message}`);
  }
  const list = (raw as { topics?: unknown } | null)?.topics;
  if (!Array.isArray(list)) throw new TopicError(`${TOPICS_FILE}: expected a list under \`topics:\``);
  const seen = new Set<string>();
  return list.map((t: any, i: number): Topic => {
    const where = `${TOPICS_FILE}: topic ${typeof t?.id === 'string' ? t.id : `#${i + 1}`}`;
    if (typeof t?.id !== 'string' || !ID.test(t.id)) throw new TopicError(`${where}: id must be lower case letters, digits and dashes`);
    if (seen.has(t.id)) throw new TopicError(`${where}: the id is used twice`);
    seen.add(t.id);
    if (typeof t.title !== 'string' || typeof t.description !== 'string') throw new TopicError(`${where}: needs a title and a description`);
    if (typeof t.resource !== 'string' || !isResourceType(t.resource)) throw new TopicError(`${where}: resource must be an R4 resource type`);
    if (!Array.isArray(t.interactions) || !t.interactions.length || !t.interactions.every((x: unknown) => INTERACTIONS.has(x as string)))
      throw new TopicError(`${where}: interactions must list create, update and/or delete`);
    if (t.fhirPath !== undefined && typeof t.fhirPath !== 'string') throw new TopicError(`${where}: fhirPath must be a string`);
    const filters = (t.filters ?? []) as any[];
    if (!Array.isArray(filters)) throw new TopicError(`${where}: filters must be a list`);
    return {
      id: t.id,
      title: t.title,
      description: t.description.trim(),
      resource: t.resource,
      interactions: t.interactions,
      fhirPath: t.fhirPath,
      criterion: t.fhirPath === undefined ? undefined : compile(t.fhirPath, where),
      filters: filters.map((f) => {
        if (typeof f?.name !== 'string' || !/^[a-z][a-z0-9-]*$/.test(f.name) || typeof f.fhirPath !== 'string')
          throw new TopicError(`${where}: each filter needs a name (lower case) and a fhirPath`);
        return { name: f.name, description: String(f.description ?? ''), fhirPath: f.fhirPath, path: compile(f.fhirPath, `${where}, filter ${f.name}`) };
      }),
    };
  });
}

const EMPTY: TypedValue = { type: 'undefined', value: undefined };

/** Does this change fire the topic? (interaction, then the FHIRPath criterion with %current and %previous). */
export function topicFires(topic: Topic, change: ResourceChange): boolean {
  const resource = change.after ?? change.before;
  if (!resource || resource.resourceType !== topic.resource || !topic.interactions.includes(change.interaction)) return false;
  if (!topic.criterion) return true;
  try {
    const variables: Record<string, TypedValue> = {
      '%current': change.after ? toTypedValue(change.after) : EMPTY,
      '%previous': change.before ? toTypedValue(change.before) : EMPTY,
    };
    return toJsBoolean(evalFhirPathTyped(topic.criterion, [toTypedValue(resource)], variables));
  } catch {
    return false; // an expression that cannot be evaluated on this resource does not fire
  }
}

/**
 * Does the resource pass a subscription's filters (every one: a value of its FHIRPath equals the filter's)? The rule the
 * fan-out applies in SQL to the stored filterValues (src/subscriptions/service.ts FILTERS_PASS), written out.
 */
export function filtersPass(topic: Topic, filters: Array<{ name: string; value: string }>, resource: Resource): boolean {
  const values = filterValues(topic, resource);
  return filters.every((f) => (values[f.name] ?? []).includes(f.value));
}

/**
 * The values of the topic's filters on the resource (filter name -> every value of its FHIRPath, as text): stored with a
 * queued change, so the fan-out matches any number of subscriptions' filters in SQL (`filters` ⊆ these).
 */
export function filterValues(topic: Topic, resource: Resource): Record<string, string[]> {
  const values: Record<string, string[]> = {};
  for (const filter of topic.filters) {
    try {
      values[filter.name] = [...new Set(evalFhirPathTyped(filter.path, [toTypedValue(resource)]).map((v) => String(v.value)))];
    } catch {
      values[filter.name] = []; // an expression that cannot be evaluated on this resource passes no filter
    }
  }
  return values;
}

/** The canonical URL of a topic, under the public URL (what Subscription.criteria names). */
export const topicUrl = (publicUrl: string, id: string) => `${publicUrl}/api/fhir/R4/SubscriptionTopic/${id}`;

/**
 * A topic as a Basic resource (code SubscriptionTopic) with the cross-version extensions of the R5 SubscriptionTopic's
 * elements: the shape of the IG's later R4 example (r4-encounter-complete, 1.2.0 ballot); STU 1.1 leaves R4 topic
 * definitions out of scope. No meta.profile: the IG defines none for it. status, a modifier in R5, is a modifierExtension.
 */
export function topicAsBasic(publicUrl: string, topic: Topic): Resource {
  const ext = (name: string) => `http://hl7.org/fhir/5.0/StructureDefinition/extension-SubscriptionTopic.${name}`;
  const url = topicUrl(publicUrl, topic.id);
  return {
    resourceType: 'Basic',
    id: topic.id,
    code: { coding: [{ system: 'http://hl7.org/fhir/fhir-types', code: 'SubscriptionTopic' }] },
    modifierExtension: [{ url: ext('status'), valueCode: 'active' }],
    extension: [
      { url: ext('url'), valueUri: url },
      { url: ext('version'), valueString: '1' },
      { url: ext('title'), valueString: topic.title },
      { url: ext('description'), valueMarkdown: topic.description },
      {
        url: ext('resourceTrigger'),
        extension: [
          { url: 'description', valueMarkdown: topic.description },
          { url: 'resource', valueUri: `http://hl7.org/fhir/StructureDefinition/${topic.resource}` },
          ...topic.interactions.map((i) => ({ url: 'supportedInteraction', valueCode: i })),
          ...(topic.fhirPath ? [{ url: 'fhirPathCriteria', valueString: topic.fhirPath }] : []),
        ],
      },
      ...topic.filters.map((f) => ({
        url: ext('canFilterBy'),
        extension: [
          { url: 'description', valueMarkdown: f.description },
          { url: 'resource', valueUri: `http://hl7.org/fhir/StructureDefinition/${topic.resource}` },
          { url: 'filterParameter', valueString: f.name },
        ],
      })),
      {
        url: ext('notificationShape'),
        extension: [{ url: 'resource', valueUri: `http://hl7.org/fhir/StructureDefinition/${topic.resource}` }],
      },
    ],
  } as Resource;
}
