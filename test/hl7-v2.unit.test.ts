import { validateFhirResource } from '../src/fhir/validate';
import { appendFileSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { once } from 'node:events';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Hl7Message } from '@medplum/core';
import { describe, expect, it } from 'vitest';
import { buildAck } from '../src/agent/ack';
import { AgentConfigError, parseAgentConfig } from '../src/agent/config';
import { MllpDeframer, startMllpServer, stopMllpServer, type Frame } from '../src/agent/mllp';
import { eventually } from './eventually';
import { mapBreaker } from './break-map';
import { DurableQueue } from '../src/agent/queue';
import { batchOf } from '../src/agent/agent';
import { beyondPont, ErrorCondition, MAX_BATCH_BYTES, nulAt, translate } from '../src/agent/translate';
import { loadMappings } from '../src/mapping/index';
import { evaluateV2, evaluateV2Each, parseV2Expression, parseV2Objects, unescapeV2, v2Charset, V2PathError } from '../src/mapping/v2-path';
import { fromV2Text } from '../src/mapping/v2';

/** The HL7 v2 agent's pieces without a Pont: framing, the v2 path, ACKs, the queue's files, the config's checks. */

/** The shipped maps, compiled once for the file (each loadMappings() compiles every map again). */
const MAPS = loadMappings();
const message = (...segments: string[]) => Hl7Message.parse(segments.join('\r'));
const MSH = 'MSH|^~\\&|LAB|GHH|PONT|FAC|20240116120000||ORU^R01^ORU_R01|C1|P|2.5.1';

describe('the v2 path', () => {
  it('escapes in the message own characters, hex, line breaks', () => {
    const m = Hl7Message.parse('MSH#$%*@#A\rNTE#1##A*F*B*S*C*T*D*R*E*E* *X41C3A9*x*.br*y*H*!*N*');
    // # fields, $ components, % repetitions, * escape, @ subcomponents
    expect(unescapeV2(m.getSegment('NTE')!.getField(3).toString(), m)).toBe('A#B$C@D%E* Aéx\ny!');
  });
  it('a condition on the same field picks the repetition; otherwise the first; alternatives in order', () => {
    const m = message(MSH, 'PID|1||1^^^A||ALIAS^AL^^^^^A~LEGAL^LE^^^^^L');
    expect(evaluateV2(parseV2Expression('PID-5.1 where PID-5.7 = L | PID-5.1'), { message: m })).toBe('LEGAL');
    expect(evaluateV2(parseV2Expression('PID-5.1 where PID-5.7 = B | PID-5.1'), { message: m })).toBe('ALIAS');
    expect(evaluateV2(parseV2Expression("'yes' where PID-9"), { message: m })).toBeUndefined();
  });
  it('a repetition picked by a condition on its own field gives its own components, even empty: the legal name takes no part of another name', () => {
    const m = message(MSH, 'PID|1||1^^^A||Nick^Bobby^X^^^^N~Smith^^^^^^L');
    const read = (path: string) => evaluateV2(parseV2Expression(path), { message: m });
    expect(read('PID-5.1 where PID-5.7 = L | PID-5.1')).toBe('Smith');
    expect(read('PID-5.2 where PID-5.7 = L | PID-5.2')).toBeUndefined();
    expect(read('PID-5.3 where PID-5.7 = L | PID-5.3')).toBeUndefined();
    // No legal name at all: the first name given, whole.
    const none = message(MSH, 'PID|1||1^^^A||Nick^Bobby^^^^^N');
    expect(evaluateV2(parseV2Expression('PID-5.2 where PID-5.7 = L | PID-5.2'), { message: none })).toBe('Bobby');
  });
  it('"" (HL7\'s explicit null, "delete what you hold") is no value, never the text ""; \\X..\\ under MSH-18 8859/1 is Latin-1', () => {
    const m = message(MSH, 'PID|1||1^^^A||DOE^FIONA^""^^^^L||""|F|||""^^""');
    const read = (path: string) => evaluateV2(parseV2Expression(path), { message: m });
    expect(read('PID-5.3')).toBeUndefined();
    expect(read('PID-7')).toBeUndefined();
    expect(read('PID-11.3')).toBeUndefined();
    expect(read('PID-5.2')).toBe('FIONA');
    const latin = Hl7Message.parse('MSH|^~\\&|LAB|GHH|PONT|FAC|20240116120000||ADT^A08^ADT_A01|C2|P|2.5.1||||||8859/1\rPID|1||1^^^A||REN\\XE9\\^A');
    expect(unescapeV2(latin.getSegment('PID')!.getField(5).getComponent(1), latin)).toBe('RENÉ'.replace('É', 'é'));
  });
  it('MSH-18: UTF-8, ASCII, Latin-1 and Latin-9 are read (\\XA4\\ is € in 8859/15, ¤ in 8859/1); any other character set is AR naming MSH-18, not stored wrong', () => {
    const withCharset = (charset: string, pid = 'PID|1||1^^^A||MOREAU^ZO\\XA4\\') => Hl7Message.parse(`MSH|^~\\&|LAB|GHH|PONT|FAC|20240116120000||ADT^A08^ADT_A01|C3|P|2.5.1||||||${charset}\r${pid}`);
    const given = (m: Hl7Message) => unescapeV2(m.getSegment('PID')!.getField(5).getComponent(2), m);
    expect(given(withCharset('8859/15'))).toBe('ZO€');
    expect(given(withCharset('8859/1'))).toBe('ZO¤');
    expect(['', 'ASCII', 'UNICODE UTF-8', '8859/1', '8859/15', '8859/5', 'UNICODE', 'ISO IR87'].map((c) => v2Charset(c))).toEqual(['utf-8', 'utf-8', 'utf-8', 'iso-8859-1', 'iso-8859-15', undefined, undefined, undefined]);
    const refused = translate(withCharset('8859/5', 'PID|1||1^^^A||IVANOV^IVAN'), MAPS);
    expect(refused).toMatchObject({ ok: false, ack: 'AR', error: { location: 'MSH-18' } });
    expect(translate(withCharset('8859/15', 'PID|1||1^^^A||IVANOV^IVAN'), MAPS).ok).toBe(true);
  });
  it('key, low, high, range_text', () => {
    const m = message(MSH, 'PID|1||12 34^^^GH/H&1.2.3&ISO', 'OBX|1|NM|X||1|u|3.5 - 5.1', 'OBX|2|NM|Y||1|u|see note');
    const obx = (n: number) => ({ message: m, current: new Map([['OBX', m.getAllSegments('OBX')[n]!]]) });
    expect(evaluateV2(parseV2Expression('key(PID-3.4.1, PID-3.1)'), { message: m })).toMatch(/^GH-H-12-34-[0-9a-f]{16}$/);
    expect(evaluateV2(parseV2Expression('key(PID-3.4.1, PID-3.5)'), { message: message(MSH, 'PID|1||12^^^GHH LAB^MR') })).toBe('GHH-LAB-MR');
    expect(parseV2Expression('key(PID-3.4.1, PID-3.1)').location).toBe('PID-3');
    expect(evaluateV2(parseV2Expression('low(OBX-7)'), obx(0))).toBe('3.5');
    expect(evaluateV2(parseV2Expression('high(OBX-7)'), obx(0))).toBe('5.1');
    expect(evaluateV2(parseV2Expression('range_text(OBX-7)'), obx(0))).toBeUndefined();
    expect(evaluateV2(parseV2Expression('range_text(OBX-7)'), obx(1))).toBe('see note');
    expect(evaluateV2(parseV2Expression('key(PID-3.4.1, PID-3.2)'), { message: m })).toBeUndefined();
  });
  it('key: numbers that differ only in a space, a slash or a hyphen are three keys; the authority is its namespace, else its OID; a plain key is kept as it is', () => {
    const key = (pid3: string) => evaluateV2(parseV2Expression('key(PID-3.4.1, PID-3.4.2, PID-3.1)'), { message: message(MSH, `PID|1||${pid3}`) });
    const keys = ['00 77^^^GHH', '00/77^^^GHH', '00-77^^^GHH'].map(key);
    expect(new Set(keys).size).toBe(3);
    expect(keys[2]).toBe('GHH-00-77');
    expect(key('PATID1234^^^GHH^MR')).toBe('GHH-PATID1234');
    expect(key('12345^^^&1.2.840.10001&ISO')).toBe('1.2.840.10001-12345');
    expect(key('12345^^^&1.2.840.20002&ISO')).toBe('1.2.840.20002-12345');
    expect(key('12345^^^GHH&1.2.840.10001&ISO')).toBe('GHH-1.2.840.10001-12345');
    // Authorities whose names differ only in letters outside ASCII are two (an attack review: one patient's
    // demographics overwrote the other's); one in ASCII keeps its readable key.
    const nordic = ['100^^^ÅLESUND^MR', '100^^^ØLESUND^MR'].map(key);
    expect(new Set(nordic).size).toBe(2);
    expect(nordic[0]).toMatch(/^-LESUND-100-[0-9a-f]{16}$/);
    expect(key('100^^^ALESUND^MR')).toBe('ALESUND-100');
  });
  it('refuses what is not a path, naming it', () => {
    expect(() => parseV2Expression('PID5')).toThrow(V2PathError);
    expect(() => parseV2Expression('frist(PID-5)')).toThrow(/unknown function `frist`/);
    expect(() => parseV2Expression('PID-0')).toThrow(/count from 1/);
  });
  it('v2 types to Connect types', () => {
    expect(fromV2Text('19620320', 'date')).toBe('1962-03-20');
    expect(fromV2Text('202401150830+0100', 'date-time')).toBe('2024-01-15T08:30:00+01:00');
    expect(fromV2Text('20240115083000.25', 'date-time')).toBe('2024-01-15T08:30:00.25Z');
    expect(fromV2Text('1962-03-20', 'date')).toBeUndefined();
    expect(fromV2Text('20240230', 'date')).toBeUndefined();
    // One calendar with FHIR's doors (src/core/fhir-dates.ts): 29 February in 2000 and 2024, not in 1900 or 2023.
    expect(fromV2Text('20000229', 'date')).toBe('2000-02-29');
    expect(fromV2Text('202402291000+0100', 'date-time')).toBe('2024-02-29T10:00:00+01:00');
    expect(fromV2Text('19000229', 'date')).toBeUndefined();
    expect(fromV2Text('202302291000', 'date-time')).toBeUndefined();
    expect(fromV2Text('7.5', 'number')).toBe(7.5);
    expect(fromV2Text('7.5', 'integer')).toBeUndefined();
  });
});

/** An ORU^R01 of one patient and one OBR, the lines after the OBR given. */
const oru = (...lines: string[]) =>
  ['MSH|^~\\&|LAB|GHH|PONT|FAC|20240116||ORU^R01^ORU_R01|C9|P|2.5.1', 'PID|1||P1^^^GHH^MR||DOE^JO', 'OBR|1|O1^OE|F1^LAB|24323-8^CMP^LN|||20240116093000||||||||||||||||||F', ...lines].join('\r');

/** The Observations an ORU of these lines gives (it must translate). */
function observationsOf(...lines: string[]): any[] {
  const translation = translate(Hl7Message.parse(oru(...lines)), MAPS);
  if (!translation.ok) throw new Error(`refused: ${JSON.stringify(translation.error)}`);
  return translation.resources.filter((r) => r.resourceType === 'Observation');
}

describe('what an ORU says beside its values (found by an outside probe: lost while the message got AA)', () => {
  it('the NTEs after an OBX are its note, a line each, and no other OBX’s; a TX value’s repetitions are its lines', () => {
    const [k, path, glucose] = observationsOf(
      'NTE|1|L|Fasting sample',
      'OBX|1|NM|2823-3^Potassium^LN||6.1|mmol/L|3.5-5.0|H|||F',
      'NTE|1|L|Specimen hemolyzed; potassium may be falsely elevated',
      'NTE|2|L|Repeat requested',
      'OBX|2|TX|11529-5^Path^LN||Line one\\.br\\Line two~Second repetition~||||||F',
      'OBX|3|NM|2345-7^Glucose^LN||5.5|mmol/L|3.9-5.5|N|||F',
    );
    expect(k.note).toEqual([{ text: 'Specimen hemolyzed; potassium may be falsely elevated\nRepeat requested' }]);
    expect(path.valueString).toBe('Line one\nLine two\nSecond repetition');
    expect(path.note).toBeUndefined();
    expect(glucose.note).toBeUndefined();
  });
});

describe('abnormal flags of several repetitions (found by an outside laboratory integrator: only the first was kept)', () => {
  it('each OBX-8 repetition is an interpretation of its own, in order; a code outside table 0078 is AE naming OBX-8', () => {
    const V3 = 'http://terminology.hl7.org/CodeSystem/v3-ObservationInterpretation';
    const [high, low, none] = observationsOf(
      'OBX|1|NM|2345-7^Glucose^LN||182|mg/dL|70-99|H~A|||F',
      'OBX|2|NM|2823-3^Potassium^LN||2.1|mmol/L|3.5-5.0|L~LL|||F',
      'OBX|3|NM|718-7^Hemoglobin^LN||14|g/dL|12-16||||F',
    );
    expect(high.interpretation).toEqual([{ coding: [{ system: V3, code: 'H' }] }, { coding: [{ system: V3, code: 'A' }] }]);
    expect(low.interpretation).toEqual([{ coding: [{ system: V3, code: 'L' }] }, { coding: [{ system: V3, code: 'LL' }] }]);
    expect(none.interpretation).toBeUndefined();
    const refused = translate(Hl7Message.parse(oru('OBX|1|NM|2345-7^Glucose^LN||182|mg/dL|70-99|H~ZZ|||F')), MAPS);
    expect(refused).toMatchObject({ ok: false, ack: 'AE', error: { location: 'OBX-8', condition: ErrorCondition.tableValue } });
  });
  it("a laboratory's own flag (C, critical) is an informaticist's edit of the map, as docs/hl7-v2.md shows: one alternative, read per repetition", () => {
    const V3 = 'http://terminology.hl7.org/CodeSystem/v3-ObservationInterpretation';
    const line = 'OBX|1|NM|2345-7^Glucose^LN||450|mg/dL|70-99|HH~C|||F';
    expect(translate(Hl7Message.parse(oru(line)), MAPS)).toMatchObject({ ok: false, ack: 'AE', error: { location: 'OBX-8', condition: ErrorCondition.tableValue } });
    const scratch: string[] = [];
    try {
      const { dir } = mapBreaker(scratch)('v2-observation.map.yaml', '    flag: OBX-8\n', `    flag: "'AA' where OBX-8 = C | OBX-8"\n`);
      const edited = translate(Hl7Message.parse(oru(line)), loadMappings(dir));
      if (!edited.ok) throw new Error(JSON.stringify(edited.error));
      expect(edited.resources.find((r) => r.resourceType === 'Observation')!.interpretation).toEqual([{ coding: [{ system: V3, code: 'HH' }] }, { coding: [{ system: V3, code: 'AA' }] }]);
    } finally {
      scratch.forEach((dir) => rmSync(dir, { recursive: true, force: true }));
    }
  });
  it('a field of more repetitions than a resource may list is refused before its FHIR is built (100,000 flags took a second of the agent)', () => {
    const many = (n: number) => translate(Hl7Message.parse(oru(`OBX|1|NM|2345-7^Glucose^LN||182|mg/dL|70-99|${Array(n).fill('H').join('~')}|||F`)), MAPS);
    expect(many(10_001)).toMatchObject({ ok: false, ack: 'AE', error: { location: 'OBX-8', text: expect.stringContaining('10001 repetitions') } });
    const doctors = translate(Hl7Message.parse(['MSH|^~\\&|ADT|GHH|PONT|FAC|20240116||ADT^A01^ADT_A01|C9|P|2.5.1', 'PID|1||P1^^^GHH^MR||DOE^JO', `PV1|1|I|||||${Array(20_000).fill('D1^SMITH^J').join('~')}||||||||||||V1`].join('\r')), MAPS);
    expect(doctors).toMatchObject({ ok: false, ack: 'AE', error: { location: expect.stringMatching(/^PV1-7/) } });
  });
  it('a list field of a v2 map takes a value of each repetition of the field it reads', () => {
    const m = message(MSH, 'PID|1||1^^^A||DOE^JO||||||||^PRN^PH^^^555^5551234~^NET^Internet^jo@example.org~(555)555-9999');
    expect(evaluateV2Each(parseV2Expression('PID-13.4 where PID-13.3 = Internet,X.400'), { message: m })).toEqual(['jo@example.org']);
    expect(evaluateV2Each(parseV2Expression('PID-13.6'), { message: m })).toEqual(['555']);
    expect(evaluateV2Each(parseV2Expression('PID-13.3'), { message: message(MSH, 'PID|1||1^^^A') })).toEqual([]);
  });
  it('an object list of a v2 map reads one field, an object of each repetition; a field it lacks, or paths of two fields, are refused, named', () => {
    const scratch: string[] = [];
    try {
      const at = mapBreaker(scratch)('v2-observation.map.yaml', '    flag: OBX-8\n', '    flag: OBX-8\n    other: OBX-8\n');
      expect(() => loadMappings(at.dir)).toThrow(/`other` is not a field of `interpretations`/);
    } finally {
      scratch.forEach((dir) => rmSync(dir, { recursive: true, force: true }));
    }
    expect(parseV2Objects(new Map([['a', parseV2Expression('PID-13.4')], ['b', parseV2Expression("'x' where PID-13.3 = Internet | PID-13.1")]])).location).toBe('PID-13');
    expect(() => parseV2Objects(new Map([['a', parseV2Expression('PID-13.4')], ['b', parseV2Expression('PID-14.1')]]))).toThrow(/one field: `PID-14.1` reads PID-14, `PID-13.4` PID-13/);
  });
});

describe("a resource's key made one way in every v2 map (found in a review of the agent's leftovers: the patient key is written in six maps, and an edit of one split a patient in two)", () => {
  const PI_FIRST = 'idkey(PID-3.4.1, PID-3.4.2, MSH-4.1, MSH-3.1, PID-3.1) where PID-3.5 = PI | idkey(PID-3.4.1, PID-3.4.2, MSH-4.1, MSH-3.1, PID-3.1) where PID-3.5 = MR |';
  const MR_FIRST = 'idkey(PID-3.4.1, PID-3.4.2, MSH-4.1, MSH-3.1, PID-3.1) where PID-3.5 = MR | idkey(PID-3.4.1, PID-3.4.2, MSH-4.1, MSH-3.1, PID-3.1) where PID-3.5 = PI |';
  it("a result's patient key made otherwise than the patient's own id is refused at load, naming the field, where results were filed on a second Patient", () => {
    const scratch: string[] = [];
    try {
      const edited = mapBreaker(scratch)('v2-observation.map.yaml', `  patient_id: ${MR_FIRST}`, `  patient_id: ${PI_FIRST}`, 'patient_id');
      // Before: the message was AA, and its Observation named a Patient no admission of hers had made.
      const message = oru('OBX|1|NM|2345-7^Glucose^LN||182|mg/dL|||||F').replace('PID|1||P1^^^GHH^MR', 'PID|1||P1^^^GHH^MR~9^^^SSA^PI');
      const ok = translate(Hl7Message.parse(message), MAPS);
      expect(ok.ok && ok.resources.filter((r) => r.resourceType !== 'Patient').map((r) => (r.subject as { reference: string }).reference)).toEqual(['Patient/GHH-P1', 'Patient/GHH-P1']);
      expect(() => loadMappings(edited.dir)).toThrow(new RegExp(`v2-observation\\.map\\.yaml:${edited.line}:\\d+: v2-observation's \`patient_id\` makes a Patient's key of PID-3 otherwise than v2-(merged-)?patient's \`id\``));
    } finally {
      scratch.forEach((dir) => rmSync(dir, { recursive: true, force: true }));
    }
  });
  it("the same key of another field (an A40's MRG-1) is made alike; a condition on another field (MSH-9.2 = A40) says when, not how, and is no difference", () => {
    const scratch: string[] = [];
    try {
      const merged = mapBreaker(scratch)('v2-merged-patient.map.yaml', `  id: ${MR_FIRST.replaceAll('PID-3', 'MRG-1')}`, `  id: ${PI_FIRST.replaceAll('PID-3', 'MRG-1')}`, 'id');
      expect(() => loadMappings(merged.dir)).toThrow(/v2-merged-patient's `id` makes a Patient's key of MRG-1 otherwise than v2-patient's `id` makes it of PID-3/);
    } finally {
      scratch.forEach((dir) => rmSync(dir, { recursive: true, force: true }));
    }
    expect(() => loadMappings()).not.toThrow();
  });
});

describe('structured numeric results (found by an outside laboratory integrator: `=^5` was not the number 5)', () => {
  const value = (sn: string, unit = 'mg/dL') => {
    const [o] = observationsOf(`OBX|1|SN|2345-7^Glucose^LN||${sn}|${unit}|||||F`);
    return { valueQuantity: o.valueQuantity, valueRange: o.valueRange, valueRatio: o.valueRatio };
  };
  const refusal = (sn: string) => translate(Hl7Message.parse(oru(`OBX|1|SN|2345-7^Glucose^LN||${sn}|mg/dL|||||F`)), MAPS);
  it('a comparator and a number: = is the number itself; <, >=, … its comparator', () => {
    expect(value('=^5')).toEqual({ valueQuantity: { value: 5, unit: 'mg/dL' } });
    expect(value('^5')).toEqual({ valueQuantity: { value: 5, unit: 'mg/dL' } });
    expect(value('<^5')).toEqual({ valueQuantity: { value: 5, comparator: '<', unit: 'mg/dL' } });
    expect(value('>=^200')).toEqual({ valueQuantity: { value: 200, comparator: '>=', unit: 'mg/dL' } });
    expect(value('<=^0.5^^', 'mg/dL^^UCUM')).toEqual({ valueQuantity: { value: 0.5, comparator: '<=', unit: 'mg/dL', system: 'http://unitsofmeasure.org', code: 'mg/dL' } });
  });
  it('two numbers: a range (-) is a valueRange in the unit, a ratio (: or /) a valueRatio', () => {
    expect(value('^10^-^20')).toEqual({ valueRange: { low: { value: 10, unit: 'mg/dL' }, high: { value: 20, unit: 'mg/dL' } } });
    expect(value('^10^-^20', 'mg/dL^^UCUM').valueRange).toEqual({
      low: { value: 10, unit: 'mg/dL', system: 'http://unitsofmeasure.org', code: 'mg/dL' },
      high: { value: 20, unit: 'mg/dL', system: 'http://unitsofmeasure.org', code: 'mg/dL' },
    });
    expect(value('^1^:^128', '')).toEqual({ valueRatio: { numerator: { value: 1 }, denominator: { value: 128 } } });
    expect(value('^1^/^2', '')).toEqual({ valueRatio: { numerator: { value: 1 }, denominator: { value: 2 } } });
  });
  it('what FHIR has no value for is AE naming OBX-5, never a number that says something else', () => {
    for (const sn of ['<>^5', '>^10^-^20', '^2^+', '^10^-', '^10^-^abc', '^1^.^5', '^1^:^0', '^1^/^0.0']) {
      expect(refusal(sn), sn).toMatchObject({ ok: false, ack: 'AE', error: { location: expect.stringMatching(/^OBX-5(\.\d)?$/) } });
    }
  });
  it('an attacker\'s review: a half-given SN, a second repetition, OBX-2 with components, or a number JavaScript reads and v2 does not is AE, never a value that says something else', () => {
    // Half a value: a comparator with no number, a range or ratio without its first number, a second number with no separator.
    for (const sn of ['<^', '<', '^^-^20', '^^:^128', '^5^^7', '^5~^6', '^0x10', '^1e3']) {
      expect(refusal(sn), sn).toMatchObject({ ok: false, ack: 'AE', error: { location: expect.stringMatching(/^OBX-5(\.\d)?$/) } });
    }
    // OBX-2's type is its first component: `SN^Structured` and `SN~NM` are SNs, `<>^5` ("not 5") refused there too;
    // `SN&x` is no type the maps read (OBX-2).
    for (const [type, location] of [['SN^Structured', 'OBX-5'], ['SN~NM', 'OBX-5'], ['SN&x', 'OBX-2']]) {
      const translation = translate(Hl7Message.parse(oru(`OBX|1|${type}|2345-7^Glucose^LN||<>^5|mg/dL|||||F`)), MAPS);
      expect(translation, type).toMatchObject({ ok: false, ack: 'AE', error: { location } });
    }
    for (const nm of ['0x10', '0b11', '1e3', 'Infinity', '5~6', '1,5']) {
      const translation = translate(Hl7Message.parse(oru(`OBX|1|NM|2345-7^Glucose^LN||${nm}|mg/dL|||||F`)), MAPS);
      expect(translation, nm).toMatchObject({ ok: false, ack: 'AE', error: { location: expect.stringMatching(/^OBX-5(\.\d)?$/) } });
    }
    // A type the maps read no value of, its value given: AE naming OBX-2, not an Observation without its value.
    for (const type of ['ZZ', 'RP']) {
      const translation = translate(Hl7Message.parse(oru(`OBX|1|${type}|2345-7^Glucose^LN||^TEXT^^A^Zm9v||||||F`)), MAPS);
      expect(translation, type).toMatchObject({ ok: false, ack: 'AE', error: { location: 'OBX-2' } });
    }
    // (An ED is the report as presented, its text as given: no Observation.)
    const ed = translate(Hl7Message.parse(oru('OBX|1|ED|2345-7^Glucose^LN||^TEXT^^A^Zm9v||||||F')), MAPS);
    expect(ed.ok && ed.resources.find((r) => r.resourceType === 'DiagnosticReport')).toMatchObject({ presentedForm: [{ contentType: 'text/plain', data: Buffer.from('Zm9v').toString('base64'), title: 'Glucose' }] });
    for (const [nm, value] of [['+5', 5], ['-0.5', -0.5], ['.5', 0.5], ['5.', 5], [' 12 ', 12]] as const) expect(observationsOf(`OBX|1|NM|2345-7^Glucose^LN||${nm}|mg/dL|||||F`)[0].valueQuantity.value, nm).toBe(value);
  });
  it('a number with more significant digits than a double keeps (15) is AE naming OBX-5, never stored rounded (an attacker\'s review: 23 digits became another number)', () => {
    for (const [nm, type] of [['12345678901234567890123', 'NM'], ['0.1234567890123456', 'NM'], ['^1234567890123456^:^2', 'SN'], ['^1^/^1234567890.1234567', 'SN']]) {
      const translation = translate(Hl7Message.parse(oru(`OBX|1|${type}|2345-7^Glucose^LN||${nm}|mg/dL|||||F`)), MAPS);
      expect(translation, nm).toMatchObject({ ok: false, ack: 'AE', error: { location: expect.stringMatching(/^OBX-5(\.\d)?$/), text: expect.stringMatching(/significant digits/) } });
    }
    // Fifteen, and zeros that only place the point, are kept exactly.
    for (const [nm, value] of [['123456789012345', 123456789012345], ['0.000123456789012345', 0.000123456789012345], ['1200000000000000000000', 1.2e21], ['-1.50000000000000000', -1.5]] as const)
      expect(observationsOf(`OBX|1|NM|2345-7^Glucose^LN||${nm}|mg/dL|||||F`)[0].valueQuantity.value, nm).toBe(value);
  });
});

describe("a numeric result beyond what the analyser measures, in NM as laboratories write it (found in a review of the agent's leftovers: `<5` and `>=200` were AE, their results never in Pont)", () => {
  const nm = (value: string) => observationsOf(`OBX|1|NM|2345-7^Glucose^LN||${value}|mg/dL|||||F`)[0].valueQuantity;
  it('a leading comparator is the Quantity\'s, as SN `<^5` gives it; `=5` is the number itself', () => {
    expect(nm('<5')).toEqual({ value: 5, comparator: '<', unit: 'mg/dL' });
    expect(nm('>=200')).toEqual({ value: 200, comparator: '>=', unit: 'mg/dL' });
    expect(nm('> 1000')).toEqual({ value: 1000, comparator: '>', unit: 'mg/dL' });
    expect(nm('<=0.5')).toEqual({ value: 0.5, comparator: '<=', unit: 'mg/dL' });
    expect(nm('=5')).toEqual({ value: 5, unit: 'mg/dL' });
    // Its decimal places are kept as a plain number's are.
    expect(nm('<0.50')).toEqual({ value: 0.5, _value: { extension: [{ url: 'http://hl7.org/fhir/StructureDefinition/quantity-precision', valueInteger: 2 }] }, comparator: '<', unit: 'mg/dL' });
  });
  it('what is no comparator and a number stays AE naming OBX-5: not equal (FHIR has no <>), two comparators, a comparator alone, a number after words', () => {
    for (const value of ['<>5', '<<5', '<', '>=', '< 5 6', '<five', 'approx 5']) {
      const translation = translate(Hl7Message.parse(oru(`OBX|1|NM|2345-7^Glucose^LN||${value}|mg/dL|||||F`)), MAPS);
      expect(translation, value).toMatchObject({ ok: false, ack: 'AE', error: { location: expect.stringMatching(/^OBX-5(\.\d)?$/) } });
    }
  });
});

describe('a result written with trailing zeros (found in a review of the v2 maps: NM `1.10` was stored as 1.1, which says less)', () => {
  const PRECISION = 'http://hl7.org/fhir/StructureDefinition/quantity-precision';
  const quantity = (type: string, value: string) => observationsOf(`OBX|1|${type}|2345-7^Glucose^LN||${value}|mg/dL|||||F`)[0].valueQuantity;
  it('keeps its decimal places in FHIR\'s quantity-precision extension; a number that shows them itself has none', () => {
    for (const [type, given, value, places] of [['NM', '1.10', 1.1, 2], ['NM', '10.0', 10, 1], ['NM', '-0.050', -0.05, 3], ['SN', '<^5.00', 5, 2], ['SN', '^0.10', 0.1, 2]] as const) {
      expect(quantity(type, given), given).toMatchObject({ value, _value: { extension: [{ url: PRECISION, valueInteger: places }] } });
    }
    for (const [type, given] of [['NM', '1.1'], ['NM', '182'], ['NM', '5.'], ['NM', '100'], ['SN', '<^5']]) expect(quantity(type, given), given).not.toHaveProperty('_value');
  });
  it('the Observation it gives is valid FHIR, and a lab result read through Connect shows the places (value_precision)', () => {
    const [o] = observationsOf('OBX|1|NM|2345-7^Glucose^LN||1.10|mg/dL|||||F');
    expect(() => validateFhirResource(o)).not.toThrow();
    const { connect } = MAPS.get('lab-result').readFhir(o, {});
    expect(connect).toMatchObject({ value_numeric: 1.1, value_precision: 2 });
  });
});

describe("a test's alternate code (found in a review of the v2 maps: a laboratory's local code with LOINC as the alternate, OBX-3.4-6, lost the LOINC)", () => {
  const LOINC = 'http://loinc.org';
  it('OBX-3 and OBR-4 give a coding of each identifier, the alternate second; a lab result read through Connect finds its LOINC code', () => {
    const translation = translate(Hl7Message.parse(oru('OBX|1|NM|GLU^Glucose^L^2345-7^Glucose [Mass/volume] in Serum^LN||182|mg/dL|||||F').replace('24323-8^CMP^LN', 'CMP^Chem panel^L^24323-8^Comprehensive metabolic panel^LN')), MAPS);
    if (!translation.ok) throw new Error(JSON.stringify(translation.error));
    const observation = translation.resources.find((r) => r.resourceType === 'Observation') as any;
    expect(observation.code).toEqual({ coding: [{ code: 'GLU' }, { system: LOINC, code: '2345-7', display: 'Glucose [Mass/volume] in Serum' }], text: 'Glucose' });
    const report = translation.resources.find((r) => r.resourceType === 'DiagnosticReport') as any;
    expect(report.code).toEqual({ coding: [{ code: 'CMP' }, { system: LOINC, code: '24323-8', display: 'Comprehensive metabolic panel' }], text: 'Chem panel' });
    expect(MAPS.get('lab-result').readFhir(observation, {}).connect).toMatchObject({ loinc_code: '2345-7', test_name: 'Glucose' });
    // LOINC first and the local code as the alternate: the same two codings, LOINC's first.
    const [swapped] = observationsOf('OBX|1|NM|2345-7^Glucose^LN^GLU^Glucose^L||182|mg/dL|||||F');
    expect(swapped.code).toEqual({ coding: [{ system: LOINC, code: '2345-7' }, { code: 'GLU', display: 'Glucose' }], text: 'Glucose' });
  });
});

describe("a report whose OBR-25 is empty (found in a review of the agent's leftovers: AE, though v2 makes the result status optional in OBR)", () => {
  it('is a DiagnosticReport of status unknown, its results with their own (OBX-11); a status outside table 0123 is still AE naming OBR-25', () => {
    const translated = (status: string) => translate(Hl7Message.parse(oru('OBX|1|NM|2345-7^Glucose^LN||182|mg/dL|||||F').replace(/\|F(\r|$)/, `|${status}$1`)), MAPS);
    const empty = translated('');
    if (!empty.ok) throw new Error(JSON.stringify(empty.error));
    const report = empty.resources.find((r) => r.resourceType === 'DiagnosticReport') as any;
    expect(report.status).toBe('unknown');
    expect(validateFhirResource(report)).toBeUndefined();
    expect(empty.resources.find((r) => r.resourceType === 'Observation')).toMatchObject({ status: 'final' });
    expect(MAPS.get('diagnostic-report').readFhir(report, {}).connect).toMatchObject({ status: 'unknown' });
    expect(translated('Q')).toMatchObject({ ok: false, ack: 'AE', error: { location: 'OBR-25' } });
  });
});

describe("the report's diagnostic service section (found in a review of the v2 maps: OBR-24 MB, a microbiology report, was written as LAB)", () => {
  const V2_0074 = 'http://terminology.hl7.org/CodeSystem/v2-0074';
  const translated = (section: string) =>
    translate(Hl7Message.parse(oru('OBX|1|ST|600-7^Blood culture^LN||No growth||||||F').replace('||||||||||||||||||F', `${'|'.repeat(17)}${section}|F`)), MAPS);
  it('OBR-24 is the DiagnosticReport category (table 0074), LAB when the message gives none', () => {
    for (const [section, code] of [['MB', 'MB'], ['HM', 'HM'], ['', 'LAB'], ['""', 'LAB']]) {
      const translation = translated(section);
      if (!translation.ok) throw new Error(`${section}: ${JSON.stringify(translation.error)}`);
      const report = translation.resources.find((r) => r.resourceType === 'DiagnosticReport') as any;
      expect(report.category, section).toEqual([{ coding: [{ system: V2_0074, code }] }]);
    }
  });
  it('a code outside table 0074 is AE naming OBR-24, never written as another section', () => {
    expect(translated('ZZZ')).toMatchObject({ ok: false, ack: 'AE', error: { location: 'OBR-24', condition: ErrorCondition.tableValue } });
  });
});

describe('a date or a date-time result (found by an outside laboratory integrator: OBX-2 DT and TS were lost)', () => {
  it('is a valueDateTime to the precision given, with its offset', () => {
    const [ts, tsUtc, dt, month, dtm] = observationsOf(
      'OBX|1|TS|11778-8^Delivery date^LN|1|20261127083000+0100||||||F',
      'OBX|2|TS|11778-8^Delivery date^LN|2|202611270830||||||F',
      'OBX|3|DT|11778-8^Delivery date^LN|3|20261127||||||F',
      'OBX|4|DT|11778-8^Delivery date^LN|4|202611||||||F',
      'OBX|5|DTM|11778-8^Delivery date^LN|5|2026||||||F',
    );
    expect(ts.valueDateTime).toBe('2026-11-27T08:30:00+01:00');
    expect(tsUtc.valueDateTime).toBe('2026-11-27T08:30:00Z');
    expect(dt.valueDateTime).toBe('2026-11-27');
    expect(month.valueDateTime).toBe('2026-11');
    expect(dtm.valueDateTime).toBe('2026');
    for (const o of [ts, dt]) expect(o.valueQuantity ?? o.valueString).toBeUndefined();
    const refused = translate(Hl7Message.parse(oru('OBX|1|DT|11778-8^Delivery date^LN||2026-11-27||||||F')), MAPS);
    expect(refused).toMatchObject({ ok: false, ack: 'AE', error: { location: 'OBX-5.1', condition: ErrorCondition.dataType } });
  });
});

describe("whose results they are, as vendors write identifiers (found by a review with vendors' messages: results filed on another patient or on a duplicate, under AA)", () => {
  const ids = (text: string, type: string) => {
    const translation = translate(Hl7Message.parse(text), MAPS);
    if (!translation.ok) throw new Error(`refused: ${JSON.stringify(translation.error)}`);
    return translation.resources.filter((r) => r.resourceType === type).map((r) => r.id);
  };
  const oruFrom = (facility: string, pid3: string, ...lines: string[]) => [`MSH|^~\\&|LIS|${facility}|PONT|PONT|20261127160000||ORU^R01|M9-0001|P|2.3.1`, `PID|1||${pid3}||Alpha^Alice||19600101|F`, ...lines].join('\r');
  const k = 'OBX|1|NM|K^Potassium^L||4.1|mmol/L|||||F';
  it('a number without its authority (an MRN, an accession number) is the sending facility’s: two senders’ 12345 and 1001 are two patients and two reports', () => {
    const a = oruFrom('HOSP A', '12345', 'OBR|1||1001|K^Potassium^L|||20261127100000||||||||||||||||||F', k);
    const b = oruFrom('OUTREACH B', '12345', 'OBR|1||1001|PSA^PSA^L|||20261127110000||||||||||||||||||F', 'OBX|1|NM|PSA^PSA^L||9.5|ng/mL||H|||F');
    expect(ids(a, 'Patient')).toEqual(['HOSP-A-12345']);
    expect(ids(b, 'Patient')).toEqual(['OUTREACH-B-12345']);
    expect(ids(a, 'DiagnosticReport')).not.toEqual(ids(b, 'DiagnosticReport'));
    // Without a facility (MSH-4), the sending application (MSH-3) is the authority.
    expect(ids(oruFrom('', '12345', 'OBR|1||1001|K^Potassium^L|||20261127100000||||||||||||||||||F', k), 'Patient')).toEqual(['LIS-12345']);
  });
  it('an authority given with its OID, or by its OID alone after its namespace, is one: the namespace names it, else the OID', () => {
    const obr = 'OBR|1||BK-1^BEAKER|K^Potassium^L|||20261127100000||||||||||||||||||F';
    expect(ids(oruFrom('SMC', '900100^^^SMC&2.16.840.1.113883.19.5&ISO^MR', obr, k), 'Patient')).toEqual(['SMC-900100']);
    expect(ids(oruFrom('SMC', '900100^^^SMC^MR', obr, k), 'Patient')).toEqual(['SMC-900100']);
    expect(ids(oruFrom('SMC', '900100^^^&2.16.840.1.113883.19.5&ISO^MR', obr, k), 'Patient')).toEqual(['2.16.840.1.113883.19.5-900100']);
  });
  it('the medical record number (MR) identifies the patient before a patient identifier (PI) listed first', () => {
    const obr = 'OBR|1||RLACC-1^REFLAB|HBA1C^HbA1c^L|||20261127100000||||||||||||||||||F';
    expect(ids(oruFrom('QUESTX', 'RL-55501^^^REFLAB^PI~900100^^^SMC^MR', obr, 'OBX|1|NM|4548-4^Hemoglobin A1c^LN||7.9|%|4.0-5.6|H|||F'), 'Patient')).toEqual(['SMC-900100']);
    expect(ids(oruFrom('QUESTX', 'RL-55501^^^REFLAB^PI~111^^^SSA^SS', obr, 'OBX|1|NM|4548-4^Hemoglobin A1c^LN||7.9|%|4.0-5.6|H|||F'), 'Patient')).toEqual(['REFLAB-RL-55501']);
  });
  it('the filler order number in ORC-3 alone is the report’s, and each OBR reads its own ORC', () => {
    const text = oruFrom('SMC', '667788^^^SMC^MR',
      'ORC|RE|PL-1^CERNER|FL-777^PATHNET', 'OBR|1|PL-1^CERNER||TSH^TSH^L|||20261127100000||||||||||||||||||F', 'OBX|1|NM|3016-3^TSH^LN||2.1|mIU/L|||||F',
      'OBR|2|PL-2^CERNER|FL-778^PATHNET|T4^T4^L|||20261127100000||||||||||||||||||F', 'OBX|1|NM|3024-7^T4^LN||1.2|ng/dL|||||F');
    expect(ids(text, 'DiagnosticReport')).toEqual(['PATHNET-FL-777', 'PATHNET-FL-778']);
    expect(ids(text, 'Observation')).toEqual(['PATHNET-FL-777-3016-3', 'PATHNET-FL-778-3024-7']);
  });
});

describe("what vendors' messages say of times, forms and kinds of result (found by the same review: shifted, dropped, refused or misfiled)", () => {
  const translated = (...lines: string[]) => {
    const translation = translate(Hl7Message.parse(lines.join('\r')), MAPS);
    if (!translation.ok) throw new Error(`refused: ${JSON.stringify(translation.error)}`);
    return translation.resources as any[];
  };
  const msh = (sent: string, version = '2.3.1') => `MSH|^~\\&|MEDITECH|GENHOSP|PONT|PONT|${sent}||ORU^R01|T1|P|${version}`;
  const pid = 'PID|1||P5001^^^GENHOSP^MR||Prelim^Pat||19600101|M';
  it("a time without an offset is in the sender's, as MSH-7 gives it (before: read as UTC, five hours off); without one there either, UTC", () => {
    const obr = 'OBR|1||R1^LAB|CXR^CHEST XRAY|||20261127061500||||||||||||||||||F';
    const obx = 'OBX|1|NM|K^Potassium^L||4.1|mmol/L|||||F|||20261127063000';
    const of = (type: string, resources: any[]) => resources.find((r) => r.resourceType === type);
    const resources = translated(msh('20261127160000-0500'), pid, obr, obx);
    expect(of('DiagnosticReport', resources).effectiveDateTime).toBe('2026-11-27T06:15:00-05:00');
    expect(of('Observation', resources).effectiveDateTime).toBe('2026-11-27T06:30:00-05:00');
    expect(of('DiagnosticReport', translated(msh('20261127160000-0500'), pid, obr.replace('20261127061500', '20261127061500+0100'), obx)).effectiveDateTime).toBe('2026-11-27T06:15:00+01:00');
    expect(of('DiagnosticReport', translated(msh('20261127160000'), pid, obr, obx)).effectiveDateTime).toBe('2026-11-27T06:15:00Z');
  });
  it("FT's formatting: a skipped line is a blank line, skipped spaces are spaces, and no count writes more than 10", () => {
    const result = translated(msh('20261127160000'), pid, 'OBR|1||R2^LAB|IMP^IMPRESSION|||20261127061500||||||||||||||||||F', 'OBX|1|FT|IMP^IMPRESSION||\\H\\IMPRESSION:\\N\\\\.br\\1. Normal chest.\\.sp2\\\\.in+4\\Signed\\.sk3\\electronically.\\.sp99999999\\End||||||F').find((r) => r.resourceType === 'Observation');
    expect(result.valueString).toBe(`IMPRESSION:\n1. Normal chest.\n\n\nSigned   electronically.\n${'\n'.repeat(10)}End`);
  });
  it('an encapsulated PDF (OBX ED) is the report as presented, beside its text results; an ED without data it can read is AE naming OBX-5', () => {
    const lines = [msh('20261127160000+0530', '2.5.1'), 'PID|1||445567^^^NWH^MR||Das^Ravi||19800101|M', 'OBR|1||SP-26-100^BEAKER|88305^Surgical pathology^C4|||20261120100000+0530||||||||||||||||||F', 'OBX|1|TX|22634-0^Pathology report.final diagnosis^LN||Benign colonic mucosa.||||||F'];
    const resources = translated(...lines, 'OBX|2|ED|PDF^Pathology report PDF^L||BEAKER^AP^PDF^Base64^JVBERi0xLjQKJcfsj6IKNSAwIG9iago=||||||F');
    const report = resources.find((r) => r.resourceType === 'DiagnosticReport');
    expect(report.presentedForm).toEqual([{ contentType: 'application/pdf', data: 'JVBERi0xLjQKJcfsj6IKNSAwIG9iago=', title: 'Pathology report PDF' }]);
    expect(resources.filter((r) => r.resourceType === 'Observation').map((o) => o.valueString)).toEqual(['Benign colonic mucosa.']);
    expect(report.result).toHaveLength(1);
    // A PDF over 1 MiB (the longest string Pont keeps but an attachment's data) is taken, as Pont takes it.
    const large = 'A'.repeat(1_200_000);
    const big = translate(Hl7Message.parse([...lines, `OBX|2|ED|PDF^Pathology report PDF^L||BEAKER^AP^PDF^Base64^${large}||||||F`].join('\r')), MAPS);
    expect(big.ok && (big.resources.find((r) => r.resourceType === 'DiagnosticReport') as any).presentedForm[0].data.length).toBe(large.length);
    const refused = translate(Hl7Message.parse([...lines, 'OBX|2|ED|PDF^Pathology report PDF^L||BEAKER^AP^PDF^UUENCODE^begin 644||||||F'].join('\r')), MAPS);
    expect(refused).toMatchObject({ ok: false, ack: 'AE', error: { location: 'OBX-5' } });
  });
  it("a radiology report's findings are imaging, an ECG's a procedure, and a section without a kind of its own laboratory", () => {
    const category = (section: string) => translated(msh('20261127160000'), pid, `OBR|1||R3^LAB|CXR^CHEST XRAY|||20261127061500|||||||||||||||||${section}|F`, 'OBX|1|TX|CXR^CHEST XRAY||No acute disease.||||||F').find((r) => r.resourceType === 'Observation').category[0].coding[0].code;
    expect(category('RAD')).toBe('imaging');
    expect(category('EC')).toBe('procedure');
    expect(category('CH')).toBe('laboratory');
    expect(category('')).toBe('laboratory');
  });
  it("PID-11's home address is written as home", () => {
    const [patient] = translated(msh('20261127160000'), 'PID|1||P5001^^^GENHOSP^MR||Prelim^Pat||19600101|M|||55 Oak Ave^Apt 2^Austin^TX^73301^USA^H', 'OBR|1||R4^LAB|K^K|||20261127061500||||||||||||||||||F', 'OBX|1|NM|K^Potassium^L||4.1|mmol/L|||||F');
    expect(patient.address).toEqual([{ use: 'home', line: ['55 Oak Ave', 'Apt 2'], city: 'Austin', state: 'TX', postalCode: '73301', country: 'USA' }]);
  });
});

describe('an A40 that merges a record into itself (found by an outside probe: it replaced itself)', () => {
  it('is AE naming MRG-1', () => {
    const a40 = (mrg: string) =>
      translate(Hl7Message.parse(['MSH|^~\\&|ADT|GHH|PONT|FAC|20240116||ADT^A40^ADT_A39|C9|P|2.5.1', 'PID|1||P1^^^GHH^MR||DOE^JO', `MRG|${mrg}`].join('\r')), MAPS);
    expect(a40('P1^^^GHH^MR')).toMatchObject({ ok: false, ack: 'AE', error: { location: 'MRG-1' } });
    expect(a40('P0^^^GHH^MR').ok).toBe(true);
  });
});

describe('a numeric result without its number (found by an outside probe: `""` gave a Quantity of a unit alone)', () => {
  it('has no value at all, not a valueQuantity of its unit', () => {
    const [hb, glucose] = observationsOf('OBX|1|NM|718-7^Hemoglobin^LN||""|g/dL|12-16||||F', 'OBX|2|NM|2345-7^Glucose^LN||5.5|mmol/L|3.9-5.5|N|||F');
    expect(hb.valueQuantity).toBeUndefined();
    expect(glucose.valueQuantity).toMatchObject({ value: 5.5, unit: 'mmol/L' });
  });
});

describe('an address of two lines (found by an outside probe: the apartment was lost)', () => {
  it('PID-11.2 is the second line', () => {
    const translation = translate(
      Hl7Message.parse(['MSH|^~\\&|ADT|GHH|PONT|FAC|20240116||ADT^A04^ADT_A01|C9|P|2.5.1', 'PID|1||P1^^^GHH^MR||DOE^JO||19700101|F|||12 MAIN ST^APT 5^SPRINGFIELD^IL^62701^USA'].join('\r')),
      MAPS,
    );
    expect(translation.ok).toBe(true);
    if (!translation.ok) return;
    expect((translation.resources[0] as any).address).toEqual([{ line: ['12 MAIN ST', 'APT 5'], city: 'SPRINGFIELD', state: 'IL', postalCode: '62701', country: 'USA' }]);
  });
});

/** An ADT^A04 of this PID (its other segments none), translated. */
const a04 = (pid: string) => translate(Hl7Message.parse(['MSH|^~\\&|ADT|GHH|PONT|FAC|20240116||ADT^A04^ADT_A01|C9|P|2.5.1', pid].join('\r')), MAPS);
const patientOf = (pid: string): any => {
  const translation = a04(pid);
  if (!translation.ok) throw new Error(`refused: ${JSON.stringify(translation.error)}`);
  return translation.resources.find((r) => r.resourceType === 'Patient');
};

describe('a birth date of a year, or a year and month (found by an outside laboratory integrator: refused or lost)', () => {
  it('PID-7 keeps the precision given; a birth time is its date', () => {
    const born = (pid7: string) => patientOf(`PID|1||P1^^^GHH^MR||DOE^JO||${pid7}|F`).birthDate;
    expect(born('1980')).toBe('1980');
    expect(born('198005')).toBe('1980-05');
    expect(born('19800515')).toBe('1980-05-15');
    expect(born('198005150830+0100')).toBe('1980-05-15');
    expect(a04('PID|1||P1^^^GHH^MR||DOE^JO||1980-05|F')).toMatchObject({ ok: false, ack: 'AE', error: { location: 'PID-7' } });
    expect(a04('PID|1||P1^^^GHH^MR||DOE^JO||198013|F')).toMatchObject({ ok: false, ack: 'AE', error: { location: 'PID-7', condition: ErrorCondition.dataType } });
    // A map that copied a birth time into birthDate (a FHIR date) is refused, never written as invalid FHIR.
    expect(() => MAPS.get('v2-patient').toFhir({ id: 'P1', mrn: 'P1', birth_date: '1980-05-15T08:30:00+01:00' })).toThrow(/has a time/);
  });
});

describe('phones and emails (found by an outside laboratory integrator: a number in components, an email, a second one were lost)', () => {
  it('PID-13 (home) and PID-14 (work): every repetition a telecom, the number as written, an email from XTN-4', () => {
    const patient = patientOf(
      'PID|1||P1^^^GHH^MR||DOE^JO||19700101|F|||||' +
        '^PRN^PH^^^555^5551234~^NET^Internet^jo@example.org~(555)555-9999~^PRN^CP^^^^^^^^^+15555550100~~^PRN^PH|' +
        '(555)555-2000~^WPN^X.400^jo.work@example.org',
    );
    expect(patient.telecom).toEqual([
      { system: 'phone', value: '555 5551234', use: 'home' },
      { system: 'email', value: 'jo@example.org', use: 'home' },
      { system: 'phone', value: '(555)555-9999', use: 'home' },
      { system: 'phone', value: '+15555550100', use: 'home' },
      { system: 'phone', value: '(555)555-2000', use: 'work' },
      { system: 'email', value: 'jo.work@example.org', use: 'work' },
    ]);
    expect(patientOf('PID|1||P1^^^GHH^MR||DOE^JO||19700101|F').telecom).toBeUndefined();
    // A fax and a pager are what they are, not a phone.
    expect(patientOf('PID|1||P1^^^GHH^MR||DOE^JO||19700101|F|||||^PRN^FX^^^555^5550000~^PRN^BP^^^^^^^^^5551111').telecom).toEqual([
      { system: 'fax', value: '555 5550000', use: 'home' },
      { system: 'pager', value: '5551111', use: 'home' },
    ]);
    // Its country code (XTN-5) and extension (XTN-8) are the number's too (an attacker's review: both were dropped).
    expect(patientOf('PID|1||P1^^^GHH^MR||DOE^JO||19700101|F|||||^PRN^PH^^1^555^3334444|^WPN^PH^^^555^1234567^42').telecom).toEqual([
      { system: 'phone', value: '+1 555 3334444', use: 'home' },
      { system: 'phone', value: '555 1234567 ext. 42', use: 'work' },
    ]);
  });
});

describe('acknowledgements', () => {
  const now = new Date('2024-01-16T12:00:00Z');
  it('in the message own encoding characters and version; ERR-2/3/8 from v2.5, ERR-1 before', () => {
    const m = Hl7Message.parse('MSH#$%*@#LAB#GHH#PONT#FAC#20240116##ADT$A01#C9#P#2.5');
    const ack = buildAck({ message: m, code: 'AE', error: { location: 'PID-3', condition: ErrorCondition.requiredFieldMissing, text: 'PID-3 is empty: a#b' }, now, controlId: 'A1' })!;
    expect(ack.split('\r')).toEqual([
      'MSH#$%*@#PONT#FAC#LAB#GHH#20240116120000+0000##ACK$A01$ACK#A1#P#2.5',
      'MSA#AE#C9#Application error',
      'ERR##PID$1$3#101$Required field missing$HL70357#E####PID-3 is empty: a*F*b',
    ]);
    const old = Hl7Message.parse('MSH|^~\\&|LAB|GHH|PONT|FAC|20240116||ADT^A01|C9|P|2.3');
    expect(buildAck({ message: old, code: 'AR', error: { location: 'MSH-12', condition: ErrorCondition.unsupportedVersion, text: 'x' }, now, controlId: 'A2' })!.split('\r')[2]).toBe('ERR|MSH^1^12^203&Unsupported version id&HL70357');
  });
  it("before v2.5, whose ERR has no text, MSA-3 says what is wrong (found in a review of the agent's leftovers: a v2.3 sender got only `Application error`)", () => {
    const old = Hl7Message.parse('MSH|^~\\&|LAB|GHH|PONT|FAC|20240116||ORU^R01|C9|P|2.3');
    const text = 'OBX-5.1 `abc` is not a number | and a separator, then more words than MSA-3 holds in v2.3: eighty at most';
    const [, msa, err] = buildAck({ message: old, code: 'AE', error: { location: 'OBX-5.1', condition: ErrorCondition.dataType, text }, now, controlId: 'A3' })!.split('\r');
    // Its first 80 characters (MSA-3's length in v2.3 and v2.4), a separator in them escaped.
    expect(msa).toBe('MSA|AE|C9|OBX-5.1 `abc` is not a number \\F\\ and a separator, then more words than MSA-3 hold');
    expect(err).toBe('ERR|OBX^1^5^102&Data type error&HL70357');
    // From v2.5 the text is ERR-8's, whole, and MSA-3 (deprecated) keeps its word.
    const current = Hl7Message.parse('MSH|^~\\&|LAB|GHH|PONT|FAC|20240116||ORU^R01|C9|P|2.5.1');
    expect(buildAck({ message: current, code: 'AE', error: { location: 'OBX-5.1', condition: ErrorCondition.dataType, text }, now, controlId: 'A4' })!.split('\r')[1]).toBe('MSA|AE|C9|Application error');
  });
  it('ERR-2 names the segment of the error among those of its name (found by an outside probe: the second OBX was OBX^1)', () => {
    const maps = MAPS;
    const oru = (version: string) =>
      Hl7Message.parse(
        [
          `MSH|^~\\&|LAB|GHH|PONT|FAC|20240116||ORU^R01^ORU_R01|C9|P|${version}`,
          'PID|1||P1^^^GHH^MR||DOE^JO',
          'OBR|1|O1^OE|F1^LAB|24323-8^CMP^LN|||20240116093000||||||||||||||||||F',
          'OBX|1|NM|2345-7^Glucose^LN||5.5|mmol/L|3.9-5.5|N|||F',
          'OBX|2|NM|2823-3^K^LN||4.1|mmol/L|3.5-5.0|N|||',
        ].join('\r'),
      );
    for (const [version, err] of [['2.5.1', /^ERR\|\|OBX\^2\^11\|101/], ['2.3', /^ERR\|OBX\^2\^11\^101&/]] as const) {
      const translation = translate(oru(version), maps);
      expect(translation.ok).toBe(false);
      if (translation.ok) continue;
      expect(translation.error).toMatchObject({ location: 'OBX-11', sequence: 2 });
      expect(buildAck({ message: oru(version), code: 'AE', error: translation.error, now, controlId: 'A3' })!.split('\r')[2]).toMatch(err);
    }
  });
  it('a NUL in MSH-10 (or any field the ACK echoes) never reaches the ACK: it is escaped \\X00\\ (found by an outside probe: MSA-2 carried it raw)', () => {
    const text = 'MSH|^~\\&|LAB\u0000|GHH|PONT|FAC|20240116||ADT^A04^ADT_A01|C\u00009|P|2.5.1\rPID|1||P1^^^GHH^MR||DOE^JO';
    const m = Hl7Message.parse(text);
    const translation = translate(m, MAPS, text);
    expect(translation).toMatchObject({ ok: false, ack: 'AE', error: { location: 'MSH-3' } });
    if (translation.ok) return;
    const ack = buildAck({ message: m, code: 'AE', error: translation.error, now, controlId: 'A4' })!;
    expect(ack).not.toContain('\u0000');
    expect(ack.split('\r')[0]).toBe('MSH|^~\\&|PONT|FAC|LAB\\X00\\|GHH|20240116120000+0000||ACK^A04^ACK|A4|P|2.5.1');
    expect(ack.split('\r')[1]).toBe('MSA|AE|C\\X00\\9|Application error');
    // A NUL as the escape character itself (MSH-2) leaves no way to write one: the ACK drops it (an attacker's review).
    const nulEscape = 'MSH|^~\u0000&|LAB|GHH|PONT|FAC|20240116||ADT^A04^ADT_A01|C\u00009|P|2.5.1\rPID|1||P1^^^GHH^MR||DOE^JO';
    expect(buildAck({ message: Hl7Message.parse(nulEscape), code: 'AE', now, controlId: 'A5' })).not.toContain('\u0000');
  });
  it('enhanced mode: CA/CE as MSH-15 asks; none for NE, none on success for ER', () => {
    const with15 = (v: string) => Hl7Message.parse(`MSH|^~\\&|LAB|GHH|PONT|FAC|20240116||ADT^A01|C9|P|2.5|||${v}|NE`);
    expect(buildAck({ message: with15('AL'), code: 'AA', now, controlId: 'A' })).toMatch(/\rMSA\|CA\|C9/);
    expect(buildAck({ message: with15('AL'), code: 'AE', now, controlId: 'A' })).toMatch(/\rMSA\|CE\|C9/);
    expect(buildAck({ message: with15('NE'), code: 'AA', now, controlId: 'A' })).toBeUndefined();
    expect(buildAck({ message: with15('ER'), code: 'AA', now, controlId: 'A' })).toBeUndefined();
    expect(buildAck({ message: with15('ER'), code: 'AR', now, controlId: 'A' })).toMatch(/MSA\|CR/);
  });
});

describe('what Pont would refuse of a batch however often it is sent (found by an outside probe: batches refused whole, their messages lost)', () => {
  it('a NUL character is found where it is, field by field (MSH counts its separator as MSH-1)', () => {
    expect(nulAt('MSH|^~\\&|LAB\rPID|1||X||VE\u0000C')).toBe('PID-5');
    expect(nulAt('MSH|^~\\&|LA\u0000B|FAC')).toBe('MSH-3');
    expect(nulAt('MSH|^~\\&|LAB\rPID|1||X||VEC')).toBeUndefined();
  });
  it('a NUL written as an escape (\\X00\\), or in MSH-12, is AE naming its field; a year 0000 is no date (an attacker’s review: AA, then refused by Pont and lost)', () => {
    const maps = MAPS;
    const adt = (msh12: string, pid: string) => Hl7Message.parse([`MSH|^~\\&|ADT|GHH|PONT|FAC|20240116||ADT^A04^ADT_A01|C9|P|${msh12}`, pid].join('\r'));
    expect(translate(adt('2.5.1', 'PID|1||P1^^^GHH^MR||A\\X00\\B^EVE'), maps, 'x')).toMatchObject({ ok: false, ack: 'AE', error: { location: 'PID-5.1.1' } });
    const inVersion = 'MSH|^~\\&|ADT|GHH|PONT|FAC|20240116||ADT^A04^ADT_A01|C9|P|2.5\u0000.1\rPID|1||P1^^^GHH^MR';
    expect(translate(Hl7Message.parse(inVersion), maps, inVersion)).toMatchObject({ ok: false, ack: 'AE', error: { location: 'MSH-12' } });
    expect(translate(Hl7Message.parse(oru('OBX|1|NM|2345-7^Glucose^LN||5.5|mmol/L|||||F|||00000101')), maps)).toMatchObject({ ok: false, ack: 'AE', error: { location: 'OBX-14' } });
  });
  it('a message whose FHIR is over MAX_BATCH_BYTES is refused; batches hold at most MAX_BATCH_BYTES of FHIR, a message never split', () => {
    const obs = (id: string, size: number) => ({ resourceType: 'Observation', id, valueString: 'v'.repeat(size) });
    expect(beyondPont([obs('a', 1_000_000), obs('b', 1_000_000), obs('c', 1_000_000), obs('d', 1_000_000), obs('e', 500_000)])).toMatchObject({ location: 'OBX-5', text: expect.stringMatching(/bytes of FHIR/) });
    const messages = Array.from({ length: 20 }, (_, i) => ({ id: `M${i}`, type: 'ORU^R01', received_at: '', resources: [obs(`o${i}`, 900_000)] }));
    const batch = batchOf(messages, false);
    expect(batch.messages.length).toBe(4);
    expect(batch.bytes).toBeLessThanOrEqual(MAX_BATCH_BYTES);
    expect(Buffer.byteLength(JSON.stringify(batch.resources))).toBeLessThanOrEqual(MAX_BATCH_BYTES);
    // Multi-byte text counts in bytes.
    expect(batchOf(messages.map((m, i) => ({ ...m, resources: [{ resourceType: 'Observation', id: `u${i}`, valueString: 'é'.repeat(450_000) }] })), false).messages.length).toBe(4);
  });
  it("a batch's texts (the request's body) are its resources' JSON, in order: a patient repeated unchanged in each message (each message a group of its own), a message that repeats one changed as it is", () => {
    const patient = { resourceType: 'Patient', id: 'p1', name: [{ family: 'Ngozi' }] };
    const result = (id: string, value: string) => ({ resourceType: 'Observation', id, valueString: value, subject: { reference: 'Patient/p1' } });
    const message = (id: string, resources: unknown[]) => ({ id, type: 'ORU^R01', received_at: '', resources });
    for (const [messages, whole] of [
      [[message('A', [patient, result('o1', 'x')]), message('B', [patient, result('o2', 'y\ud800')])], false],
      [[message('C', [patient, result('o3', '1'), result('o3', '2')])], false],
      [[message('D', [patient]), message('E', [{ ...patient, gender: 'female' }])], true],
    ] as const) {
      const batch = batchOf([...messages], whole);
      expect(batch.texts).toEqual(batch.resources.map((r) => JSON.stringify(r)));
      expect(JSON.parse(`[${batch.texts.join(',')}]`)).toEqual(batch.resources);
    }
    // Each message whole, its resources one after the other: A's patient and result, then B's.
    const both = batchOf([message('A', [patient, result('o1', 'x')]), message('B', [patient, result('o2', 'y')])], false);
    expect(both.resources.map((r) => `${(r as { resourceType: string }).resourceType}/${(r as { id: string }).id}`)).toEqual(['Patient/p1', 'Observation/o1', 'Patient/p1', 'Observation/o2']);
    expect(both.owners).toEqual(['A', 'A', 'B', 'B']);
  });
});

describe('what Pont would refuse of a message however often it is sent', () => {
  it('more resources than a batch holds, or a string over 1 MiB (located at OBX-5 in a result); nothing else', () => {
    const obs = (value: string) => ({ resourceType: 'Observation', valueString: value });
    expect(beyondPont([obs('x')])).toBeUndefined();
    expect(beyondPont(Array.from({ length: 1001 }, () => obs('x')))?.text).toMatch(/more than 1000 resources/);
    expect(beyondPont(Array.from({ length: 1000 }, () => obs('x')))).toBeUndefined();
    expect(beyondPont([{ resourceType: 'Patient' }, obs('y'.repeat(1_048_577))])).toMatchObject({ location: 'OBX-5' });
    expect(beyondPont([{ resourceType: 'Patient', name: [{ text: 'z'.repeat(1_048_577) }] }])).toMatchObject({ location: 'MSH' });
    expect(beyondPont([obs('y'.repeat(1_048_576))])).toBeUndefined();
    // A message of at most 1 MiB cannot hold a longer value: its resources are not walked.
    expect(beyondPont([obs('y'.repeat(1_048_577))], 1_048_576)).toBeUndefined();
    expect(beyondPont([obs('y'.repeat(1_048_577))], 1_048_577)).toMatchObject({ location: 'OBX-5' });
  });
});

describe('MLLP framing', () => {
  const text = (frames: Frame[]) => frames.map((f) => (f.kind === 'message' ? f.bytes.toString() : `${f.kind} ${f.size} ${f.head.length}`));
  it('messages split anywhere (FS and CR in two reads), several in one read, bytes between frames ignored, a frame over the bound kept only by its head', () => {
    const d = new MllpDeframer(5000);
    const read = (s: string) => text(d.push(Buffer.from(s, 'latin1')));
    expect(read('noise\x0bMSH|one\x1c')).toEqual([]);
    expect(read('\r\x0bMSH|tw')).toEqual(['MSH|one']);
    expect(read('o\x1c\r\x0bMSH|three\x1c\rjunk\x0bMSH|a\x1cb\x1c\r')).toEqual(['MSH|two', 'MSH|three', 'MSH|a\x1cb']);
    expect(read(`\x0bMSH|${'x'.repeat(9000)}`)).toEqual([]);
    expect(read(`${'x'.repeat(1000)}\x1c\r\x0bMSH|after\x1c\r`)).toEqual(['too-large 10004 4096', 'MSH|after']);
  });
  it('a start block inside a frame starts a new one: the frame cut short is dropped, never joined to the next (whose patient it is not)', () => {
    const d = new MllpDeframer(5000);
    const read = (s: string) => text(d.push(Buffer.from(s, 'latin1')));
    expect(read('\x0bMSH|ann PID|ANN')).toEqual([]);
    expect(read('\x0bMSH|ben PID|BEN\x1c\r')).toEqual(['MSH|ben PID|BEN']);
    expect(read('\x0bMSH|cut\x1c\x0bMSH|next\x1c\r')).toEqual(['MSH|next']);
    const big = new MllpDeframer(10);
    expect(text(big.push(Buffer.from(`\x0bMSH|${'x'.repeat(50)}\x0bMSH|ok\x1c\r`, 'latin1')))).toEqual(['MSH|ok']);
  });
  it('over TCP: answers in order, one per frame', async () => {
    const server = await startMllpServer('127.0.0.1', 0, 1000, async (f) => (f.kind === 'message' ? `MSA|AA|${f.bytes.toString()}` : undefined), () => {});
    const socket = connect((server.address() as { port: number }).port, '127.0.0.1');
    await once(socket, 'connect');
    let replies = '';
    socket.on('data', (d) => (replies += d.toString('latin1')));
    socket.write(Buffer.from('\x0b1\x1c\r\x0b2\x1c\r\x0b3\x1c\r', 'latin1'));
    await eventually(() => expect(replies).toBe('\x0bMSA|AA|1\x1c\r\x0bMSA|AA|2\x1c\r\x0bMSA|AA|3\x1c\r'));
    socket.destroy();
    await stopMllpServer(server);
  });
});

describe('MLLP connections that hold on (found by outside probes: slowloris sockets and a never-ending frame stayed open; 256 silent connections locked the sender out)', () => {
  /** A server answering each frame AA under these limits, and a way to open connections to it. */
  const acking = async (limits: { stallMs?: number; maxConnections?: number }) => {
    const server = await startMllpServer('127.0.0.1', 0, 1000, async (f) => (f.kind === 'message' ? 'MSA|AA' : undefined), () => {}, limits);
    const port = (server.address() as { port: number }).port;
    const open = async () => {
      const socket = connect(port, '127.0.0.1');
      await once(socket, 'connect');
      return socket;
    };
    return { server, open };
  };
  it('a frame begun and then silent is given up with its connection; a connection idle between frames stays', async () => {
    const { server, open } = await acking({ stallMs: 300 });
    const idle = await open();
    let idleClosed = false;
    idle.on('close', () => (idleClosed = true));
    idle.write(Buffer.from('\x0bMSH|1\x1c\r', 'latin1')); // one whole frame, then nothing
    const stalled = await open();
    stalled.write(Buffer.from('\x0bMSH|never ends', 'latin1'));
    await once(stalled, 'close');
    expect(idleClosed).toBe(false);
    idle.destroy();
    await stopMllpServer(server);
  });
  it('beyond the most connections, a new one closes the one idle longest between frames (never one mid-frame), and is answered', async () => {
    const { server, open } = await acking({ maxConnections: 3 });
    const first = await open();
    let firstClosed = false;
    first.on('close', () => (firstClosed = true));
    // The oldest, but busy (a frame begun): never the one closed. Its answer to the whole frame before says the server has read it.
    let firstReplies = '';
    first.on('data', (d) => (firstReplies += d.toString('latin1')));
    first.write(Buffer.from('\x0bMSH|0\x1c\r\x0bMSH|mid-frame', 'latin1'));
    await eventually(() => expect(firstReplies).toBe('\x0bMSA|AA\x1c\r'));
    const second = await open();
    second.on('error', () => {}); // closed by the server: a reset
    const third = await open();
    let secondClosed = false;
    second.on('close', () => (secondClosed = true));
    const fourth = await open();
    await eventually(() => expect(secondClosed).toBe(true));
    let replies = '';
    fourth.on('data', (d) => (replies += d.toString('latin1')));
    fourth.write(Buffer.from('\x0bMSH|4\x1c\r', 'latin1'));
    await eventually(() => expect(replies).toBe('\x0bMSA|AA\x1c\r'));
    expect(firstClosed).toBe(false);
    for (const s of [first, third, fourth]) s.destroy();
    await stopMllpServer(server);
  });
  it('when every connection is mid-frame (frames begun and fed a byte at a time), a new one closes the one whose frame began first, and is answered (an attack review: 256 such locked every sender out)', async () => {
    const { server, open } = await acking({ maxConnections: 3 });
    const begun: Socket[] = [];
    const closed = [false, false, false];
    for (let i = 0; i < 3; i++) {
      const socket = await open();
      socket.on('error', () => {}); // closed by the server: a reset
      socket.on('close', () => (closed[i] = true));
      // A whole frame, then one begun: the answer to the first says the server has read them, in this order.
      let replies = '';
      socket.on('data', (d) => (replies += d.toString('latin1')));
      socket.write(Buffer.from(`\x0bMSH|${i}\x1c\r\x0bMSH|begun ${i}`, 'latin1'));
      await eventually(() => expect(replies).toBe('\x0bMSA|AA\x1c\r'));
      begun.push(socket);
    }
    const fourth = await open();
    let replies = '';
    fourth.on('data', (d) => (replies += d.toString('latin1')));
    fourth.write(Buffer.from('\x0bMSH|4\x1c\r', 'latin1'));
    await eventually(() => expect(replies).toBe('\x0bMSA|AA\x1c\r'));
    await eventually(() => expect(closed).toEqual([true, false, false]));
    for (const s of [...begun, fourth]) s.destroy();
    await stopMllpServer(server);
  });
});

/** `test` with a queue directory of its own, removed after. */
async function withQueueDir(test: (dir: string) => Promise<void>): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'pont-queue-'));
  try {
    await test(dir);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

describe('the durable queue', () => {
  it('a line cut by a crash is dropped; what was not confirmed comes back in order; a control id is kept once; the interrupted batch is the same again', () =>
    withQueueDir(async (dir) => {
      const q = new DurableQueue(dir);
      for (const id of ['a', 'b', 'c']) await q.accept({ id, type: 'ORU^R01', received_at: 't', resources: [{ id }] });
      expect(q.accepted('b')).toBeDefined();
      await q.confirm(q.peek(1));
      await q.sending(q.peek(2));
      await q.close();
      appendFileSync(join(dir, 'messages.log'), '{"id":"d","ty'); // a crash in the middle of a write
      const again = new DurableQueue(dir);
      expect(again.peek(10).map((m) => m.id)).toEqual(['b', 'c']);
      expect(again.interrupted()).toEqual(['b', 'c']);
      expect(again.accepted('a')).toBeDefined();
      expect(again.accepted('d')).toBeUndefined();
      expect(readFileSync(join(dir, 'messages.log'), 'utf8').endsWith('\n')).toBe(true);
      await again.close();
    }));

  it('two batches on their way: confirmed in either order; after a crash each unconfirmed one comes back as it was, in the order sent', () =>
    withQueueDir(async (dir) => {
      const ids = (messages: Array<{ id: string }> | undefined) => messages?.map((m) => m.id);
      const q = new DurableQueue(dir);
      for (const id of ['a', 'b', 'c', 'd', 'e', 'f']) await q.accept({ id, type: 'ORU^R01', received_at: 't', resources: [{ id }] });
      // Three batches sent: [a b], [c d], [e]; the second confirmed before the first; the third not at all.
      const first = q.peek(2);
      const second = q.peek(2, 2);
      await Promise.all([q.sending(first), q.sending(second)]);
      await q.sending(q.peek(1, 4));
      await q.confirm(second);
      expect(ids(q.peek(10))).toEqual(['a', 'b', 'e', 'f']);
      expect(q.interrupted()).toEqual(['a', 'b']);
      await q.close();
      let again = new DurableQueue(dir);
      expect(ids(again.peek(10))).toEqual(['a', 'b', 'e', 'f']);
      expect(again.interrupted()).toEqual(['a', 'b']);
      await again.sending(again.peek(2)); // sent again: said once in sent.log
      await again.confirm(again.peek(2));
      expect(again.interrupted()).toEqual(['e']);
      await again.close();
      again = new DurableQueue(dir);
      expect(again.interrupted()).toEqual(['e']);
      await again.confirm(again.peek(1));
      expect(again.interrupted()).toBeUndefined();
      expect(ids(again.peek(10))).toEqual(['f']);
      expect(readFileSync(join(dir, 'sent.log'), 'utf8').split('\n').filter((l) => l.startsWith('>'))).toEqual(['>["a","b"]', '>["c","d"]', '>["e"]']);
      await again.close();
    }));

  it("a batch's ids cut short in sent.log by a failed write, the next list glued on: the queue starts, and that batch is made again", () =>
    withQueueDir(async (dir) => {
      const q = new DurableQueue(dir);
      for (const id of ['a', 'b', 'c']) await q.accept({ id, type: 'ORU^R01', received_at: 't', resources: [{ id }] });
      await q.close();
      appendFileSync(join(dir, 'sent.log'), '>["a","b>["c"]\n');
      const again = new DurableQueue(dir);
      expect(again.unconfirmed()).toEqual([]);
      expect(again.interrupted()).toBeUndefined();
      expect(again.peek(10).map((m) => m.id)).toEqual(['a', 'b', 'c']);
      await again.close();
    }));

  it('the backlog is read back from disk in order, messages larger than a read included; a resend while the first is being written waits for it and is kept once', () =>
    withQueueDir(async (dir) => {
      const q = new DurableQueue(dir);
      // 3 MB of resources (more than the 1 MB the start reads at a time), between small ones; an id with escapes.
      const big = { resourceType: 'Observation', id: 'big', valueString: 'x'.repeat(3 * 1024 * 1024) };
      const ids = ['m1', 'm2 "quoted" \\ é', 'm3', 'm4'];
      const written = ids.map((id, n) => q.accept({ id, type: 'ORU^R01', received_at: 't', resources: n === 1 ? [big] : [{ n }] }));
      const resend = q.accept({ id: 'm3', type: 'ORU^R01', received_at: 't', resources: [{ other: true }] });
      await Promise.all([...written, resend]);
      expect(q.size).toBe(4);
      await q.close();
      const again = new DurableQueue(dir);
      expect(again.size).toBe(4);
      const back = again.peek(10);
      expect(back.map((m) => m.id)).toEqual(ids);
      expect((back[1]!.resources[0] as typeof big).valueString.length).toBe(big.valueString.length);
      expect(back[2]!.resources).toEqual([{ n: 2 }]);
      await again.confirm(again.peek(2));
      expect(again.peek(10).map((m) => m.id)).toEqual(['m3', 'm4']);
      await again.close();
    }));
});

describe('the config file', () => {
  const good = { pont_url: 'https://pont.example.org', agent_id: 'agt_0123456789abcdef01234567', agent_key: 'pak_abcdefghijklmnopqrstuvwxyz012345', facility_id: 'f', mllp_host: '0.0.0.0', mllp_port: 2575, queue_dir: '/q', max_message_bytes: 1048576 };
  it('names the missing, invalid or unknown key', () => {
    expect(parseAgentConfig(good)).toEqual(good);
    const key = (value: unknown) => {
      try {
        parseAgentConfig(value);
      } catch (err) {
        return (err as AgentConfigError).key;
      }
    };
    expect(key({ ...good, agent_key: undefined })).toBe('agent_key');
    expect(key({ ...good, mllp_port: 70000 })).toBe('mllp_port');
    expect(key({ ...good, pont_url: 'ftp://x' })).toBe('pont_url');
    expect(key({ ...good, max_message_bytes: 10 })).toBe('max_message_bytes');
    expect(key({ ...good, queue: '/q' })).toBe('queue');
  });
});

describe('a value of spaces alone (an attacker\'s review: AA, then FHIR Pont refuses, and the message lost)', () => {
  it('is no value, and what the maps write is valid FHIR; spaces around a value are padding', () => {
    const message = [
      'MSH|^~\\&|LAB|GHH|PONT|FAC|20240116||ORU^R01^ORU_R01|C9|P|2.5.1',
      'PID|1||P1^^^GHH^MR|| ^ ||19800101|F|||   |||  ~ 555 1234 ',
      'OBR|1|O1^OE|F1^LAB|24323-8^CMP^LN|||20240116093000||||||||||||||||||F',
      'OBX|1|NM|2345-7^ ^LN||5.5| |  |  |||F',
      'NTE|1|| ',
      'OBX|2|ST|5778-6^Color^LN||  ||||||F',
    ].join('\r');
    const translation = translate(Hl7Message.parse(message), MAPS);
    if (!translation.ok) throw new Error(JSON.stringify(translation.error));
    for (const resource of translation.resources) expect(() => validateFhirResource(resource as never), JSON.stringify(resource)).not.toThrow();
    const patient = translation.resources.find((r) => r.resourceType === 'Patient') as any;
    expect(patient.telecom).toEqual([{ system: 'phone', value: '555 1234', use: 'work' }]); // PID-14
    const [glucose, color] = translation.resources.filter((r) => r.resourceType === 'Observation') as any[];
    expect(glucose.valueQuantity).toEqual({ value: 5.5 });
    expect(glucose.note).toBeUndefined();
    expect(color.valueString).toBeUndefined();
  });
});

describe('facts an ORU or an ADT states, lost under AA (found by a laboratory integrator\'s review of the v2 maps, stop 71)', () => {
  it('every comment of an OBX is its note: an NTE-3 of several repetitions, and the NTEs after it, a line each', () => {
    const [hb] = observationsOf('OBX|1|NM|718-7^Hgb^LN||13.2|g/dL|12-16||||F', 'NTE|1|L|Specimen received 14:02~Repeat analysis confirmed', 'NTE|2|L|Critical value phoned to Dr Smith 14:30');
    expect(hb.note).toEqual([{ text: 'Specimen received 14:02\nRepeat analysis confirmed\nCritical value phoned to Dr Smith 14:30' }]);
  });
  it('a coded result keeps its alternate code (CWE-4..6) and its original text (CWE-9); one of them alone is a value, not AE; a second repetition is AE naming OBX-5', () => {
    const SCT = 'http://snomed.info/sct';
    const [mrsa] = observationsOf('OBX|1|CWE|600-7^Culture^LN||L3092^Staph aureus^99LAB^3092008^Staphylococcus aureus^SCT^^^Staphylococcus aureus (MRSA)||||||F');
    expect(mrsa.valueCodeableConcept).toEqual({ coding: [{ code: 'L3092', display: 'Staph aureus' }, { system: SCT, code: '3092008', display: 'Staphylococcus aureus' }], text: 'Staphylococcus aureus (MRSA)' });
    const [textOnly] = observationsOf('OBX|1|CWE|5196-1^HBsAg^LN||^^^^^^^^Positive, confirmed by neutralisation||||||F');
    expect(textOnly.valueCodeableConcept).toEqual({ text: 'Positive, confirmed by neutralisation' });
    const [altOnly] = observationsOf('OBX|1|CE|600-7^Culture^LN||^^^3092008^Staphylococcus aureus^SCT||||||F');
    expect(altOnly.valueCodeableConcept.coding).toContainEqual({ system: SCT, code: '3092008', display: 'Staphylococcus aureus' });
    const two = translate(Hl7Message.parse(oru('OBX|1|CWE|600-7^Culture^LN|1|3092008^Staphylococcus aureus^SCT~112283007^Escherichia coli^SCT||||||F')), MAPS);
    expect(two).toMatchObject({ ok: false, ack: 'AE', error: { location: expect.stringMatching(/^OBX-5/) } });
  });
  it('a unit given as text only (OBX-6.2) is the unit; a UCUM code given as the alternate (OBX-6.4, 6.6 UCUM) is its code', () => {
    expect(observationsOf('OBX|1|NM|2823-3^K^LN||4.1|^mmol/L|||||F')[0].valueQuantity).toEqual({ value: 4.1, unit: 'mmol/L' });
    expect(observationsOf('OBX|1|NM|2345-7^Glucose^LN||95|MGDL^mg/dL^L^mg/dL^^UCUM|||||F')[0].valueQuantity).toEqual({ value: 95, unit: 'MGDL', system: 'http://unitsofmeasure.org', code: 'mg/dL' });
  });
  it('PID-29 and PID-30: the patient died (deceasedDateTime, else deceasedBoolean)', () => {
    expect(patientOf(`PID|1||D1^^^GHH^MR||SMITH^JOHN||19620320|M${'|'.repeat(21)}20240115073000+0100|Y`)).toMatchObject({ deceasedDateTime: '2024-01-15T07:30:00+01:00' });
    expect(patientOf(`PID|1||D2^^^GHH^MR||SMITH^JOHN||19620320|M${'|'.repeat(22)}Y`)).toMatchObject({ deceasedBoolean: true });
    expect(patientOf('PID|1||D3^^^GHH^MR||SMITH^JOHN||19620320|M')).not.toHaveProperty('deceasedBoolean');
  });
  it('PID-11: the home address (type H), else one without a type; never the birthplace (BDL) as where the patient lives', () => {
    const patient = patientOf('PID|1||D4^^^GHH^MR||SMITH^JOHN^^^^^L||19620320|M|||^^Paris^^^FRA^BDL~12 Rue de Rivoli^Apt 4^Lyon^^69001^FRA^H');
    expect(patient.address).toEqual([{ line: ['12 Rue de Rivoli', 'Apt 4'], city: 'Lyon', postalCode: '69001', country: 'FRA' }]);
    expect(patientOf('PID|1||D5^^^GHH^MR||SMITH^JOHN||19620320|M|||^^Paris^^^FRA^BDL').address).toBeUndefined();
  });
});

/** A segment from its fields by number (`seg('OBX', { 1: '1', 5: '5.5' })`), the fields between empty. */
const seg = (name: string, fields: Record<number, string>) => {
  const last = Math.max(...Object.keys(fields).map(Number));
  return [name, ...Array.from({ length: last }, (_, i) => fields[i + 1] ?? '')].join('|');
};

/** The resources a message of these segments gives (it must translate). */
function resourcesOf(...segments: string[]): any[] {
  const translation = translate(Hl7Message.parse(segments.join('\r')), MAPS);
  if (!translation.ok) throw new Error(`refused: ${JSON.stringify(translation.error)}`);
  for (const resource of translation.resources) expect(() => validateFhirResource(resource as never), JSON.stringify(resource)).not.toThrow();
  return translation.resources;
}

describe('what a report says of itself and who made its results (found by a laboratory integrator\'s review of the v2 maps, stop 71)', () => {
  const MSH_ORU = 'MSH|^~\\&|LAB|GHH|PONT|FAC|20240116||ORU^R01^ORU_R01|C9|P|2.5.1';
  const PID = 'PID|1||P1^^^GHH^MR||DOE^JO';
  const obr = (fields: Record<number, string>) => seg('OBR', { 1: '1', 2: 'O1^OE', 3: 'F1^LAB', 4: '24323-8^CMP^LN', 7: '20240116093000', 25: 'F', ...fields });
  const K = 'OBX|1|NM|2823-3^Potassium^LN||6.1|mmol/L|3.5-5.1|H|||F';

  it("the NTEs after an OBR are its report's conclusion (a hemolysed specimen, a cancellation's reason), a line each; never another report's, never an OBX's", () => {
    const resources = resourcesOf(MSH_ORU, PID,
      obr({}), 'NTE|1|L|Specimen hemolysed~potassium may be falsely high', 'NTE|2|L|Recollection advised', K, 'NTE|1||Repeated: same value',
      obr({ 1: '2', 3: 'F2^LAB', 4: '2951-2^Sodium^LN', 25: 'X' }), 'NTE|1|L|Test cancelled: specimen lost in transit',
      obr({ 1: '3', 3: 'F3^LAB', 4: '2345-7^Glucose^LN' }), 'OBX|1|NM|2345-7^Glucose^LN||5.5|mmol/L|||||F');
    const [first, cancelled, plain] = resources.filter((r) => r.resourceType === 'DiagnosticReport');
    expect(first.conclusion).toBe('Specimen hemolysed\npotassium may be falsely high\nRecollection advised');
    expect(cancelled).toMatchObject({ status: 'cancelled', conclusion: 'Test cancelled: specimen lost in transit' });
    expect(plain.conclusion).toBeUndefined();
    const [k, glucose] = resources.filter((r) => r.resourceType === 'Observation');
    expect(k.note).toEqual([{ text: 'Repeated: same value' }]);
    expect(glucose.note).toBeUndefined();
  });

  it('who performed a result: the performing laboratory (OBX-23, else the producer OBX-15) and the responsible observer (OBX-16), by name and id; the method (OBX-17); the report\'s interpreter (OBR-32)', () => {
    const resources = resourcesOf(MSH_ORU, PID,
      obr({ 32: 'D456&JONES&ROBERT' }),
      seg('OBX', { 1: '1', 2: 'NM', 3: '2823-3^Potassium^LN', 5: '4.1', 6: 'mmol/L', 11: 'F', 16: 'D123^SMITH^JANE^^^DR', 17: 'ISE^Ion-selective electrode^99MTH', 23: 'GHH Central Laboratory^L^^^^CLIA&2.16.840.1.113883.4.7&ISO^XX^^^05D0897628' }),
      seg('OBX', { 1: '2', 2: 'NM', 3: '2951-2^Sodium^LN', 5: '140', 6: 'mmol/L', 11: 'F', 15: 'GHHLAB^GHH Laboratory^99LAB' }));
    const report = resources.find((r) => r.resourceType === 'DiagnosticReport');
    expect(report.resultsInterpreter).toEqual([{ type: 'Practitioner', display: 'ROBERT JONES', identifier: { value: 'D456' } }]);
    const [k, na] = resources.filter((r) => r.resourceType === 'Observation');
    expect(k.performer).toEqual(expect.arrayContaining([
      { type: 'Organization', display: 'GHH Central Laboratory', identifier: { value: '05D0897628' } },
      { type: 'Practitioner', display: 'JANE SMITH', identifier: { value: 'D123' } },
    ]));
    expect(k.performer).toHaveLength(2);
    expect(k.method).toEqual({ coding: [{ code: 'ISE', display: 'Ion-selective electrode' }] });
    expect(na.performer).toEqual([{ type: 'Organization', display: 'GHH Laboratory', identifier: { value: 'GHHLAB' } }]);
    expect(na.method).toBeUndefined();
  });

  it("OBR-22 is when the report was issued, an instant: given with a time it is `issued`; a date alone is not written (an instant needs the time), and the message is not refused for it", () => {
    const reportOf = (issued: string) => resourcesOf(MSH_ORU, PID, obr({ 22: issued }), K).find((r) => r.resourceType === 'DiagnosticReport');
    expect(reportOf('20240116143000+0100').issued).toBe('2024-01-16T14:30:00+01:00');
    expect(reportOf('202401161430').issued).toBe('2024-01-16T14:30:00Z');
    expect(reportOf('20240116')).not.toHaveProperty('issued');
    expect(reportOf('')).not.toHaveProperty('issued');
  });

  it('the order numbers: OBR-2 (placer) and OBR-3 (filler) are the report\'s identifiers, typed PLAC and FILL, their namespace the assigner', () => {
    const report = resourcesOf(MSH_ORU, PID, obr({ 2: '845439^GHH OE', 3: '1045813^GHH LAB' }), K).find((r) => r.resourceType === 'DiagnosticReport');
    const v2_0203 = 'http://terminology.hl7.org/CodeSystem/v2-0203';
    expect(report.identifier).toEqual(expect.arrayContaining([
      { type: { coding: [{ system: v2_0203, code: 'PLAC' }] }, value: '845439', assigner: { display: 'GHH OE' } },
      { type: { coding: [{ system: v2_0203, code: 'FILL' }] }, value: '1045813', assigner: { display: 'GHH LAB' } },
    ]));
    expect(report.identifier).toHaveLength(2);
    const fillerOnly = resourcesOf(MSH_ORU, PID, obr({ 2: '', 3: '1045813^GHH LAB' }), K).find((r) => r.resourceType === 'DiagnosticReport');
    expect(fillerOnly.identifier).toEqual([{ type: { coding: [{ system: v2_0203, code: 'FILL' }] }, value: '1045813', assigner: { display: 'GHH LAB' } }]);
  });

  it('a reference range with its unit (`3.5-5.0 mmol/L`) keeps its low and high, and its text as written', () => {
    const [k] = observationsOf('OBX|1|NM|2823-3^Potassium^LN||4.1|mmol/L|3.5-5.0 mmol/L||||F');
    expect(k.referenceRange).toEqual([{ low: { value: 3.5, unit: 'mmol/L' }, high: { value: 5, unit: 'mmol/L' }, text: '3.5-5.0 mmol/L' }]);
    const [plain] = observationsOf('OBX|1|NM|2823-3^Potassium^LN||4.1|mmol/L|3.5-5.0||||F');
    expect(plain.referenceRange).toEqual([{ low: { value: 3.5 }, high: { value: 5 } }]);
  });

  it('OBX-11 A and B (v2.7: amended, appended) are an amended result, not AE', () => {
    expect(observationsOf('OBX|1|NM|2823-3^Potassium^LN||4.1|mmol/L|||||A')[0].status).toBe('amended');
    expect(observationsOf('OBX|1|NM|2823-3^Potassium^LN||4.1|mmol/L|||||B')[0].status).toBe('amended');
  });
});

describe('what an admission says of its visit (found by a laboratory integrator\'s review of the v2 maps, stop 71: lost under AA)', () => {
  const encounterOf = (pv1: string, event = 'A01') =>
    resourcesOf(`MSH|^~\\&|ADT|GHH|PONT|FAC|20240116||ADT^${event}^ADT_A01|C9|P|2.5.1`, 'PID|1||P1^^^GHH^MR||DOE^JO', pv1).find((r) => r.resourceType === 'Encounter');
  const LPT = 'http://terminology.hl7.org/CodeSystem/location-physical-type';
  const PT = 'http://terminology.hl7.org/CodeSystem/v3-ParticipationType';

  it('the place (PV1-3): its point of care, room and bed, the room and the bed of their physical types', () => {
    expect(encounterOf(seg('PV1', { 1: '1', 2: 'I', 3: '2000^2012^01', 19: 'V1^^^GHH' })).location).toEqual([
      { location: { display: '2000' } },
      { location: { display: '2012' }, physicalType: { coding: [{ system: LPT, code: 'ro' }] } },
      { location: { display: '01' }, physicalType: { coding: [{ system: LPT, code: 'bd' }] } },
    ]);
    expect(encounterOf(seg('PV1', { 1: '1', 2: 'O', 3: 'CLINIC7', 19: 'V2^^^GHH' })).location).toEqual([{ location: { display: 'CLINIC7' } }]);
  });

  it('the doctors, each by name and id in their role: attending (PV1-7), referring (PV1-8), consulting (PV1-9), admitting (PV1-17)', () => {
    const encounter = encounterOf(seg('PV1', { 1: '1', 2: 'I', 7: '004777^ATTEND^AARON^A', 8: '005555^REFER^RITA', 9: '006666^CONSULT^CARL', 17: '007777^ADMIT^ADA', 19: 'V3^^^GHH' }));
    const role = (code: string, display: string) => [{ coding: [{ system: PT, code, display }] }];
    expect(encounter.participant).toEqual([
      { type: role('ATND', 'attender'), individual: { display: 'AARON ATTEND', identifier: { value: '004777' } } },
      { type: role('REF', 'referrer'), individual: { display: 'RITA REFER', identifier: { value: '005555' } } },
      { type: role('CON', 'consultant'), individual: { display: 'CARL CONSULT', identifier: { value: '006666' } } },
      { type: role('ADM', 'admitter'), individual: { display: 'ADA ADMIT', identifier: { value: '007777' } } },
    ]);
  });

  it('the admission type (PV1-4), hospital service (PV1-10), admit source (PV1-14) and discharge disposition (PV1-36), each a code of the facility\'s table, with its name where v2.7 gives one', () => {
    const encounter = encounterOf(seg('PV1', { 1: '1', 2: 'I', 4: 'E', 10: 'MED^Medicine^HL70069', 14: '7', 19: 'V4^^^GHH', 36: '01^Discharged home', 45: '20240118093000+0100' }), 'A03');
    const code = (c: string, display?: string) => ({ coding: [{ code: c, ...(display ? { display } : {}) }] });
    expect(encounter).toMatchObject({
      status: 'finished',
      type: [code('E')],
      serviceType: code('MED', 'Medicine'),
      hospitalization: { admitSource: code('7'), dischargeDisposition: code('01', 'Discharged home') },
    });
  });
});

describe('the specimen of a result (SPM; found by a laboratory integrator\'s review of the v2 maps, stop 71: its type and collection time lost, its OBXs written as the patient\'s results)', () => {
  const MSH_ORU = 'MSH|^~\\&|LAB|GHH|PONT|FAC|20240116||ORU^R01^ORU_R01|C9|P|2.5.1';
  const PID = 'PID|1||P1^^^GHH^MR||DOE^JO';
  const obr = (filler: string) => seg('OBR', { 1: '1', 2: 'O1^OE', 3: `${filler}^LAB`, 4: '24323-8^CMP^LN', 7: '20240116093000', 25: 'F' });
  const SPM = seg('SPM', {
    1: '1', 2: 'SP001&GHH OE^AC123&GHH LAB', 4: '119297000^Blood specimen^SCT^BLD^Blood^HL70487', 7: 'VENIP^Venipuncture^HL70488', 8: 'LACF^Left antecubital fossa^HL70163',
    12: '5^mL', 17: '20240116080000+0100', 18: '20240116090000+0100', 24: 'HEM^Hemolyzed^HL70493',
  });
  const table = (n: string) => `http://terminology.hl7.org/CodeSystem/v2-${n}`;

  it('is a Specimen: its accession (SPM-2), type (SPM-4, both codings), collection (method, site, amount, time), receipt and condition', () => {
    const resources = resourcesOf(MSH_ORU, PID, obr('F1'), 'OBX|1|NM|2823-3^Potassium^LN||6.1|mmol/L|||||F', SPM);
    const specimen = resources.find((r) => r.resourceType === 'Specimen');
    expect(specimen).toEqual({
      resourceType: 'Specimen',
      id: 'GHH-LAB-AC123',
      subject: { reference: 'Patient/GHH-P1' },
      accessionIdentifier: { value: 'AC123', assigner: { display: 'GHH LAB' } },
      identifier: [{ type: { coding: [{ system: table('0203'), code: 'PLAC' }] }, value: 'SP001', assigner: { display: 'GHH OE' } }],
      type: { coding: [{ system: 'http://snomed.info/sct', code: '119297000', display: 'Blood specimen' }, { system: table('0487'), code: 'BLD', display: 'Blood' }] },
      collection: {
        collectedDateTime: '2024-01-16T08:00:00+01:00',
        method: { coding: [{ system: table('0488'), code: 'VENIP', display: 'Venipuncture' }] },
        bodySite: { coding: [{ system: table('0163'), code: 'LACF', display: 'Left antecubital fossa' }] },
        quantity: { value: 5, unit: 'mL' },
      },
      receivedTime: '2024-01-16T09:00:00+01:00',
      condition: [{ coding: [{ system: table('0493'), code: 'HEM', display: 'Hemolyzed' }] }],
    });
  });

  it("the report and its results name their OBR's specimen; an OBX after the SPM is a fact of the specimen (its focus), not one of the report's results; another OBR's results name none", () => {
    const resources = resourcesOf(MSH_ORU, PID,
      obr('F1'), 'OBX|1|NM|2823-3^Potassium^LN||6.1|mmol/L|||||F', SPM, 'OBX|1|NM|9999-1^Specimen volume^LN||5|mL|||||F',
      obr('F2'), 'OBX|1|NM|2345-7^Glucose^LN||5.5|mmol/L|||||F');
    const ref = { reference: 'Specimen/GHH-LAB-AC123' };
    const [first, second] = resources.filter((r) => r.resourceType === 'DiagnosticReport');
    const [k, volume, glucose] = resources.filter((r) => r.resourceType === 'Observation');
    expect(first.specimen).toEqual([ref]);
    expect(first.result).toEqual([{ reference: `Observation/${k.id}` }]);
    expect(k.specimen).toEqual(ref);
    expect(volume).toMatchObject({ specimen: ref, focus: [ref], valueQuantity: { value: 5, unit: 'mL' } });
    expect(second.specimen).toBeUndefined();
    expect(glucose.specimen).toBeUndefined();
    expect(resources.filter((r) => r.resourceType === 'Specimen')).toHaveLength(1);
  });

  it('two specimens under one OBR: the report names both; a result, which names at most one, names neither rather than a guess; a collection over a period (SPM-17 start and end) is a period', () => {
    const two = seg('SPM', { 1: '2', 2: '^AC124&GHH LAB', 4: '122575003^Urine specimen^SCT', 17: '20240115080000+0100^20240116080000+0100' });
    const resources = resourcesOf(MSH_ORU, PID, obr('F1'), 'OBX|1|NM|2823-3^Potassium^LN||6.1|mmol/L|||||F', SPM, two);
    const report = resources.find((r) => r.resourceType === 'DiagnosticReport');
    expect(report.specimen).toEqual([{ reference: 'Specimen/GHH-LAB-AC123' }, { reference: 'Specimen/GHH-LAB-AC124' }]);
    expect(resources.find((r) => r.resourceType === 'Observation').specimen).toBeUndefined();
    expect(resources.find((r) => r.id === 'GHH-LAB-AC124').collection).toEqual({ collectedPeriod: { start: '2024-01-15T08:00:00+01:00', end: '2024-01-16T08:00:00+01:00' } });
  });

  it('a specimen without an accession number is its OBR\'s (filler order number and SPM-1); one rejected (SPM-21) is unsatisfactory, its reason a condition', () => {
    const rejected = seg('SPM', { 1: '1', 4: '119297000^Blood specimen^SCT', 21: 'RH^Hemolysis^HL70490' });
    const specimen = resourcesOf(MSH_ORU, PID, obr('F1'), 'OBX|1|NM|2823-3^Potassium^LN||6.1|mmol/L|||||X', rejected).find((r) => r.resourceType === 'Specimen');
    expect(specimen).toMatchObject({ id: 'LAB-F1-1', status: 'unsatisfactory', condition: [{ coding: [{ system: table('0490'), code: 'RH', display: 'Hemolysis' }] }] });
  });
});

describe("found by a laboratory integrator's second review of the v2 maps (stop 72)", () => {
  const MSH_ORU = (version = '2.5.1') => `MSH|^~\\&|LAB|GHH|PONT|FAC|20240116||ORU^R01^ORU_R01|C9|P|${version}`;
  const obr = (fields: Record<number, string>) => seg('OBR', { 1: '1', 2: 'O1^OE', 3: 'F1^LAB', 4: '24323-8^CMP^LN', 7: '20240116093000', 25: 'F', ...fields });
  const refusal = (...segments: string[]) => translate(Hl7Message.parse(segments.join('\r')), MAPS);

  it('each PID of an ORU (a PATIENT_RESULT group) is the patient of the reports and results that follow it, with its own visit; never the first patient\'s', () => {
    const resources = resourcesOf(MSH_ORU(),
      'PID|1||P1^^^GHH^MR||DOE^JO', 'PV1|1|O|||||||||||||||||V1^^^GHH', obr({ 3: 'FL1^LAB' }), 'OBX|1|NM|2345-7^Glucose^LN||5.6|mmol/L|||||F',
      'PID|2||P2^^^GHH^MR||ROE^ANN', obr({ 3: 'FL2^LAB' }), 'OBX|1|NM|2345-7^Glucose^LN||12.0|mmol/L||HH|||F');
    expect(resources.filter((r) => r.resourceType === 'Patient').map((p) => p.id)).toEqual(['GHH-P1', 'GHH-P2']);
    const [first, second] = resources.filter((r) => r.resourceType === 'DiagnosticReport');
    const [a, b] = resources.filter((r) => r.resourceType === 'Observation');
    expect([first.subject, a.subject, a.encounter]).toEqual([{ reference: 'Patient/GHH-P1' }, { reference: 'Patient/GHH-P1' }, { reference: 'Encounter/GHH-V1' }]);
    expect([second.subject, b.subject]).toEqual([{ reference: 'Patient/GHH-P2' }, { reference: 'Patient/GHH-P2' }]);
    expect(b.encounter).toBeUndefined();
    expect(second.encounter).toBeUndefined();
  });

  it('two OBRs of one message with the same filler order number are AE naming the second OBR-3 (one would replace the other), not AA', () => {
    const t = refusal(MSH_ORU(), 'PID|1||P1^^^GHH^MR||DOE^JO', obr({ 3: 'ACC123^LAB', 4: '58410-2^CBC^LN' }), 'OBX|1|NM|718-7^Hgb^LN||13|g/dL|||||F', obr({ 1: '2', 3: 'ACC123^LAB' }), 'OBX|1|NM|2345-7^Glucose^LN||5.5|mmol/L|||||F');
    expect(t).toMatchObject({ ok: false, ack: 'AE', error: { location: 'OBR-3', sequence: 2, condition: ErrorCondition.duplicateKey } });
  });

  it('an order or specimen number whose authority is given only as an OID (EI-3) keeps it: two laboratories\' FL1 are two reports', () => {
    const reportOf = (oid: string) => resourcesOf(MSH_ORU(), 'PID|1||P1^^^GHH^MR||DOE^JO', obr({ 2: '', 3: `FL1^^${oid}^ISO` }), 'OBX|1|NM|2345-7^Glucose^LN||5.6|mmol/L|||||F', seg('SPM', { 1: '1', 2: `^SP1&&${oid}&ISO`, 4: '119297000^Blood^SCT' }));
    const [one, two] = [reportOf('2.16.840.1.113883.19.4.6'), reportOf('2.16.840.1.113883.19.4.7')];
    const ids = (rs: any[]) => rs.filter((r) => r.resourceType !== 'Patient').map((r) => `${r.resourceType}/${r.id}`);
    expect(ids(one)).toEqual(['Specimen/2.16.840.1.113883.19.4.6-SP1', 'Observation/2.16.840.1.113883.19.4.6-FL1-2345-7', 'DiagnosticReport/2.16.840.1.113883.19.4.6-FL1']);
    expect(ids(two).some((id) => ids(one).includes(id))).toBe(false);
    expect(one.find((r) => r.resourceType === 'DiagnosticReport').identifier[0]).toMatchObject({ value: 'FL1', assigner: { display: '2.16.840.1.113883.19.4.6' } });
    // With a namespace, the id is as before (no id changes for a sender that gives one).
    expect(resourcesOf(MSH_ORU(), 'PID|1||P1^^^GHH^MR||DOE^JO', obr({ 3: 'FL1^LAB^2.16.840.1.113883.19.4.6^ISO' })).find((r) => r.resourceType === 'DiagnosticReport').id).toBe('LAB-FL1');
  });

  it('v2.7: the NTEs after an OBX (or an OBR) that a PRT segment comes between are still its notes', () => {
    const resources = resourcesOf(MSH_ORU('2.7'), 'PID|1||P1^^^GHH^MR||DOE^JO', obr({}), 'PRT|1|AD||PO^Performing Organization^HL70912', 'NTE|1||Report comment',
      'OBX|1|NM|2823-3^K^LN||6.1|mmol/L|||||F', 'PRT|1|AD||RO^Responsible Observer^HL70912|9876^Jones^Mary', 'NTE|1||Hemolysed sample: potassium may be falsely elevated');
    expect(resources.find((r) => r.resourceType === 'Observation').note).toEqual([{ text: 'Hemolysed sample: potassium may be falsely elevated' }]);
    expect(resources.find((r) => r.resourceType === 'DiagnosticReport').conclusion).toBe('Report comment');
  });

  it('a titre range (<1:40, <1/80) is text, never a high limit of 1; a range in another unit than the value\'s keeps its unit on its limits', () => {
    for (const range of ['<1:40', '<1/80', '1:10-1:40']) {
      const [ana] = observationsOf(`OBX|1|SN|5048-4^ANA titer^LN||^1^:^160||${range}|H|||F`);
      expect(ana.referenceRange, range).toEqual([{ text: range }]);
    }
    const [glucose] = observationsOf('OBX|1|NM|2345-7^Glucose^LN||110|mg/dL|3.9-5.5 mmol/L|H|||F');
    expect(glucose.referenceRange).toEqual([{ low: { value: 3.9, unit: 'mmol/L' }, high: { value: 5.5, unit: 'mmol/L' }, text: '3.9-5.5 mmol/L' }]);
    const [gfr] = observationsOf('OBX|1|NM|33914-3^eGFR^LN||75|mL/min|>60 mL/min||||F');
    expect(gfr.referenceRange).toEqual([{ low: { value: 60, unit: 'mL/min' }, text: '>60 mL/min' }]);
  });

  it('a family name sent with its FN subcomponents (Jansen&de&Jansen) is its surname, not the subcomponents joined by &', () => {
    const [k] = observationsOf(seg('OBX', { 1: '1', 2: 'NM', 3: '2823-3^K^LN', 5: '4.1', 11: 'F', 16: '9876^Jansen&de&Jansen^Piet' }));
    expect(k.performer).toEqual([{ type: 'Practitioner', display: 'Piet Jansen', identifier: { value: '9876' } }]);
    expect(patientOf('PID|1||D9^^^GHH^MR||Vries&de&Vries^Jan^^^^^L').name[0].family).toBe('Vries');
    const encounter = resourcesOf('MSH|^~\\&|ADT|GHH|PONT|FAC|20240116||ADT^A01^ADT_A01|C9|P|2.5.1', 'PID|1||P1^^^GHH^MR||DOE^JO', seg('PV1', { 1: '1', 2: 'I', 7: '1111^Berg&van den&Berg^Anna', 19: 'V5^^^GHH' })).find((r) => r.resourceType === 'Encounter');
    expect(encounter.participant[0].individual.display).toBe('Anna Berg');
  });

  it('every repetition of OBX-16 (observers), PV1-7/8/9/17 (doctors), SPM-24 (conditions) and SPM-21 (reasons) is kept; OBX-17\'s method keeps its SNOMED CT system', () => {
    const [k] = observationsOf(seg('OBX', { 1: '1', 2: 'NM', 3: '2823-3^K^LN', 5: '4.1', 11: 'F', 16: '9876^Jones^Mary~5432^Brown^Bob', 17: '702659008^Automated count^SCT' }));
    expect(k.performer.map((p: any) => p.display)).toEqual(['Mary Jones', 'Bob Brown']);
    expect(k.method).toEqual({ coding: [{ system: 'http://snomed.info/sct', code: '702659008', display: 'Automated count' }] });
    const encounter = resourcesOf('MSH|^~\\&|ADT|GHH|PONT|FAC|20240116||ADT^A01^ADT_A01|C9|P|2.5.1', 'PID|1||P1^^^GHH^MR||DOE^JO', seg('PV1', { 1: '1', 2: 'I', 7: '1111^Adams^Alice~2222^Baker^Bob', 9: '4444^Dunn^Dora~5555^Eve^Ed', 19: 'V6^^^GHH' })).find((r) => r.resourceType === 'Encounter');
    expect(encounter.participant.map((p: any) => [p.type[0].coding[0].code, p.individual.display])).toEqual([['ATND', 'Alice Adams'], ['ATND', 'Bob Baker'], ['CON', 'Dora Dunn'], ['CON', 'Ed Eve']]);
    const specimen = resourcesOf(MSH_ORU(), 'PID|1||P1^^^GHH^MR||DOE^JO', obr({}), seg('SPM', { 1: '1', 4: '119297000^Blood^SCT', 21: 'RC^Clotting^HL70490~RB^Broken container^HL70490', 24: 'HEM^Hemolyzed^HL70493~LIP^Lipemic^HL70493' })).find((r) => r.resourceType === 'Specimen');
    expect(specimen.condition.map((c: any) => c.coding[0].code)).toEqual(['RC', 'RB', 'HEM', 'LIP']);
  });

  it('PV1-3: the point of care is a location of no physical type (a clinic is no ward); its facility (PL-4), building (PL-7) and floor (PL-8) are locations of their types', () => {
    const encounterOf = (pv1: string) => resourcesOf('MSH|^~\\&|ADT|GHH|PONT|FAC|20240116||ADT^A01^ADT_A01|C9|P|2.5.1', 'PID|1||P1^^^GHH^MR||DOE^JO', pv1).find((r) => r.resourceType === 'Encounter');
    const LPT = 'http://terminology.hl7.org/CodeSystem/location-physical-type';
    const typed = (code: string, display: string) => ({ location: { display }, physicalType: { coding: [{ system: LPT, code }] } });
    expect(encounterOf(seg('PV1', { 1: '1', 2: 'I', 3: '4E^401^1^NORTH^^N^B2^4', 19: 'V7^^^GHH' })).location).toEqual([
      { location: { display: '4E' } }, typed('ro', '401'), typed('bd', '1'), typed('si', 'NORTH'), typed('bu', 'B2'), typed('lvl', '4'),
    ]);
    expect(encounterOf(seg('PV1', { 1: '1', 2: 'O', 3: '^^^GHH', 19: 'V8^^^GHH' })).location).toEqual([typed('si', 'GHH')]);
  });

  it('a pre-admission (PV1-2 P) is a planned visit, not one in progress', () => {
    const encounter = resourcesOf('MSH|^~\\&|ADT|GHH|PONT|FAC|20240116||ADT^A04^ADT_A01|C9|P|2.5.1', 'PID|1||P1^^^GHH^MR||DOE^JO', seg('PV1', { 1: '1', 2: 'P', 19: 'V9^^^GHH' })).find((r) => r.resourceType === 'Encounter');
    expect(encounter.status).toBe('planned');
  });

  it('an SPM before any OBR is AE (as an OBX is); the NTEs after an SPM and its description (SPM-14) are its note; SPM-20 N is unavailable; an SPM without SPM-1 or SPM-2 is its OBR\'s specimen, not AE', () => {
    expect(refusal(MSH_ORU(), 'PID|1||P1^^^GHH^MR||DOE^JO', 'SPM|1|^AC1&LAB||119297000^Blood^SCT', obr({}))).toMatchObject({ ok: false, ack: 'AE', error: { location: 'SPM', condition: ErrorCondition.segmentSequence } });
    const specimen = resourcesOf(MSH_ORU(), 'PID|1||P1^^^GHH^MR||DOE^JO', obr({}), seg('SPM', { 2: '^AC1&LAB', 4: '119297000^Blood^SCT', 14: 'Drawn above the IV line', 20: 'N' }), 'NTE|1||Received warm').find((r) => r.resourceType === 'Specimen');
    expect(specimen).toMatchObject({ status: 'unavailable', note: [{ text: 'Drawn above the IV line\nReceived warm' }] });
    const bare = resourcesOf(MSH_ORU(), 'PID|1||P1^^^GHH^MR||DOE^JO', obr({}), 'SPM||||119297000^Blood^SCT').find((r) => r.resourceType === 'Specimen');
    expect(bare.id).toBe('LAB-F1');
  });

  it("a user-defined table's code (PV1-4, 10, 14, 36) is the facility's: written without HL7's code system, whose example meanings would read as its own", () => {
    const encounter = resourcesOf('MSH|^~\\&|ADT|GHH|PONT|FAC|20240116||ADT^A01^ADT_A01|C9|P|2.5.1', 'PID|1||P1^^^GHH^MR||DOE^JO', seg('PV1', { 1: '1', 2: 'I', 4: 'E', 10: 'MED', 14: '1^Ambulance', 19: 'V10^^^GHH' })).find((r) => r.resourceType === 'Encounter');
    expect(encounter).toMatchObject({ type: [{ coding: [{ code: 'E' }] }], serviceType: { coding: [{ code: 'MED' }] }, hospitalization: { admitSource: { coding: [{ code: '1', display: 'Ambulance' }] } } });
    expect(JSON.stringify(encounter)).not.toMatch(/v2-0007|v2-0069|v2-0023/);
  });

  it('cosmetic: an NTE of "" or spaces is no line; OBR-32 flat (v2.3: 12345^Smith^John) keeps the name; OBX-23\'s id in XON-3; OBR-8 ends the report\'s period', () => {
    const resources = resourcesOf(MSH_ORU('2.3'), 'PID|1||P1^^^GHH^MR||DOE^JO', obr({ 8: '20240116100000', 32: '12345^Smith^John' }), 'NTE|1||""', 'NTE|2||  ', 'NTE|3||Kept',
      seg('OBX', { 1: '1', 2: 'NM', 3: '2823-3^K^LN', 5: '4.1', 11: 'F', 23: 'Central Lab^^CL77' }));
    const report = resources.find((r) => r.resourceType === 'DiagnosticReport');
    expect(report.conclusion).toBe('Kept');
    expect(report.resultsInterpreter).toEqual([{ type: 'Practitioner', display: 'John Smith', identifier: { value: '12345' } }]);
    expect(report.effectivePeriod).toEqual({ start: '2024-01-16T09:30:00Z', end: '2024-01-16T10:00:00Z' });
    expect(report.effectiveDateTime).toBeUndefined();
    expect(resources.find((r) => r.resourceType === 'Observation').performer).toEqual([{ type: 'Organization', display: 'Central Lab', identifier: { value: 'CL77' } }]);
  });
});

describe('what Pont\'s validation would refuse is AE at once, never AA and then lost (found while reviewing OBR-8)', () => {
  const MSH_ORU = 'MSH|^~\\&|LAB|GHH|PONT|FAC|20240116||ORU^R01^ORU_R01|C9|P|2.5.1';
  const PID = 'PID|1||P1^^^GHH^MR||DOE^JO';
  const obr = (fields: Record<number, string>) => seg('OBR', { 1: '1', 2: 'O1^OE', 3: 'F1^LAB', 4: '24323-8^CMP^LN', 7: '20240116093000', 25: 'F', ...fields });
  const t = (...segments: string[]) => translate(Hl7Message.parse(segments.join('\r')), MAPS);

  it('a period that ends before it starts (OBR-8 before OBR-7, SPM-17, PV1-45 before PV1-44) is AE naming its segment', () => {
    expect(t(MSH_ORU, PID, obr({ 8: '20240116080000' }), 'OBX|1|NM|2345-7^Glucose^LN||5.5|mmol/L|||||F')).toMatchObject({ ok: false, ack: 'AE', error: { location: 'OBR', condition: ErrorCondition.dataType, text: expect.stringMatching(/ends before it starts/) } });
    expect(t(MSH_ORU, PID, obr({}), 'OBX|1|NM|2345-7^Glucose^LN||5.5|mmol/L|||||F', seg('SPM', { 1: '1', 4: '119297000^Blood^SCT', 17: '20240116080000^20240115080000' }))).toMatchObject({ ok: false, ack: 'AE', error: { location: 'SPM' } });
    expect(t('MSH|^~\\&|ADT|GHH|PONT|FAC|20240116||ADT^A03^ADT_A03|C9|P|2.5.1', PID, seg('PV1', { 1: '1', 2: 'I', 19: 'V1^^^GHH', 44: '20240118093000', 45: '20240115083000' }))).toMatchObject({ ok: false, ack: 'AE', error: { location: 'PV1' } });
  });

  it('an SN range whose low is above its high (^20^-^10) is AE naming OBX-5 of its OBX, by its place among the OBXs', () => {
    expect(t(MSH_ORU, PID, obr({}), 'OBX|1|NM|2345-7^Glucose^LN||5.5|mmol/L|||||F', 'OBX|2|SN|5048-4^Titer^LN||^20^-^10||||||F')).toMatchObject({ ok: false, ack: 'AE', error: { location: 'OBX-5', sequence: 2, text: expect.stringMatching(/low is never above its high/) } });
  });
});

describe("found by an attacker's review of the v2 agent (stop 72)", () => {
  const MSH = (type = 'ORU^R01^ORU_R01') => `MSH|^~\\&|LAB|GHH|PONT|FAC|20240116||${type}|C9|P|2.5.1`;
  const obr = (filler = 'F1') => seg('OBR', { 1: '1', 2: 'O1^OE', 3: `${filler}^LAB`, 4: '24323-8^CMP^LN', 7: '20240116093000', 25: 'F' });
  const t = (...segments: string[]) => translate(Hl7Message.parse(segments.join('\r')), MAPS, segments.join('\r'));

  it('an MRG outside an A40 merges nothing: no Patient of an ORU or an A08 replaces the record it names', () => {
    const oru = resourcesOf(MSH(), 'PID|1||P1^^^GHH^MR||DOE^JO', obr(), 'OBX|1|NM|2345-7^Glucose^LN||5.5|mmol/L|||||F', 'MRG|OTHER^^^GHH^MR');
    const a08 = resourcesOf(MSH('ADT^A08^ADT_A01'), 'PID|1||P1^^^GHH^MR||DOE^JO', 'MRG|OTHER^^^GHH^MR');
    for (const patient of [...oru, ...a08].filter((r) => r.resourceType === 'Patient')) expect(patient.link).toBeUndefined();
  });

  it('two resources of one id with different content in one message are AE 205, never one silently kept: one visit number for two patients, one accession for two specimens', () => {
    const visit = t(MSH(), 'PID|1||P1^^^GHH^MR||DOE^JO', 'PV1|1|O|||||||||||||||||V1^^^GHH', obr('F1'), 'OBX|1|NM|2345-7^Glucose^LN||5.5|mmol/L|||||F',
      'PID|2||P2^^^GHH^MR||ROE^ANN', 'PV1|1|O|||||||||||||||||V1^^^GHH', obr('F2'), 'OBX|1|NM|2345-7^Glucose^LN||6.5|mmol/L|||||F');
    expect(visit).toMatchObject({ ok: false, ack: 'AE', error: { location: 'PV1', sequence: 2, condition: ErrorCondition.duplicateKey } });
    const specimens = t(MSH(), 'PID|1||P1^^^GHH^MR||DOE^JO', obr(), 'OBX|1|NM|2345-7^Glucose^LN||5.5|mmol/L|||||F', 'SPM|1|^S1&LAB||119297000^Blood^SCT', 'SPM|2|^S1&LAB||122575003^Urine^SCT');
    expect(specimens).toMatchObject({ ok: false, ack: 'AE', error: { location: 'SPM', sequence: 2, condition: ErrorCondition.duplicateKey } });
    // Results whose keys fold together (F1 with sub-id 1, F1-1 without): AE, not one replacing the other.
    const folded = t(MSH(), 'PID|1||P1^^^GHH^MR||DOE^JO', obr('F1'), 'OBX|1|NM|GLU^Glucose^L|1|5.5|mmol/L|||||F', obr('F1-1'), 'OBX|1|NM|GLU^Glucose^L||6.5|mmol/L|||||F');
    expect(folded).toMatchObject({ ok: false, ack: 'AE', error: { location: 'OBX', sequence: 2, condition: ErrorCondition.duplicateKey } });
    // The same specimen named under two OBRs, identically, is one Specimen (no refusal).
    expect(resourcesOf(MSH(), 'PID|1||P1^^^GHH^MR||DOE^JO', obr('F1'), 'SPM|1|^S1&LAB||119297000^Blood^SCT', obr('F2'), 'SPM|1|^S1&LAB||119297000^Blood^SCT').filter((r) => r.resourceType === 'Specimen')).toHaveLength(1);
  });

  it("each specimen's facts are its own Observations, though their set ids start again at 1 under each SPM", () => {
    const resources = resourcesOf(MSH(), 'PID|1||P1^^^GHH^MR||DOE^JO', obr(), 'SPM|1|^S1&LAB||119297000^Blood^SCT', 'OBX|1|NM|VOL^Volume^L||5|mL|||||F', 'SPM|2|^S2&LAB||119297000^Blood^SCT', 'OBX|1|NM|VOL^Volume^L||9|mL|||||F');
    const facts = resources.filter((r) => r.resourceType === 'Observation');
    expect(facts.map((f) => [f.focus[0].reference, f.valueQuantity.value])).toEqual([['Specimen/LAB-S1', 5], ['Specimen/LAB-S2', 9]]);
    expect(new Set(facts.map((f) => f.id)).size).toBe(2);
  });

  it('a message of at most 1 MiB whose FHIR is over what a batch carries (repetitions multiplied) is AR, not AA and then refused by Pont', () => {
    const flags = Array.from({ length: 3000 }, () => 'H').join('~');
    const obx = Array.from({ length: 40 }, (_, i) => `OBX|${i + 1}|NM|C${i}^Test^L||5|mmol/L||${flags}|||F`);
    const r = t(MSH(), 'PID|1||P1^^^GHH^MR||DOE^JO', obr(), ...obx);
    expect(r).toMatchObject({ ok: false, ack: 'AR' });
  });

  it('a segment name that is no v2 name (pid, lower case) is AE naming it, never a result filed under the patient before it', () => {
    expect(t(MSH(), 'PID|1||P1^^^GHH^MR||DOE^JO', obr('F1'), 'OBX|1|NM|2345-7^Glucose^LN||5.5|mmol/L|||||F', 'pid|2||P2^^^GHH^MR||ROE^ANN', obr('F2'), 'OBX|1|NM|2345-7^Glucose^LN||6.5|mmol/L|||||F'))
      .toMatchObject({ ok: false, ack: 'AE', error: { location: 'pid', condition: ErrorCondition.segmentSequence } });
  });

  it('a message type named like an object property (constructor, __proto__) is AR 200, never an exception', () => {
    for (const type of ['constructor', '__proto__', 'toString']) expect(t(MSH(`${type}^R01`), 'PID|1||P1^^^GHH^MR||DOE^JO')).toMatchObject({ ok: false, ack: 'AR', error: { location: 'MSH-9' } });
  });
});

describe("the ADT events a facility's feed sends beside the five (found in a review of the agent's leftovers: a transfer, a cancelled admission and a person update were AR, the visit left as it was)", () => {
  const msh = (event: string, id = 'E1') => `MSH|^~\\&|ADT|GHH|PONT|FAC|20240116120000||ADT^${event}^ADT_A01|${id}|P|2.5.1`;
  const PID = 'PID|1||P1^^^GHH^MR||DOE^JO||19620320|F';
  const visit = (fields: Record<number, string> = {}) => seg('PV1', { 1: '1', 2: 'I', 3: '2000^2012^01', 19: 'V1^^^GHH', 44: '20240115083000+0100', ...fields });
  const IF_ABSENT = { system: 'https://pont.health/fhir/CodeSystem/bridge-write', code: 'if-absent' };
  const byType = (resources: any[]) => Object.fromEntries(resources.map((r) => [r.resourceType, r]));
  const writtenWhole = (patient: any) => !(patient.meta?.tag ?? []).some((t: any) => t.code === IF_ABSENT.code);

  it('a transfer (A02) moves the visit, in progress; the patient is named, not rewritten', () => {
    const { Patient, Encounter } = byType(resourcesOf(msh('A02'), PID, visit({ 3: '3000^3104^02', 6: '2000^2012^01' })));
    expect(Encounter).toMatchObject({ id: 'GHH-V1', status: 'in-progress', location: [{ location: { display: '3000' } }, { location: { display: '3104' } }, { location: { display: '02' } }] });
    expect(Patient.meta.tag).toContainEqual(IF_ABSENT);
  });

  it('a cancelled admission (A11) is a cancelled visit, whatever its PV1-45 says', () => {
    expect(byType(resourcesOf(msh('A11'), PID, visit())).Encounter.status).toBe('cancelled');
    expect(byType(resourcesOf(msh('A11'), PID, visit({ 45: '20240118093000+0100' }))).Encounter.status).toBe('cancelled');
  });

  it('a pre-admission (A05) is planned, a visit of its own message without a visit number; a change of class (A06, A07) is the class PV1-2 gives', () => {
    const { Encounter } = byType(resourcesOf(msh('A05', 'PRE-1'), PID, visit({ 19: '' })));
    expect(Encounter).toMatchObject({ id: 'ADT-GHH-PRE-1', status: 'planned' });
    expect(byType(resourcesOf(msh('A06'), PID, visit({ 2: 'I' }))).Encounter.class.code).toBe('IMP');
    expect(byType(resourcesOf(msh('A07'), PID, visit({ 2: 'O' }))).Encounter.class.code).toBe('AMB');
  });

  it("a person's events (A28 add, A31 update) write the demographics whole and no visit, whatever their PV1 says", () => {
    for (const event of ['A28', 'A31']) {
      const resources = resourcesOf(msh(event), 'PID|1||P1^^^GHH^MR||DOE^JOANNA||19620320|F', seg('PV1', { 1: '1', 2: 'N', 19: 'V9^^^GHH' }));
      expect(resources.map((r) => r.resourceType), event).toEqual(['Patient']);
      expect(resources[0].name[0].given, event).toEqual(['JOANNA']);
      expect(writtenWhole(resources[0]), event).toBe(true);
    }
  });

  it('a visit event without a visit number (PV1-19) changes the patient alone; the demographics are the admissions\' and updates\' only', () => {
    for (const event of ['A02', 'A03', 'A06', 'A07', 'A11']) {
      const resources = resourcesOf(msh(event), PID, visit({ 19: '' }));
      expect(resources.map((r) => r.resourceType), event).toEqual(['Patient']);
      expect(writtenWhole(resources[0]), event).toBe(false);
    }
    for (const event of ['A01', 'A04', 'A05', 'A08']) expect(writtenWhole(byType(resourcesOf(msh(event), PID, visit())).Patient), event).toBe(true);
  });

  it('an event still not handled (A17 swap, A12 cancel transfer, A13 cancel discharge: a thin PV1 written whole would empty the visit it reopens) is AR naming MSH-9.2, and lists those that are', () => {
    for (const event of ['A17', 'A12', 'A13']) {
      const refused = translate(Hl7Message.parse([msh(event), PID, visit()].join('\r')), MAPS);
      expect(refused, event).toMatchObject({ ok: false, ack: 'AR', error: { location: 'MSH-9.2', condition: ErrorCondition.unsupportedEvent } });
      expect((refused as any).error.text).toContain('ADT^A01/A02/A03/A04/A05/A06/A07/A08/A11/A28/A31/A40');
    }
  });

  it('the v2 path: `not PATH = codes` holds when the field is none of them, empty included', () => {
    const scope = { message: Hl7Message.parse([msh('A13'), PID].join('\r')) };
    expect(evaluateV2(parseV2Expression("'yes' where not MSH-9.2 = A13,A03 | 'no'"), scope)).toBe('no');
    expect(evaluateV2(parseV2Expression("'yes' where not MSH-9.2 = A03 | 'no'"), scope)).toBe('yes');
    expect(evaluateV2(parseV2Expression("'yes' where not PID-30 = Y | 'no'"), scope)).toBe('yes');
    expect(evaluateV2(parseV2Expression("'yes' where not PID-8 | 'no'"), scope)).toBe('no');
  });
});
