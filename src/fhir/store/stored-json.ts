import type { Bundle, Resource } from '@medplum/fhirtypes';

/**
 * Search matches sent as stored. A route that only writes a searchset out asks for its matches as the JSON text
 * PostgreSQL gives for each row, spliced into the answer unparsed: parsing each row into objects and writing them
 * again cost a deep page of 50 Observations 0.6 ms of parsing alone, more than its SQL's share. Such a match is an
 * object with its type and id only (what the fullUrl and the audit trail read), its text kept here.
 */
const texts = new WeakMap<object, string>();

/** A match of `resourceType`/`id` whose JSON is `text`, PostgreSQL's rendering of the stored content. */
export function storedJson(resourceType: string, id: string, text: string): Resource {
  const resource = { resourceType, id } as Resource;
  texts.set(resource, text);
  return resource;
}

/** The JSON of a Bundle, each stored match (storedJson) written as its stored text. */
export function bundleJson(bundle: Bundle): string {
  const { entry, ...rest } = bundle;
  const head = JSON.stringify(rest);
  if (!entry) return head;
  const entries = entry.map((e) => {
    const text = e.resource && texts.get(e.resource);
    if (text === undefined) return JSON.stringify(e);
    const members = Object.entries(e).flatMap(([key, value]) => (value === undefined ? [] : [`${JSON.stringify(key)}:${key === 'resource' ? text : JSON.stringify(value)}`]));
    return `{${members.join(',')}}`;
  });
  return `${head.slice(0, -1)}${head.length > 2 ? ',' : ''}"entry":[${entries.join(',')}]}`;
}
