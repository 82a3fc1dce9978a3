/**
 * The load generator of the benchmarks, run in a process of its own (so that the client does not compete
 * with the measured server for its event loop): autocannon sends GET requests for `paths` (or the `requests`
 * given: pushes with their bodies), in turn across all connections, and this process prints one JSON line of figures.
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
  /** GET requests of these paths, in turn; or, when `requests` is given, those (each sent once, in turn). */
  paths: string[];
  requests?: LoadRequest[];
  headers?: Record<string, string>;
  connections: number;
  /** Requests to send (latency phase), or seconds to run (throughput phase). */
  amount?: number;
  seconds?: number;
  expectStatus?: number;
}

/** One request of a LoadSpec that is not a GET of a path: a push with its body and its own Idempotency-Key. */
export interface LoadRequest {
  method: 'GET' | 'POST';
  path: string;
  body?: string;
  headers?: Record<string, string>;
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
  let firstSent = Infinity;
  let lastAnswered = 0;
  const result = await new Promise<autocannon.Result>((resolveRun, rejectRun) => {
    const instance = autocannon(
      {
        url: spec.url,
        connections: spec.connections,
        ...(spec.amount ? { amount: spec.amount } : { duration: spec.seconds ?? 5 }),
        headers: spec.headers,
        requests: [
          {
            method: 'GET',
            setupRequest: (req) => {
              const i = next++;
              const one = spec.requests?.[i % spec.requests.length];
              if (one) return { ...req, method: one.method, path: one.path, body: one.body, headers: { ...req.headers, ...one.headers } };
              return { ...req, path: spec.paths[i % spec.paths.length] };
            },
          },
        ],
      },
      (err, done) => (err ? rejectRun(err) : resolveRun(done)),
    );
    instance.on('response', (_client, status, _bytes, ms) => {
      const now = performance.now();
      firstSent = Math.min(firstSent, now - ms);
      lastAnswered = now;
      if (status === expect) latencies.push(ms);
      else unexpected[status] = (unexpected[status] ?? 0) + 1;
    });
  });
  // From the first request sent to the last answer: autocannon notices that `amount` is done on its 1-second tick,
  // which would make 30 quick requests look like 30 a second.
  const seconds = (latencies.length ? lastAnswered - firstSent : performance.now() - started) / 1000;
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
