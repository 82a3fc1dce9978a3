import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { compileMap } from './compile';
import { defaultMappingsDir } from './index';
import type { CompiledExpression, MapProgram } from './runtime';
import { YamlSource } from './yaml-source';

/** Every compiled map of mappings/, as the runtime reads it. */
function programs(): MapProgram[] {
  return readdirSync(defaultMappingsDir)
    .filter((f) => f.endsWith('.map.yaml'))
    .map((f) => compileMap(new YamlSource(join(defaultMappingsDir, f)))!);
}

/** The property lists of each kind of compiled object, over every map: one list per kind when they share one shape. */
function shapes(maps: MapProgram[]): Record<string, Set<string>> {
  const seen: Record<string, Set<string>> = { map: new Set(), rule: new Set(), field: new Set(), expression: new Set(), alternative: new Set(), step: new Set(), condition: new Set() };
  const note = (kind: string, o: object) => seen[kind]!.add(Object.keys(o).join(','));
  const expression = (e: CompiledExpression) => {
    note('expression', e);
    for (const a of e.alternatives) {
      note('alternative', a);
      if (a.from) expression(a.from);
      for (const s of [...a.steps, ...e.write]) {
        note('step', s);
        for (const c of s.where) {
          note('condition', c);
          for (const cs of c.steps) note('step', cs);
        }
      }
    }
  };
  const map = (p: MapProgram) => {
    note('map', p);
    for (const r of p.fields) {
      note('rule', r);
      note('field', r.field);
      r.targets.forEach(expression);
      if (r.object) map(r.object);
    }
  };
  maps.forEach(map);
  return seen;
}

describe('compiled maps in one shape (one-shape.ts)', () => {
  it('gives every step, condition, alternative, expression, field, rule and map of every map one property list', () => {
    const lists = shapes(programs());
    for (const [kind, list] of Object.entries(lists)) expect([kind, [...list]]).toEqual([kind, [expect.any(String)]]);
  });

  it('keeps what the compiler shares shared: the fields reading one `let` read one expression', () => {
    const lab = programs().find((p) => p.name === 'lab-result')!;
    const lets = lab.fields.flatMap((r) => r.targets.flatMap((t) => t.alternatives.map((a) => a.from).filter((f) => f !== undefined)));
    expect(lets.length).toBeGreaterThan(1);
    // The runtime chooses a let once per resource by this identity (runtime.ts letValues).
    expect(new Set(lets).size).toBeLessThan(lets.length);
  });
});
