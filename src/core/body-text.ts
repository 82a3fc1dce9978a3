import { badRequest } from './errors';
import { MAX_BODY_DEPTH } from './limits';

// The text of a request body, read strictly: UTF-8, forms and JSON (src/http/body.ts reads the bytes; the FHIR
// core parses Binary and JSON Patch contents with the same rules).

const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/** The body as text: invalid UTF-8 is refused, not replaced by U+FFFD. (A BOM is kept, and JSON.parse refuses it, as before.) */
export function decodeUtf8(raw: Buffer): string {
  try {
    return utf8.decode(raw);
  } catch {
    throw badRequest('The body is not valid UTF-8');
  }
}

/** A form body's fields in order (repeated names kept), decoded strictly: the one rule for every form Pont reads. */
export function formFields(text: string): Array<[string, string]> {
  // URLSearchParams replaces percent-encoded invalid UTF-8 by U+FFFD: decode each part strictly first.
  for (const part of text.split(/[&=]/)) {
    try {
      decodeURIComponent(part.replace(/\+/g, ' '));
    } catch {
      throw badRequest('Malformed percent-encoding or invalid UTF-8 in the form body');
    }
  }
  const form = [...new URLSearchParams(text)];
  // Decoded (%00 becomes NUL): the same rule as for JSON bodies and URLs.
  if (form.some(([k, v]) => k.includes('\u0000') || v.includes('\u0000'))) throw badRequest('NUL characters are not allowed in the body');
  return form;
}

/**
 * A JSON body's value. Before JSON.parse: no NUL characters, no nesting deeper than MAX_BODY_DEPTH (so every
 * later walk over the value may recurse); after it: no lone surrogate escapes.
 */
export function parseJsonText(text: string): unknown {
  // PostgreSQL cannot store NUL in text or jsonb; refuse it here rather than fail later.
  if (text.includes('\u0000') || text.includes('\\u0000')) throw badRequest('NUL characters are not allowed in the body');
  checkJsonDepth(text);
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw badRequest(`Malformed JSON body: ${(err as Error).message}`);
  }
  // An escaped lone surrogate (\ud800) parses, but is no Unicode text and PostgreSQL refuses it.
  if (/\\u[dD][89a-fA-F]/.test(text) && hasLoneSurrogate(value)) throw badRequest('The body has an unpaired UTF-16 surrogate escape');
  return value;
}

/**
 * Refuses JSON text whose arrays and objects nest deeper than MAX_BODY_DEPTH (brackets inside strings do not
 * count): one pass over the text, no recursion, before JSON.parse.
 */
export function checkJsonDepth(text: string): void {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c) i++; // a backslash: the next character is escaped (\" or \\)
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x5b || c === 0x7b) {
      if (++depth > MAX_BODY_DEPTH) throw badRequest(`The body is nested more than ${MAX_BODY_DEPTH} levels deep (arrays and objects)`);
    } else if (c === 0x5d || c === 0x7d) depth--;
  }
}

/** Whether a string or key anywhere in the value is not well-formed UTF-16 (an explicit stack: no recursion). */
function hasLoneSurrogate(value: unknown): boolean {
  const stack: unknown[] = [value];
  while (stack.length) {
    const v = stack.pop();
    if (typeof v === 'string') {
      if (!v.isWellFormed()) return true;
    } else if (Array.isArray(v)) for (const item of v) stack.push(item);
    else if (v && typeof v === 'object')
      for (const [k, item] of Object.entries(v)) {
        if (!k.isWellFormed()) return true;
        stack.push(item);
      }
  }
  return false;
}
