/**
 * The Bridge agent's config file (docs/hl7-v2.md "The config file"): JSON, as `pont agents create` prints the
 * credentials. Every key is checked before anything starts; a problem names the key. The file holds the agent key,
 * so a file that others may read is refused.
 */
import { readFileSync, statSync } from 'node:fs';

export interface AgentConfig {
  pont_url: string;
  agent_id: string;
  agent_key: string;
  facility_id: string;
  mllp_host: string;
  mllp_port: number;
  queue_dir: string;
  max_message_bytes: number;
}

export class AgentConfigError extends Error {
  constructor(
    /** The key that is missing or wrong (undefined: the file itself). */
    readonly key: string | undefined,
    message: string,
  ) {
    super(message);
    this.name = 'AgentConfigError';
  }
}

const text = (max: number, pattern?: RegExp, hint?: string) => (v: unknown) =>
  typeof v === 'string' && v.length > 0 && v.length <= max && (!pattern || pattern.test(v)) ? undefined : `must be ${hint ?? `a string of 1-${max} characters`}`;
const integer = (min: number, max: number) => (v: unknown) => (Number.isInteger(v) && (v as number) >= min && (v as number) <= max ? undefined : `must be an integer from ${min} to ${max}`);

/** What each key must be; the order is the order problems are reported in. */
const KEYS: Record<keyof AgentConfig, (v: unknown) => string | undefined> = {
  pont_url: (v) => {
    if (typeof v !== 'string') return 'must be the URL of Pont, e.g. https://pont.example.org';
    try {
      const url = new URL(v);
      return url.protocol === 'https:' || url.protocol === 'http:' ? undefined : 'must be an http(s) URL';
    } catch {
      return 'must be the URL of Pont, e.g. https://pont.example.org';
    }
  },
  agent_id: text(128, /^agt_[0-9a-f]{24}$/, 'the agent_id `pont agents create` printed (agt_ and 24 hex digits)'),
  agent_key: text(128, /^pak_[A-Za-z0-9_-]{20,}$/, 'the agent_key `pont agents create` printed (pak_…)'),
  facility_id: text(64),
  mllp_host: text(255),
  mllp_port: integer(1, 65535),
  queue_dir: text(4096),
  // At least a large ADT; at most 64 MiB, so that one message cannot exhaust the agent's memory.
  max_message_bytes: integer(1024, 64 * 1024 * 1024),
};

export function parseAgentConfig(json: unknown): AgentConfig {
  if (!json || typeof json !== 'object' || Array.isArray(json)) throw new AgentConfigError(undefined, 'the config file must hold a JSON object');
  const obj = json as Record<string, unknown>;
  for (const [key, check] of Object.entries(KEYS)) {
    if (!(key in obj)) throw new AgentConfigError(key, `${key} is missing`);
    const problem = check(obj[key]);
    if (problem) throw new AgentConfigError(key, `${key} ${problem}`);
  }
  const unknown = Object.keys(obj).filter((k) => !(k in KEYS));
  if (unknown.length) throw new AgentConfigError(unknown[0], `${unknown[0]} is not a config key (the keys are ${Object.keys(KEYS).join(', ')})`);
  return obj as unknown as AgentConfig;
}

/** Reads and checks FILE; refuses one that its group or others may read or write (it holds the agent key). */
export function loadAgentConfig(file: string): AgentConfig {
  let stat;
  try {
    stat = statSync(file);
  } catch (err) {
    throw new AgentConfigError(undefined, `cannot read the config file ${file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
  if (process.platform !== 'win32' && (stat.mode & 0o077) !== 0) {
    throw new AgentConfigError(undefined, `${file} holds the agent key and its group or others may read it (mode ${(stat.mode & 0o777).toString(8)}): chmod 600 ${file}`);
  }
  let json: unknown;
  try {
    json = JSON.parse(readFileSync(file, 'utf8'));
  } catch (err) {
    throw new AgentConfigError(undefined, `${file} is not JSON: ${(err as Error).message}`);
  }
  return parseAgentConfig(json);
}
