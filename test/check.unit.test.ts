import { beforeAll, describe, expect, it } from 'vitest';
import type { Observation } from '@medplum/fhirtypes';
import { loadFhirDefinitions } from '../src/core/fhir-definitions';
import { ApiError } from '../src/core/errors';
import { checkResources } from '../src/fhir/check';

/** The check of a write (src/fhir/check.ts): every outcome in order, and a large write shares the event loop. */
const observations = (n: number, bad?: number): Observation[] =>
  Array.from({ length: n }, (_, i) => ({
    resourceType: 'Observation',
    id: `o${i}`,
    status: i === bad ? ('finished' as Observation['status']) : 'final',
    code: { text: 'x' },
    subject: { reference: 'Patient/p1' },
  }));
const base = 'https://pont.example/fhir';

describe('checkResources', () => {
  beforeAll(() => loadFhirDefinitions());

  it('answers each resource in order: its index rows and patients, or the error it failed with, at its index', async () => {
    const outcomes = await checkResources(observations(100, 63), base, true);
    expect(outcomes).toHaveLength(100);
    expect(outcomes[63]).toBeInstanceOf(ApiError);
    expect((outcomes[63] as ApiError).message).toMatch(/status/);
    expect(outcomes.filter((o) => o instanceof ApiError)).toHaveLength(1);
    expect((outcomes[0] as { patients: string[] }).patients).toEqual(['p1']);
    // Resources Pont builds itself are indexed, not validated.
    expect((await checkResources(observations(3, 1), base, false)).some((o) => o instanceof ApiError)).toBe(false);
  });

  it('lets other work run while it checks a large write, and still answers every resource in order', async () => {
    let turns = 0;
    let checking = true;
    const other = () => {
      turns++;
      if (checking) setImmediate(other);
    };
    setImmediate(other);
    const outcomes = await checkResources(observations(2_000, 1_990), base, true);
    checking = false;
    // 2,000 resources, 32 between two turns of the event loop: the other work ran between the slices.
    expect(turns).toBeGreaterThanOrEqual(2_000 / 32 - 1);
    expect(outcomes).toHaveLength(2_000);
    expect(outcomes.map((o, i) => (o instanceof ApiError ? i : -1)).filter((i) => i >= 0)).toEqual([1_990]);
  });
});
