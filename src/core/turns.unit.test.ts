import { describe, expect, it } from 'vitest';
import { Turns } from './turns';

/** A task that ends when told to, recording when it started. */
function gate(started: number[], n: number) {
  let open!: () => void;
  let fail!: (err: Error) => void;
  const done = new Promise<number>((resolve, reject) => {
    open = () => resolve(n);
    fail = reject;
  });
  return { task: () => (started.push(n), done), open: () => open(), fail: (err: Error) => fail(err) };
}

const settle = () => new Promise((resolve) => setImmediate(resolve));

describe('Turns', () => {
  it('runs at most `limit` at once, the rest in the order they came', async () => {
    const turns = new Turns(2);
    const started: number[] = [];
    const gates = [1, 2, 3, 4].map((n) => gate(started, n));
    const results = gates.map((g) => turns.run(g.task));
    await settle();
    expect(started).toEqual([1, 2]);
    expect(turns.counts).toEqual({ running: 2, waiting: 2 });
    gates[1]!.open();
    await settle();
    expect(started).toEqual([1, 2, 3]);
    gates[0]!.open();
    await settle();
    expect(started).toEqual([1, 2, 3, 4]);
    gates[2]!.open();
    gates[3]!.open();
    expect(await Promise.all(results)).toEqual([1, 2, 3, 4]);
    expect(turns.counts).toEqual({ running: 0, waiting: 0 });
  });

  it('a task that fails gives its turn to the next, and its caller gets the error', async () => {
    const turns = new Turns(1);
    const started: number[] = [];
    const [a, b] = [gate(started, 1), gate(started, 2)];
    const first = turns.run(a.task);
    const second = turns.run(b.task);
    a.fail(new Error('no'));
    await expect(first).rejects.toThrow('no');
    await settle();
    expect(started).toEqual([1, 2]);
    b.open();
    expect(await second).toBe(2);
    expect(turns.counts).toEqual({ running: 0, waiting: 0 });
  });

  it('refuses a limit below 1', () => {
    expect(() => new Turns(0)).toThrow(/at least 1/);
  });
});
