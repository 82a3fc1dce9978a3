/** Small measuring helpers for the benchmarks. */

export interface Stats {
  n: number;
  p50: number;
  p95: number;
  mean: number;
}

/** Nearest-rank percentiles and the mean of a list of milliseconds. */
export function stats(ms: number[]): Stats {
  const sorted = [...ms].sort((a, b) => a - b);
  const at = (p: number) => sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!;
  return { n: ms.length, p50: at(50), p95: at(95), mean: ms.reduce((s, v) => s + v, 0) / Math.max(1, ms.length) };
}

/** Runs `task` `count` times with `concurrency` at once: each run's milliseconds and the overall rate. */
export async function runConcurrently(count: number, concurrency: number, task: () => Promise<number>): Promise<{ ms: number[]; perSecond: number }> {
  const ms: number[] = [];
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: Math.min(concurrency, count) }, async () => {
      while (next < count) {
        next++;
        ms.push(await task());
      }
    }),
  );
  return { ms, perSecond: (count / (performance.now() - started)) * 1000 };
}
