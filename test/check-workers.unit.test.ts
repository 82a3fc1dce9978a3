import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Observation } from '@medplum/fhirtypes';
import { loadFhirDefinitions } from '../src/core/fhir-definitions';
import { ApiError } from '../src/core/errors';
import { checkResources, checkWorkersState, closeCheckWorkers, startCheckWorkers } from '../src/fhir/check';

/** When the check of a write runs on the worker threads, and when they start (src/fhir/check.ts). */
const observations = (n: number, bad?: number): Observation[] =>
  Array.from({ length: n }, (_, i) => ({
    resourceType: 'Observation',
    id: `o${i}`,
    status: i === bad ? ('finished' as Observation['status']) : 'final',
    code: { text: 'x' },
    subject: { reference: 'Patient/p1' },
  }));
const base = 'https://pont.example/fhir';

describe('the check workers', () => {
  beforeAll(async () => {
    loadFhirDefinitions();
    await closeCheckWorkers();
  });
  afterAll(() => closeCheckWorkers());

  it('a single write of 16 or more is checked on the calling thread and starts none; a second within 30 s starts them', async () => {
    const tasks = checkWorkersState().tasks;
    const first = await checkResources(observations(40, 7), base, true);
    expect(first[7]).toBeInstanceOf(ApiError);
    expect(first.filter((o) => o instanceof ApiError)).toHaveLength(1);
    expect(checkWorkersState().state).toBe('stopped');
    await checkResources(observations(20), base, true);
    expect(checkWorkersState().state).toBe('starting');
    expect(checkWorkersState().tasks).toBe(tasks); // both checked here
  });

  it('once they are up, a write is checked on them with the same outcomes, errors included', async () => {
    await startCheckWorkers();
    expect(checkWorkersState().state).toBe('ready');
    const tasks = checkWorkersState().tasks;
    const outcomes = await checkResources(observations(100, 63), base, true);
    expect(checkWorkersState().tasks - tasks).toBe(4); // 100 resources, 32 a task
    expect(outcomes[63]).toBeInstanceOf(ApiError);
    expect((outcomes[63] as ApiError).message).toMatch(/status/);
    expect(outcomes.filter((o) => o instanceof ApiError)).toHaveLength(1);
    expect((outcomes[0] as { patients: string[] }).patients).toEqual(['p1']);
  });

  it('a write of 2,000 or more starts them at once; smaller or unvalidated writes start none', async () => {
    await closeCheckWorkers();
    await checkResources(observations(15), base, true);
    await checkResources(observations(15), base, true);
    await checkResources(observations(100), base, false);
    expect(checkWorkersState().state).toBe('stopped');
    // Checked here a slice at a time while they start (other requests run between slices), the rest on them once up.
    const outcomes = await checkResources(observations(2_000, 1_990), base, true);
    expect(checkWorkersState().state).not.toBe('stopped');
    expect(outcomes).toHaveLength(2_000);
    expect(outcomes.map((o, i) => (o instanceof ApiError ? i : -1)).filter((i) => i >= 0)).toEqual([1_990]);
  });
});
