import { once } from 'node:events';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Hl7Message } from '@medplum/core';
import { Hl7Client } from '@medplum/hl7';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAgent } from '../src/auth/agents';
import { frame } from '../src/agent/mllp';
import { syncedId } from '../src/bridge/sync';
import { spawnAgentProcess, type AgentProcess } from './agent-process';
import { eventually } from './eventually';
import { createTestClient, freePort, startTestServer, type TestClient, type TestServer } from './harness';

/**
 * An attacker's review of the HL7 v2 Bridge agent (its ADT events A02, A05, A06/A07, A11, A28/A31 beside A01/A03/A04/A08/A40
 * and ORU^R01): MLLP over TCP into the real agent process, FHIR read back over HTTP. Each `it` is one finding or one probe
 * that held.
 */
const FACILITY = 'fac-attack-1';

let pont: TestServer;
let operator: TestClient;
let work: string;

beforeAll(async () => {
  pont = await startTestServer();
  operator = await createTestClient(pont, ['fhir:read'], { organizationId: 'org-operator', allPatients: true });
  work = mkdtempSync(join(tmpdir(), 'pont-hl7-attack-'));
});
afterAll(async () => {
  await pont?.close();
  if (work) rmSync(work, { recursive: true, force: true });
});

async function startAgent(org: string, facility: string, name: string): Promise<AgentProcess & { path: string }> {
  const credentials = await createAgent(pont.services.db, { organizationId: org, facilityId: facility });
  const config = {
    pont_url: pont.url,
    agent_id: credentials.agent_id,
    agent_key: credentials.agent_key,
    facility_id: facility,
    mllp_host: '127.0.0.1',
    mllp_port: await freePort(),
    queue_dir: join(work, `q-${name}`),
    max_message_bytes: 1024 * 1024,
  };
  const path = join(work, `${name}.json`);
  writeFileSync(path, JSON.stringify(config));
  chmodSync(path, 0o600);
  return spawnAgent(path, config.mllp_port);
}

/** The agent of this config file (started again on the queue it kept). */
async function spawnAgent(path: string, port: number): Promise<AgentProcess & { path: string }> {
  return { ...(await spawnAgentProcess(path, port)), path };
}

const v2 = (...segments: string[]) => Hl7Message.parse(segments.join('\r'));
const msh = (type: string, id: string, version = '2.5.1') => `MSH|^~\\&|ADT|GHH|PONT|${FACILITY}|20240116120000||${type}|${id}|P|${version}`;
const pid = (mrn: string, family: string, extra = '') => `PID|1||${mrn}^^^GHH^MR||${family}^ANN^^^^^L||19700101|F${extra}`;
const visit = (number: string, place = '2000^2012^01', end = '') => `PV1|1|I|${place}||||004777^ATTEND^AARON^A|||SUR||||ADM|A0||||${number}^^^GHH${'|'.repeat(25)}20240115083000+0100|${end}`;
const ack = (m: Hl7Message) => ({
  code: m.getSegment('MSA')?.getField(1)?.toString(),
  err: m.getSegment('ERR')?.toString(),
});
const read = (facility: string, type: string, sourceId: string) => pont.json(`/api/fhir/R4/${type}/${syncedId(facility, type, sourceId)}`, { headers: operator.headers });
const readOk = async (type: string, sourceId: string, facility = FACILITY) => {
  const res = await read(facility, type, sourceId);
  expect(res.status).toBe(200);
  return res.body;
};
const patientRef = (mrn: string, facility = FACILITY) => `Patient/${syncedId(facility, 'Patient', `GHH-${mrn}`)}`;

describe('HL7 agent under attack: one organisation, one facility', () => {
  let agent: AgentProcess;
  let client: Hl7Client;
  beforeAll(async () => {
    agent = await startAgent('org-attack', FACILITY, 'main');
    client = new Hl7Client({ host: '127.0.0.1', port: agent.port });
  });
  afterAll(async () => {
    await client?.close();
    await agent?.kill();
  });
  const send = async (type: string, id: string, ...segments: string[]) => ack(await client.sendAndWait(v2(msh(type, id), ...segments)));

  // Original mode answers AA once the message is on disk (the agent does not read Pont): the refusal is Pont's, logged
  // by the agent with the control id (and an application AE in enhanced mode), as for a result naming another's visit.
  it("an A02 naming by PV1-19 the visit of ANOTHER patient does not move it to them: X's visit (and X's results in it) stay X's", async () => {
    expect((await send('ADT^A01^ADT_A01', 'HJ-1', pid('HJ-X', 'XAVIER'), visit('HJV-1'))).code).toBe('AA');
    expect((await send('ORU^R01^ORU_R01', 'HJ-2', pid('HJ-X', 'XAVIER'), 'PV1|1|I|||||||||||||||||HJV-1^^^GHH', 'OBR|1|HJ2^OE|HJ2^LAB|24323-8^CMP^LN|||20240116093000+0100||||||||||||||||||F', 'OBX|1|NM|2345-7^Glucose^LN||90|mg/dL|70-99|N|||F')).code).toBe('AA');
    const result = await eventually(() => readOk('Observation', 'LAB-HJ2-2345-7'));
    const before = await readOk('Encounter', 'GHH-HJV-1');
    expect(before.subject.reference).toBe(patientRef('HJ-X'));
    // Y's transfer, naming X's visit number; then a message after it, to know Pont has had the transfer.
    expect((await send('ADT^A02^ADT_A02', 'HJ-3', pid('HJ-Y', 'YOLANDA'), visit('HJV-1', '3000^3104^02'))).code).toBe('AA');
    expect((await send('ADT^A28^ADT_A05', 'HJ-4', pid('HJ-Z', 'ZED'), 'PV1|1|N')).code).toBe('AA');
    await eventually(() => readOk('Patient', 'GHH-HJ-Z'));
    const after = await readOk('Encounter', 'GHH-HJV-1');
    expect(result.encounter.reference).toBe(`Encounter/${before.id}`);
    expect({ subject: after.subject.reference, place: after.location[0].location.display }).toEqual({ subject: patientRef('HJ-X'), place: '2000' });
    await eventually(() => expect(agent.output()).toMatch(/Pont refused a resource of a message.*HJ-3|HJ-3.*Pont refused a resource of a message/));
  });

  it("an A11 naming by PV1-19 ANOTHER patient's visit neither cancels nor moves it", async () => {
    expect((await send('ADT^A01^ADT_A01', 'HJ-10', pid('HJ-X2', 'XENIA'), visit('HJV-2'))).code).toBe('AA');
    const before = await eventually(() => readOk('Encounter', 'GHH-HJV-2'));
    expect((await send('ADT^A11^ADT_A09', 'HJ-11', pid('HJ-Y2', 'YANNICK'), 'PV1|1|I|||||||||||||||||HJV-2^^^GHH')).code).toBe('AA');
    expect((await send('ADT^A28^ADT_A05', 'HJ-12', pid('HJ-Z2', 'ZED'), 'PV1|1|N')).code).toBe('AA');
    await eventually(() => readOk('Patient', 'GHH-HJ-Z2'));
    const after = await readOk('Encounter', 'GHH-HJV-2');
    expect({ status: after.status, subject: after.subject.reference, attending: after.participant?.length }).toEqual({ status: before.status, subject: patientRef('HJ-X2'), attending: 1 });
  });

  it('A40: what referred to the merged record all moves to the survivor, also when its visit was changed after its results (a transfer)', async () => {
    expect((await send('ADT^A01^ADT_A01', 'MV-1', pid('MV-OLD', 'MOVER'), visit('MVV-1'))).code).toBe('AA');
    expect((await send('ORU^R01^ORU_R01', 'MV-2', pid('MV-OLD', 'MOVER'), 'PV1|1|I|||||||||||||||||MVV-1^^^GHH', 'OBR|1|MV2^OE|MV2^LAB|24323-8^CMP^LN|||20240116093000+0100||||||||||||||||||F', 'OBX|1|NM|2345-7^Glucose^LN||90|mg/dL|70-99|N|||F')).code).toBe('AA');
    await eventually(() => readOk('Observation', 'LAB-MV2-2345-7'));
    expect((await send('ADT^A02^ADT_A02', 'MV-3', pid('MV-OLD', 'MOVER'), visit('MVV-1', '3000^3104^02'))).code).toBe('AA');
    await eventually(async () => expect((await readOk('Encounter', 'GHH-MVV-1')).location[0].location.display).toBe('3000'));
    expect((await send('ADT^A40^ADT_A39', 'MV-4', pid('MV-NEW', 'MOVER'), 'MRG|MV-OLD^^^GHH^MR')).code).toBe('AA');
    await eventually(async () => expect((await readOk('Patient', 'GHH-MV-OLD')).active).toBe(false));
    await eventually(async () => {
      const [enc, obs, rep] = await Promise.all([readOk('Encounter', 'GHH-MVV-1'), readOk('Observation', 'LAB-MV2-2345-7'), readOk('DiagnosticReport', 'LAB-MV2')]);
      expect([enc.subject.reference, obs.subject.reference, rep.subject.reference]).toEqual(Array(3).fill(patientRef('MV-NEW')));
    }, { timeoutMs: 5000 });
  });

  it('A40 back again (X into Y, then Y into X): refused, or one record is left active; never two records each replaced by the other', async () => {
    expect((await send('ADT^A28^ADT_A05', 'CY-1', pid('CY-X', 'CYCLE'), 'PV1|1|N')).code).toBe('AA');
    expect((await send('ADT^A28^ADT_A05', 'CY-2', pid('CY-Y', 'CYCLE'), 'PV1|1|N')).code).toBe('AA');
    expect((await send('ADT^A40^ADT_A39', 'CY-3', pid('CY-Y', 'CYCLE'), 'MRG|CY-X^^^GHH^MR')).code).toBe('AA');
    await eventually(async () => expect((await readOk('Patient', 'GHH-CY-X')).active).toBe(false));
    const back = await send('ADT^A40^ADT_A39', 'CY-4', pid('CY-X', 'CYCLE'), 'MRG|CY-Y^^^GHH^MR');
    await eventually(async () => expect((await readOk('Patient', 'GHH-CY-Y')).active).toBe(false));
    const [x, y] = await Promise.all([readOk('Patient', 'GHH-CY-X'), readOk('Patient', 'GHH-CY-Y')]);
    const replacedBy = (p: any) => (p.link ?? []).filter((l: any) => l.type === 'replaced-by').map((l: any) => l.other.reference);
    expect({ back: back.code, xReplacedBy: replacedBy(x), yReplacedBy: replacedBy(y), xActive: x.active }).toEqual({ back: 'AA', xReplacedBy: [], yReplacedBy: [patientRef('CY-X')], xActive: undefined });
  });

  it('an A40 of two merges (ADT_A39 repeats its PATIENT group: PID MRG, PID MRG) merges both, or is refused: never AA with the second dropped', async () => {
    for (const [id, mrn] of [['MP-1', 'MP-X1'], ['MP-2', 'MP-X2'], ['MP-3', 'MP-Y1'], ['MP-4', 'MP-Y2']]) expect((await send('ADT^A28^ADT_A05', id!, pid(mrn!, 'MULTI'), 'PV1|1|N')).code).toBe('AA');
    const a = await send('ADT^A40^ADT_A39', 'MP-5', 'EVN|A40|20240122090000', pid('MP-Y1', 'MULTI'), 'MRG|MP-X1^^^GHH^MR', pid('MP-Y2', 'MULTI'), 'MRG|MP-X2^^^GHH^MR');
    if (a.code === 'AA') {
      await eventually(async () => expect((await readOk('Patient', 'GHH-MP-X1')).active).toBe(false));
      await expect(send('ADT^A28^ADT_A05', 'MP-6', pid('MP-Z', 'MULTI'), 'PV1|1|N')).resolves.toMatchObject({ code: 'AA' });
      await eventually(() => readOk('Patient', 'GHH-MP-Z'));
      expect((await readOk('Patient', 'GHH-MP-X2')).active).toBe(false);
    } else {
      expect(a.code).toBe('AE');
      expect(a.err).toMatch(/PID|MRG/);
    }
  });

  it('two assigning authorities whose names differ only in letters outside ASCII (ÅLESUND, ØLESUND) are two patients, not one overwritten by the other', async () => {
    expect((await send('ADT^A28^ADT_A05', 'AU-1', 'PID|1||100^^^ÅLESUND^MR||AAGE^ANNA^^^^^L||19700101|F', 'PV1|1|N')).code).toBe('AA');
    expect((await send('ADT^A28^ADT_A05', 'AU-2', 'PID|1||100^^^ØLESUND^MR||OYEN^OLE^^^^^L||19800101|M', 'PV1|1|N')).code).toBe('AA');
    await eventually(async () => {
      const found = await pont.json('/api/fhir/R4/Patient?identifier=100&_count=10', { headers: operator.headers });
      const names = (found.body.entry ?? []).map((e: any) => e.resource.name[0].family).sort();
      expect(names).toEqual(['AAGE', 'OYEN']);
    }, { timeoutMs: 5000 });
  });

  it('an A08 of a record merged away does not make it an active patient again', async () => {
    expect((await send('ADT^A28^ADT_A05', 'RA-1', pid('RA-X', 'REVIVE'), 'PV1|1|N')).code).toBe('AA');
    expect((await send('ADT^A40^ADT_A39', 'RA-2', pid('RA-Y', 'REVIVE'), 'MRG|RA-X^^^GHH^MR')).code).toBe('AA');
    await eventually(async () => expect((await readOk('Patient', 'GHH-RA-X')).active).toBe(false));
    expect((await send('ADT^A08^ADT_A01', 'RA-3', pid('RA-X', 'REVIVED'), 'PV1|1|N')).code).toBe('AA');
    await eventually(async () => expect((await readOk('Patient', 'GHH-RA-X')).name[0].family).toBe('REVIVED'));
    expect((await readOk('Patient', 'GHH-RA-X')).active).toBe(false);
  });
});

/** One MLLP frame of raw bytes on its own connection, the ACK's text back (a sender that writes what it likes). */
async function rawSend(port: number, body: Buffer): Promise<Hl7Message> {
  const { connect } = await import('node:net');
  const socket = connect(port, '127.0.0.1');
  await once(socket, 'connect');
  socket.write(Buffer.concat([Buffer.from([0x0b]), body, Buffer.from([0x1c, 0x0d])]));
  let got = Buffer.alloc(0);
  for await (const chunk of socket) {
    got = Buffer.concat([got, chunk as Buffer]);
    if (got.includes(0x1c)) break;
  }
  socket.destroy();
  return Hl7Message.parse(got.subarray(1, got.indexOf(0x1c)).toString('utf8'));
}


/** A message sent after the others and seen in Pont: the agent forwards in order, so what came before it is answered. */
async function markerThrough(port: number, facility: string, id: string): Promise<void> {
  const text = [`MSH|^~\\&|ADT|GHH|PONT|${facility}|20240116120000||ADT^A28^ADT_A05|${id}|P|2.5.1`, pid(id, 'MARKER'), 'PV1|1|N'].join('\r');
  expect(await rawBurst(port, [text])).toEqual(['AA']);
  await eventually(() => readOk('Patient', `GHH-${id}`, facility));
}

/** Frames written at once on one raw connection (a sender that pipelines); each answer's MSA-1 and MSA-2, in order. */
async function rawAnswers(port: number, texts: string[]): Promise<Array<{ code: string; id: string }>> {
  const { connect } = await import('node:net');
  const socket = connect(port, '127.0.0.1');
  await once(socket, 'connect');
  socket.write(Buffer.concat(texts.map(frame)));
  socket.setEncoding('utf8');
  const got = await new Promise<string>((resolve) => {
    let text = '';
    socket.on('data', (c: string) => (text += c).split('\x1c').length > texts.length && resolve(text));
    socket.on('close', () => resolve(text));
    socket.on('error', () => resolve(text));
  });
  socket.destroy();
  return [...got.matchAll(/MSA\|(\w+)\|([^|\r]*)/g)].map((x) => ({ code: x[1]!, id: x[2]! }));
}

/** rawAnswers' MSA-1 of each answer, in order. */
const rawBurst = async (port: number, texts: string[]) => (await rawAnswers(port, texts)).map((a) => a.code);

describe('HL7 agent under attack: hostile fields', () => {
  let agent: AgentProcess;
  let client: Hl7Client;
  beforeAll(async () => {
    agent = await startAgent('org-fields', 'fac-fields', 'fields');
    client = new Hl7Client({ host: '127.0.0.1', port: agent.port });
  });
  afterAll(async () => {
    await client?.close();
    await agent?.kill();
  });
  const m = (type: string, id: string, version = '2.5.1') => `MSH|^~\\&|ADT|GHH|PONT|fac-fields|20240116120000||${type}|${id}|P|${version}`;
  const cases: Array<[string, string[], string, RegExp]> = [
    ['a month 13 in PID-7', [m('ADT^A01^ADT_A01', 'F-1'), pid('F1', 'DOE').replace('19700101', '20241301'), visit('FV-1')], 'AE', /PID\^1\^7|PID-7/],
    ['a PV1-2 class not in table 0004', [m('ADT^A01^ADT_A01', 'F-2'), pid('F2', 'DOE'), visit('FV-2').replace('PV1|1|I|', 'PV1|1|Z|')], 'AE', /PV1\^1\^2|PV1-2/],
    ['PV1-45 before PV1-44', [m('ADT^A03^ADT_A03', 'F-3'), pid('F3', 'DOE'), visit('FV-3', undefined, '20240101083000+0100')], 'AE', /PV1/],
    ['a 29 February of 2023 in PID-7', [m('ADT^A01^ADT_A01', 'F-1b'), pid('F1b', 'DOE').replace('19700101', '20230229'), visit('FV-1b')], 'AE', /PID\^1\^7|PID-7/],
    ['a month 13 in PV1-44', [m('ADT^A01^ADT_A01', 'F-1c'), pid('F1c', 'DOE'), visit('FV-1c').replace('20240115083000+0100', '20241315083000+0100')], 'AE', /PV1\^1\^44|PV1-44/],
    ['an hour 25 in PV1-45', [m('ADT^A03^ADT_A03', 'F-1d'), pid('F1d', 'DOE'), visit('FV-1d', undefined, '20240118253000+0100')], 'AE', /PV1\^1\^45|PV1-45/],
    ['MSH-9 event in lower case (ADT^a01)', [m('ADT^a01^ADT_A01', 'F-6b'), pid('F6b', 'DOE'), visit('FV-6b')], 'AR', /MSH/],
    ['an A11 of a visit that never existed', [m('ADT^A11^ADT_A09', 'F-16'), pid('F16', 'DOE'), 'PV1|1|I|||||||||||||||||FV-16^^^GHH'], 'AA', /.*/],
    ['MSH-12 2.9', [m('ADT^A01^ADT_A01', 'F-4', '2.9'), pid('F4', 'DOE'), visit('FV-4')], 'AR', /MSH\^1\^12|MSH-12/],
    ['MSH-12 2.2', [m('ADT^A01^ADT_A01', 'F-5', '2.2'), pid('F5', 'DOE'), visit('FV-5')], 'AR', /MSH/],
    ['MSH-9 in lower case', [m('adt^a01^adt_a01', 'F-6'), pid('F6', 'DOE'), visit('FV-6')], 'AR', /MSH/],
    ['A13 (cancel discharge)', [m('ADT^A13^ADT_A01', 'F-7'), pid('F7', 'DOE'), visit('FV-7')], 'AR', /MSH/],
    ['A12 (cancel transfer)', [m('ADT^A12^ADT_A12', 'F-8'), pid('F8', 'DOE'), visit('FV-8')], 'AR', /MSH/],
    ['A38 (cancel pre-admit)', [m('ADT^A38^ADT_A38', 'F-9'), pid('F9', 'DOE'), visit('FV-9')], 'AR', /MSH/],
    ['a NUL written as \\X00\\ in PID-5', [m('ADT^A28^ADT_A05', 'F-10'), pid('F10', 'DO\\X00\\E'), 'PV1|1|N'], 'AE', /PID\^1\^5|PID-5/],
    ['A40 merging a record into itself', [m('ADT^A40^ADT_A39', 'F-11'), pid('F11', 'DOE'), 'MRG|F11^^^GHH^MR'], 'AE', /MRG/],
    ['A40 without MRG', [m('ADT^A40^ADT_A39', 'F-12'), pid('F12', 'DOE')], 'AE', /MRG/],
    ['an empty PID-3', [m('ADT^A28^ADT_A05', 'F-13'), 'PID|1||||DOE^JOHN', 'PV1|1|N'], 'AE', /PID\^1\^3|PID-3/],
    ['a PV1-19 of 5,000 components', [m('ADT^A01^ADT_A01', 'F-14'), pid('F14', 'DOE'), visit(`FV14${'^X'.repeat(5000)}`)], 'AA', /.*/],
    ['a PV1-7 of 20,000 repetitions', [m('ADT^A01^ADT_A01', 'F-15'), pid('F15', 'DOE'), visit('FV-15').replace('004777^ATTEND^AARON^A', '1^A^B~'.repeat(20000))], 'AE', /PV1/],
  ];
  for (const [what, segments, code, where] of cases) {
    it(`${what}: ${code}${code === 'AA' ? '' : ' naming the field'}, and the agent goes on`, async () => {
      const a = ack(await client.sendAndWait(v2(...segments), { timeoutMs: 30_000 }));
      expect(a.code).toBe(code);
      if (code !== 'AA') expect(a.err).toMatch(where);
      expect(ack(await client.sendAndWait(v2(m('ADT^A28^ADT_A05', `${segments[0]!.split('|')[9]}-after`), pid('ALIVE', 'DOE'), 'PV1|1|N'))).code).toBe('AA');
      expect(agent.child.exitCode).toBeNull();
    });
  }

  it('a message of ~1 MB of separators (PID-5 of 300,000 repetitions, PID-11 of 300,000 components) is answered within 5 s, and another connection is answered meanwhile', async () => {
    for (const [id, field] of [['F-BIG1', '~'.repeat(300_000)], ['F-BIG2', '^'.repeat(300_000)], ['F-BIG3', '&'.repeat(300_000)]] as const) {
      const big = Buffer.from([`MSH|^~\\&|ADT|GHH|PONT|fac-fields|20240116120000||ADT^A28^ADT_A05|${id}|P|2.5.1`, `PID|1||BIG1^^^GHH^MR||DOE^JANE${field}||19700101|F|||1 MAIN ST${field}`, 'PV1|1|N'].join('\r'));
      const started = Date.now();
      const answer = rawSend(agent.port, big);
      const other = client.sendAndWait(v2(m('ADT^A28^ADT_A05', `${id}-other`), pid('BIGOTHER', 'DOE'), 'PV1|1|N'));
      const [a, o] = await Promise.all([answer, other]);
      expect(ack(o).code).toBe('AA');
      expect(['AA', 'AE', 'AR']).toContain(ack(a).code);
      expect(Date.now() - started, id).toBeLessThan(5000);
    }
  });

  it('odd encoding characters in MSH-1/MSH-2 get an answer (or the connection survives), never a crash', async () => {
    for (const head of ['MSH|^^\\&', 'MSH||', 'MSH|^~\\&&&&&', 'MSH|^', 'MSH^|~\\&', 'MSHA^~\\&']) {
      const sep = head[3]!;
      const text = `${head}${sep}ADT${sep}GHH${sep}PONT${sep}fac-fields${sep}20240116120000${sep}${sep}ADT^A28^ADT_A05${sep}ENC-${head.length}${sep}P${sep}2.5.1\rPID|1||ENC1^^^GHH^MR||DOE^JOHN\rPV1|1|N`;
      await Promise.race([rawSend(agent.port, Buffer.from(text)).catch(() => undefined), new Promise((r) => setTimeout(r, 3000))]);
      expect(agent.child.exitCode, head).toBeNull();
    }
    expect(ack(await client.sendAndWait(v2(m('ADT^A28^ADT_A05', 'ENC-after'), pid('ALIVE', 'DOE'), 'PV1|1|N'))).code).toBe('AA');
  });

  it('enhanced mode with MSH-15/MSH-16 values outside table 0155 (XX, al): an answer, not a silence', async () => {
    for (const [i, [a15, a16]] of [['XX', 'XX'], ['al', 'al'], ['', 'ZZ']].entries()) {
      const text = `MSH|^~\\&|ADT|GHH|PONT|fac-fields|20240116120000||ADT^A28^ADT_A05|ENH-${i}|P|2.5.1|||${a15}|${a16}\r${pid(`ENH${i}`, 'DOE')}\rPV1|1|N`;
      const answer = await Promise.race([rawSend(agent.port, Buffer.from(text)).then((m) => ack(m).code), new Promise((r) => setTimeout(() => r('silence'), 5000))]);
      expect(answer, `${a15}/${a16}`).not.toBe('silence');
    }
  });

  it("a NUL written as \\X00\\ in an ED's title (OBX-3.2, which no map reads) is AE naming it; the messages after it still reach Pont", async () => {
    const ed = `OBX|1|ED|PDF^Re\\X00\\port^L||^AP^PDF^Base64^JVBERi0xLjQK||||||F`;
    const a = ack(await client.sendAndWait(v2(m('ORU^R01^ORU_R01', 'ED-NUL'), pid('EDNUL', 'DOE'), 'OBR|1|EN1^OE|EN1^LAB|24323-8^CMP^LN|||20240116093000+0100||||||||||||||||||F', ed)));
    expect(ack(await client.sendAndWait(v2(m('ADT^A28^ADT_A05', 'ED-NUL-after'), pid('EDNUL-AFTER', 'DOE'), 'PV1|1|N'))).code).toBe('AA');
    await eventually(() => readOk('Patient', 'GHH-EDNUL-AFTER', 'fac-fields'));
    expect(a.code).toBe('AE');
    expect(a.err).toMatch(/OBX\^1\^3/);
  });

  it('bytes that are not UTF-8 in PID-5: AE naming PID-5', async () => {
    const body = Buffer.concat([Buffer.from(`${m('ADT^A28^ADT_A05', 'F-UTF')}\r${pid('FUTF', 'DO')}`), Buffer.from([0xc3, 0x28, 0xff]), Buffer.from('E\rPV1|1|N')]);
    const a = ack(await rawSend(agent.port, body));
    expect(a.code).toBe('AE');
    expect(a.err).toMatch(/PID/);
  });

  it('\\X..\\ bytes that are no UTF-8 (a lone C3) are refused, not stored as U+FFFD', async () => {
    const a = ack(await client.sendAndWait(v2(m('ADT^A28^ADT_A05', 'F-XC3'), pid('FXC3', 'DO\\XC3\\E'), 'PV1|1|N')));
    if (a.code === 'AA') {
      const p = await eventually(() => readOk('Patient', 'GHH-FXC3', 'fac-fields'));
      expect(p.name[0].family).not.toContain('\uFFFD');
    } else {
      expect(a.code).toBe('AE');
      expect(a.err).toMatch(/PID\^1\^5/);
    }
  });
});

describe('HL7 agent under attack: bursts and duplicates', () => {
  let agent: AgentProcess;
  let clients: Hl7Client[];
  const FAC = 'fac-burst';
  beforeAll(async () => {
    agent = await startAgent('org-burst', FAC, 'burst');
    clients = [0, 1].map(() => new Hl7Client({ host: '127.0.0.1', port: agent.port }));
    // Connected before the bursts (the stock client's concurrent first connect() is its own race, not the agent's).
    for (const [i, c] of clients.entries()) await c.sendAndWait(v2(`MSH|^~\\&|ADT|GHH|PONT|${FAC}|20240116120000||ADT^A28^ADT_A05|WARM-${i}|P|2.5.1`, pid(`WARM-${i}`, 'WARM'), 'PV1|1|N'));
  });
  afterAll(async () => {
    for (const c of clients ?? []) await c.close();
    await agent?.kill();
  });
  const m = (type: string, id: string, ...s: string[]) => v2(`MSH|^~\\&|ADT|GHH|PONT|${FAC}|20240116120000||${type}|${id}|P|2.5.1`, ...s);

  it('ten frames in one write on one connection (a pipelining sender): ten ACKs, in order', async () => {
    const texts = Array.from({ length: 10 }, (_, i) => `MSH|^~\\&|ADT|GHH|PONT|${FAC}|20240116120000||ADT^A28^ADT_A05|PIPE-${i}|P|2.5.1\r${pid('PIPE-1', 'PIPER')}\rPV1|1|N`);
    expect((await rawAnswers(agent.port, texts)).map((a) => `${a.code} ${a.id}`)).toEqual(Array.from({ length: 10 }, (_, i) => `AA PIPE-${i}`));
  });

  const text = (type: string, id: string, ...seg: string[]) => [`MSH|^~\\&|ADT|GHH|PONT|${FAC}|20240116120000||${type}|${id}|P|2.5.1`, ...seg].join('\r');
  it('the same new patient in 20 concurrent A28s on two connections: all AA, one Patient, nothing refused', async () => {
    const acks = await Promise.all([0, 1].map((c) => rawBurst(agent.port, Array.from({ length: 10 }, (_, i) => text('ADT^A28^ADT_A05', `B28-${c}-${i}`, pid('BURST-1', 'BURSTY'), 'PV1|1|N')))));
    expect(acks.flat()).toEqual(Array(20).fill('AA'));
    await eventually(() => readOk('Patient', 'GHH-BURST-1', FAC));
    const found = await pont.json('/api/fhir/R4/Patient?family=BURSTY', { headers: operator.headers });
    expect(found.body.entry?.length).toBe(1);
    await markerThrough(agent.port, FAC, 'B28-MARK'); // the agent forwards in order: the bursts' answers are in
    expect(agent.output()).not.toMatch(/refused/);
  });

  it('ten different new patients of the same demographics at once: each reaches Pont', async () => {
    const acks = await Promise.all([0, 1].map((c) => rawBurst(agent.port, Array.from({ length: 5 }, (_, i) => text('ADT^A28^ADT_A05', `TWIN-${c}-${i}`, pid(`TWIN-${c}-${i}`, 'TWINNING'), 'PV1|1|N')))));
    expect(acks.flat()).toEqual(Array(10).fill('AA'));
    await eventually(async () => {
      const found = await pont.json('/api/fhir/R4/Patient?family=TWINNING', { headers: operator.headers });
      expect(found.body.entry?.length).toBe(10);
    });
    expect(agent.output()).not.toMatch(/refused/);
  });

  it('A01 then A03 of 30 visits in a burst on two connections: every visit ends finished (the order of each visit\'s messages kept)', async () => {
    await Promise.all([0, 1].map(async (c) => {
      for (let i = c; i < 30; i += 2) {
        expect(ack(await clients[c]!.sendAndWait(m('ADT^A01^ADT_A01', `BV-A01-${i}`, pid(`BVP-${i}`, 'VISITOR'), visit(`BV-${i}`)))).code).toBe('AA');
        expect(ack(await clients[c]!.sendAndWait(m('ADT^A03^ADT_A03', `BV-A03-${i}`, pid(`BVP-${i}`, 'VISITOR'), visit(`BV-${i}`, undefined, '20240118093000+0100')))).code).toBe('AA');
      }
    }));
    await eventually(async () => {
      const statuses = await Promise.all(Array.from({ length: 30 }, async (_, i) => (await read(FAC, 'Encounter', `GHH-BV-${i}`)).body.status));
      expect(statuses).toEqual(Array(30).fill('finished'));
    });
  });

  it('one MSH-10 sent twice at once with other content on two connections: AA both, only one of them written', async () => {
    const [one, two] = await Promise.all([
      clients[0]!.sendAndWait(m('ADT^A28^ADT_A05', 'DUP-1', pid('DUP-P', 'FIRSTCOPY'), 'PV1|1|N')),
      clients[1]!.sendAndWait(m('ADT^A28^ADT_A05', 'DUP-1', pid('DUP-P', 'SECONDCOPY'), 'PV1|1|N')),
    ]);
    expect([ack(one).code, ack(two).code]).toEqual(['AA', 'AA']);
    const p = await eventually(() => readOk('Patient', 'GHH-DUP-P', FAC));
    await markerThrough(agent.port, FAC, 'DUP-MARK'); // both copies are behind it
    const history = await pont.json(`/api/fhir/R4/Patient/${p.id}/_history`, { headers: operator.headers });
    expect(history.body.total ?? history.body.entry.length).toBe(1);
  });
});

describe('HL7 agent under attack: what the queue keeps', () => {
  const FAC = 'fac-queue';
  const m = (app: string, id: string, ...seg: string[]) => v2(`MSH|^~\\&|${app}|GHH|PONT|${FAC}|20240116120000||ADT^A28^ADT_A05|${id}|P|2.5.1`, ...seg);

  it('a control id of 2,000 characters is taken (or refused) and the agent starts again on its queue', async () => {
    const agent = await startAgent('org-queue', FAC, 'queue-long');
    const client = new Hl7Client({ host: '127.0.0.1', port: agent.port });
    try {
      const a = ack(await client.sendAndWait(m('ADT', `L${'X'.repeat(2000)}`, pid('LONG-1', 'LONGID'), 'PV1|1|N')));
      expect(['AA', 'AE', 'AR']).toContain(a.code);
    } finally {
      await client.close();
      await agent.kill();
    }
    const again = await spawnAgent(agent.path, agent.port).catch((err: Error) => err);
    if (again instanceof Error) throw again;
    await again.kill();
  });

  it('a sending application (MSH-3) that starts with ">": a message Pont confirmed is not sent again after a restart (it would undo the later update)', async () => {
    const agent = await startAgent('org-queue', FAC, 'queue-gt');
    const client = new Hl7Client({ host: '127.0.0.1', port: agent.port });
    try {
      // Two messages in one write: one batch to Pont (a batch of its own would be answered again from Pont's copy).
      const text = (app: string, id: string, ...seg: string[]) => [`MSH|^~\\&|${app}|GHH|PONT|${FAC}|20240116120000||ADT^A28^ADT_A05|${id}|P|2.5.1`, ...seg].join('\r');
      expect(await rawBurst(agent.port, [text('>SYS', 'GT-1', pid('GT-1', 'OLDNAME'), 'PV1|1|N'), text('ADT', 'GT-1B', pid('GT-1B', 'OTHER'), 'PV1|1|N')])).toEqual(['AA', 'AA']);
      await eventually(async () => expect((await readOk('Patient', 'GHH-GT-1', FAC)).name[0].family).toBe('OLDNAME'));
      expect(ack(await client.sendAndWait(m('ADT', 'GT-2', pid('GT-1', 'NEWNAME'), 'PV1|1|N'))).code).toBe('AA');
      // In Pont: the agent's stop below confirms the batch on its way before its files close.
      await eventually(async () => expect((await readOk('Patient', 'GHH-GT-1', FAC)).name[0].family).toBe('NEWNAME'));
    } finally {
      await client.close();
      await agent.kill();
    }
    const again = await spawnAgent(agent.path, agent.port);
    try {
      const backlog = /"backlog":(\d+)/.exec(again.output())?.[1];
      // A message after the restart reaches Pont after whatever the agent sends first (in order).
      const client2 = new Hl7Client({ host: '127.0.0.1', port: again.port });
      expect(ack(await client2.sendAndWait(m('ADT', 'GT-3', pid('GT-3', 'MARKER'), 'PV1|1|N'))).code).toBe('AA');
      await client2.close();
      await eventually(() => readOk('Patient', 'GHH-GT-3', FAC));
      expect({ backlog, family: (await readOk('Patient', 'GHH-GT-1', FAC)).name[0].family }).toEqual({ backlog: '0', family: 'NEWNAME' });
    } finally {
      await again.kill();
    }
  });
});

describe('HL7 agent under attack: two agents of one facility', () => {
  it('the same new patients sent at once through two agents of one facility: all reach Pont, no 500, nothing refused', async () => {
    const FAC = 'fac-twin-agents';
    const [a, b] = await Promise.all([startAgent('org-twin', FAC, 'twin-a'), startAgent('org-twin', FAC, 'twin-b')]);
    try {
      const text = (id: string, mrn: string) => [`MSH|^~\\&|ADT|GHH|PONT|${FAC}|20240116120000||ADT^A28^ADT_A05|${id}|P|2.5.1`, pid(mrn, 'TWINAGENT'), 'PV1|1|N'].join('\r');
      const acks = await Promise.all([a, b].map((agent, n) => rawBurst(agent.port, Array.from({ length: 15 }, (_, i) => text(`TA-${n}-${i}`, `TA-${i}`)))));
      expect(acks.flat()).toEqual(Array(30).fill('AA'));
      await eventually(async () => {
        const found = await pont.json('/api/fhir/R4/Patient?family=TWINAGENT&_count=50', { headers: operator.headers });
        expect(found.body.entry?.length).toBe(15);
      });
      await Promise.all([a, b].map((agent, n) => markerThrough(agent.port, FAC, `TA-MARK-${n}`)));
      expect(a.output() + b.output()).not.toMatch(/forwarding to Pont failed|refused|"status":5\d\d/);
    } finally {
      await a.kill();
      await b.kill();
    }
  });
});

