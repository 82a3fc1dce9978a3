/**
 * The operator CLI's grammar: commands are declared once (src/cli.ts), and both the parser and the help text are
 * made from that declaration, so the help cannot drift from what the parser accepts.
 */
import { parseArgs } from 'node:util';

/** A command line the CLI cannot accept (unknown command or option, missing or invalid value): exit code 2. */
export class UsageError extends Error {}

export const EXIT_CODES = [
  'Exit codes:',
  '  0  success',
  '  1  the command ran and failed (no such client, database unreachable, bad configuration, ...)',
  '  2  usage error (unknown command or option, missing or invalid value)',
].join('\n');

export interface OptionSpec {
  /** `integer` and `string` take a value; `boolean` is a flag. */
  type: 'string' | 'integer' | 'boolean';
  /** Name of the value in the help (`--org <ORG>`). */
  value?: string;
  required?: boolean;
  /** What applies when the option is absent, as the help shows it. */
  default?: string;
  min?: number;
  max?: number;
  description: string;
}

export interface ArgSpec {
  name: string;
  description: string;
  /** Default true. */
  required?: boolean;
  /** Takes every remaining argument (the last one only). */
  variadic?: boolean;
  choices?: string[];
}

export type Values = Record<string, string | number | boolean | undefined>;
export type Args = Record<string, string | string[] | undefined>;

export interface CommandSpec {
  /** What the operator types after `pont`: `migrate`, `clients create`. */
  name: string;
  summary: string;
  /** Shown in the command's own help, after the summary. */
  details?: string;
  args?: ArgSpec[];
  options?: Record<string, OptionSpec>;
  examples: string[];
  run(input: { values: Values; args: Args }): Promise<number>;
}

const HELP_OPTION = '-h, --help';

/** Parses a command's arguments (everything after its name) against its declaration. */
export function parseCommand(spec: CommandSpec, argv: string[]): { values: Values; args: Args } {
  const options = spec.options ?? {};
  const { tokens } = parseArgs({
    args: argv,
    strict: false,
    allowPositionals: true,
    tokens: true,
    options: Object.fromEntries(Object.entries(options).map(([name, o]) => [name, { type: o.type === 'boolean' ? 'boolean' : 'string' }])),
  });
  const values: Values = {};
  const positionals: string[] = [];
  for (const token of tokens) {
    if (token.kind === 'positional') positionals.push(token.value);
    if (token.kind !== 'option') continue;
    const option = options[token.name];
    if (!option || token.rawName !== `--${token.name}`) {
      throw new UsageError(`Unknown option ${token.rawName}${suggest(token.rawName, Object.keys(options).map((n) => `--${n}`))}`);
    }
    if (option.type === 'boolean') {
      if (token.value !== undefined) throw new UsageError(`${token.rawName} takes no value (it is a flag)`);
      values[token.name] = true;
      continue;
    }
    // `--org --name X`: parseArgs would take `--name` as the value of --org.
    if (token.value === undefined || (!token.inlineValue && token.value.startsWith('--'))) {
      throw new UsageError(`${token.rawName} needs a value: ${token.rawName} <${option.value ?? 'VALUE'}>`);
    }
    values[token.name] = option.type === 'integer' ? integer(token.rawName, token.value, option) : token.value;
  }
  for (const [name, option] of Object.entries(options)) {
    if (option.required && values[name] === undefined) throw new UsageError(`--${name} is required. ${optionName(name, option)}: ${option.description}`);
    if (option.type === 'boolean' && values[name] === undefined) values[name] = false;
  }
  const args: Args = {};
  for (const arg of spec.args ?? []) {
    const taken = arg.variadic ? positionals.splice(0) : positionals.splice(0, 1);
    if (!taken.length) {
      if (arg.required ?? true) throw new UsageError(`${arg.name} is required. ${arg.name}: ${arg.description}`);
      continue;
    }
    for (const value of taken) {
      if (arg.choices && !arg.choices.includes(value)) throw new UsageError(`${arg.name}: give ${arg.choices.join(' or ')}, not "${value}"`);
    }
    args[arg.name] = arg.variadic ? taken : taken[0];
  }
  if (positionals.length) throw new UsageError(`Unexpected argument "${positionals[0]}"`);
  return { values, args };
}

function integer(flag: string, text: string, option: OptionSpec): number {
  const n = Number(text);
  const min = option.min ?? -Infinity;
  const max = option.max ?? Infinity;
  if (!/^-?\d+$/.test(text.trim()) || n < min || n > max) {
    throw new UsageError(`${flag} must be a whole number${isFinite(min) ? ` from ${min}` : ''}${isFinite(max) ? ` to ${max}` : ''}, not "${text}"`);
  }
  return n;
}

/** `; did you mean --facility?` for the nearest candidate, if one is near enough to be a typo; else nothing. */
export function suggest(typed: string, candidates: string[], shown: (candidate: string) => string = (c) => c): string {
  const scored = candidates
    .map((c) => ({ c, d: c.startsWith(typed) && typed.replace(/^-+/, '').length >= 2 ? 0.5 : distance(typed, c) }))
    .sort((a, b) => a.d - b.d);
  const best = scored[0];
  return best && best.d <= Math.max(2, Math.floor(typed.length / 3)) ? `; did you mean ${shown(best.c)}?` : '';
}

/** Levenshtein distance. */
function distance(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++) row[j] = Math.min(prev[j]! + 1, row[j - 1]! + 1, prev[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
    prev = row;
  }
  return prev[b.length]!;
}

function optionName(name: string, option: OptionSpec): string {
  return option.type === 'boolean' ? `--${name}` : `--${name} <${option.value ?? 'VALUE'}>`;
}

function argName(arg: ArgSpec): string {
  const name = arg.choices ? arg.choices.join('|') : arg.name;
  const shown = arg.variadic ? `${name}...` : name;
  return (arg.required ?? true) ? shown : `[${shown}]`;
}

export function usageLine(spec: CommandSpec): string {
  const options = Object.entries(spec.options ?? {});
  const parts = [
    `pont ${spec.name}`,
    ...(spec.args ?? []).map(argName),
    ...options.filter(([, o]) => o.required).map(([n, o]) => optionName(n, o)),
    ...options.filter(([, o]) => !o.required).map(([n, o]) => `[${optionName(n, o)}]`),
  ];
  return parts.join(' ');
}

/** `string, required` / `integer 1-64, default 1` / `flag`. */
function optionFacts(option: OptionSpec): string {
  const type =
    option.type === 'boolean'
      ? 'flag'
      : option.type === 'integer' && option.min !== undefined && option.max !== undefined
        ? `integer ${option.min}-${option.max}`
        : option.type;
  return [type, option.required ? 'required' : option.default !== undefined ? `default: ${option.default}` : 'optional'].join(', ');
}

function table(rows: Array<[string, string]>): string[] {
  const width = Math.max(...rows.map(([left]) => left.length));
  return rows.map(([left, right]) => `  ${left.padEnd(width)}  ${right}`);
}

/** The help of one command: usage, what it does, arguments, options (type, required or default), examples, exit codes. */
export function commandHelp(spec: CommandSpec): string {
  const lines = [`Usage: ${usageLine(spec)}`, '', spec.summary + (spec.summary.endsWith('.') ? '' : '.')];
  if (spec.details) lines.push(spec.details);
  if (spec.args?.length) {
    lines.push('', 'Arguments:');
    lines.push(...table(spec.args.map((a) => [argName(a), `${(a.required ?? true) ? 'required' : 'optional'}. ${a.description}`])));
  }
  lines.push('', 'Options:');
  const options = Object.entries(spec.options ?? {}).map(([n, o]): [string, string] => [optionName(n, o), `(${optionFacts(o)}) ${o.description}`]);
  lines.push(...table([...options, [HELP_OPTION, 'Show this help']]));
  lines.push('', 'Examples:', ...spec.examples.map((e) => `  ${e}`), '', EXIT_CODES);
  return lines.join('\n');
}

/** The help of a group of subcommands (`pont clients --help`). */
export function groupHelp(group: string, summary: string, specs: CommandSpec[]): string {
  return [
    `Usage: pont ${group} <subcommand> [options]`,
    '',
    summary + '.',
    '',
    'Subcommands:',
    ...table(specs.map((s) => [s.name.slice(group.length + 1), s.summary])),
    '',
    `Run 'pont ${group} <subcommand> --help' for its options and examples.`,
    '',
    EXIT_CODES,
  ].join('\n');
}

/** True when the arguments ask for help (before any `--`). */
export function wantsHelp(argv: string[]): boolean {
  const end = argv.indexOf('--');
  return (end < 0 ? argv : argv.slice(0, end)).some((a) => a === '--help' || a === '-h');
}
