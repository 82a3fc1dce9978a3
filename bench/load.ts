/**
 * The load generator of the benchmarks, run in a process of its own (so that the client does not compete
 * with the measured server for its event loop): autocannon sends GET requests for `paths`, in turn across
 * all connections, and this process prints one JSON line of figures.
 *
 *   node --import tsx bench/load.ts < spec.json      (a LoadSpec on standard input: its headers hold a token)
 *
 * Latencies are taken from autocannon's per-response times (float milliseconds; its own histogram rounds
 * to whole milliseconds, too coarse for sub-millisecond requests). Any answer other than the expected
 * status, or an error, fails the run: a benchmark must not count refusals as throughput.
 */
import autocannon from 'autocannon';
import { stats } from './stats';

export interface LoadSpec {
  url: string;
  paths: string[];
  headers?: Record<string, string>;
  connections: number;
  /** Requests to send (latency phase), or seconds to run (throughput phase). */
  amount?: number;
  seconds?: number;
  expectStatus?: number;
}

export interface LoadResult {
  requests: number;
  p50: number;
  p95: number;
  mean: number;
  perSecond: number;
  errors: number;
  unexpected: Record<string, number>;
}

async function run(spec: LoadSpec): Promise<LoadResult> {
  const latencies: number[] = [];
  const unexpected: Record<string, number> = {};
  const expect = spec.expectStatus ?? 200;
  let next = 0;
  const started = performance.now();
  const result = await new Promise<autocannon.Result>((resolveRun, rejectRun) => {
    const instance = autocannon(
      {
        url: spec.url,
        connections: spec.connections,
        ...(spec.amount ? { amount: spec.amount } : { duration: spec.seconds ?? 5 }),
        headers: spec.headers,
        requests: [{ method: 'GET', setupRequest: (req) => ({ ...req, path: spec.paths[next++ % spec.paths.length] }) }],
      },
      (err, done) => (err ? rejectRun(err) : resolveRun(done)),
    );
    instance.on('response', (_client, status, _bytes, ms) => {
      if (status === expect) latencies.push(ms);
      else unexpected[status] = (unexpected[status] ?? 0) + 1;
    });
  });
  const seconds = (performance.now() - started) / 1000;
  const s = stats(latencies);
  return { requests: latencies.length, p50: s.p50, p95: s.p95, mean: s.mean, perSecond: latencies.length / seconds, errors: result.errors + result.timeouts, unexpected };
}

const main = (spec: LoadSpec) =>
  run(spec).then(
    (r) => process.stdout.write(JSON.stringify(r) + '\n'),
    (err) => {
      process.stderr.write(String(err?.stack ?? err) + '\n');
      process.exit(1);
    },
  );

let input = '';
process.stdin.on('data', (chunk) => (input += chunk));
process.stdin.on('end', () => void main(JSON.parse(input) as LoadSpec));
