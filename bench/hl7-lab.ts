/**
 * The laboratory system of `npm run bench:hl7`, in a process of its own (so that Pont's work in the bench's process
 * does not delay reading the ACKs): BENCH_CONNECTIONS @medplum/hl7 MLLP clients, each sending ORU^R01 messages with
 * 5 OBX one after the other. Arguments: port, count, run (the control ids' prefix). Prints one JSON line: seconds,
 * every ACK's latency in ms, the ACK codes, its CPU time in ms.
 */
import { Hl7Message } from '@medplum/core';
import { Hl7Client } from '@medplum/hl7';

const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 4);

function oru(n: number, run: string): Hl7Message {
  const patient = n % 100;
  return Hl7Message.parse(
    [
      `MSH|^~\\&|LAB|GHH LAB|PONT|FAC|20240116120000||ORU^R01^ORU_R01|${run}-${n}|P|2.5.1`,
      `PID|1||P${patient}^^^GHH^MR||PATIENT${patient}^TEST^^^^^L||19800101|F`,
      `OBR|1|${run}${n}^OE|${run}${n}^LAB|24323-8^Comprehensive metabolic panel^LN|||20240116093000+0100||||||||||||||||||F`,
      `OBX|1|NM|2345-7^Glucose^LN||${80 + (n % 40)}|mg/dL^^UCUM|70-99|${n % 40 > 19 ? 'H' : 'N'}|||F`,
      `OBX|2|NM|2951-2^Sodium^LN||140|mmol/L|135-145|N|||F`,
      `OBX|3|NM|2823-3^Potassium^LN||4.1|mmol/L|3.5-5.1|N|||F`,
      `OBX|4|SN|1988-5^C reactive protein^LN||<^5|mg/L|<5|N|||F`,
      `OBX|5|ST|5778-6^Color of Urine^LN||Yellow||||||F`,
    ].join('\r'),
  );
}

async function burst(port: number, count: number, run: string): Promise<{ seconds: number; latencies: number[]; codes: Record<string, number>; cpuMs: number }> {
  const latencies: number[] = [];
  const codes: Record<string, number> = {};
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: CONNECTIONS }, async () => {
      const client = new Hl7Client({ host: '127.0.0.1', port });
      try {
        for (let n = next++; n < count; n = next++) {
          const t = performance.now();
          const reply = await client.sendAndWait(oru(n, run), { timeoutMs: 30_000 });
          latencies.push(performance.now() - t);
          const code = reply.getSegment('MSA')?.getField(1)?.toString() ?? '?';
          codes[code] = (codes[code] ?? 0) + 1;
        }
      } finally {
        await client.close();
      }
    }),
  );
  const cpu = process.cpuUsage();
  return { seconds: (performance.now() - started) / 1000, latencies, codes, cpuMs: (cpu.user + cpu.system) / 1000 };
}

const [port, count, run] = process.argv.slice(2);
const result = await burst(Number(port), Number(count), run!);
// Exit once it is written: a timer of the client's sendAndWait (its 30 s timeout) would otherwise keep the process,
// and the bench, waiting, which once counted as time for the messages to reach Pont.
process.stdout.write(`${JSON.stringify(result)}\n`, () => process.exit(0));
