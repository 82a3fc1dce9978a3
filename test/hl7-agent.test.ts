import { execFileSync } from 'node:child_process';
import { once } from 'node:events';
import { chmodSync, cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer as createHttpServer } from 'node:http';
import { connect, createServer, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Hl7Message } from '@medplum/core';
import { Hl7Client, ReturnAckCategory } from '@medplum/hl7';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAgent, listAgents } from '../src/auth/agents';
import { syncedId } from '../src/bridge/sync';
import { spawnAgentProcess, type AgentProcess } from './agent-process';
import { eventually } from './eventually';
import { createTestClient, freePort, pontCommand, runPont, startTestServer, type TestClient, type TestServer } from './harness';

/**
 * The HL7 v2 Bridge agent as a facility runs it (issue 45): `pont bridge-agent --config FILE` as a process of its
 * own, a laboratory system simulated by a stock MLLP client from npm (@medplum/hl7's Hl7Client), Pont reached only
 * through the Bridge API. Messages are built from the v2 standard's examples (2.5.1 ch. 2 and 7).
 */
const repoRoot = fileURLToPath(new URL('..', import.meta.url));
const FACILITY = 'fac-lab-1';

let pont: TestServer;
let operator: TestClient;
let credentials: Awaited<ReturnType<typeof createAgent>>;
let work: string;

beforeAll(async () => {
  pont = await startTestServer();
  credentials = await createAgent(pont.services.db, { organizationId: 'org-hospital', facilityId: FACILITY });
  operator = await createTestClient(pont, ['fhir:read'], { organizationId: 'org-operator', allPatients: true });
  work = mkdtempSync(join(tmpdir(), 'pont-hl7-'));
});
afterAll(async () => {
  await pont?.close();
  if (work) rmSync(work, { recursive: true, force: true });
});

function writeConfig(name: string, values: Record<string, unknown>, mode = 0o600): string {
  const file = join(work, name);
  writeFileSync(file, JSON.stringify(values));
  chmodSync(file, mode);
  return file;
}

async function configFor(queueName: string, extra: Record<string, unknown> = {}) {
  return {
    pont_url: pont.url,
    agent_id: credentials.agent_id,
    agent_key: credentials.agent_key,
    facility_id: FACILITY,
    mllp_host: '127.0.0.1',
    mllp_port: await freePort(),
    queue_dir: join(work, queueName),
    max_message_bytes: 1024 * 1024,
    ...extra,
  };
}

async function startAgentProcess(config: Record<string, unknown>, file = `agent-${config.mllp_port}.json`, env: Record<string, string> = {}): Promise<AgentProcess> {
  return spawnAgentProcess(writeConfig(file, config), config.mllp_port as number, env);
}

const v2 = (...segments: string[]) => Hl7Message.parse(segments.join('\r'));
const msh = (type: string, id: string, version = '2.5.1', extra = '') => `MSH|^~\\&|LAB|GHH LAB|PONT|${FACILITY}|20240116120000||${type}|${id}|P|${version}${extra}`;
const PID = 'PID|1||PATID1234^^^GHH^MR~123456789^^^USSSA^SS||EVERYWOMAN^EVE^E^^^^A~O\\T\\BRIEN^EVE^E^^^^L||19620320|F|||153 FERNWOOD DR.^^STATESVILLE^OH^35292^USA';
const pv1 = (extra = '') => `PV1|1|I|2000^2012^01||||004777^ATTEND^AARON^A|||SUR||||ADM|A0||||V1001^^^GHH${extra}`;
const ack = (m: Hl7Message) => ({
  code: m.getSegment('MSA')?.getField(1)?.toString(),
  controlId: m.getSegment('MSA')?.getField(2)?.toString(),
  err: m.getSegment('ERR')?.toString(),
  version: m.getSegment('MSH')?.getField(12)?.toString(),
});

const read = (type: string, sourceId: string) => pont.json(`/api/fhir/R4/${type}/${syncedId(FACILITY, type, sourceId)}`, { headers: operator.headers });
const readOk = async (type: string, sourceId: string) => {
  const res = await read(type, sourceId);
  expect(res.status).toBe(200);
  return res.body;
};

describe('pont bridge-agent: the config file', () => {
  it('a missing or invalid key: exit 1 naming it; a file others may read: refused', async () => {
    const good = await configFor('q-config');
    const { mllp_port: _p, ...missing } = good;
    let r = await runPont({}, 'bridge-agent', '--config', writeConfig('missing.json', missing));
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/mllp_port is missing/);
    r = await runPont({}, 'bridge-agent', '--config', writeConfig('bad.json', { ...good, max_message_bytes: 'lots' }));
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/max_message_bytes must be an integer/);
    r = await runPont({}, 'bridge-agent', '--config', writeConfig('open.json', good, 0o644));
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/others may read it .*chmod 600/);
  });

  // Found by an outside review: a port in use was `cannot start: listen EADDRINUSE: …`, naming no key and no fix.
  it('an mllp_port in use, a queue_dir that cannot be made, a maps directory without a v2 map: exit 1 naming the key (or the map) and the fix', async () => {
    const good = await configFor('q-in-use');
    const taken = createServer();
    await new Promise<void>((resolve) => taken.listen(good.mllp_port, '127.0.0.1', resolve));
    try {
      const r = await runPont({}, 'bridge-agent', '--config', writeConfig('in-use.json', good));
      expect(r.code).toBe(1);
      expect(r.stderr).toBe(`pont bridge-agent: cannot start: mllp_port: 127.0.0.1:${good.mllp_port} is in use by another process (EADDRINUSE); fix: set another mllp_port, or stop what listens there\n`);
    } finally {
      taken.close();
    }
    const file = join(work, 'a-file');
    writeFileSync(file, '');
    const r = await runPont({}, 'bridge-agent', '--config', writeConfig('queue.json', { ...good, queue_dir: join(file, 'queue') }));
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/^pont bridge-agent: cannot start: queue_dir: cannot make the directory .*a-file\/queue or write in it \(E[A-Z]+\); fix: [^\n]+\n$/);
    // A facility's own copy of mappings/ from before a v2 map was added: refused at start, naming it, not AE later.
    const maps = join(work, 'old-maps');
    cpSync(join(repoRoot, 'mappings'), maps, { recursive: true });
    rmSync(join(maps, 'v2-specimen.map.yaml'));
    rmSync(join(maps, 'v2-specimen.examples.yaml'));
    const old = await runPont({ PONT_MAPPINGS_DIR: maps }, 'bridge-agent', '--config', writeConfig('old-maps.json', good));
    expect(old.code).toBe(1);
    expect(old.stderr).toMatch(/^pont bridge-agent: cannot start: the maps directory .*old-maps has no v2-specimen\.map\.yaml, which the agent reads: copy it from Pont's mappings\/\n$/);
  });
});

describe('pont bridge-agent: MLLP in, FHIR in Pont', () => {
  let agent: AgentProcess;
  let client: Hl7Client;
  beforeAll(async () => {
    agent = await startAgentProcess(await configFor('q-main'));
    client = new Hl7Client({ host: '127.0.0.1', port: agent.port });
  });
  afterAll(async () => {
    await client?.close();
    await agent?.kill();
  });

  it('ADT^A01: AA in the message version; the Patient (legal name official, escapes undone) and its Encounter appear', async () => {
    const reply = await client.sendAndWait(v2(msh('ADT^A01^ADT_A01', 'ADT-1', '2.4'), 'EVN|A01|20240115083000', PID, pv1()));
    expect(ack(reply)).toMatchObject({ code: 'AA', controlId: 'ADT-1', version: '2.4' });
    const patient = await eventually(() => readOk('Patient', 'GHH-PATID1234'));
    expect(patient.name[0]).toEqual({ use: 'official', family: 'O&BRIEN', given: ['EVE', 'E'] });
    expect(patient.identifier).toEqual(expect.arrayContaining([expect.objectContaining({ value: 'PATID1234', assigner: { display: 'GHH' } })]));
    expect(patient.gender).toBe('female');
    const encounter = await eventually(() => readOk('Encounter', 'GHH-V1001'));
    expect(encounter).toMatchObject({ status: 'in-progress', class: { code: 'IMP' }, subject: { reference: `Patient/${patient.id}` } });
    // Where and who, as PV1-3 and PV1-7 say: point of care, room and bed; the attending doctor by name and id.
    expect(encounter.location.map((l: any) => [l.physicalType?.coding[0].code, l.location.display])).toEqual([[undefined, '2000'], ['ro', '2012'], ['bd', '01']]);
    expect(encounter.participant).toEqual([expect.objectContaining({ individual: { display: 'AARON ATTEND', identifier: { value: '004777' } } })]);
  });

  it('ADT^A03 finishes the A01 Encounter; A08 replaces the demographics', async () => {
    const discharge = `${pv1()}${'|'.repeat(25)}20240115083000+0100|20240118093000+0100`;
    expect(ack(await client.sendAndWait(v2(msh('ADT^A03^ADT_A03', 'ADT-2'), 'EVN|A03|20240118093000', PID, discharge))).code).toBe('AA');
    await eventually(async () => expect(await readOk('Encounter', 'GHH-V1001')).toMatchObject({ status: 'finished', period: { end: '2024-01-18T09:30:00+01:00' } }));
    const a08 = PID.replace('O\\T\\BRIEN^EVE^E', 'SMITH^EVE^E');
    expect(ack(await client.sendAndWait(v2(msh('ADT^A08^ADT_A01', 'ADT-3'), 'EVN|A08|20240119100000', a08, 'PV1|1|I'))).code).toBe('AA');
    await eventually(async () => expect((await readOk('Patient', 'GHH-PATID1234')).name[0].family).toBe('SMITH'));
  });

  it("a feed's other ADT events reach Pont: a transfer moves the visit, a cancelled admission cancels it, a person update renames the patient (found in a review of the agent's leftovers: AR, the visit left as it was)", async () => {
    const pid = 'PID|1||PATID5678^^^GHH^MR||TRANSFER^TOM^^^^^L||19700101|M';
    const visit = (id: string, place = '2000^2012^01', end = '') => `PV1|1|I|${place}||||004777^ATTEND^AARON^A|||SUR||||ADM|A0||||${id}^^^GHH${'|'.repeat(25)}20240115083000+0100|${end}`;
    const send = async (event: string, id: string, ...segments: string[]) => expect(ack(await client.sendAndWait(v2(msh(`ADT^${event}^ADT_A01`, id), ...segments))).code, event).toBe('AA');
    await send('A01', 'EVT-1', pid, visit('VX1'));
    await send('A02', 'EVT-2', pid, visit('VX1', '3000^3104^02'));
    await eventually(async () => expect((await readOk('Encounter', 'GHH-VX1')).location[0].location.display).toBe('3000'));
    await send('A03', 'EVT-3', pid, visit('VX1', '3000^3104^02', '20240118093000+0100'));
    await eventually(async () => expect((await readOk('Encounter', 'GHH-VX1')).status).toBe('finished'));
    await send('A11', 'EVT-5', pid, visit('VX2'));
    await eventually(async () => expect((await readOk('Encounter', 'GHH-VX2')).status).toBe('cancelled'));
    await send('A31', 'EVT-6', pid.replace('TRANSFER^TOM', 'TRANSFER^THOMAS'), 'PV1|1|N||||||||||||||||||VX3^^^GHH');
    await eventually(async () => expect((await readOk('Patient', 'GHH-PATID5678')).name[0].given).toEqual(['THOMAS']));
    // A person update's PV1 is no visit.
    expect((await read('Encounter', 'GHH-VX3')).status).toBe(404);
  });

  it('ORU^R01: a DiagnosticReport and its Observations (NM, SN with comparator, CWE, ST with escapes; ranges, flags); a correction (OBX-11 C) updates, never duplicates', async () => {
    const obr = (status: string) => `OBR|1|845439^GHH OE|1045813^GHH LAB|24323-8^Comprehensive metabolic panel^LN|||20240116093000+0100||||||||||||||||||${status}`;
    const results = (glucose: string, status: string) => [
      `OBX|1|NM|2345-7^Glucose^LN||${glucose}|mg/dL^^UCUM|70-99|H|||${status}`,
      `OBX|2|SN|1988-5^C reactive protein^LN||<^5|mg/L|negative|N|||${status}`,
      `OBX|3|CWE|600-7^Bacteria identified^LN||3092008^Staphylococcus aureus^SCT||||||${status}`,
      `OBX|4|ST|5778-6^Color of Urine^LN||Yellow\\S\\amber \\T\\ clear||||||${status}`,
      `OBX|5|NM|2951-2^Sodium^LN||140|mmol/L|>135||||${status}`,
    ];
    const reply = await client.sendAndWait(v2(msh('ORU^R01^ORU_R01', 'LAB-1'), PID, obr('F'), ...results('182', 'F')));
    expect(ack(reply)).toMatchObject({ code: 'AA', err: undefined });
    const report = await eventually(() => readOk('DiagnosticReport', 'GHH-LAB-1045813'));
    expect(report.status).toBe('final');
    expect(report.category[0].coding[0].code).toBe('LAB');
    expect(report.result).toHaveLength(5);
    const glucose = await readOk('Observation', 'GHH-LAB-1045813-2345-7');
    expect(glucose).toMatchObject({
      status: 'final',
      valueQuantity: { value: 182, unit: 'mg/dL', system: 'http://unitsofmeasure.org', code: 'mg/dL' },
      referenceRange: [{ low: { value: 70 }, high: { value: 99 } }],
      interpretation: [{ coding: [{ code: 'H' }] }],
      category: [{ coding: [{ code: 'laboratory' }] }],
    });
    expect((await readOk('Observation', 'GHH-LAB-1045813-1988-5')).valueQuantity).toEqual({ value: 5, comparator: '<', unit: 'mg/L' });
    expect((await readOk('Observation', 'GHH-LAB-1045813-600-7')).valueCodeableConcept.coding[0]).toEqual({ system: 'http://snomed.info/sct', code: '3092008', display: 'Staphylococcus aureus' });
    expect((await readOk('Observation', 'GHH-LAB-1045813-5778-6')).valueString).toBe('Yellow^amber & clear');
    expect((await readOk('Observation', 'GHH-LAB-1045813-2951-2')).referenceRange).toEqual([{ low: { value: 135 } }]);

    expect(ack(await client.sendAndWait(v2(msh('ORU^R01^ORU_R01', 'LAB-2'), PID, obr('C'), ...results('128', 'C')))).code).toBe('AA');
    await eventually(async () => expect(await readOk('Observation', 'GHH-LAB-1045813-2345-7')).toMatchObject({ status: 'corrected', valueQuantity: { value: 128 } }));
    const patient = await readOk('Patient', 'GHH-PATID1234');
    const all = await pont.json(`/api/fhir/R4/Observation?subject=Patient/${patient.id}&code=2345-7&_total=accurate`, { headers: operator.headers });
    expect(all.body.total ?? all.body.entry.length).toBe(1);
  });

  it('ADT^A40: the survivor `replaces` the record MRG-1 names, which becomes inactive and `replaced-by` it; what referred to it moves to the survivor', async () => {
    const old = 'PID|1||PATID9999^^^GHH^MR||EVERYWOMAN^EVIE^^^^^L||19620320|F';
    expect(ack(await client.sendAndWait(v2(msh('ADT^A04^ADT_A01', 'MRG-0'), old, 'PV1|1|O|||||||||||||||||V2002^^^GHH'))).code).toBe('AA');
    const result = 'OBX|1|NM|2345-7^Glucose^LN||95|mg/dL|70-99||||F';
    expect(ack(await client.sendAndWait(v2(msh('ORU^R01^ORU_R01', 'MRG-R'), old, 'OBR|1|M1^OE|M1^LAB|24323-8^CMP^LN|||20240116093000+0100||||||||||||||||||F', result))).code).toBe('AA');
    const before = await eventually(() => readOk('Observation', 'LAB-M1-2345-7'));
    const merge = v2(msh('ADT^A40^ADT_A39', 'MRG-1'), 'EVN|A40|20240120090000', PID, 'MRG|PATID9999^^^GHH^MR');
    expect(ack(await client.sendAndWait(merge)).code).toBe('AA');
    const survivor = await readOk('Patient', 'GHH-PATID1234');
    await eventually(async () => expect((await readOk('Patient', 'GHH-PATID9999'))).toMatchObject({ active: false, link: [{ type: 'replaced-by', other: { reference: `Patient/${survivor.id}` } }] }));
    const merged = await readOk('Patient', 'GHH-PATID9999');
    await eventually(async () => expect((await readOk('Patient', 'GHH-PATID1234')).link).toEqual([{ type: 'replaces', other: { reference: `Patient/${merged.id}` } }]));
    // What referred to the merged record now refers to the survivor.
    expect(before.subject.reference).toBe(`Patient/${merged.id}`);
    await eventually(async () => expect((await readOk('Observation', 'LAB-M1-2345-7')).subject.reference).toBe(`Patient/${survivor.id}`));
    await eventually(async () => expect((await readOk('DiagnosticReport', 'LAB-M1')).subject.reference).toBe(`Patient/${survivor.id}`));
  });

  it('the survivor keeps every merge: a later A08 of it and a second A40 into it add to its links, never replace them', async () => {
    const link = (sourceId: string) => readOk('Patient', sourceId).then((p) => ({ type: 'replaces', other: { reference: `Patient/${p.id}` } }));
    const first = await link('GHH-PATID9999');
    expect(ack(await client.sendAndWait(v2(msh('ADT^A08^ADT_A01', 'MRG-2'), 'EVN|A08|20240121090000', PID.replace('STATESVILLE', 'DAYTON')))).code).toBe('AA');
    await eventually(async () => expect((await readOk('Patient', 'GHH-PATID1234')).address[0].city).toBe('DAYTON'));
    expect((await readOk('Patient', 'GHH-PATID1234')).link).toEqual([first]);
    expect(ack(await client.sendAndWait(v2(msh('ADT^A04^ADT_A01', 'MRG-3'), 'PID|1||PATID8888^^^GHH^MR||EVERYWOMAN^E^^^^^L||19620320|F'))).code).toBe('AA');
    await eventually(() => readOk('Patient', 'GHH-PATID8888'));
    expect(ack(await client.sendAndWait(v2(msh('ADT^A40^ADT_A39', 'MRG-4'), 'EVN|A40|20240122090000', PID, 'MRG|PATID8888^^^GHH^MR'))).code).toBe('AA');
    const second = await link('GHH-PATID8888');
    await eventually(async () => expect((await readOk('Patient', 'GHH-PATID1234')).link).toEqual(expect.arrayContaining([first, second])));
    expect((await readOk('Patient', 'GHH-PATID1234')).link).toHaveLength(2);
  });

  it('a resent MSH-10 gets AA and changes nothing', async () => {
    const before = await readOk('Observation', 'GHH-LAB-1045813-2345-7');
    const resend = v2(msh('ORU^R01^ORU_R01', 'LAB-1'), PID, 'OBR|1|845439^GHH OE|1045813^GHH LAB|24323-8^CMP^LN|||||||||||||||||||||F', 'OBX|1|NM|2345-7^Glucose^LN||999|mg/dL|70-99|H|||F');
    expect(ack(await client.sendAndWait(resend)).code).toBe('AA');
    // The next message is forwarded after it would have been: once it is in, the resend was not.
    expect(ack(await client.sendAndWait(v2(msh('ADT^A08^ADT_A01', 'ADT-4'), PID.replace('19620320', '19620321')))).code).toBe('AA');
    await eventually(async () => expect((await readOk('Patient', 'GHH-PATID1234')).birthDate).toBe('1962-03-21'));
    expect((await readOk('Observation', 'GHH-LAB-1045813-2345-7')).meta.versionId).toBe(before.meta.versionId);
  });

  it('an ORU names its patient and changes nothing of them: the admission’s demographics stay when a result comes with a thin PID', async () => {
    const full = 'PID|1||PAT-THIN^^^GHH^MR||THIN^TOM^^^^^L||19550505|M|||1 MAIN ST^^OSLO^^0150^NOR';
    expect(ack(await client.sendAndWait(v2(msh('ADT^A04^ADT_A01', 'THIN-1'), full))).code).toBe('AA');
    await eventually(async () => expect(await readOk('Patient', 'GHH-PAT-THIN')).toMatchObject({ birthDate: '1955-05-05', gender: 'male' }));
    const result = v2(msh('ORU^R01^ORU_R01', 'THIN-2'), 'PID|1||PAT-THIN^^^GHH^MR||THIN^TOM', 'OBR|1|T1^OE|T1^LAB|24323-8^CMP^LN|||20240116093000+0100||||||||||||||||||F', 'OBX|1|NM|2345-7^Glucose^LN||101|mg/dL|70-99|H|||F');
    expect(ack(await client.sendAndWait(result)).code).toBe('AA');
    await eventually(() => readOk('Observation', 'LAB-T1-2345-7'));
    expect(await readOk('Patient', 'GHH-PAT-THIN')).toMatchObject({ birthDate: '1955-05-05', gender: 'male', address: [{ city: 'OSLO' }], name: [{ use: 'official', family: 'THIN' }] });
  });

  it('an ORU for a patient no admission named yet creates them from its PID', async () => {
    const result = v2(msh('ORU^R01^ORU_R01', 'NEW-ORU-1'), 'PID|1||PAT-ORU-ONLY^^^GHH^MR||ONLY^OLA^^^^^L||19800101|F', 'OBR|1|T2^OE|T2^LAB|24323-8^CMP^LN|||20240116093000+0100||||||||||||||||||F', 'OBX|1|NM|2345-7^Glucose^LN||90|mg/dL|70-99|N|||F');
    expect(ack(await client.sendAndWait(result)).code).toBe('AA');
    await eventually(async () => expect(await readOk('Patient', 'GHH-PAT-ORU-ONLY')).toMatchObject({ birthDate: '1980-01-01', name: [{ family: 'ONLY' }] }));
    expect((await readOk('Observation', 'LAB-T2-2345-7')).subject.reference).toMatch(/^Patient\//);
  });

  it('an ORU whose PV1 names a visit no admission announced creates that visit, never changes a known one, and its results reach Pont', async () => {
    const oru = (id: string, pv1: string, value: string) =>
      v2(msh('ORU^R01^ORU_R01', id), PID, pv1, `OBR|1|${id}^OE|${id}^LAB|24323-8^CMP^LN|||20240116093000+0100||||||||||||||||||F`, `OBX|1|NM|2345-7^Glucose^LN||${value}|mg/dL|70-99|N|||F`);
    // An outpatient visit the laboratory knows and the admission system never sent, and one without its class.
    expect(ack(await client.sendAndWait(oru('VIS-1', 'PV1|1|O|LABDRAW||||||||||||||||V7001^^^GHH', '91'))).code).toBe('AA');
    expect(ack(await client.sendAndWait(oru('VIS-2', 'PV1|1||||||||||||||||||V7002^^^GHH', '92'))).code).toBe('AA');
    const first = await eventually(() => readOk('Observation', 'LAB-VIS-1-2345-7'));
    const visit = await readOk('Encounter', 'GHH-V7001');
    expect(first.encounter.reference).toBe(`Encounter/${visit.id}`);
    expect(visit).toMatchObject({ class: { code: 'AMB' }, subject: { reference: first.subject.reference } });
    expect((await eventually(() => readOk('Observation', 'LAB-VIS-2-2345-7'))).encounter.reference).toBe(`Encounter/${(await readOk('Encounter', 'GHH-V7002')).id}`);
    // The admitted visit V1001 (inpatient, attending ATTEND) is named by a result with a thin PV1: it stays as it was.
    const admitted = await readOk('Encounter', 'GHH-V1001');
    expect(ack(await client.sendAndWait(oru('VIS-3', 'PV1|1|O|||||||||||||||||V1001^^^GHH', '93'))).code).toBe('AA');
    await eventually(() => readOk('Observation', 'LAB-VIS-3-2345-7'));
    expect((await readOk('Encounter', 'GHH-V1001')).meta.versionId).toBe(admitted.meta.versionId);
  });

  it('a message is written whole or not at all: a result naming another patient\'s visit writes none of the message (found by an outside probe: half of it was written)', async () => {
    // V9001 is PAT-OWN-1's admission; the result is PAT-OTHER-1's. Pont refuses what names the visit of another patient.
    expect(ack(await client.sendAndWait(v2(msh('ADT^A01^ADT_A01', 'XPAT-ADT'), 'EVN|A01|20240115083000', 'PID|1||PAT-OWN-1^^^GHH^MR||OWN^ODA^^^^^L||19750101|F', 'PV1|1|I|2000^2012^01||||||||||||||||V9001^^^GHH'))).code).toBe('AA');
    await eventually(() => readOk('Encounter', 'GHH-V9001'));
    const other = v2(msh('ORU^R01^ORU_R01', 'XPAT-1'), 'PID|1||PAT-OTHER-1^^^GHH^MR||OTHER^OTTO^^^^^L||19700101|M', 'PV1|1|O|||||||||||||||||V9001^^^GHH', 'OBR|1|XP1^OE|XP1^LAB|24323-8^CMP^LN|||20240116093000+0100||||||||||||||||||F', 'OBX|1|NM|2345-7^Glucose^LN||90|mg/dL|70-99|N|||F', 'OBX|2|NM|2951-2^Sodium^LN||140|mmol/L|135-145|N|||F');
    expect(ack(await client.sendAndWait(other)).code).toBe('AA');
    // A message after it reaches Pont after it (the backlog goes in order): by then it has been answered.
    const after = v2(msh('ORU^R01^ORU_R01', 'XPAT-2'), 'PID|1||PAT-OWN-1^^^GHH^MR', 'OBR|1|XP2^OE|XP2^LAB|24323-8^CMP^LN|||20240116093000+0100||||||||||||||||||F', 'OBX|1|NM|2345-7^Glucose^LN||91|mg/dL|70-99|N|||F');
    expect(ack(await client.sendAndWait(after)).code).toBe('AA');
    await eventually(() => readOk('DiagnosticReport', 'LAB-XP2'));
    const written = await Promise.all([read('Patient', 'GHH-PAT-OTHER-1'), read('DiagnosticReport', 'LAB-XP1'), read('Observation', 'LAB-XP1-2345-7'), read('Observation', 'LAB-XP1-2951-2')]);
    expect(written.map((r) => r.status)).toEqual([404, 404, 404, 404]);
    // Said by the agent once Pont's answer reaches it (Pont may show the next message before).
    await eventually(() => expect(agent.output()).toMatch(/Pont refused a resource of a message.*XPAT-1/));
  });

  it('lines of one code without a sub-id (a narrative, a culture) are each an Observation, told apart by their set id; a code given once keeps its id', async () => {
    const lines = ['OBX|1|TX|664-3^Gram stain^LN||Gram positive cocci||||||F', 'OBX|2|TX|664-3^Gram stain^LN||in clusters||||||F', 'OBX|3|TX|664-3^Gram stain^LN||few white cells||||||F', 'OBX|4|NM|2345-7^Glucose^LN||99|mg/dL|70-99|N|||F'];
    expect(ack(await client.sendAndWait(v2(msh('ORU^R01^ORU_R01', 'NARR-1'), PID, 'OBR|1|N1^OE|N1^LAB|664-3^Gram stain^LN|||20240116093000+0100||||||||||||||||||F', ...lines))).code).toBe('AA');
    const report = await eventually(() => readOk('DiagnosticReport', 'LAB-N1'));
    expect(new Set(report.result.map((r: any) => r.reference)).size).toBe(4);
    expect((await Promise.all([1, 2, 3].map((n) => readOk('Observation', `LAB-N1-664-3-${n}`)))).map((o) => o.valueString)).toEqual(['Gram positive cocci', 'in clusters', 'few white cells']);
    expect((await readOk('Observation', 'LAB-N1-2345-7')).valueQuantity.value).toBe(99);
  });

  it('a message Pont could never take whole (1,200 results: more than a batch holds) is AR at once, not AA then lost', async () => {
    const obx = Array.from({ length: 1200 }, (_, i) => `OBX|${i + 1}|NM|X${i}^Analyte ${i}^L||${i}|mg/dL|||||F`);
    const a = ack(await client.sendAndWait(v2(msh('ORU^R01^ORU_R01', 'MANY-1'), PID, 'OBR|1|M1^OE|MANY1^LAB|24323-8^CMP^LN|||20240116093000+0100||||||||||||||||||F', ...obx), { timeoutMs: 30_000 }));
    expect(a.code).toBe('AR');
    expect(a.err).toMatch(/more than 1000 resources/);
    expect(ack(await client.sendAndWait(v2(msh('ADT^A08^ADT_A01', 'AFTER-MANY'), PID))).code).toBe('AA');
  });

  it('an SN range or ratio (^10^-^20, ^1^:^128) reaches Pont as a Range or a Ratio, =^5 as 5; a form FHIR has no value for (^2^+) is AE naming OBX-5, never stored as its first number', async () => {
    const sn = (id: string, value: string, unit = '') => v2(msh('ORU^R01^ORU_R01', id), PID, `OBR|1|${id}^OE|${id}^LAB|24323-8^CMP^LN|||20240116093000+0100||||||||||||||||||F`, `OBX|1|SN|5196-1^HBsAg^LN||${value}|${unit}||A|||F`);
    for (const [id, value, unit] of [['SN-1', '^10^-^20', 'mg/dL'], ['SN-2', '^1^:^128', ''], ['SN-3', '=^5', 'mg/dL']]) expect(ack(await client.sendAndWait(sn(id!, value!, unit))).code, id).toBe('AA');
    const a = ack(await client.sendAndWait(sn('SN-4', '^2^+')));
    expect(a.code).toBe('AE');
    expect(a.err).toMatch(/OBX\^1\^5/);
    expect(await eventually(() => readOk('Observation', 'LAB-SN-3-5196-1'))).toMatchObject({ valueQuantity: { value: 5, unit: 'mg/dL' } });
    expect(await readOk('Observation', 'LAB-SN-1-5196-1')).toMatchObject({ valueRange: { low: { value: 10, unit: 'mg/dL' }, high: { value: 20, unit: 'mg/dL' } } });
    expect((await readOk('Observation', 'LAB-SN-2-5196-1')).valueRatio).toEqual({ numerator: { value: 1 }, denominator: { value: 128 } });
    expect((await read('Observation', 'LAB-SN-4-5196-1')).status).toBe(404);
  });

  it('what an outside laboratory integrator found lost reaches Pont: a birth month, phones and an email, two flags, a date-time result', async () => {
    const pid = 'PID|1||PAT-LOST^^^GHH^MR||LOST^LENA^^^^^L||198005|F|||||^PRN^PH^^^555^5551234~^NET^Internet^lena@example.org|^WPN^PH^^^^^^^^^5552000';
    expect(ack(await client.sendAndWait(v2(msh('ADT^A04^ADT_A01', 'LOST-1'), pid))).code).toBe('AA');
    const obr = 'OBR|1|LOST1^OE|LOST1^LAB|24323-8^CMP^LN|||20240116093000+0100||||||||||||||||||F';
    const obx = ['OBX|1|NM|2345-7^Glucose^LN||182|mg/dL|70-99|H~A|||F', 'OBX|2|TS|11778-8^Delivery date^LN||20261127083000+0100||||||F'];
    expect(ack(await client.sendAndWait(v2(msh('ORU^R01^ORU_R01', 'LOST-2'), pid, obr, ...obx))).code).toBe('AA');
    const glucose = await eventually(() => readOk('Observation', 'LAB-LOST1-2345-7'));
    expect(glucose.interpretation.map((i: any) => i.coding[0].code)).toEqual(['H', 'A']);
    expect((await readOk('Observation', 'LAB-LOST1-11778-8')).valueDateTime).toBe('2026-11-27T08:30:00+01:00');
    expect(await readOk('Patient', 'GHH-PAT-LOST')).toMatchObject({
      birthDate: '1980-05',
      telecom: [
        { system: 'phone', value: '555 5551234', use: 'home' },
        { system: 'email', value: 'lena@example.org', use: 'home' },
        { system: 'phone', value: '5552000', use: 'work' },
      ],
    });
  });

  it("what a report says of itself and who made its results reaches Pont: its comment, numbers, issue time and interpreter; each result's performers, method, amended status and a range with its unit", async () => {
    const obr = 'OBR|1|845439^GHH OE|REP1^GHH LAB|24323-8^CMP^LN|||20240116093000+0100|||||||||||||||20240116143000+0100|||F|||||||D456&JONES&ROBERT';
    const obx = 'OBX|1|NM|2823-3^Potassium^LN||4.1|mmol/L|3.5-5.0 mmol/L||||A|||20240116093000+0100||D123^SMITH^JANE|ISE^Ion-selective electrode^99MTH||||||GHH Central Laboratory^L^^^^CLIA&2.16.840.1.113883.4.7&ISO^XX^^^05D0897628';
    const spm = 'SPM|1|^AC123&GHH LAB||119297000^Blood specimen^SCT|||||||||||||20240116080000+0100|||||||HEM^Hemolyzed^HL70493';
    const volume = 'OBX|1|NM|9999-1^Specimen volume^LN||5|mL|||||F';
    expect(ack(await client.sendAndWait(v2(msh('ORU^R01^ORU_R01', 'REP-1'), PID, obr, 'NTE|1|L|Specimen hemolysed', obx, spm, volume))).code).toBe('AA');
    const report = await eventually(() => readOk('DiagnosticReport', 'GHH-LAB-REP1'));
    expect(report).toMatchObject({ conclusion: 'Specimen hemolysed', issued: '2024-01-16T14:30:00+01:00', resultsInterpreter: [{ display: 'ROBERT JONES', identifier: { value: 'D456' } }] });
    expect(report.identifier.map((i: any) => [i.type.coding[0].code, i.value])).toEqual([['PLAC', '845439'], ['FILL', 'REP1']]);
    const k = await readOk('Observation', 'GHH-LAB-REP1-2823-3');
    expect(k).toMatchObject({ status: 'amended', method: { coding: [{ code: 'ISE' }] }, referenceRange: [{ low: { value: 3.5 }, high: { value: 5 }, text: '3.5-5.0 mmol/L' }] });
    expect(k.performer.map((p: any) => p.display).sort()).toEqual(['GHH Central Laboratory', 'JANE SMITH']);
    // The specimen (SPM): a Specimen the report and the result name, in Pont's ids; the OBX after it a fact of it, none of the report's results.
    const specimen = await readOk('Specimen', 'GHH-LAB-AC123');
    expect(specimen).toMatchObject({ type: { coding: [{ code: '119297000' }] }, collection: { collectedDateTime: '2024-01-16T08:00:00+01:00' }, condition: [{ coding: [{ code: 'HEM' }] }] });
    expect(report.specimen).toEqual([{ reference: `Specimen/${specimen.id}` }]);
    expect(k.specimen).toEqual({ reference: `Specimen/${specimen.id}` });
    const fact = await readOk('Observation', 'GHH-LAB-REP1-9999-1-S1');
    expect(fact).toMatchObject({ focus: [{ reference: `Specimen/${specimen.id}` }], specimen: { reference: `Specimen/${specimen.id}` } });
    expect(report.result).toHaveLength(1);
  });

  it('an ORU of two patients (two PATIENT_RESULT groups): each result reaches Pont under its own patient (found by a review: all were filed under the first)', async () => {
    const group = (n: number, value: string) => [`PID|${n}||TWO-${n}^^^GHH^MR||TWO^PAT${n}^^^^^L||1980010${n}|F`, `OBR|1|TWO${n}^OE|TWO${n}^LAB|24323-8^CMP^LN|||20240116093000+0100||||||||||||||||||F`, `OBX|1|NM|2345-7^Glucose^LN||${value}|mmol/L|||||F`];
    expect(ack(await client.sendAndWait(v2(msh('ORU^R01^ORU_R01', 'TWO-1'), ...group(1, '5.6'), ...group(2, '12.0')))).code).toBe('AA');
    for (const n of [1, 2]) {
      const patient = await eventually(() => readOk('Patient', `GHH-TWO-${n}`));
      const result = await readOk('Observation', `LAB-TWO${n}-2345-7`);
      expect(result.subject).toEqual({ reference: `Patient/${patient.id}` });
    }
  });

  it('two authorities known only by their OIDs are two patients, and so are numbers that differ only in a slash or a space', async () => {
    const a04 = (id: string, pid3: string, family: string) => v2(msh('ADT^A04^ADT_A01', id), `PID|1||${pid3}||${family}^ANN^^^^^L||19700101|F`);
    for (const [id, pid3, family] of [['OID-1', '12345^^^&1.2.840.10001&ISO', 'NORTH'], ['OID-2', '12345^^^&1.2.840.20002&ISO', 'SOUTH'], ['SEP-1', '00/77^^^GHH', 'SLASH'], ['SEP-2', '00 77^^^GHH', 'SPACE']])
      expect(ack(await client.sendAndWait(a04(id!, pid3!, family!))).code).toBe('AA');
    // The agent forwards in order: once the last message's patient is in Pont, so are the others'.
    await eventually(async () => {
      const families = await pont.json(`/api/fhir/R4/Patient?family=SLASH,SPACE&_count=10`, { headers: operator.headers });
      expect((families.body.entry ?? []).map((e: any) => e.resource.name[0].family).sort()).toEqual(['SLASH', 'SPACE']);
    });
    expect((await readOk('Patient', '1.2.840.20002-12345')).name[0].family).toBe('SOUTH');
    expect((await readOk('Patient', '1.2.840.10001-12345')).name[0].family).toBe('NORTH');
  });

  it('the patient is their medical record number whatever the order of PID-3’s repetitions (found by an outside probe: a result with SS~MR made a second patient)', async () => {
    expect(ack(await client.sendAndWait(v2(msh('ADT^A04^ADT_A01', 'ORDER-1'), 'PID|1||D600^^^GHH^MR||DELTA^DIANA^^^^^L||19800202|F'))).code).toBe('AA');
    const oru = v2(
      msh('ORU^R01^ORU_R01', 'ORDER-2'),
      'PID|1||111-22-3333^^^USSSA^SS~D600^^^GHH^MR||DELTA^DIANA||19800202|F',
      'OBR|1|ORD2^OE|ORD2^LAB|24323-8^CMP^LN|||20240116093000+0100||||||||||||||||||F',
      'OBX|1|NM|2345-7^Glucose^LN||6.1|mmol/L|3.9-5.5|H|||F',
    );
    expect(ack(await client.sendAndWait(oru)).code).toBe('AA');
    const result = await eventually(async () => readOk('Observation', 'LAB-ORD2-2345-7'));
    const patient = await readOk('Patient', 'GHH-D600');
    expect(result.subject.reference).toBe(`Patient/${patient.id}`);
    expect((await read('Patient', 'USSSA-111-22-3333')).status).toBe(404);
  });

  it('an admission without a visit number (PV1-19, optional in v2: the standard’s own A01 example) is AA: the patient, and a visit of its own message; a discharge without one, with a thin PID, changes nothing (found by an outside probe)', async () => {
    const a01 = v2(msh('ADT^A01^ADT_A01', 'NOVISIT-1'), 'PID|1||NOVISIT1^^^GHH^MR||NOVISIT^NORA^^^^^L||19700101|F', 'PV1|1|I|2000^2012^01||||004777^ATTEND^AARON^A|||SUR||||ADM|A0');
    expect(ack(await client.sendAndWait(a01)).code).toBe('AA');
    const patient = await eventually(async () => readOk('Patient', 'GHH-NOVISIT1'));
    const visit = await eventually(async () => readOk('Encounter', 'LAB-GHH-LAB-NOVISIT-1'));
    expect(visit).toMatchObject({ status: 'in-progress', subject: { reference: `Patient/${patient.id}` } });
    const a03 = v2(msh('ADT^A03^ADT_A03', 'NOVISIT-2'), 'PID|1||NOVISIT1^^^GHH^MR', 'PV1|1|I|2000^2012^01');
    expect(ack(await client.sendAndWait(a03)).code).toBe('AA');
    // A later message's patient is in Pont once the A03's is: the A03 changed nothing of hers (a thin PID empties nothing).
    expect(ack(await client.sendAndWait(v2(msh('ADT^A04^ADT_A01', 'NOVISIT-3'), 'PID|1||NOVISIT3^^^GHH^MR||LATER^LIL^^^^^L||19700101|F'))).code).toBe('AA');
    await eventually(async () => readOk('Patient', 'GHH-NOVISIT3'));
    expect(await readOk('Patient', 'GHH-NOVISIT1')).toMatchObject({ name: [{ family: 'NOVISIT', given: ['NORA'] }], birthDate: '1970-01-01', gender: 'female' });
    expect((await read('Encounter', 'LAB-GHH-LAB-NOVISIT-2')).status).toBe(404);
  });

  it('every result status of table 0085 is taken as the v2-to-FHIR guide maps it: W (posted as wrong: another patient’s) retracts the result, R and S are preliminary, U final, N cancelled, O registered', async () => {
    const send = (id: string, status: string) =>
      client.sendAndWait(v2(msh('ORU^R01^ORU_R01', `${id}-${status}`), PID, `OBR|1|${id}^OE|${id}^LAB|24323-8^CMP^LN|||20240116093000+0100||||||||||||||||||F`, `OBX|1|NM|2345-7^Glucose^LN||5.5|mmol/L|3.9-5.5|N|||${status}`));
    expect(ack(await send('STAT-W', 'F')).code).toBe('AA');
    expect(ack(await send('STAT-W', 'W')).code).toBe('AA');
    await eventually(async () => expect((await readOk('Observation', 'LAB-STAT-W-2345-7')).status).toBe('entered-in-error'));
    for (const [status, fhir] of [['R', 'preliminary'], ['S', 'preliminary'], ['U', 'final'], ['N', 'cancelled'], ['O', 'registered']]) {
      expect(ack(await send(`STAT-${status}`, status!)).code, status).toBe('AA');
      await eventually(async () => expect((await readOk('Observation', `LAB-STAT-${status}-2345-7`)).status, status).toBe(fhir));
    }
  });

  it('the same MSH-10 from another sending system is another message (HL7: a control id is unique within its sender), both kept', async () => {
    const from = (application: string, facility: string) => `MSH|^~\\&|${application}|${facility}|PONT|${FACILITY}|20240116120000||ADT^A04^ADT_A01|SHARED-1|P|2.5.1`;
    const patient = (id: string, family: string) => `PID|1||${id}^^^GHH^MR||${family}^ANN^^^^^L||19700101|F`;
    expect(ack(await client.sendAndWait(v2(from('ADTSYS', 'GENHOSP'), patient('PAT-SHARED-A', 'FIRST')))).code).toBe('AA');
    expect(ack(await client.sendAndWait(v2(from('LIS', 'CENTRALLAB'), patient('PAT-SHARED-B', 'SECOND')))).code).toBe('AA');
    await eventually(async () => expect((await readOk('Patient', 'GHH-PAT-SHARED-B')).name[0].family).toBe('SECOND'));
    expect((await readOk('Patient', 'GHH-PAT-SHARED-A')).name[0].family).toBe('FIRST');
  });

  it('AR for an unhandled type or version, AE with ERR naming the field for an empty PID-3 or a bad date; the agent keeps serving', async () => {
    let a = ack(await client.sendAndWait(v2(msh('MDM^T02^MDM_T02', 'BAD-1'), PID, 'TXA|1|CN')));
    expect(a.code).toBe('AR');
    expect(a.err).toMatch(/^ERR\|\|MSH\^1\^9\|200\^Unsupported message type\^HL70357\|E/);
    a = ack(await client.sendAndWait(v2(msh('ADT^A01^ADT_A01', 'BAD-2', '2.2'), PID, pv1())));
    expect(a).toMatchObject({ code: 'AR', version: '2.2' });
    expect(a.err).toMatch(/203/);
    a = ack(await client.sendAndWait(v2(msh('ADT^A01^ADT_A01', 'BAD-3'), 'PID|1||^^^GHH^MR||DOE^JOHN', pv1())));
    expect(a.code).toBe('AE');
    expect(a.err).toMatch(/^ERR\|\|PID\^1\^3\|101\^Required field missing/);
    a = ack(await client.sendAndWait(v2(msh('ADT^A01^ADT_A01', 'BAD-4', '2.3'), PID.replace('19620320', '1962-03-20'), pv1())));
    expect(a.code).toBe('AE');
    expect(a.err).toMatch(/^ERR\|PID\^1\^7\^102&Data type error&HL70357/);
    // Truncated: the body ends inside MSH-9's message; no PID.
    a = ack(await client.sendAndWait(v2(msh('ORU^R01^ORU_R01', 'BAD-5'))));
    expect(a.code).toBe('AE');
    expect(a.err).toMatch(/PID/);
  });

  it('raw frames: several per write, one without MSH (AR), one cut short by a closed connection; then a 4 MB message over max_message_bytes (AR), and the agent still serves', async () => {
    const frameOf = (text: string) => Buffer.concat([Buffer.from([0x0b]), Buffer.from(text), Buffer.from([0x1c, 0x0d])]);
    const socket = connect(agent.port, '127.0.0.1');
    await once(socket, 'connect');
    let received = '';
    socket.on('data', (d) => (received += d.toString('latin1')));
    const a1 = [msh('ADT^A08^ADT_A01', 'RAW-1'), PID].join('\r');
    socket.write(Buffer.concat([frameOf(a1), frameOf('EVN|A08|2024'), frameOf([msh('ADT^A08^ADT_A01', 'RAW-2'), PID].join('\r'))]));
    await eventually(() => expect(received.split('\x1c\r').filter(Boolean)).toHaveLength(3));
    const codes = received.split('\x1c\r').filter(Boolean).map((f) => /MSA\|(\w+)\|([^|\r]*)/.exec(f)!.slice(1, 3));
    expect(codes).toEqual([['AA', 'RAW-1'], ['AR', ''], ['AA', 'RAW-2']]);
    socket.write(Buffer.concat([Buffer.from([0x0b]), Buffer.from(msh('ADT^A08^ADT_A01', 'CUT-1'))]));
    socket.destroy();

    const big = `OBX|1|TX|11526-1^Pathology study^LN||${'A'.repeat(4 * 1024 * 1024)}||||||F`;
    const reply = await client.sendAndWait(v2(msh('ORU^R01^ORU_R01', 'BIG-1'), PID, 'OBR|1|1^X|2^X|3^X^LN|||||||||||||||||||||F', big), { timeoutMs: 30_000 });
    expect(ack(reply).code).toBe('AR');
    expect(ack(reply).err).toMatch(/max_message_bytes/);
    expect(ack(await client.sendAndWait(v2(msh('ADT^A08^ADT_A01', 'AFTER-BIG'), PID))).code).toBe('AA');
  });

  it('raw bytes in the character set MSH-18 names: Latin-9 (8859/15) read as such (0xA6 is Š); a set the agent does not read (8859/5) is AR naming MSH-18', async () => {
    const socket = connect(agent.port, '127.0.0.1');
    await once(socket, 'connect');
    let received = '';
    socket.on('data', (d) => (received += d.toString('latin1')));
    // Written as Latin-1 bytes: '\u00a6' is the byte 0xA6, which Latin-9 reads as Š (and Latin-1 as ¦).
    const latin9 = [msh('ADT^A04^ADT_A01', 'L9-1', '2.5.1', '||||||8859/15'), 'PID|1||PAT-L9^^^GHH^MR||\u00a6KODA^MAR\u00e9E^^^^^L||19700101|F'].join('\r');
    const cyrillic = [msh('ADT^A04^ADT_A01', 'L9-2', '2.5.1', '||||||8859/5'), 'PID|1||PAT-L9B^^^GHH^MR||\u00b8\u00d2\u00d0\u00dd\u00de\u00d2^\u00b8||19700101|M'].join('\r');
    socket.write(Buffer.concat([Buffer.from([0x0b]), Buffer.from(latin9, 'latin1'), Buffer.from([0x1c, 0x0d, 0x0b]), Buffer.from(cyrillic, 'latin1'), Buffer.from([0x1c, 0x0d])]));
    await eventually(() => expect(received.split('\x1c\r').filter(Boolean)).toHaveLength(2));
    const acks = received.split('\x1c\r').filter(Boolean);
    expect(/MSA\|(\w+)\|L9-1/.exec(acks.find((f) => f.includes('L9-1'))!)![1]).toBe('AA');
    expect(acks.find((f) => f.includes('L9-2')), JSON.stringify(acks)).toMatch(/MSA\|AR\|L9-2[\s\S]*ERR\|\|MSH\^1\^18/);
    socket.destroy();
    await eventually(async () => expect((await readOk('Patient', 'GHH-PAT-L9')).name[0]).toMatchObject({ family: 'ŠKODA', given: ['MARéE'] }));
    expect((await read('Patient', 'GHH-PAT-L9B')).status).toBe(404);
  });

  it('bytes that are not UTF-8 in a message that says it is (MSH-18 empty) are AE naming the field, never stored as U+FFFD (found by an outside probe)', async () => {
    const socket = connect(agent.port, '127.0.0.1');
    await once(socket, 'connect');
    let received = '';
    socket.on('data', (d) => (received += d.toString('latin1')));
    // 0xE9 alone (Latin-1 é) is no UTF-8.
    const bad = [msh('ADT^A04^ADT_A01', 'U8-1'), 'PID|1||PAT-U8^^^GHH^MR||VER\u00e9N^ANA^^^^^L||19700101|F'].join('\r');
    socket.write(Buffer.concat([Buffer.from([0x0b]), Buffer.from(bad, 'latin1'), Buffer.from([0x1c, 0x0d])]));
    await eventually(() => expect(received).toContain('U8-1'));
    expect(received).toMatch(/MSA\|AE\|U8-1[\s\S]*ERR\|\|PID\^1\^5\|102/);
    socket.destroy();
    // A genuine U+FFFD, sent as UTF-8, is a character like any other.
    expect(ack(await client.sendAndWait(v2(msh('ADT^A04^ADT_A01', 'U8-2'), 'PID|1||PAT-U8B^^^GHH^MR||REPL\uFFFDCHAR^ANA^^^^^L||19700101|F'))).code).toBe('AA');
    await eventually(async () => expect((await readOk('Patient', 'GHH-PAT-U8B')).name[0].family).toBe('REPL\uFFFDCHAR'));
    expect((await read('Patient', 'GHH-PAT-U8')).status).toBe(404);
  });

  it('enhanced mode: MSH-15 says which accept acknowledgements come (AL, NE, ER, SU); MSH-16 which application acknowledgements, AA once the message is in Pont', async () => {
    const reply = await client.sendAndWait(v2(msh('ADT^A08^ADT_A01', 'ENH-1', '2.5.1', '|||AL|NE'), PID));
    expect(ack(reply).code).toBe('CA');

    // The stock client waiting for the application acknowledgement: CA first, then AA once Pont has the message.
    const app = await client.sendAndWait(v2(msh('ADT^A08^ADT_A01', 'ENH-2', '2.5.1', '|||AL|AL'), PID.replace('19620320', '19620322')), { returnAck: ReturnAckCategory.APPLICATION, timeoutMs: 15_000 });
    expect(ack(app)).toMatchObject({ code: 'AA', controlId: 'ENH-2' });
    expect((await readOk('Patient', 'GHH-PATID1234')).birthDate).toBe('1962-03-22');

    // Raw frames on one connection: what is sent, and what is not.
    const socket = connect(agent.port, '127.0.0.1');
    let received = '';
    socket.on('data', (d) => (received += d.toString('latin1')));
    const send = (m: Hl7Message) => socket.write(`\x0b${m.toString()}\x1c\r`);
    const frames = () => received.split('\x1c\r').filter(Boolean).map((f) => /MSA\|(\w+)\|([^|\r]*)/.exec(f)!.slice(1, 3).join(' '));
    send(v2(msh('ADT^A08^ADT_A01', 'ENH-3', '2.5.1', '|||SU|ER'), PID)); // CA; no application ACK (success)
    send(v2(msh('MDM^T02^MDM_T02', 'ENH-4', '2.5.1', '|||ER|AL'), PID, 'TXA|1|CN')); // CR, and nothing more
    send(v2(msh('ADT^A08^ADT_A01', 'ENH-5', '2.5.1', '|||ER|SU'), PID)); // no CA (success); AA
    send(v2(msh('ADT^A08^ADT_A01', 'ENH-6', '2.5.1', '|||NE|AL'), PID)); // no CA; AA
    // ENH-5 and ENH-6 are forwarded after ENH-3: once their AAs are in, ENH-3's would have been too.
    await eventually(() => expect(frames()).toEqual(expect.arrayContaining(['AA ENH-5', 'AA ENH-6'])));
    expect(frames().sort()).toEqual(['AA ENH-5', 'AA ENH-6', 'CA ENH-3', 'CR ENH-4']);
    socket.destroy();
  });

  it('the heartbeat: `pont agents list` shows last_seen_at and the version with the backlog', async () => {
    const me = (await listAgents(pont.services.db)).find((a) => a.agent_id === credentials.agent_id)!;
    expect(me.last_seen_at).not.toBeNull();
    expect(me.last_version).toMatch(/^pont-bridge-agent .* backlog \d+$/);
  });
});

describe('pont bridge-agent: kill -9 mid-burst', () => {
  it('every message acknowledged AA is in Pont exactly once, in order, after a restart', async () => {
    const config = await configFor('q-kill');
    let agent = await startAgentProcess(config, 'kill.json');
    const client = new Hl7Client({ host: '127.0.0.1', port: agent.port });
    const acked: number[] = [];
    // Each message: its own result (OBR-3 = n) and the running counter on one Observation (the last one wins).
    const message = (n: number) =>
      v2(
        msh('ORU^R01^ORU_R01', `BURST-${n}`),
        'PID|1||BURST1^^^GHH^MR||BURST^TEST^^^^^L||19800101|M',
        `OBR|1|${n}^OE|B${n}^LAB|24323-8^CMP^LN|||||||||||||||||||||F`,
        `OBX|1|NM|2345-7^Glucose^LN||${n}|mg/dL|70-99||||F`,
        'OBR|2|COUNTER^OE|COUNTER^LAB|24323-8^CMP^LN|||||||||||||||||||||F',
        `OBX|1|NM|8867-4^Counter^LN||${n}|/min|||||F`,
      );
    const burst = (async () => {
      for (let n = 1; n <= 400; n++) {
        try {
          const reply = await client.sendAndWait(message(n), { timeoutMs: 5_000 });
          if (ack(reply).code === 'AA') acked.push(n);
        } catch {
          return; // the agent is gone
        }
      }
    })();
    await eventually(() => expect(acked.length).toBeGreaterThan(60));
    await agent.kill('SIGKILL');
    await burst;
    await client.close();
    expect(acked.length).toBeLessThan(400);

    agent = await startAgentProcess(config, 'kill.json');
    try {
      const last = acked[acked.length - 1]!;
      // The message in flight when the agent died may have been queued without its ACK going out: it may be in too.
      const inFlight = last + 1;
      await eventually(async () => expect([last, inFlight]).toContain((await readOk('Observation', 'LAB-COUNTER-8867-4')).valueQuantity.value), { timeoutMs: 30_000 });
      const patient = await readOk('Patient', 'GHH-BURST1');
      const page = await pont.json(`/api/fhir/R4/Observation?subject=Patient/${patient.id}&code=2345-7&_count=1000`, { headers: operator.headers });
      const values: number[] = (page.body.entry ?? []).map((e: any) => e.resource.valueQuantity.value).sort((a: number, b: number) => a - b);
      // Exactly once: one Observation per acknowledged message (none lost, none twice).
      expect(values.filter((v) => v !== inFlight)).toEqual(acked);
      // In order, and each once: the counter's versions go up one message at a time.
      const history = await pont.json(`/api/fhir/R4/Observation/${syncedId(FACILITY, 'Observation', 'LAB-COUNTER-8867-4')}/_history?_count=1000`, { headers: operator.headers });
      const seen: number[] = (history.body.entry ?? []).map((e: any) => e.resource.valueQuantity.value).reverse();
      expect(seen.filter((v) => v !== inFlight)).toEqual(acked);
    } finally {
      await agent.kill();
    }
  });
});

describe('pont bridge-agent: two batches on their way at once, killed mid-burst', () => {
  it('results of many patients from four connections: after a SIGKILL and a restart every message acknowledged AA is in Pont, each result written once', async () => {
    const config = await configFor('q-many');
    let agent = await startAgentProcess(config, 'many.json');
    const count = 1200;
    const patients = 25;
    const sent = new Set<number>();
    const acked = new Set<number>();
    // Each message its own result; the patients' results interleave, so that consecutive batches share only patients.
    const message = (n: number) =>
      v2(
        msh('ORU^R01^ORU_R01', `MANY-${n}`),
        `PID|1||MANY${n % patients}^^^GHH^MR||MANY^P${n % patients}^^^^^L||19800101|F`,
        `OBR|1|MANY${n}^OE|MANY${n}^LAB|24323-8^CMP^LN|||||||||||||||||||||F`,
        `OBX|1|NM|2345-7^Glucose^LN||${n}|mg/dL|70-99||||F`,
      );
    let next = 1;
    const lane = async () => {
      const client = new Hl7Client({ host: '127.0.0.1', port: agent.port });
      try {
        for (let n = next++; n <= count; n = next++) {
          sent.add(n);
          const reply = await client.sendAndWait(message(n), { timeoutMs: 5_000 }).catch(() => undefined);
          if (!reply) return; // the agent is gone
          if (ack(reply).code === 'AA') acked.add(n);
        }
      } finally {
        await client.close();
      }
    };
    const burst = Promise.all([lane(), lane(), lane(), lane()]);
    await eventually(() => expect(acked.size).toBeGreaterThan(400));
    await agent.kill('SIGKILL');
    await burst;
    expect(acked.size).toBeLessThan(count);

    agent = await startAgentProcess(config, 'many.json');
    try {
      const ids = await Promise.all(Array.from({ length: patients }, async (_, p) => (await readOk('Patient', `GHH-MANY${p}`)).id as string));
      const results = async () => {
        const pages = await Promise.all(ids.map((id) => pont.json(`/api/fhir/R4/Observation?subject=Patient/${id}&code=2345-7&_count=1000`, { headers: operator.headers })));
        return pages.flatMap((page) => (page.body.entry ?? []).map((e: any) => e.resource));
      };
      await eventually(async () => expect((await results()).map((o) => o.valueQuantity.value)).toEqual(expect.arrayContaining([...acked])), { timeoutMs: 30_000 });
      const found = await results();
      // Nothing that was not sent; each result once, in its first version (a batch sent again changed nothing).
      for (const o of found) expect(sent.has(o.valueQuantity.value)).toBe(true);
      expect(new Set(found.map((o) => o.valueQuantity.value)).size).toBe(found.length);
      expect(found.filter((o) => o.meta.versionId !== '1')).toEqual([]);
    } finally {
      await agent.kill();
    }
  });
});

/**
 * Pont behind a proxy that holds each Bridge sync until the test lets it through (or answers it 503): which batches
 * the agent has on their way at once, under which batch id, in which order. Every other request goes straight through.
 */
/** `answer`: what to do with each sync request as it comes (default: hold it until the test says). */
async function holdingProxy(answer?: (held: { let(): void; refuse(): void; reject(): void; tooMany(seconds: number): void }, n: number) => void) {
  const log: string[] = [];
  const held: Array<{ batchId: string; let(): void; refuse(): void; reject(): void; messages: number; tooMany(seconds: number): void; at: number }> = [];
  const server = createHttpServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      const forward = async () => {
        const headers = Object.fromEntries(Object.entries(req.headers).filter(([k]) => !['host', 'content-length', 'connection'].includes(k))) as Record<string, string>;
        const answer = await fetch(pont.url + req.url, { method: req.method, headers, body: req.method === 'POST' ? body : undefined });
        res.writeHead(answer.status, { 'content-type': answer.headers.get('content-type') ?? 'application/json' }).end(Buffer.from(await answer.arrayBuffer()));
      };
      if (!req.url?.endsWith('/bridge/sync')) return void forward().catch(() => res.destroy());
      const batchId = (JSON.parse(body.toString('utf8')) as { batch_id: string }).batch_id;
      log.push(`sent ${batchId}`);
      held.push({
        batchId,
        at: performance.now(),
        let: () => (log.push(`answered ${batchId}`), void forward().catch(() => res.destroy())),
        refuse: () => (log.push(`refused ${batchId}`), res.writeHead(503, { 'content-type': 'application/json' }).end('{"message":"busy"}')),
        // What Pont answers a request it would refuse whatever it is sent again (a body it cannot take).
        reject: () => (log.push(`rejected ${batchId}`), res.writeHead(400, { 'content-type': 'application/json' }).end('{"message":"NUL characters are not allowed in the body"}')),
        messages: (JSON.parse(body.toString('utf8')) as { resources: Array<{ resourceType: string; id: string }> }).resources.filter((r) => r.resourceType === 'Observation').length,
        tooMany: (seconds: number) => (log.push(`429 ${batchId}`), res.writeHead(429, { 'content-type': 'application/json', 'retry-after': String(seconds) }).end('{"message":"Rate limit"}')),
      });
      answer?.(held.at(-1)!, held.length - 1);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as { port: number }).port}`,
    log,
    /** The next request held, once it has come. */
    next: (after: number) => eventually(() => held[after] ?? expect.fail(`batch ${after + 1} not sent`), { timeoutMs: 20_000 }),
    held,
    close: () => new Promise((resolve) => (server.closeAllConnections(), server.close(resolve))),
  };
}

describe('pont bridge-agent: two batches on their way, in order where it matters', () => {
  const result = (id: string, mrn: string, given: string, obx = 1) =>
    v2(
      msh('ORU^R01^ORU_R01', id),
      `PID|1||${mrn}^^^GHH^MR||TWIN^${given}^^^^^L||19800101|F`,
      `OBR|1|${id}^OE|${id}^LAB|24323-8^CMP^LN|||||||||||||||||||||F`,
      ...Array.from({ length: obx }, (_, i) => `OBX|${i + 1}|NM|2345-7^Glucose^LN|${obx > 1 ? i + 1 : ''}|${90 + (i % 10)}|mg/dL|70-99||||F`),
    );

  it('two new patients with the same demographics: the first message holds the match key, however small the second', async () => {
    const agent = await startAgentProcess(await configFor('q-twins'), 'twins.json');
    const client = new Hl7Client({ host: '127.0.0.1', port: agent.port });
    try {
      // The first a large batch, the second a small one: sent beside it, the second would commit first.
      expect(ack(await client.sendAndWait(result('TWIN-1', 'TWINA', 'SAM', 300))).code).toBe('AA');
      expect(ack(await client.sendAndWait(result('TWIN-2', 'TWINB', 'SAM'))).code).toBe('AA');
      const first = await eventually(async () => readOk('Patient', 'GHH-TWINA'), { timeoutMs: 30_000 });
      const second = await eventually(async () => readOk('Patient', 'GHH-TWINB'), { timeoutMs: 30_000 });
      const { rows } = await pont.services.db.query<{ patient_id: string }>('SELECT patient_id FROM health_ids WHERE patient_id = ANY($1) AND match_key IS NOT NULL', [[first.id, second.id]]);
      expect(rows.map((r) => r.patient_id)).toEqual([first.id]);
    } finally {
      await client.close();
      await agent.kill();
    }
  });

  it('after a kill -9 with two batches on their way: each is sent again as it was, one at a time, in the order sent, before any new one; one refused again the same', async () => {
    const proxy = await holdingProxy();
    const config = await configFor('q-held', { pont_url: proxy.url });
    let agent = await startAgentProcess(config, 'held.json');
    let client = new Hl7Client({ host: '127.0.0.1', port: agent.port });
    try {
      // Two patients Pont has confirmed: their next results may go beside each other.
      for (const [n, [id, mrn]] of [['HELD-1', 'HELDA'], ['HELD-2', 'HELDB']].entries()) {
        expect(ack(await client.sendAndWait(result(id!, mrn!, 'KIM'))).code).toBe('AA');
        (await proxy.next(n)).let();
      }
      await eventually(async () => readOk('Patient', 'GHH-HELDB'));
      // Each sent once the one before is on its way (the agent sends at most every 125 ms: sooner, they would be one batch).
      expect(ack(await client.sendAndWait(result('HELD-3', 'HELDA', 'KIM'))).code).toBe('AA');
      const third = await proxy.next(2);
      expect(ack(await client.sendAndWait(result('HELD-4', 'HELDB', 'KIM'))).code).toBe('AA');
      const fourth = await proxy.next(3);
      // HELD-5 of a third patient: independent of HELD-3, but queued behind the two on their way.
      expect(ack(await client.sendAndWait(result('HELD-5', 'HELDC', 'KIM'))).code).toBe('AA');
      expect(proxy.log.slice(-2)).toEqual([`sent ${third.batchId}`, `sent ${fourth.batchId}`]); // both on their way
      await client.close();
      await agent.kill('SIGKILL');

      agent = await startAgentProcess(config, 'held.json');
      client = new Hl7Client({ host: '127.0.0.1', port: agent.port });
      // HELD-6 accepted now waits too: nothing new goes before the batches that were on their way.
      expect(ack(await client.sendAndWait(result('HELD-6', 'HELDB', 'KIM'))).code).toBe('AA');
      const again = await proxy.next(4);
      expect(again.batchId).toBe(third.batchId);
      again.refuse(); // and then Pont is busy: sent again after a while, the same
      const onceMore = await proxy.next(5);
      expect(onceMore.batchId).toBe(third.batchId);
      onceMore.let();
      const then = await proxy.next(6);
      expect(then.batchId).toBe(fourth.batchId);
      expect(proxy.log.slice(-3)).toEqual([`sent ${third.batchId}`, `answered ${third.batchId}`, `sent ${fourth.batchId}`]);
      then.let();
      (await proxy.next(7)).let(); // HELD-5 and HELD-6
      for (const id of ['HELD-3', 'HELD-4', 'HELD-5', 'HELD-6']) await eventually(async () => expect((await read('Observation', `LAB-${id}-2345-7`)).status, id).toBe(200));
    } finally {
      await client.close();
      await agent.kill();
      await proxy.close();
    }
  });
});

describe('pont bridge-agent: a batch Pont refuses whole (found by an outside probe: 153 messages acknowledged AA were lost)', () => {
  const result = (id: string, value: number) =>
    v2(msh('ORU^R01^ORU_R01', id), 'PID|1||WHOLE1^^^GHH^MR||WHOLE^ANN^^^^^L||19800101|F', `OBR|1|${id}^OE|${id}^LAB|24323-8^CMP^LN|||||||||||||||||||||F`, `OBX|1|NM|2345-7^Glucose^LN||${value}|mg/dL|70-99||||F`);

  it('its messages go again one at a time: the others reach Pont, only the one Pont refuses alone is lost (and said)', async () => {
    const proxy = await holdingProxy();
    const agent = await startAgentProcess(await configFor('q-whole', { pont_url: proxy.url }), 'whole.json');
    const client = new Hl7Client({ host: '127.0.0.1', port: agent.port });
    try {
      expect(ack(await client.sendAndWait(result('WHOLE-1', 91))).code).toBe('AA');
      const first = await proxy.next(0);
      // Held: the next three, of the same patient, wait for it, then go together.
      for (const [n, id] of ['WHOLE-2', 'WHOLE-3', 'WHOLE-4'].entries()) expect(ack(await client.sendAndWait(result(id, 92 + n))).code).toBe('AA');
      first.let();
      const together = await proxy.next(1);
      expect(together.messages).toBe(3);
      together.reject();
      // Each alone, in order: the second of them refused again, alone.
      const two = await proxy.next(2);
      expect(two.messages).toBe(1);
      two.let();
      const again = await proxy.next(3);
      again.reject();
      (await proxy.next(4)).let();
      await eventually(async () => expect((await read('Observation', 'LAB-WHOLE-4-2345-7')).status).toBe(200));
      expect((await read('Observation', 'LAB-WHOLE-2-2345-7')).status).toBe(200);
      expect((await read('Observation', 'LAB-WHOLE-3-2345-7')).status).toBe(404);
      expect(agent.output()).toMatch(/Pont refused a batch whole; its messages go again one at a time/);
      expect(agent.output()).toMatch(/Pont refused a resource of a message.*WHOLE-3/);
    } finally {
      await client.close();
      await agent.kill();
      await proxy.close();
    }
  });

  it('a message refused takes nothing of another message of its batch with it: one whose patient an earlier message also gave is written (found by an outside review: it was lost)', async () => {
    // The first batch held; every later one goes through at once.
    const proxy = await holdingProxy((held, n) => n > 0 && held.let());
    const agent = await startAgentProcess(await configFor('q-part', { pont_url: proxy.url }), 'part.json');
    const client = new Hl7Client({ host: '127.0.0.1', port: agent.port });
    const oru = (id: string, pv1: string[]) => v2(msh('ORU^R01^ORU_R01', id), 'PID|1||PART-NEW^^^GHH^MR||NEW^NED^^^^^L||19810101|M', ...pv1, `OBR|1|${id}^OE|${id}^LAB|24323-8^CMP^LN|||||||||||||||||||||F`, 'OBX|1|NM|2345-7^Glucose^LN||95|mg/dL|70-99||||F');
    try {
      expect(ack(await client.sendAndWait(v2(msh('ADT^A01^ADT_A01', 'PART-ADT'), 'EVN|A01|20240115083000', 'PID|1||PART-OWN^^^GHH^MR||OWN^OLE^^^^^L||19750101|F', 'PV1|1|I|2000^2012^01||||||||||||||||V9102^^^GHH'))).code).toBe('AA');
      const first = await proxy.next(0);
      // Both together, after it: the first names PART-OWN's visit (refused), the second only its patient, whom the first carries.
      expect(ack(await client.sendAndWait(oru('PART-1', ['PV1|1|O|||||||||||||||||V9102^^^GHH']))).code).toBe('AA');
      expect(ack(await client.sendAndWait(oru('PART-2', []))).code).toBe('AA');
      first.let();
      expect((await proxy.next(1)).messages).toBe(2);
      await eventually(async () => expect((await read('DiagnosticReport', 'LAB-PART-2')).status).toBe(200));
      expect((await read('Observation', 'LAB-PART-2-2345-7')).status).toBe(200);
      expect((await read('Patient', 'GHH-PART-NEW')).status).toBe(200);
      for (const [type, id] of [['DiagnosticReport', 'LAB-PART-1'], ['Observation', 'LAB-PART-1-2345-7']]) expect((await read(type!, id!)).status).toBe(404);
      await eventually(() => expect(agent.output()).toMatch(/Pont refused a resource of a message.*PART-1/));
      expect(agent.output()).not.toMatch(/Pont refused a resource of a message.*PART-2/);
    } finally {
      await client.close();
      await agent.kill();
      await proxy.close();
    }
  });

  it('a Pont older than groups (422 naming the key) is sent batches without them, and takes them', async () => {
    // What a Pont before groups answers a batch that has them; the others go through to this one.
    const older = createHttpServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c)).on('end', async () => {
        const body = Buffer.concat(chunks);
        if (req.url?.endsWith('/bridge/sync') && 'groups' in JSON.parse(body.toString('utf8')))
          return void res.writeHead(422, { 'content-type': 'application/json' }).end('{"status":"error","error_code":"VALIDATION_FAILED","message":"Invalid request","details":[{"field":"body","message":"Unrecognized key: \\"groups\\""}]}');
        const headers = Object.fromEntries(Object.entries(req.headers).filter(([k]) => !['host', 'content-length', 'connection'].includes(k))) as Record<string, string>;
        const answer = await fetch(pont.url + req.url, { method: req.method, headers, body: req.method === 'POST' ? body : undefined });
        res.writeHead(answer.status, { 'content-type': 'application/json' }).end(Buffer.from(await answer.arrayBuffer()));
      });
    });
    await new Promise<void>((resolve) => older.listen(0, '127.0.0.1', resolve));
    const agent = await startAgentProcess(await configFor('q-older', { pont_url: `http://127.0.0.1:${(older.address() as { port: number }).port}` }), 'older.json');
    const client = new Hl7Client({ host: '127.0.0.1', port: agent.port });
    try {
      expect(ack(await client.sendAndWait(v2(msh('ORU^R01^ORU_R01', 'OLDER-1'), 'PID|1||OLDER1^^^GHH^MR||OLD^OLA^^^^^L||19800101|F', 'OBR|1|OLDER-1^OE|OLDER-1^LAB|24323-8^CMP^LN|||||||||||||||||||||F', 'OBX|1|NM|2345-7^Glucose^LN||90|mg/dL|70-99||||F'))).code).toBe('AA');
      await eventually(async () => expect((await read('Observation', 'LAB-OLDER-1-2345-7')).status).toBe(200));
      expect(agent.output()).not.toMatch(/Pont refused/);
    } finally {
      await client.close();
      await agent.kill();
      await new Promise((resolve) => (older.closeAllConnections(), older.close(resolve)));
    }
  });

  it('a message Pont would refuse for what it holds (a NUL character) is AE at once naming the field, never AA', async () => {
    const agent = await startAgentProcess(await configFor('q-nul'), 'nul.json');
    const client = new Hl7Client({ host: '127.0.0.1', port: agent.port });
    try {
      const a = ack(await client.sendAndWait(v2(msh('ADT^A04^ADT_A01', 'NUL-1'), 'PID|1||NUL1^^^GHH^MR||VER^VI\u0000C||19700101|M')));
      expect(a.code).toBe('AE');
      expect(a.err).toMatch(/PID\^1\^5/);
      expect(a.err).toMatch(/NUL/);
      expect(ack(await client.sendAndWait(v2(msh('ADT^A04^ADT_A01', 'NUL-2'), 'PID|1||NUL2^^^GHH^MR||VER^VIC||19700101|M'))).code).toBe('AA');
      await eventually(async () => expect((await read('Patient', 'GHH-NUL2')).status).toBe(200));
      expect((await read('Patient', 'GHH-NUL1')).status).toBe(404);
    } finally {
      await client.close();
      await agent.kill();
    }
  });
});

describe('pont bridge-agent: Pont’s rate limit (found by an outside probe: a steady trickle spent it, and the backlog stalled a minute)', () => {
  const result = (id: string) =>
    v2(msh('ORU^R01^ORU_R01', id), 'PID|1||PACE1^^^GHH^MR||PACE^PAM^^^^^L||19800101|F', `OBR|1|${id}^OE|${id}^LAB|24323-8^CMP^LN|||||||||||||||||||||F`, 'OBX|1|NM|2345-7^Glucose^LN||90|mg/dL|70-99||||F');

  it('messages one after another go in batches, at most 8 sends a second; a 429 is retried when its Retry-After says, not sooner', async () => {
    let first = true;
    const proxy = await holdingProxy((held) => {
      if (first) return void ((first = false), held.tooMany(2));
      held.let();
    });
    const agent = await startAgentProcess(await configFor('q-pace', { pont_url: proxy.url }), 'pace.json');
    const client = new Hl7Client({ host: '127.0.0.1', port: agent.port });
    try {
      const started = performance.now();
      for (let i = 0; i < 30; i++) expect(ack(await client.sendAndWait(result(`PACE-${i}`))).code).toBe('AA');
      await eventually(async () => expect((await read('Observation', 'LAB-PACE-29-2345-7')).status).toBe(200), { timeoutMs: 20_000 });
      const elapsed = performance.now() - started;
      // The first send was refused for 2 s: the next came no sooner.
      expect(proxy.held[1]!.at - proxy.held[0]!.at).toBeGreaterThanOrEqual(1_900);
      // Never more than one send per 125 ms (and the 30 messages in far fewer sends than 30).
      expect(proxy.held.length).toBeLessThanOrEqual(Math.ceil(elapsed / 125) + 1);
      // Measured where they arrive, not where they leave: one send's way can be slower than the next's by some
      // milliseconds under load (a full run saw 116.5 ms between two arrivals); without the pacing they come 1-10 ms apart.
      for (let i = 1; i < proxy.held.length; i++) expect(proxy.held[i]!.at - proxy.held[i - 1]!.at).toBeGreaterThanOrEqual(100);
      for (let i = 0; i < 30; i++) expect((await read('Observation', `LAB-PACE-${i}-2345-7`)).status).toBe(200);
    } finally {
      await client.close();
      await agent.kill();
      await proxy.close();
    }
  });
});

describe('pont bridge-agent: an informaticist adds a Z-segment field to a v2 map', () => {
  it('one line under connect, v2 and fields (and the examples); it takes effect at SIGHUP, not before, for every Observation of the message', async () => {
    const maps = join(work, 'maps');
    cpSync(join(repoRoot, 'mappings'), maps, { recursive: true });
    const agent = await startAgentProcess(await configFor('q-zseg'), 'zseg.json', { PONT_MAPPINGS_DIR: maps });
    const client = new Hl7Client({ host: '127.0.0.1', port: agent.port });
    try {
      const message = (id: string) =>
        v2(
          msh('ORU^R01^ORU_R01', id),
          'PID|1||Z1^^^GHH^MR||ZED^ZOE^^^^^L||19900101|F',
          'OBR|1|Z^OE|Z1^LAB|24323-8^CMP^LN|||20240116093000+0100||||||||||||||||||F',
          'OBX|1|NM|2345-7^Glucose^LN||90|mg/dL|70-99||||F',
          'OBX|2|NM|2951-2^Sodium^LN||140|mmol/L|135-145||||F',
          'ZLB|1|Cobas 8000, module 4',
        );
      // The edit: the analyser (a Z-segment after the OBXs) as the Observation's device, by name.
      const file = join(maps, 'v2-observation.map.yaml');
      writeFileSync(
        file,
        readFileSync(file, 'utf8')
          .replace('\nv2:\n', '\n  analyser: { type: string, nullable: true }\n\nv2:\n')
          .replace('\nfields:\n', '\n  analyser: ZLB-2\n\nfields:\n')
          .replace(/\n$/, '\n  analyser: device.display\n'),
      );
      const examples = join(maps, 'v2-observation.examples.yaml');
      writeFileSync(examples, readFileSync(examples, 'utf8').replace(/(\n    effective_at: .*)/g, '$1\n    analyser: null'));
      // What the informaticist runs before the reload: it passes (it throws otherwise).
      expect(execFileSync(process.execPath, pontCommand('mappings', 'check', maps), { encoding: 'utf8' })).toMatch(/all good/);

      expect(ack(await client.sendAndWait(message('Z-1'))).code).toBe('AA');
      await eventually(async () => expect((await readOk('Observation', 'LAB-Z1-2345-7')).device).toBeUndefined());

      agent.child.kill('SIGHUP');
      await eventually(() => expect(agent.output()).toMatch(/mappings reloaded/));
      expect(ack(await client.sendAndWait(message('Z-2'))).code).toBe('AA');
      for (const id of ['LAB-Z1-2345-7', 'LAB-Z1-2951-2']) {
        await eventually(async () => expect((await readOk('Observation', id)).device).toEqual({ display: 'Cobas 8000, module 4' }));
      }
    } finally {
      await client.close();
      await agent.kill();
    }
  });
});

describe('pont bridge-agent: Pont unreachable', () => {
  it('the agent still answers AA at once; when Pont is back, the backlog arrives without a restart, in order', async () => {
    // Pont behind a switch: while it is off, every connection to it is cut.
    let up = false;
    const target = new URL(pont.url);
    const open = new Set<Socket>();
    const proxy = createServer((inbound) => {
      if (!up) return inbound.destroy();
      const outbound = connect(Number(target.port), target.hostname);
      open.add(inbound).add(outbound);
      inbound.pipe(outbound).pipe(inbound);
      const close = () => (inbound.destroy(), outbound.destroy());
      inbound.on('error', close).on('close', close);
      outbound.on('error', close).on('close', close);
    });
    await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
    const agent = await startAgentProcess(await configFor('q-down', { pont_url: `http://127.0.0.1:${(proxy.address() as { port: number }).port}` }), 'down.json');
    const client = new Hl7Client({ host: '127.0.0.1', port: agent.port });
    try {
      for (let n = 1; n <= 5; n++) {
        const reply = await client.sendAndWait(v2(msh('ORU^R01^ORU_R01', `DOWN-${n}`), 'PID|1||DOWN1^^^GHH^MR||DOWN^D^^^^^L||19700101|M', 'OBR|1|D^OE|D1^LAB|24323-8^CMP^LN|||20240116093000+0100||||||||||||||||||F', `OBX|1|NM|8867-4^Counter^LN||${n}|/min|||||F`), { timeoutMs: 5_000 });
        expect(ack(reply).code).toBe('AA');
      }
      expect((await read('Observation', 'LAB-D1-8867-4')).status).toBe(404);
      up = true;
      const observation = await eventually(async () => {
        const o = await readOk('Observation', 'LAB-D1-8867-4');
        expect(o.valueQuantity.value).toBe(5);
        return o;
      }, { timeoutMs: 30_000 });
      const history = await pont.json(`/api/fhir/R4/Observation/${observation.id}/_history`, { headers: operator.headers });
      expect(history.body.entry.map((e: any) => e.resource.valueQuantity.value).reverse()).toEqual([1, 2, 3, 4, 5]);
    } finally {
      await client.close();
      await agent.kill();
      for (const socket of open) socket.destroy();
      await new Promise((resolve) => proxy.close(resolve));
    }
  });
});
