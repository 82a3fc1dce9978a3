/**
 * The CLI explains itself: every command of the table in src/cli.ts answers `--help` with its usage, its options
 * (type, required or default), examples and the exit codes; a wrong command line is exit code 2 with a message
 * that names the fix. Run through the real `bin/pont.js`, as an operator would.
 */
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { parseCommand, UsageError, type CommandSpec } from '../src/cli-args';
import { commands } from '../src/cli';
import { backend } from './harness';

const repo = fileURLToPath(new URL('..', import.meta.url));

/** Exit code, stdout and stderr of `node bin/pont.js ...args` (help needs no database). */
function pont(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, ['bin/pont.js', ...args], { cwd: repo, env: { ...process.env, LOG_LEVEL: 'error' } }, (err, stdout, stderr) =>
      resolve({ code: err ? Number((err as { code?: number }).code) : 0, stdout, stderr }),
    );
  });
}

/** A few processes at a time: the machine is shared. */
async function inBatches<T, R>(items: T[], size: number, fn: (item: T) => Promise<R>): Promise<R[]> {
  const out: R[] = [];
  for (let i = 0; i < items.length; i += size) out.push(...(await Promise.all(items.slice(i, i + size).map(fn))));
  return out;
}

const escape = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
const SLOW = 240_000;

// The CLI does not depend on the database backend: once is enough.
describe.runIf(backend === 'pglite')('pont --help (real processes)', () => {
  it('pont --help and pont help list every command and the exit codes, exit 0', async () => {
    for (const args of [['--help'], ['help'], ['-h']]) {
      const { code, stdout } = await pont(...args);
      expect(code).toBe(0);
      for (const command of commands) expect(stdout).toMatch(new RegExp(`^  ${escape(command.name)}  `, 'm'));
      expect(stdout).toMatch(/Exit codes:\n {2}0 {2}success\n {2}1 .*\n {2}2 {2}usage error/);
    }
  }, SLOW);

  it('every command answers --help: usage, each option with its type and whether it is required, examples, exit codes', async () => {
    const helps = await inBatches(commands, 4, async (command) => ({ command, ...(await pont(...command.name.split(' '), '--help')) }));
    for (const { command, code, stdout, stderr } of helps) {
      expect(code, `${command.name}: ${stderr}`).toBe(0);
      expect(stdout).toMatch(new RegExp(`^Usage: pont ${escape(command.name)}\\b`));
      for (const [name, option] of Object.entries(command.options ?? {})) {
        const line = new RegExp(`^  --${escape(name)}\\b.*\\((\\w[^)]*)\\) ${escape(option.description)}$`, 'm').exec(stdout);
        expect(line, `${command.name} --${name}`).not.toBeNull();
        const facts = line![1]!;
        expect(facts).toContain(option.type === 'boolean' ? 'flag' : option.type);
        if (option.required) expect(facts).toMatch(/\brequired\b/);
        else expect(facts).not.toMatch(/\brequired\b/);
        if (option.default !== undefined) expect(facts).toContain(`default: ${option.default}`);
      }
      for (const arg of command.args ?? []) expect(stdout).toContain(arg.description);
      expect(command.examples.length).toBeGreaterThan(0);
      for (const example of command.examples) expect(stdout).toContain(`\n  ${example}\n`);
      expect(stdout).toContain('Exit codes:');
    }
  }, SLOW);

  it('the usage of clients create and agents create is current: --org required, --all-patients listed', async () => {
    const clients = await pont('clients', 'create', '--help');
    expect(clients.stdout).toMatch(/^Usage: pont clients create --name <TEXT> --org <ORG> --scopes <SCOPES> \[--facility <FACILITY>\] \[--all-patients\] \[--jwks <FILE>\] \[--jwks-uri <URL>\]$/m);
    const agents = await pont('help', 'agents', 'create');
    expect(agents.code).toBe(0);
    expect(agents.stdout).toMatch(/^Usage: pont agents create --org <ORG> --facility <FACILITY>$/m);
    expect(agents.stdout).toMatch(/^ {2}--org <ORG> +\(string, required\)/m);
    expect(agents.stdout).toMatch(/^ {2}--facility <FACILITY> +\(string, required\)/m);
    const group = await pont('clients', '--help');
    expect(group.code).toBe(0);
    for (const sub of ['create', 'list', 'revoke', 'rotate-secret']) expect(group.stdout).toMatch(new RegExp(`^  ${sub} `, 'm'));
  }, SLOW);

  it('a wrong command line is exit code 2, names the fix and points to the help', async () => {
    const [unknownOption, missingOption, missingValue, unknownCommand, unknownSub, noCommand, extra] = await inBatches(
      [
        ['clients', 'create', '--name', 'X', '--org', 'org-x', '--scopes', 'labs:read', '--nmae', 'Y'],
        ['agents', 'create', '--facility', 'fac-1'],
        ['clients', 'create', '--name', 'X', '--scopes', 'labs:read', '--org'],
        ['client', 'list'],
        ['keys', 'revok', 'kid'],
        [],
        ['clients', 'revoke', 'cli_a', 'cli_b'],
      ],
      4,
      (args) => pont(...args),
    );
    expect(unknownOption!.code).toBe(2);
    expect(unknownOption!.stderr).toContain('Unknown option --nmae; did you mean --name?');
    expect(unknownOption!.stderr).toContain("Run 'pont clients create --help' for usage.");
    expect(missingOption!.code).toBe(2);
    expect(missingOption!.stderr).toMatch(/^--org is required\. --org <ORG>: .*1-64 letters/);
    expect(missingValue!.code).toBe(2);
    expect(missingValue!.stderr).toMatch(/^--org needs a value/);
    expect(unknownCommand!.code).toBe(2);
    expect(unknownCommand!.stderr).toContain('Unknown command: client; did you mean pont clients?');
    expect(unknownSub!.code).toBe(2);
    expect(unknownSub!.stderr).toContain('did you mean pont keys revoke?');
    expect(noCommand!.code).toBe(2);
    expect(noCommand!.stderr).toContain('Usage: pont <command>');
    expect(extra!.code).toBe(2);
    expect(extra!.stderr).toContain('Unexpected argument "cli_b"');
  }, SLOW);
});

describe('the parser (pure)', () => {
  const spec: CommandSpec = {
    name: 'demo',
    summary: 'A command for the test',
    args: [
      { name: 'MODE', choices: ['on', 'off'], description: 'on or off' },
      { name: 'PATH', variadic: true, required: false, description: 'paths' },
    ],
    options: {
      count: { type: 'integer', value: 'N', min: 1, max: 16, description: 'how many' },
      name: { type: 'string', value: 'TEXT', required: true, description: 'a name' },
      force: { type: 'boolean', description: 'a flag' },
    },
    examples: ['pont demo on --name x'],
    run: async () => 0,
  };

  it('reads options, flags, choices and a variadic argument', () => {
    expect(parseCommand(spec, ['on', 'a', 'b', '--name', 'x', '--count=3'])).toEqual({
      values: { name: 'x', count: 3, force: false },
      args: { MODE: 'on', PATH: ['a', 'b'] },
    });
    expect(parseCommand(spec, ['off', '--force', '--name=y']).values).toEqual({ name: 'y', force: true });
  });

  it.each([
    [['on'], /^--name is required/],
    [['maybe', '--name', 'x'], /^MODE: give on or off, not "maybe"/],
    [['on', '--name', 'x', '--count', '17'], /^--count must be a whole number from 1 to 16, not "17"/],
    [['on', '--name', 'x', '--count', '1.5'], /^--count must be a whole number/],
    [['on', '--name', 'x', '--force=yes'], /^--force takes no value/],
    [['on', '--name', 'x', '-f'], /^Unknown option -f$/],
    [['on', '--name', 'x', '--forse'], /^Unknown option --forse; did you mean --force\?/],
    [['--name', 'x'], /^MODE is required/],
  ])('refuses %j', (argv, message) => {
    expect(() => parseCommand(spec, argv)).toThrow(UsageError);
    expect(() => parseCommand(spec, argv)).toThrow(message);
  });
});
