import { execFile } from 'node:child_process';
import { readdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../src/config';
import { startPont } from '../src/server';
import { cliInProcess } from './cli-in-process';
import { mapBreaker } from './break-map';
import { pontCommand } from './harness';

const repo = join(import.meta.dirname, '..');

// The engine itself (compilation, its problems, the run time) needs no database: src/mapping/*.unit.test.ts, in the
// unit tier. Here what starts the service or runs the CLI, once, in the pglite project rather than twice.
describe('mapping engine', () => {
  const scratch: string[] = [];
  afterAll(() => scratch.forEach((dir) => rmSync(dir, { recursive: true, force: true })));

  const breakMap = mapBreaker(scratch);

  it('the service does not start on a bad map: the error names file, line and problem', async () => {
    const at = breakMap('diagnosis.map.yaml', 'display_name: code.text', 'display_name: code.txt', 'txt');
    const config = loadConfig({ PORT: '0', LOG_LEVEL: 'error', PONT_MAPPINGS_DIR: at.dir });
    config.dataDir = undefined; // PGlite in memory
    await expect(startPont(config)).rejects.toThrow(`${at.path}:${at.line}:${at.column}: unknown FHIR element \`txt\``);
  });

  describe('pont mappings check', () => {
    const run = promisify(execFile);
    const pont = (...args: string[]) =>
      run(process.execPath, pontCommand('mappings', 'check', ...args), { cwd: repo, env: { ...process.env, LOG_LEVEL: 'error' } }).then(
        ({ stdout, stderr }) => ({ code: 0, stdout, stderr }),
        (err: { code: number; stdout: string; stderr: string }) => ({ code: err.code, stdout: err.stdout, stderr: err.stderr }),
      );

    it('passes on the repository maps', async () => {
      const result = await pont();
      expect(result.stderr).not.toMatch(/problem/);
      expect(result.stdout).toMatch(/\d+ maps, \d+ examples run both ways; all good/);
      expect(result.code).toBe(0);
    });

    // The failures are asked of the command in this process (runCli, as bin.js runs it): a process each told nothing more.
    it('fails on a broken directory, printing file:line:column: problem', async () => {
      const at = breakMap('diagnosis.map.yaml', 'display_name: code.text', 'display_name: code.txt', 'txt');
      const result = await cliInProcess('mappings', 'check', at.dir);
      expect(result.code).toBe(1);
      expect(result.stderr).toContain(`${at.path}:${at.line}:${at.column}: unknown FHIR element \`txt\` in CodeableConcept (did you mean \`text\`?)`);
      const maps = readdirSync(at.dir).filter((f) => f.endsWith('.map.yaml')).length;
      expect(result.stderr).toMatch(new RegExp(`1 problem \\(${maps - 1} maps, \\d+ examples run both ways\\)`)); // the broken map does not compile
    });

    it('fails on what the start and a reload refuse once the maps compile: a record shape the OpenAPI document cannot take', async () => {
      const at = breakMap('immunization.map.yaml', '  shape: Immunization', '  shape: Error');
      const result = await cliInProcess('mappings', 'check', at.dir);
      expect(result.code).toBe(1);
      // At the map's record type (`type:`), as the map's other record-type problems.
      const line = readFileSync(at.path, 'utf8').split('\n').findIndex((l) => l.startsWith('  type: immunizations')) + 1;
      expect(result.stderr).toMatch(new RegExp(`^${at.path}:${line}:9: record type \`immunizations\`: the shape name \`Error\` is taken by another schema of the OpenAPI document`, 'm'));
      expect(result.stderr).toMatch(/^1 problem \(/m);
    });
  });
});
