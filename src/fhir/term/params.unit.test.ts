import { describe, expect, it } from 'vitest';
import { conceptsOf, isActive } from './concepts';
import { coding, fromParameters, fromQuery, int, one } from './params';

const known = new Set(['code', 'system', 'coding', 'count', 'filter', 'activeOnly']);

describe('terminology operation parameters', () => {
  it('reads a query and a Parameters body alike, and refuses what the operation does not take', () => {
    const q = fromQuery({ code: 'a', system: 'http://s', _format: 'json' }, known);
    expect(one(q, 'code')).toBe('a');
    expect(() => fromQuery({ bogus: '1' }, known)).toThrow(/Unknown parameter "bogus"/);
    const p = fromParameters({ resourceType: 'Parameters', parameter: [{ name: 'coding', valueCoding: { system: 'http://s', code: 'a' } }, { name: 'count', valueInteger: 5 }] }, known);
    expect(coding(p, 'coding')).toEqual({ system: 'http://s', code: 'a' });
    expect(int(p, 'count', 1000)).toBe(5);
  });

  it('refuses wrong types, long strings, repeated single values and resources, with 400s', () => {
    const bad = [
      { resourceType: 'Patient' },
      { resourceType: 'Parameters', parameter: {} },
      { resourceType: 'Parameters', parameter: [{ name: 'code', valueString: 'x'.repeat(5000) }] },
      { resourceType: 'Parameters', parameter: [{ name: 'code', valueString: { a: 1 } }] },
      { resourceType: 'Parameters', parameter: [{ name: 'code' }] },
      { resourceType: 'Parameters', parameter: [{ name: 'code', valueString: 'a', valueCode: 'b' }] },
      { resourceType: 'Parameters', parameter: [{ name: 'coding', valueCoding: [] }] },
      { resourceType: 'Parameters', parameter: [{ name: 'code', resource: { resourceType: 'ValueSet' } }] },
      { resourceType: 'Parameters', parameter: Array.from({ length: 101 }, () => ({ name: 'code', valueString: 'a' })) },
    ];
    for (const body of bad) expect(() => fromParameters(body, known), JSON.stringify(body).slice(0, 80)).toThrow(expect.objectContaining({ status: 400 }));
    expect(() => one(fromQuery({ code: ['a', 'b'] }, known), 'code')).toThrow(/once/);
    expect(() => int(fromQuery({ count: '-1' }, known), 'count', 1000)).toThrow(/non-negative/);
    expect(int(fromQuery({ count: '99999999' }, known), 'count', 1000)).toBe(1000);
  });
});

describe('concepts of a CodeSystem resource', () => {
  it('takes the hierarchy from nesting and from parent and child properties, and inactive from inactive or status', () => {
    const concepts = [
      ...conceptsOf({
        resourceType: 'CodeSystem',
        url: 'http://s',
        status: 'active',
        content: 'complete',
        concept: [
          { code: 'a', concept: [{ code: 'b', property: [{ code: 'parent', valueCode: 'c' }] }] },
          { code: 'c', property: [{ code: 'child', valueCode: 'd' }, { code: 'inactive', valueBoolean: true }] },
          { code: 'd', property: [{ code: 'status', valueCode: 'retired' }, { code: 'colour', valueString: 'red' }] },
        ],
      }),
    ];
    expect(concepts.map((c) => [c.code, c.parents, c.children, c.active])).toEqual([
      ['a', [], [], true],
      ['b', ['a', 'c'], [], true],
      ['c', [], ['d'], false],
      ['d', [], [], false],
    ]);
    expect(concepts[3]!.properties).toEqual([{ code: 'status', valueCode: 'retired' }, { code: 'colour', valueString: 'red' }]);
    expect(isActive(undefined)).toBe(true);
  });

  it('refuses codes that are not codes', () => {
    for (const code of ['', ' a', 'a  b', 'x'.repeat(300), 5])
      expect(() => [...conceptsOf({ resourceType: 'CodeSystem', url: 'http://s', status: 'active', content: 'complete', concept: [{ code } as never] })]).toThrow(/is not a code/);
  });
});
