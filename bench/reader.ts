/**
 * The other client of `bench/bulk-export.ts`, in a process of its own (as another client would be: not sharing the
 * exporting client's event loop): reads one resource at a time, a read by id and a search by patient alternately,
 * until its stdin closes. Prints a line per read: the epoch millisecond it started and how many milliseconds it took.
 *
 *   BENCH_URL, BENCH_AUTHORIZATION, BENCH_SAMPLE (JSON: [{ id, patient }]) in its environment.
 */
export {};

const url = process.env.BENCH_URL!;
const headers = { authorization: process.env.BENCH_AUTHORIZATION! };
const sample = JSON.parse(process.env.BENCH_SAMPLE!) as Array<{ id: string; patient: string }>;
const FHIR = '/api/fhir/R4';

let stop = false;
process.stdin.on('end', () => (stop = true)).resume();
for (let n = 1; !stop; n++) {
  const s = sample[n % sample.length]!;
  const path = n % 2 ? `${FHIR}/Observation/${s.id}` : `${FHIR}/Condition?patient=${s.patient}&_count=20`;
  const startedAt = Date.now();
  const t = performance.now();
  const res = await fetch(url + path, { headers });
  await res.arrayBuffer();
  if (res.status !== 200) throw new Error(`read ${path}: ${res.status}`);
  process.stdout.write(`${startedAt} ${(performance.now() - t).toFixed(2)}\n`);
}
