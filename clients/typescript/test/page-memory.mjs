// Pages over a FHIR search with the built library, one page at a time, and measures the heap after each page
// (node --expose-gc). argv[2]: {"baseUrl", "clientId", "clientSecret", "type", "params", "total", "warmupPages", "keep"}; `keep` holds every
// resource (the control: what loading everything costs). Prints {"count", "pages", "unique", "baselineBytes", "peakGrowthBytes", "maxAlive"}.
import { Pont } from '../dist/index.js';

const args = JSON.parse(process.argv[2]);
const pont = new Pont({ clientId: args.clientId, clientSecret: args.clientSecret, baseUrl: args.baseUrl });
const kept = [];
// Which of the `total` resources came (their valueInteger): a fixed-size record, so it does not grow with the count.
const seen = new Uint8Array(args.total);
// Whether resources already iterated past are still reachable: with one page held, at most a page's worth are.
const refs = [];
let maxAlive = 0;
let count = 0;
let pages = 0;
let baseline = 0;
let peak = 0;
const measure = () => {
  globalThis.gc();
  return process.memoryUsage().heapUsed;
};
// The items one by one, as an integrator would; the heap is measured at each page boundary (every `_count` items).
const pageSize = Number(args.params._count);
for await (const resource of pont.fhir.search(args.type, args.params)) {
  count++;
  seen[resource.valueInteger] = 1;
  if (args.keep) kept.push(resource);
  refs.push(new WeakRef(resource));
  if (count % pageSize !== 0) continue;
  pages++;
  // The first pages warm the library, the connection and the JIT up; growth is measured after `warmupPages`.
  const used = measure();
  maxAlive = Math.max(maxAlive, refs.filter((r) => r.deref() !== undefined).length);
  if (process.env.PAGE_MEMORY_TRACE) process.stderr.write(`${pages} ${used}\n`);
  if (pages === args.warmupPages) baseline = used;
  if (pages > args.warmupPages) peak = Math.max(peak, used - baseline);
}
process.stdout.write(JSON.stringify({ count, pages, unique: seen.reduce((a, b) => a + b, 0), baselineBytes: baseline, peakGrowthBytes: peak, maxAlive, kept: kept.length }) + '\n');
