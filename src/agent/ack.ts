/**
 * Acknowledgements (docs/hl7-v2.md "Acknowledgements"), written in the message's own encoding characters and
 * version. Original mode (no MSH-15/MSH-16): AA once the message is durably queued, AE with ERR for one that
 * cannot be parsed or mapped, AR for a type or version the agent does not handle. Enhanced mode (MSH-15 or MSH-16
 * given): the accept acknowledgement CA/CE/CR, sent or not as MSH-15 asks, and for an accepted message the
 * application acknowledgement AA/AE once Pont has it (or refused part of it), sent or not as MSH-16 asks (AL always,
 * NE or empty never, ER on error only, SU on success only).
 */
import { Hl7Context, type Hl7Message } from '@medplum/core';
import type { V2Error } from './translate';

export type AckCode = 'AA' | 'AE' | 'AR';

const COMMIT: Record<AckCode, string> = { AA: 'CA', AE: 'CE', AR: 'CR' };
const TEXT: Record<string, string> = { AA: 'Message accepted', AE: 'Application error', AR: 'Application reject', CA: 'Commit accept', CE: 'Commit error', CR: 'Commit reject' };

export interface AckInput {
  /** The message, when it parsed at least as far as its MSH. */
  message?: Hl7Message;
  code: AckCode;
  error?: V2Error;
  now: Date;
  /** The ACK's own control id (MSH-10). */
  controlId: string;
  /** Enhanced mode's application acknowledgement (MSH-16 decides), not the accept acknowledgement. */
  application?: boolean;
}

/** Whether enhanced mode asks for this message's acknowledgement of this kind (MSH-15 or MSH-16) at this outcome. */
function wanted(mode: string, ok: boolean): boolean {
  return mode === 'AL' || (mode === 'ER' && !ok) || (mode === 'SU' && ok);
}

/** Whether the message asks for an application acknowledgement (enhanced mode, MSH-16 AL, ER or SU). */
export function wantsApplicationAck(message: Hl7Message): boolean {
  return ['AL', 'ER', 'SU'].includes(message.getSegment('MSH')?.getField(16)?.toString() ?? '');
}

/** The ACK's text (segments separated by CR), or undefined when enhanced mode asks for none. */
export function buildAck({ message, code, error, now, controlId, application = false }: AckInput): string | undefined {
  const msh = message?.getSegment('MSH');
  const context = message?.context ?? new Hl7Context();
  const field = (n: number) => msh?.getField(n)?.toString() ?? '';
  const accept = field(15);
  const enhanced = accept !== '' || field(16) !== '';
  let ackCode: string = code;
  if (application) {
    if (!wanted(field(16), code === 'AA')) return undefined;
  } else if (enhanced) {
    // An empty MSH-15 beside an MSH-16: accept acknowledgements always (HL7 v2 2.9.3's default).
    if (['NE', 'ER', 'SU'].includes(accept) && !wanted(accept, code === 'AA')) return undefined;
    ackCode = COMMIT[code];
  }
  const version = msh?.getField(12)?.getComponent(1) || '2.5.1';
  const { fieldSeparator: f, componentSeparator: c, subcomponentSeparator: s, repetitionSeparator: r, escapeCharacter: e } = context;
  const event = msh?.getField(9)?.getComponent(2) ?? '';
  const type = event ? `ACK${c}${event}${c}ACK` : 'ACK';
  const segments = [
    ['MSH', context.getMsh2(), field(5), field(6), field(3), field(4), hl7Time(now), '', type, controlId, field(11) || 'P', version].join(f),
    ['MSA', ackCode, field(10), error && OLD_ERR.test(version) ? escapeText(error.text.slice(0, MSA_TEXT_LENGTH).trimEnd(), f, c, s, r, e) : TEXT[ackCode]].join(f),
  ];
  if (error) segments.push(errSegment(error, version, f, c, s, r, e));
  // A NUL the message carried (MSA-2 echoes MSH-10, the MSH echoes MSH-3 to MSH-6) is escaped as \X00\, never
  // sent raw: the ACK holds no NUL byte, and MSA-2 un-escaped is still the sender's control id, so it can match the
  // ACK to its message. (Without an escape character, which Hl7Message always supplies, it would be dropped.)
  // A message whose escape character is itself a NUL (MSH-2) has no way to write one: dropped.
  return segments.join('\r').replace(/\u0000/g, e && e !== '\u0000' ? `${e}X00${e}` : '');
}

/** Versions whose ERR is ERR-1 (ELD) alone, with no room for text: the text is MSA-3's (at most its length, 80). */
const OLD_ERR = /^2\.[34]/;
const MSA_TEXT_LENGTH = 80;

/** ERR in the message's version: ERR-1 (ELD) before v2.5, ERR-2/3/4/8 from v2.5 on. Text in it is escaped. */
function errSegment(error: V2Error, version: string, f: string, c: string, s: string, r: string, e: string): string {
  const m = /^([A-Z][A-Z0-9]{2})(?:-(\d+))?(?:\.(\d+))?/.exec(error.location);
  const [segment, fieldNo, component] = [m?.[1] ?? '', m?.[2] ?? '', m?.[3] ?? ''];
  const [code, name] = error.condition;
  const text = escapeText(error.text, f, c, s, r, e);
  const sequence = String(error.sequence ?? 1);
  if (OLD_ERR.test(version)) return ['ERR', [segment, sequence, fieldNo, [code, name, 'HL70357'].join(s)].join(c)].join(f);
  const location = [segment, sequence, fieldNo, '', component].join(c).replace(new RegExp(`\\${c}+$`), '');
  return ['ERR', '', location, [code, name, 'HL70357'].join(c), 'E', '', '', '', text].join(f);
}

/** Separators inside text are escaped (\F\ \S\ \T\ \R\ \E\) so that the ERR stays one field. */
function escapeText(text: string, f: string, c: string, s: string, r = '~', e = '\\'): string {
  const sequence: Record<string, string> = { [e]: 'E', [f]: 'F', [c]: 'S', [s]: 'T', [r]: 'R' };
  return [...text].map((ch) => (sequence[ch] ? `${e}${sequence[ch]}${e}` : ch === '\r' || ch === '\n' ? ' ' : ch)).join('');
}

/** YYYYMMDDHHMMSS+0000 (UTC). */
export function hl7Time(d: Date): string {
  const p = (n: number, w = 2) => String(n).padStart(w, '0');
  return `${d.getUTCFullYear()}${p(d.getUTCMonth() + 1)}${p(d.getUTCDate())}${p(d.getUTCHours())}${p(d.getUTCMinutes())}${p(d.getUTCSeconds())}+0000`;
}
