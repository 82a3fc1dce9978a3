import type { Bundle, Resource } from '@medplum/fhirtypes';
import { describe, expect, it } from 'vitest';
import { bundleJson, storedJson } from './stored-json';

/** A resource's text as PostgreSQL renders jsonb: a space after each `:` and `,`. */
const asJsonb = (resource: unknown) => JSON.stringify(resource).replace(/":/g, '": ').replace(/,"/g, ', "');

describe('bundleJson', () => {
  const patient = { resourceType: 'Patient', id: 'p1', name: [{ family: 'O\'Brien "quoted" \\ back\u2028line', given: ['Zoë', '😀'] }], active: true };
  const outcome = { resourceType: 'OperationOutcome', issue: [{ severity: 'information', code: 'informational' }] };

  it('writes each stored match as its text, and the rest as JSON.stringify would', () => {
    const bundle: Bundle = {
      resourceType: 'Bundle',
      type: 'searchset',
      total: 2,
      link: [{ relation: 'self', url: 'http://x/Patient?name=o' }],
      entry: [
        { fullUrl: 'http://x/Patient/p1', resource: storedJson('Patient', 'p1', asJsonb(patient)), search: { mode: 'match' } },
        { fullUrl: 'http://x/Patient/p2', resource: { resourceType: 'Patient', id: 'p2' }, search: { mode: 'match' } },
        { resource: outcome as Resource, search: { mode: 'outcome' }, request: undefined },
      ],
    };
    const text = bundleJson(bundle);
    expect(text).toContain(`"resource":${asJsonb(patient)}`);
    expect(JSON.parse(text)).toEqual({
      ...bundle,
      entry: [
        { fullUrl: 'http://x/Patient/p1', resource: patient, search: { mode: 'match' } },
        { fullUrl: 'http://x/Patient/p2', resource: { resourceType: 'Patient', id: 'p2' }, search: { mode: 'match' } },
        { resource: outcome, search: { mode: 'outcome' } },
      ],
    });
    // The members keep their order: the entries last, as the Bundle was built.
    expect(Object.keys(JSON.parse(text))).toEqual(['resourceType', 'type', 'total', 'link', 'entry']);
  });

  it('writes a Bundle without entries, or with none, as JSON.stringify does', () => {
    const bare: Bundle = { resourceType: 'Bundle', type: 'searchset' };
    expect(bundleJson(bare)).toBe(JSON.stringify(bare));
    expect(bundleJson({ ...bare, entry: [] })).toBe(JSON.stringify({ ...bare, entry: [] }));
  });

  it('a stored match is its type and id only: what it holds is not read from the object', () => {
    const match = storedJson('Observation', 'o1', asJsonb({ resourceType: 'Observation', id: 'o1', status: 'final' }));
    expect(match).toEqual({ resourceType: 'Observation', id: 'o1' });
    // The same object written without bundleJson would lose its content: only bundleJson may write it.
    expect(JSON.parse(bundleJson({ resourceType: 'Bundle', type: 'searchset', entry: [{ resource: match }] })).entry[0].resource.status).toBe('final');
  });
});
