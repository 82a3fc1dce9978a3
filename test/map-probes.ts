import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect } from 'vitest';
import { loadFhirDefinitions } from '../src/core/fhir-definitions';
import { loadMappings, MappingError } from '../src/mapping/index';

/**
 * One-map directories for the maps' unit tests, removed after the file's tests (and the FHIR definitions loaded
 * before them): `probe(body)` writes `probe.map.yaml`, `header` then `body`; `problemsOf(dir)` is what loading it
 * reports, one problem a line (none: []).
 */
export function mapProbes(prefix: string, header: string) {
  const scratch: string[] = [];
  beforeAll(() => loadFhirDefinitions());
  afterAll(() => scratch.forEach((dir) => rmSync(dir, { recursive: true, force: true })));
  const scratchDir = (): string => {
    const dir = mkdtempSync(join(tmpdir(), prefix));
    scratch.push(dir);
    return dir;
  };
  const probe = (body: string): string => {
    const dir = scratchDir();
    writeFileSync(join(dir, 'probe.map.yaml'), `${header}${body}`);
    return dir;
  };
  const problemsOf = (dir: string): string[] => {
    try {
      loadMappings(dir);
    } catch (err) {
      expect(err).toBeInstanceOf(MappingError);
      return (err as Error).message.split('\n');
    }
    return [];
  };
  return { scratchDir, probe, problemsOf };
}
