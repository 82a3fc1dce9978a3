/**
 * The CLI explains itself: every command of the table in src/cli.ts answers `--help` with its usage, its options
 * (type, required or default), examples and the exit codes; a wrong command line is exit code 2 with a message
 * that names the fix. Asked of runCli in this process (test/cli-in-process.ts: what bin.js runs, its stdout, stderr
 * and exit code); test/cli-help.test.ts checks that the compiled command, a real process, answers the same.
 */
import { describe, expect, it } from 'vitest';
import { invokedAs, parseCommand, UsageError, type CommandSpec } from '../src/cli-args';
import { commands } from '../src/cli';
import { cliInProcess as cli, cliInProcessAs } from './cli-in-process';

/** Each command line in turn (runCli swaps console.log and console.error while it runs: one at a time). */
async function each(argvs: string[][]): Promise<Array<{ code: number; stdout: string; stderr: string }>> {
  const out = [];
  for (const argv of argvs) out.push(await cli(...argv));
  return out;
}

const escape = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

describe('pont --help (runCli, in process)', () => {
  it('every command answers --help: usage, each option with its type and whether it is required, examples, exit codes', async () => {
    const helps = (await each(commands.map((command) => [...command.name.split(' '), '--help']))).map((answer, i) => ({ command: commands[i]!, ...answer }));
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
  });

  it('the usage of clients create and agents create is current: --org required, --all-patients listed', async () => {
    const clients = await cli('clients', 'create', '--help');
    expect(clients.stdout).toMatch(/^Usage: pont clients create --name <TEXT> --org <ORG> --scopes <SCOPES> \[--facility <FACILITY>\] \[--all-patients\] \[--jwks <FILE>\] \[--jwks-uri <URL>\]$/m);
    const agents = await cli('help', 'agents', 'create');
    expect(agents.code).toBe(0);
    expect(agents.stdout).toMatch(/^Usage: pont agents create --org <ORG> --facility <FACILITY>$/m);
    expect(agents.stdout).toMatch(/^ {2}--org <ORG> +\(string, required\)/m);
    expect(agents.stdout).toMatch(/^ {2}--facility <FACILITY> +\(string, required\)/m);
    const group = await cli('clients', '--help');
    expect(group.code).toBe(0);
    for (const sub of ['create', 'list', 'revoke', 'rotate-secret']) expect(group.stdout).toMatch(new RegExp(`^  ${sub} `, 'm'));
  });

  it('a wrong command line is exit code 2, names the fix and points to the help', async () => {
    const [unknownOption, missingOption, missingValue, unknownCommand, unknownSub, noCommand, extra] = await each(
      [
        ['clients', 'create', '--name', 'X', '--org', 'org-x', '--scopes', 'labs:read', '--nmae', 'Y'],
        ['agents', 'create', '--facility', 'fac-1'],
        ['clients', 'create', '--name', 'X', '--scopes', 'labs:read', '--org'],
        ['client', 'list'],
        ['keys', 'revok', 'kid'],
        [],
        ['clients', 'revoke', 'cli_a', 'cli_b'],
      ],
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
  });

  // Checked by the command before it opens a database (src/retention/cli.ts); moved here from test/retention.test.ts, where
  // it was a process of its own on each database.
  it('a month written wrong to audit archive or restore is exit code 2, naming the format YYYY-MM', async () => {
    for (const answer of await each([['audit', 'archive', '--month', '2025-3'], ['audit', 'restore', '--month', 'March']])) {
      expect(answer.code, answer.stderr).toBe(2);
      expect(answer.stderr).toMatch(/YYYY-MM/);
    }
  });

  // Issue 42: `clients create --name x` named --org only; every problem of a command line is one answer, for every command.
  it('names every missing or invalid flag and argument of a command line at once, whatever the command', async () => {
    const [clients, agents, imports, webhooks] = await each(
      [
        ['clients', 'create', '--name', 'x'],
        ['agents', 'create', '--facility'],
        ['import', '--concurrency', '0'],
        ['webhooks', 'full-payload', 'whsub_x', 'maybe', '--bogus'],
      ],
    );
    const lines = (r: { stderr: string }) => r.stderr.trimEnd().split('\n');
    expect(clients!.code).toBe(2);
    expect(lines(clients!)).toEqual([
      expect.stringMatching(/^--org is required\. --org <ORG>: /),
      expect.stringMatching(/^--scopes is required\. --scopes <SCOPES>: /),
      "Run 'pont clients create --help' for usage.",
    ]);
    expect(agents!.code).toBe(2);
    expect(lines(agents!)).toEqual([
      expect.stringMatching(/^--facility needs a value: --facility <FACILITY>/),
      expect.stringMatching(/^--org is required\. /),
      "Run 'pont agents create --help' for usage.",
    ]);
    expect(imports!.code).toBe(2);
    expect(lines(imports!)).toEqual([expect.stringMatching(/^--concurrency must be a whole number from 1 to 16, not "0"/), expect.stringMatching(/^PATH is required\. /), expect.any(String)]);
    expect(webhooks!.code).toBe(2);
    expect(lines(webhooks!)).toEqual(['Unknown option --bogus', 'SWITCH: give on or off, not "maybe"', expect.any(String)]);
  });

  // Found by an outside review: the values were checked by the command only once every flag was there and well
  // formed (--scopes bogus was not named beside a missing --org), one check at a time (--jwks hid --jwks-uri).
  it('names what is wrong with each value beside what is missing or malformed, in one answer, for every command', async () => {
    const [missing, noValue, keys, agents, portal] = await each([
      ['clients', 'create', '--name', 'x', '--scopes', 'bogus'],
      ['clients', 'create', '--name', 'x', '--scopes', 'bogus:scope', '--org'],
      ['clients', 'create', '--name', 'x', '--org', 'org-x', '--scopes', 'labs:read', '--jwks', '/nonexistent-pont.json', '--jwks-uri', 'notaurl'],
      ['agents', 'create', '--org', 'o!', '--facility', ''],
      ['portal-users', 'create', '--org', 'org-1', '--email', 'nope', '--role', 'boss'],
    ]);
    const lines = (r: { stderr: string }) => r.stderr.trimEnd().split('\n');
    for (const r of [missing, noValue, keys, agents, portal]) expect(r!.code, r!.stderr).toBe(2);
    expect(lines(missing!)).toEqual([
      expect.stringMatching(/^--org is required\. /),
      expect.stringMatching(/^--scopes: "bogus" is not a scope Pont knows \(one of: health_id:verify, patients:read, .*\)$/),
      "Run 'pont clients create --help' for usage.",
    ]);
    expect(lines(noValue!)).toEqual([
      '--org needs a value: --org <ORG>',
      expect.stringMatching(/^--scopes: "bogus:scope" is not a scope Pont knows/),
      expect.any(String),
    ]);
    expect(lines(keys!)).toEqual([
      expect.stringMatching(/^--jwks: cannot read \/nonexistent-pont\.json \(ENOENT\)$/),
      expect.stringMatching(/^--jwks-uri: "notaurl" must be an absolute URL/),
      '--jwks, --jwks-uri: give the public keys either inline (--jwks) or by URL (--jwks-uri), not both',
      expect.any(String),
    ]);
    expect(lines(agents!)).toEqual([
      '--org: "o!" is not valid: use 1-64 letters, digits, . _ : -',
      '--facility: must not be empty',
      expect.any(String),
    ]);
    expect(lines(portal!)).toEqual([
      '--email: "nope" is not valid: give an e-mail address such as ana@example.org',
      '--role: "boss" is not a role (one of: admin, developer, viewer)',
      expect.any(String),
    ]);
  });

  it('says what is wrong with a value in words, naming the flag and the value, never the validator\'s own message', async () => {
    const answers = await each([
      ['clients', 'create', '--name', '', '--org', 'org-x', '--scopes', 'labs:read'],
      ['clients', 'create', '--name', '   ', '--org', 'org-x', '--scopes', ','],
      ['clients', 'create', '--name', 'n'.repeat(201), '--org', 'o'.repeat(65), '--scopes', 'labs:read', '--facility', 'f f'],
      ['clients', 'rotate-secret', 'cli_x', '--overlap', 'forever'],
      ['audit', 'archive', '--month', '2025-13'],
    ]);
    for (const r of answers) {
      expect(r.code, r.stderr).toBe(2);
      expect(r.stderr).not.toMatch(/Invalid (option|input)|Too (small|big)|expected (string|one of)|>=|<=/);
    }
    const lines = answers.map((r) => r.stderr.trimEnd().split('\n'));
    expect(lines[0]).toEqual(['--name: must not be empty', expect.any(String)]);
    expect(lines[1]).toEqual(['--name: must not be empty', '--scopes: give at least one scope', expect.any(String)]);
    expect(lines[2]).toEqual([
      '--name: must be at most 200 characters, not 201',
      `--org: "${'o'.repeat(60)}…" is not valid: use 1-64 letters, digits, . _ : -`,
      '--facility: "f f" is not valid: use 1-64 letters, digits, . _ : -',
      expect.any(String),
    ]);
    const [nearly] = await each([['clients', 'create', '--name', 'x', '--org', 'org-x', '--scopes', 'patients:read lab:read']]);
    expect(nearly!.stderr).toMatch(/^--scopes: "lab:read" is not a scope Pont knows \(one of: .*\); did you mean labs:read\?\n/);
    expect(lines[3]![0]).toBe('--overlap: give 0 or a duration such as 90s, 15m, 1h, 7d (at most 30d), not "forever"');
    expect(lines[4]![0]).toBe('--month must be a month as YYYY-MM (e.g. 2025-01), not "2025-13"');
  });

  it('help --help, help help and help COMMAND answer the help, exit 0', async () => {
    const [helpHelp, helpH, helpHelpWord, helpCommand, helpGroup, helpUnknown] = await each(
      [['help', '--help'], ['help', '-h'], ['help', 'help'], ['help', 'clients', 'rotate-secret'], ['help', 'keys'], ['help', 'nothing']],
    );
    for (const r of [helpHelp, helpH, helpHelpWord]) {
      expect(r!.code, r!.stderr).toBe(0);
      expect(r!.stdout).toMatch(/^Usage: pont <command> \[options\]/);
    }
    expect(helpCommand!.code).toBe(0);
    expect(helpCommand!.stdout).toMatch(/^Usage: pont clients rotate-secret ID/);
    expect(helpGroup!.code).toBe(0);
    expect(helpGroup!.stdout).toMatch(/^Usage: pont keys <subcommand>/);
    expect(helpUnknown!.code).toBe(2);
    expect(helpUnknown!.stderr).toContain('Unknown command: nothing');
  });
});

// Found by an outside review: the messages named a bare `pont`, which is not on the PATH of a checkout.
describe('the command is named as it was run', () => {
  it('invokedAs: node and the script relative to the working directory, pont as the installed binary, npm run -s pont -- through npm', () => {
    expect(invokedAs('/srv/pont/bin/pont.js', {}, '/srv/pont')).toBe('node bin/pont.js');
    expect(invokedAs('/app/dist/bin.js', {}, '/app')).toBe('node dist/bin.js');
    expect(invokedAs('/srv/pont/bin/pont.js', {}, '/srv/pont/docs')).toBe('node ../bin/pont.js');
    expect(invokedAs('/srv/pont/bin/pont.js', {}, '/home/ana/work/elsewhere')).toBe('node /srv/pont/bin/pont.js');
    expect(invokedAs('/srv/my pont/bin/pont.js', {}, '/home')).toBe("node '/srv/my pont/bin/pont.js'");
    expect(invokedAs('/usr/local/bin/pont', {}, '/srv')).toBe('pont');
    expect(invokedAs('/srv/pont/bin/pont.js', { npm_lifecycle_event: 'pont' }, '/srv/pont')).toBe('npm run -s pont --');
    expect(invokedAs('/srv/pont/node_modules/.bin/pont', { npm_command: 'exec', npm_lifecycle_event: 'npx' }, '/srv/pont')).toBe('npx pont');
  });

  it('every command it tells to run names it so: the usage hint, the help, a group\'s help, a suggestion', async () => {
    const as = (...args: string[]) => cliInProcessAs('node bin/pont.js', ...args);
    const usage = await as('clients', 'create', '--name', 'x');
    expect(usage.stderr).toContain("Run 'node bin/pont.js clients create --help' for usage.");
    expect((await as('--help')).stdout).toContain("Run 'node bin/pont.js <command> --help' for a command's options and examples.");
    expect((await as('keys', '--help')).stdout).toContain("Run 'node bin/pont.js keys <subcommand> --help' for its options and examples.");
    expect((await as('keys')).stderr).toMatch(/^node bin\/pont\.js keys needs a subcommand\./);
    expect((await as('client', 'list')).stderr).toContain('Unknown command: client; did you mean node bin/pont.js clients?');
    expect((await as('keys', 'revok')).stderr).toContain('did you mean node bin/pont.js keys revoke?');
    expect((await as('nothing')).stderr).toContain("Run 'node bin/pont.js --help' for usage.");
    expect(usage.stderr + (await as('--help')).stdout).not.toMatch(/'pont /);
  });
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

  it('takes a value that begins with a dash for an argument: a key id (a base64url thumbprint) may', () => {
    const kid = '-9gkfr3sT_0XbXrJm2lqJ4JhtgJ6LzC7ymx4EPFy1cE';
    expect(parseCommand(spec, ['on', kid, '-', '--name', 'x']).args).toEqual({ MODE: 'on', PATH: [kid, '-'] });
    const revoke = commands.find((c) => c.name === 'keys revoke')!;
    expect(parseCommand(revoke, [kid]).args).toEqual({ KID: kid });
    // One in 4,096 begins with two (CI met one): option names are lower-case words, a thumbprint is not one.
    const twoDashes = '--Xh7_Oe9vQk2mGZ4x8tLwP1aYcJdRbN5sUfE3iKoTq0';
    expect(parseCommand(revoke, [twoDashes]).args).toEqual({ KID: twoDashes });
    expect(parseCommand(spec, ['on', twoDashes, '--name', 'x']).args).toEqual({ MODE: 'on', PATH: [twoDashes] });
    // That holds while every option is named so.
    const names = commands.flatMap((c) => Object.keys(c.options ?? {}));
    expect(names.length).toBeGreaterThan(10);
    expect(names.filter((n) => !/^[a-z][a-z0-9-]*$/.test(n))).toEqual([]);
  });

  it('reports every problem of a command line at once, one a line, in the order typed', () => {
    let message = '';
    try {
      parseCommand(spec, ['maybe', '--count', '99', '--forse', '--force=yes', '--name']);
    } catch (err) {
      expect(err).toBeInstanceOf(UsageError);
      message = (err as Error).message;
    }
    expect(message.split('\n')).toEqual([
      '--count must be a whole number from 1 to 16, not "99"',
      'Unknown option --forse; did you mean --force?',
      '--force takes no value (it is a flag)',
      '--name needs a value: --name <TEXT>',
      'MODE: give on or off, not "maybe"',
    ]);
    // A misspelt option that takes a value takes its value with it: `--nmae x` is one problem, not an unexpected "x" too.
    expect(() => parseCommand(spec, ['on', '--nmae', 'x'])).toThrow(/^Unknown option --nmae; did you mean --name\?\n--name is required\. --name <TEXT>: a name$/);
  });

  it.each([
    [['on'], /^--name is required/],
    [['maybe', '--name', 'x'], /^MODE: give on or off, not "maybe"/],
    [['on', '--name', 'x', '--count', '17'], /^--count must be a whole number from 1 to 16, not "17"/],
    [['on', '--name', 'x', '--count', '1.5'], /^--count must be a whole number/],
    [['on', '--name', 'x', '--force=yes'], /^--force takes no value/],
    [['on', '--name', 'x', '-f'], /^Unknown option -f$/],
    [['on', '--name', 'x', '-force'], /^Unknown option -force; did you mean --force\?$/],
    [['on', '-name', 'x'], /^Unknown option -name; did you mean --name\?\n--name is required/],
    [['on', '--name', 'x', '--forse'], /^Unknown option --forse; did you mean --force\?/],
    [['--name', 'x'], /^MODE is required/],
  ])('refuses %j', (argv, message) => {
    expect(() => parseCommand(spec, argv)).toThrow(UsageError);
    expect(() => parseCommand(spec, argv)).toThrow(message);
  });
});
