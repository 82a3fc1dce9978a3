/**
 * The running service's maps, replaceable while it runs (hot reload: SIGHUP, or the development file watch).
 * A reload compiles every map and runs its examples again; only a directory that passes replaces the active
 * maps, so a mistake never reaches requests. Each request is pinned to the MappingSet active when it began, so a
 * reload in the middle of a request does not mix two versions of the maps in one answer.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { MAP_SUFFIX } from './compile';
import { EXAMPLES_SUFFIX } from './examples';
import { defaultMappingsDir, loadCheckedMappings, MappingError, type CompiledMap, type MappingSet, type ServiceChecks } from './index';

/** The maps' version: a hash of the names and contents of the maps and examples in `dir` (16 hex digits). */
export function mappingsVersion(dir: string): string {
  const hash = createHash('sha256');
  for (const name of readdirSync(dir).sort()) {
    if (!name.endsWith(MAP_SUFFIX) && !name.endsWith(EXAMPLES_SUFFIX)) continue;
    hash.update(`${name}\0`).update(readFileSync(join(dir, name))).update('\0');
  }
  return hash.digest('hex').slice(0, 16);
}

/**
 * A build's failure, as a MappingError at the map it comes from when the error names (`schema`, src/http/openapi.ts)
 * a map's record shape: the person to fix it edits that map, and start, reload and `pont mappings check` say where.
 */
function atMap(err: unknown, maps: MappingSet): unknown {
  const name = (err as { schema?: unknown } | undefined)?.schema;
  const record = typeof name === 'string' ? maps.names().map((n) => maps.get(n).record).find((r) => r?.shape === name) : undefined;
  if (!record) return err;
  return new MappingError(record.at.file, record.at.line, record.at.column, `record type \`${record.type}\`: the shape name \`${name}\` is taken by another schema of the OpenAPI document: give the shape a name of its own`);
}

/**
 * Maps compiled and checked in this process, by directory and version: compiled maps hold no state, so another
 * holder of the same files (a second service in one process, as the tests start them) or a reload of unchanged files
 * uses them again instead of compiling every map and running every example (~1 s).
 */
const LOADED = new Map<string, MappingSet>();
const LOADED_KEPT = 4;

interface Active {
  maps: MappingSet;
  version: string;
}

export type ReloadOutcome = { ok: true; version: string; previous: string } | { ok: false; version: string; error: Error };

/** `services.mappings`: a MappingSet whose `get` answers from the maps pinned to the request (else the active ones). */
export class MappingHolder implements MappingSet {
  private active: Active;
  private readonly pinned = new AsyncLocalStorage<Active>();
  /**
   * What follows from the maps (`derived`), each as its getter for a version: built once per version, first by `verify`
   * (at the start, and before a reload swaps), and what verify built is what requests get. So a builder reads nothing
   * but the maps (the public URL, known only once the server listens, is added at request time: src/app.ts).
   */
  private readonly builders: Array<(version: Active) => unknown> = [];

  /** Loads `dir` (default: the repository's mappings/); throws a MappingError (file:line:column) when it does not pass. */
  constructor(
    readonly dir: string = defaultMappingsDir,
    private readonly checks: ServiceChecks = {},
  ) {
    this.active = this.load();
  }

  private load(): Active {
    // Hashed first: a file saved during the load gives a version that a later reload sees as changed.
    const version = mappingsVersion(this.dir);
    const key = `${resolve(this.dir)}\0${version}\0${this.checks.searchProblem ? 'checked' : ''}`;
    const known = LOADED.get(key);
    if (known) return { maps: known, version };
    const maps = loadCheckedMappings(this.dir, this.checks);
    // Kept only when no file changed meanwhile (the version names what was compiled).
    if (mappingsVersion(this.dir) === version) {
      if (LOADED.size >= LOADED_KEPT) LOADED.delete(LOADED.keys().next().value!);
      LOADED.set(key, maps);
    }
    return { maps, version };
  }

  /** The version of the maps this request uses (or, outside a request, of the active ones). */
  get version(): string {
    return this.current().version;
  }

  /** The MappingSet of this request, from its start to its end; outside a request, the active one. */
  current(): MappingSet & { version: string } {
    const { maps, version } = this.pinned.getStore() ?? this.active;
    return { get: (name) => maps.get(name), names: () => maps.names(), version };
  }

  get(name: string): CompiledMap {
    return (this.pinned.getStore() ?? this.active).maps.get(name);
  }

  names(): string[] {
    return (this.pinned.getStore() ?? this.active).maps.names();
  }

  /**
   * `build` of the maps this request uses, made once per version of the maps: what follows from the maps (the
   * record types' schemas, the OpenAPI document) follows a reload, and a request sees the one of its own maps.
   */
  derived<T>(build: (maps: MappingSet) => T): () => T {
    const built = new WeakMap<Active, T>();
    const of = (version: Active): T => {
      if (!built.has(version)) built.set(version, build(version.maps));
      return built.get(version)!;
    };
    this.builders.push(of);
    return () => of(this.pinned.getStore() ?? this.active);
  }

  /**
   * Builds once, for the active maps, everything that follows from them (`derived`), and throws what fails: the start
   * runs it once the routes are made (a reload does the same for its new version before the swap), so that maps the
   * record schemas or the OpenAPI document cannot take (a shape named like one of the document's own schemas) are
   * refused, not answered with 500 later.
   */
  verify(): void {
    this.verifyVersion(this.active);
  }

  /** `verify` of one version: built as a request pinned to it would build them (each kept for when it is active). */
  private verifyVersion(version: Active): void {
    this.pinned.run(version, () => {
      for (const build of this.builders) {
        try {
          build(version);
        } catch (err) {
          throw atMap(err, version.maps);
        }
      }
    });
  }

  /** Runs `fn` (a request) with the maps active now, whatever a reload swaps in meanwhile. */
  pin<T>(fn: () => T): T {
    return this.pinned.run(this.active, fn);
  }

  /** Loads the directory again: the active maps are replaced only when it passes; else they stay, and the error says why. */
  reload(): ReloadOutcome {
    const previous = this.active.version;
    try {
      const candidate = this.load();
      this.verifyVersion(candidate);
      this.active = candidate;
      return { ok: true, version: this.active.version, previous };
    } catch (err) {
      return { ok: false, version: previous, error: err as Error };
    }
  }
}
