/**
 * The operator CLI's grammar: commands are declared once (src/cli.ts), and both the parser and the help text are
 * made from that declaration, so the help cannot drift from what the parser accepts.
 */

import { basename, isAbsolute, relative } from 'node:path';
import type { z } from 'zod';

/**
 * The command as the person ran it, for what they are told to run next (`Run 'node bin/pont.js clients create
 * --help'`): `pont` is on the PATH only where it was installed as a binary. Through `npm run pont`: `npm run -s pont
 * --` (-s: without npm's banner); `npx pont`: that; the installed binary (a link named pont): `pont`; else `node` and
 * the script as a path from the working directory (`node bin/pont.js` in a checkout, `node dist/bin.js` in the image),
 * absolute when that is shorter than climbing out of the working directory.
 */
export function invokedAs(script: string | undefined = process.argv[1], env: NodeJS.ProcessEnv = process.env, cwd = process.cwd()): string {
  if (env.npm_lifecycle_event === 'pont' && script?.endsWith('pont.js')) return 'npm run -s pont --';
  if (!script) return 'pont';
  if (basename(script) === 'pont') return env.npm_command === 'exec' ? 'npx pont' : 'pont';
  const fromHere = relative(cwd, script);
  const path = fromHere.startsWith('..') && isAbsolute(script) && script.length <= fromHere.length ? script : fromHere;
  return `node ${/^[\w./@%+=:,-]+$/.test(path) ? path : `'${path.replace(/'/g, `'\\''`)}'`}`;
}

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
  /**
   * What the values mean (a scope Pont knows, a file it can read), checked before the command runs and beside the
   * parser's problems, so that one answer names them all: given every value the parser took (one missing or refused
   * is undefined), it returns a problem a line, each naming its flag and the value (flagProblems).
   */
  check?(input: { values: Values; args: Args }): string[] | Promise<string[]>;
  /** `program`: the command as it was run (invokedAs), for the commands a message tells to run. */
  run(input: { values: Values; args: Args; program: string }): Promise<number>;
}

const HELP_OPTION = '-h, --help';

/** `--name` or `--name=…`: how every option is spelt (a test holds every declared name to it). */
const OPTION_WORD = /^--[a-z][a-z0-9-]*(=|$)/;

/**
 * Parses a command's arguments (everything after its name) against its declaration. Every problem of the command
 * line is reported at once, one a line, in the order typed (options, then what is missing, then the arguments):
 * one UsageError, so that one failed attempt shows all there is to fix.
 */
export function parseCommand(spec: CommandSpec, argv: string[]): { values: Values; args: Args } {
  const { values, args, problems } = readCommand(spec, argv);
  if (problems.length) throw new UsageError(problems.join('\n'));
  return { values, args };
}

/** parseCommand, then the command's own check of the values (CommandSpec.check): every problem in one UsageError. */
export async function parseAndCheckCommand(spec: CommandSpec, argv: string[]): Promise<{ values: Values; args: Args }> {
  const { values, args, problems } = readCommand(spec, argv);
  if (spec.check) problems.push(...(await spec.check({ values, args })));
  if (problems.length) throw new UsageError(problems.join('\n'));
  return { values, args };
}

/** What parseCommand reads, and its problems (not thrown). */
function readCommand(spec: CommandSpec, argv: string[]): { values: Values; args: Args; problems: string[] } {
  const options = spec.options ?? {};
  const problems: string[] = [];
  const values: Values = {};
  const positionals: string[] = [];
  /** Options typed but refused: not reported as missing too. */
  const refused = new Set<string>();
  for (let i = 0; i < argv.length; i++) {
    const word = argv[i]!;
    if (word === '--') {
      positionals.push(...argv.slice(i + 1));
      break;
    }
    // A value may begin with '-' (a key id is a base64url thumbprint: one in 64 does, one in 4,096 with '--'): only
    // `--name` (a lower-case word, as every option's name is), a one-letter `-x` and an option's name with one dash
    // (`-dry-run`, refused with the right spelling) are taken for options.
    const optionLike = word.startsWith('--') ? OPTION_WORD.test(word) : word.startsWith('-') && (word.length === 2 || !!options[word.slice(1).split('=')[0]!]);
    if (!optionLike) {
      positionals.push(word);
      continue;
    }
    const equals = word.indexOf('=');
    const rawName = equals > 0 && word.startsWith('--') ? word.slice(0, equals) : word;
    const inline = rawName === word ? undefined : word.slice(equals + 1);
    const name = rawName.slice(2);
    const option = rawName.startsWith('--') ? options[name] : undefined;
    // The next word, when it can be this option's value (`--org --name X`: --org has none).
    const next = () => (inline === undefined && argv[i + 1] !== undefined && !argv[i + 1]!.startsWith('--') ? argv[++i] : undefined);
    if (!option) {
      const near = nearest(rawName, Object.keys(options).map((n) => `--${n}`));
      problems.push(`Unknown option ${rawName}${near ? `; did you mean ${near}?` : ''}`);
      // A misspelt option that takes a value took its value with it (`--nmae X`): X is not an argument of its own.
      if (near && options[near.slice(2)]!.type !== 'boolean' && !argv[i + 1]?.startsWith('-')) next();
      continue;
    }
    if (option.type === 'boolean') {
      if (inline !== undefined) {
        problems.push(`${rawName} takes no value (it is a flag)`);
        refused.add(name);
      } else values[name] = true;
      continue;
    }
    const value = inline ?? next();
    if (value === undefined) {
      problems.push(`${rawName} needs a value: ${rawName} <${option.value ?? 'VALUE'}>`);
      refused.add(name);
      continue;
    }
    const problem = option.type === 'integer' ? integerProblem(rawName, value, option) : undefined;
    if (problem) {
      problems.push(problem);
      refused.add(name);
    } else values[name] = option.type === 'integer' ? Number(value) : value;
  }
  for (const [name, option] of Object.entries(options)) {
    if (option.required && values[name] === undefined && !refused.has(name)) problems.push(`--${name} is required. ${optionName(name, option)}: ${option.description}`);
    if (option.type === 'boolean' && values[name] === undefined) values[name] = false;
  }
  const args: Args = {};
  for (const arg of spec.args ?? []) {
    const taken = arg.variadic ? positionals.splice(0) : positionals.splice(0, 1);
    if (!taken.length) {
      if (arg.required ?? true) problems.push(`${arg.name} is required. ${arg.name}: ${arg.description}`);
      continue;
    }
    const wrong = taken.filter((value) => arg.choices && !arg.choices.includes(value));
    problems.push(...wrong.map((value) => `${arg.name}: give ${arg.choices!.join(' or ')}, not "${value}"`));
    args[arg.name] = arg.variadic ? taken : taken[0];
  }
  problems.push(...positionals.map((p) => `Unexpected argument "${p}"`));
  return { values, args, problems };
}

/** A value as a problem quotes it: at most 60 characters. */
export const quoted = (value: string) => JSON.stringify(value.length > 60 ? `${value.slice(0, 60)}…` : value);

/**
 * The problems of flags' values by their schemas (each value given; undefined ones are skipped), in words that name
 * the flag and the value: `--scopes: "bogus" is not a scope Pont knows (one of: …)`, `--name: must not be empty`.
 * A schema's own message is kept when it is written for people (a custom one); zod's defaults ("Invalid option:
 * expected one of …", "Too small: expected string to have >=1 characters") are said again in words. `what` names a
 * value of an enumeration (default "an allowed value"); an array's issues are its item's.
 */
export async function flagProblems(checks: Array<{ flag: string; value: unknown; schema: z.ZodType; what?: string }>): Promise<string[]> {
  const problems: string[] = [];
  for (const { flag, value, schema, what } of checks) {
    if (value === undefined) continue;
    const result = await schema.safeParseAsync(value);
    if (!result.success) problems.push(...result.error.issues.map((issue) => `${flag}: ${inWords(issue, value, what)}`));
  }
  return problems;
}

/** A ZodError of a command's input, in words (flagProblems), each issue named by the flag of its field (`flags`). */
export function issueProblems(error: z.ZodError, flags: Record<string, string>): string[] {
  return error.issues.map((issue) => `${flags[String(issue.path[0])] ?? 'input'}: ${inWords({ ...issue, path: issue.path.slice(1) } as z.core.$ZodIssue, undefined)}`);
}

function inWords(issue: z.core.$ZodIssue, input: unknown, what = 'an allowed value'): string {
  const at = issue.path.length && Array.isArray(input) ? input[Number(issue.path[0])] : input;
  const shown = typeof at === 'string' ? quoted(at) : undefined;
  const own = !/^(Invalid|Too (small|big)|Expected)\b/.test(issue.message);
  if (typeof at === 'string' && !at.trim()) return 'must not be empty';
  if (issue.code === 'invalid_value')
    return `${shown ?? 'the value'} is not ${what} (one of: ${issue.values.join(', ')})${typeof at === 'string' ? suggest(at, issue.values.map(String)) : ''}`;
  if (own) return shown === undefined ? issue.message : /^must\b/.test(issue.message) ? `${shown} ${issue.message}` : `${shown} is not valid: ${issue.message}`;
  if (issue.code === 'too_small' && issue.origin === 'string')
    return Number(issue.minimum) <= 1 ? 'must not be empty' : `must be at least ${issue.minimum} characters, not ${String(at).length}`;
  if (issue.code === 'too_big' && issue.origin === 'string') return `must be at most ${issue.maximum} characters, not ${String(at).length}`;
  if (issue.code === 'too_small') return `give at least ${issue.minimum}`;
  if (issue.code === 'too_big') return `give at most ${issue.maximum}`;
  return shown === undefined ? 'is not valid' : `${shown} is not valid`;
}

function integerProblem(flag: string, text: string, option: OptionSpec): string | undefined {
  const n = Number(text);
  const min = option.min ?? -Infinity;
  const max = option.max ?? Infinity;
  if (/^-?\d+$/.test(text.trim()) && n >= min && n <= max) return undefined;
  return `${flag} must be a whole number${isFinite(min) ? ` from ${min}` : ''}${isFinite(max) ? ` to ${max}` : ''}, not "${text}"`;
}

/** The candidate nearest `typed`, if one is near enough to be a typo; else undefined. */
function nearest(typed: string, candidates: string[]): string | undefined {
  const scored = candidates
    .map((c) => ({ c, d: c.startsWith(typed) && typed.replace(/^-+/, '').length >= 2 ? 0.5 : distance(typed, c) }))
    .sort((a, b) => a.d - b.d);
  const best = scored[0];
  return best && best.d <= Math.max(2, Math.floor(typed.length / 3)) ? best.c : undefined;
}

/** `; did you mean --facility?` for the nearest candidate, if one is near enough to be a typo; else nothing. */
export function suggest(typed: string, candidates: string[], shown: (candidate: string) => string = (c) => c): string {
  const near = nearest(typed, candidates);
  return near === undefined ? '' : `; did you mean ${shown(near)}?`;
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

/** The help of a group of subcommands (`pont clients --help`); `program`: the command as it was run (invokedAs). */
export function groupHelp(group: string, summary: string, specs: CommandSpec[], program = 'pont'): string {
  return [
    `Usage: pont ${group} <subcommand> [options]`,
    '',
    summary + '.',
    '',
    'Subcommands:',
    ...table(specs.map((s) => [s.name.slice(group.length + 1), s.summary])),
    '',
    `Run '${program} ${group} <subcommand> --help' for its options and examples.`,
    '',
    EXIT_CODES,
  ].join('\n');
}

/** True when the arguments ask for help (before any `--`). */
export function wantsHelp(argv: string[]): boolean {
  const end = argv.indexOf('--');
  return (end < 0 ? argv : argv.slice(0, end)).some((a) => a === '--help' || a === '-h');
}
