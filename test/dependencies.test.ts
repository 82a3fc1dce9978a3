import { existsSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join, posix, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

// The layers of src and what each may import (docs/contributors.md "Code layout and rules"). Route modules (src/routes) never hold the
// database: clinical and facility data through the request's repository (which applies src/policy), Pont's own
// tables through the service objects that own them. Checked over the import statements themselves (type imports
// included). Not dependency-cruiser: 17.4.3 reads .ts only through the typescript package < 7 (this repo has 7.0), and
// `depcruise src` then skips every .ts file and passes whatever the code imports.

const root = fileURLToPath(new URL('..', import.meta.url));
const files = (dir: string): string[] =>
  readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? files(path) : /\.(ts|mjs)$/.test(path) ? [path] : [];
  });
// Unit tests beside the code (src/**/*.unit.test.ts) are not part of the program: they are left out of the build
// (tsconfig.build.json) and of these rules, so that a test importing what it tests (or a helper of test/) neither
// counts as an edge of the layers and their README diagram nor breaks a rule meant for the code.
const sources = files(join(root, 'src'))
  .filter((path) => !path.endsWith('.unit.test.ts'))
  .map((path) => ({ path: relative(root, path).split('\\').join('/'), text: readFileSync(path, 'utf8') }));

/** Static imports and re-exports (`import`, `import type`, `export … from`), bare imports and dynamic `import('…')`. */
const IMPORT = /^\s*(?:import|export)\b([^;]*?)\bfrom\s*['"]([^'"]+)['"]|^\s*import\s*['"]([^'"]+)['"]|\bimport\(\s*['"]([^'"]+)['"]\s*\)/gm;

interface Import {
  from: string;
  /** The imported module, relative to the repository root (only relative specifiers: packages are not layers). */
  to: string;
  /** The names imported (`import { a, type b as c }` -> a, b); empty for `*`, default and bare imports. */
  names: string[];
}

function resolve(from: string, specifier: string): string {
  const base = posix.normalize(posix.join(posix.dirname(from), specifier));
  return [base, `${base}.ts`, `${base}/index.ts`].find((p) => /\.(ts|mjs)$/.test(p) && existsSync(join(root, p))) ?? base;
}

function importsOf(path: string, text: string): Import[] {
  return [...text.matchAll(IMPORT)].flatMap((m) => {
    const specifier = m[2] ?? m[3] ?? m[4]!;
    if (!specifier.startsWith('.')) return [];
    const names = /\{([^}]*)\}/.exec(m[1] ?? '')?.[1]!.split(',').map((n) => n.trim().replace(/^type\s+/, '').split(/\s+as\s+/)[0]!).filter(Boolean) ?? [];
    return [{ from: path, to: resolve(path, specifier), names }];
  });
}
const imports = sources.flatMap((f) => importsOf(f.path, f.text));

const ROUTE_MODULE = /^src\/routes\/[^/]+\.ts$/;
/** The store's pure checks (ids, types, If-Match): anyone may use them. Its other modules are SQL. */
const STORE_PURE = 'src/fhir/store/types.ts';
const PURE_NAMES = new Set([...readFileSync(join(root, STORE_PURE), 'utf8').matchAll(/^export (?:const|function|type|interface|class) (\w+)/gm)].map((m) => m[1]!));

interface Rule {
  name: string;
  why: string;
  /** True when the import breaks the rule. */
  forbidden(i: Import): boolean;
}

const RULES: Rule[] = [
  {
    name: 'routes-no-database',
    why: 'route modules never hold the database: the repository (clinical and facility data) or a service object (Pont tables)',
    forbidden: (i) => ROUTE_MODULE.test(i.from) && i.to.startsWith('src/db/'),
  },
  {
    name: 'routes-no-store',
    why: 'route modules reach stored resources only through the repository, which applies the access policy',
    forbidden: (i) =>
      ROUTE_MODULE.test(i.from) &&
      ((i.to.startsWith('src/fhir/store/') && i.to !== STORE_PURE) || (i.to === 'src/fhir/store.ts' && (!i.names.length || i.names.some((n) => !PURE_NAMES.has(n))))),
  },
  {
    name: 'adapters-inside-db',
    why: 'the PGlite and PostgreSQL adapters are chosen by src/db/open.ts; everything else speaks Database/Queryable',
    forbidden: (i) => /^src\/db\/(postgres|pglite|pg-listener)\.ts$/.test(i.to) && !i.from.startsWith('src/db/'),
  },
  {
    name: 'agent-standalone',
    why: "the HL7 v2 Bridge agent (src/agent) is a process a facility installs: it reaches Pont only through the Bridge API, and imports the maps, the core helpers (src/core) and Pont's resource validation alone (src/fhir/validate.ts, a pure function: what Pont would refuse is refused before an AA)",
    forbidden: (i) => i.from.startsWith('src/agent/') && !i.to.startsWith('src/agent/') && !i.to.startsWith('src/mapping/') && !i.to.startsWith('src/core/') && i.to !== 'src/fhir/validate.ts',
  },
  {
    name: 'composition-opens-database',
    why: 'only the composition roots (the server, the CLI) open, migrate or share the database',
    forbidden: (i) => /^src\/db\/(open|migrate|pglite-share)\.ts$/.test(i.to) && !i.from.startsWith('src/db/') && !['src/server.ts', 'src/cli.ts'].includes(i.from),
  },
];

describe('dependency rules', () => {
  it('the import parser sees the imports it checks', () => {
    // Guards the rules below against a parser that finds nothing (they would pass vacuously).
    expect(imports.some((i) => i.from === 'src/fhir/repository.ts' && i.to === 'src/db/database.ts' && i.names.includes('Queryable'))).toBe(true);
    expect(imports.some((i) => i.from === 'src/db/open.ts' && i.to === 'src/db/pglite.ts')).toBe(true);
    expect(imports.some((i) => i.from === 'src/cli.ts' && i.to === 'src/main.ts')).toBe(true); // dynamic import()
    expect(sources.filter((f) => ROUTE_MODULE.test(f.path)).length).toBeGreaterThan(5);
    expect(imports.some((i) => i.from === 'src/routes/fhir.ts' && i.to === 'src/http/services.ts' && i.names.includes('Services'))).toBe(true);
  });

  for (const rule of RULES) {
    it(`${rule.name}: ${rule.why}`, () => {
      expect(imports.filter((i) => rule.forbidden(i)).map((i) => `${i.from} -> ${i.to}`)).toEqual([]);
    });
  }

  it('route modules and feature services never reach a database handle (services.db, fhir.db, a destructured db)', () => {
    // Whoever is handed the route-facing Services (src/http/services.ts), apart from the composition that builds it.
    const receivesServices = (path: string) => imports.some((i) => i.from === path && i.to === 'src/http/services.ts') && !['src/services.ts', 'src/app.ts'].includes(path);
    const handle = /\.db\b|\{[^}]*\bdb\b[^}]*\}\s*=/;
    const offenders = sources.filter((f) => (ROUTE_MODULE.test(f.path) || receivesServices(f.path)) && handle.test(f.text)).map((f) => f.path);
    expect(offenders).toEqual([]);
  });
});

// A rule that cannot fail is no rule: each one, applied to an import that breaks it.
describe('dependency rules catch what they forbid', () => {
  const cases: Array<[string, Import]> = [
    ['routes-no-database', { from: 'src/routes/inventory.ts', to: 'src/db/database.ts', names: ['Database'] }],
    ['routes-no-store', { from: 'src/routes/fhir.ts', to: 'src/fhir/store/history.ts', names: ['readVersion'] }],
    ['routes-no-store', { from: 'src/routes/fhir.ts', to: 'src/fhir/store.ts', names: ['checkType', 'readVersion'] }],
    ['adapters-inside-db', { from: 'src/services.ts', to: 'src/db/postgres.ts', names: ['openPostgres'] }],
    ['composition-opens-database', { from: 'src/inventory/blood.ts', to: 'src/db/open.ts', names: ['openDatabase'] }],
    ['agent-standalone', { from: 'src/agent/agent.ts', to: 'src/fhir/repository.ts', names: ['FhirRepository'] }],
  ];
  for (const [name, i] of cases) {
    it(`${name} refuses ${i.from} -> ${i.to}`, () => {
      expect(RULES.find((r) => r.name === name)!.forbidden(i)).toBe(true);
    });
  }
  it('the store barrel is allowed for its pure checks only', () => {
    const rule = RULES.find((r) => r.name === 'routes-no-store')!;
    expect(rule.forbidden({ from: 'src/routes/fhir.ts', to: 'src/fhir/store.ts', names: ['checkType'] })).toBe(false);
    expect(PURE_NAMES.has('checkType')).toBe(true);
  });
  it('the parser reads multi-line, type, re-exported and dynamic imports', () => {
    const text = "import {\n  a,\n  type B as C,\n} from '../db/database';\nimport type { D } from './store';\nexport * from './store/writes';\nconst m = await import('../main');\n";
    expect(importsOf('src/fhir/x.ts', text)).toEqual([
      { from: 'src/fhir/x.ts', to: 'src/db/database.ts', names: ['a', 'B'] },
      { from: 'src/fhir/x.ts', to: 'src/fhir/store.ts', names: ['D'] },
      { from: 'src/fhir/x.ts', to: 'src/fhir/store/writes.ts', names: [] },
      { from: 'src/fhir/x.ts', to: 'src/main.ts', names: [] },
    ]);
  });
});

// Direction: no import cycle between the files of src, nor between its folders (docs/contributors.md "Code layout and rules").
// Type imports count too: a cycle of types is still two modules that cannot be understood apart.

/** The folder a file belongs to for the folder-level graph: `src/fhir/store/x.ts` -> `src/fhir`, `src/app.ts` -> itself. */
const folderOf = (path: string) => path.split('/').slice(0, 2).join('/');

/** The import cycles: strongly connected components of more than one node (Tarjan), each sorted, in order. */
function cyclesOf(edges: Array<[string, string]>): string[][] {
  const next = new Map<string, Set<string>>();
  for (const [a, b] of edges) if (a !== b) next.set(a, (next.get(a) ?? new Set()).add(b));
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const components: string[][] = [];
  const visit = (v: string) => {
    index.set(v, index.size);
    low.set(v, index.get(v)!);
    stack.push(v);
    onStack.add(v);
    for (const w of next.get(v) ?? []) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) === index.get(v)) {
      const component: string[] = [];
      let w: string;
      do {
        w = stack.pop()!;
        onStack.delete(w);
        component.push(w);
      } while (w !== v);
      if (component.length > 1) components.push(component.sort());
    }
  };
  for (const v of [...next.keys()].sort()) if (!index.has(v)) visit(v);
  return components.sort((a, b) => a[0]!.localeCompare(b[0]!));
}

const fileEdges = imports.filter((i) => i.to.startsWith('src/')).map((i): [string, string] => [i.from, i.to]);
const folderEdges = fileEdges.map(([a, b]): [string, string] => [folderOf(a), folderOf(b)]);

describe('direction', () => {
  it('no import cycle between files of src', () => {
    expect(cyclesOf(fileEdges)).toEqual([]);
  });
  it('no import cycle between folders of src', () => {
    expect(cyclesOf(folderEdges)).toEqual([]);
  });
  it('the cycle finder finds cycles', () => {
    expect(cyclesOf([['a', 'b'], ['b', 'c'], ['c', 'a'], ['c', 'd'], ['d', 'd']])).toEqual([['a', 'b', 'c']]);
    expect(folderOf('src/fhir/store/x.ts')).toBe('src/fhir');
    expect(folderOf('src/app.ts')).toBe('src/app.ts');
  });
});

/**
 * The layers, lowest first (docs/contributors.md "Code layout and rules"): a module imports its own layer and those below. Every
 * top-level entry of src has one; an import from a lower layer to a higher one is upward, and there is none.
 */
const LAYERS: Array<[layer: string, entries: string[]]> = [
  ['core', ['src/core', 'src/log.ts', 'src/config.ts', 'src/jobs.ts', 'src/cli-args.ts', 'src/metrics.ts']],
  ['db', ['src/db']],
  ['fhir/policy', ['src/fhir', 'src/policy', 'src/audit', 'src/events', 'src/healthid', 'src/mapping']],
  ['features', ['src/auth', 'src/consents', 'src/inventory', 'src/records', 'src/bulk', 'src/retention', 'src/bridge', 'src/webhooks', 'src/patients', 'src/subscriptions', 'src/agent']],
  ['http/routes', ['src/http', 'src/routes', 'src/portal', 'src/demo', 'src/app.ts']],
  ['composition', ['src/services.ts', 'src/server.ts', 'src/cli.ts', 'src/main.ts', 'src/bin.ts']],
];
/** The layer of a top-level entry of src, or of a file. */
const layerOf = (path: string) => LAYERS.findIndex(([, entries]) => entries.includes(folderOf(path)));
const upward = fileEdges.filter(([a, b]) => layerOf(a) < layerOf(b));

/** The layers and the imports between them, as a mermaid flowchart: upward imports dotted, with their count. */
function layerDiagram(): string {
  const count = new Map<string, number>();
  for (const [a, b] of fileEdges) {
    const key = `${layerOf(a)} ${layerOf(b)}`;
    if (layerOf(a) !== layerOf(b)) count.set(key, (count.get(key) ?? 0) + 1);
  }
  const id = (i: number) => `L${i}`;
  const nodes = LAYERS.map(([name, entries], i) => `  ${id(i)}["${name}<br/>${entries.map((e) => e.slice(4)).join(' ')}"]`);
  const edges = [...count.entries()]
    .map(([key, n]) => key.split(' ').map(Number).concat(n) as [number, number, number])
    .sort((x, y) => y[0] - x[0] || y[1] - x[1])
    .map(([a, b, n]) => (a > b ? `  ${id(a)} -->|${n}| ${id(b)}` : `  ${id(a)} -.->|${n} upward| ${id(b)}`));
  return ['```mermaid', 'flowchart TD', ...nodes.reverse(), ...edges, '```'].join('\n');
}

describe('layers', () => {
  it('every top-level entry of src has a layer', () => {
    const entries = [...new Set(sources.map((f) => folderOf(f.path)))].sort();
    expect(entries.filter((e) => layerOf(e) < 0)).toEqual([]);
  });
  it('no upward import between layers', () => {
    expect(upward.map(([a, b]) => `${a} -> ${b}`)).toEqual([]);
  });
  it('the layer check sees an upward import', () => {
    expect(layerOf('src/fhir/repository.ts') < layerOf('src/inventory/blood.ts')).toBe(true);
    expect(layerOf('src/routes/fhir.ts')).toBe(LAYERS.findIndex(([name]) => name === 'http/routes'));
  });
  it('the README draws the layers from this graph (PONT_WRITE_README=1 rewrites the block)', () => {
    const path = join(root, 'README.md');
    const readme = readFileSync(path, 'utf8');
    const block = /(<!-- layer-diagram[^>]*-->\n)([\s\S]*?)\n(<!-- \/layer-diagram -->)/;
    if (process.env.PONT_WRITE_README === '1') writeFileSync(path, readme.replace(block, (_, open: string, _old, close: string) => `${open}${layerDiagram()}\n${close}`));
    expect(block.exec(readFileSync(path, 'utf8'))?.[2], 'the layer diagram in README.md is stale: run `npm run docs`').toBe(layerDiagram());
  });
});
