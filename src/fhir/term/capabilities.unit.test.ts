import { describe, expect, it } from 'vitest';
import type { Queryable } from '../../db/database';
import { terminologyCapabilities } from './capabilities';

/** A Queryable answering these rows to every statement. */
const answering = (rows: unknown[]) => ({ query: async () => ({ rows, rowCount: rows.length }) }) as unknown as Queryable;

describe('terminologyCapabilities', () => {
  it('leaves codeSystem out when nothing is loaded (FHIR JSON has no empty arrays)', async () => {
    const tc = await terminologyCapabilities(answering([]), 'https://pont.example/api/fhir/R4');
    expect(tc.resourceType).toBe('TerminologyCapabilities');
    expect('codeSystem' in tc).toBe(false);
    expect(tc.expansion?.parameter?.length).toBeGreaterThan(0);
  });

  it("lists a code system's versions in the order given, a version-less one without a code, its own properties as filters", async () => {
    const tc = await terminologyCapabilities(
      answering([
        { url: 'http://a', version: '2', current: true, properties: ['severity'] },
        { url: 'http://a', version: '1', current: false, properties: null },
        { url: 'http://b', version: '', current: true, properties: null },
      ]),
      'https://pont.example/api/fhir/R4',
    );
    expect(tc.codeSystem?.map((c) => [c.uri, c.version?.map((v) => [v.code, v.isDefault])])).toEqual([
      ['http://a', [['2', true], ['1', false]]],
      ['http://b', [[undefined, true]]],
    ]);
    expect(tc.codeSystem?.[0]?.version?.[0]?.filter?.find((f) => f.code === 'severity')?.op).toEqual(['=', 'in', 'not-in', 'regex', 'exists']);
  });
});
