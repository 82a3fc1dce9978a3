import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join, posix, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

// The layers of src and what each may import (README "Code layout and rules"). Route modules never hold the
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
const sources = files(join(root, 'src')).map((path) => ({ path: relative(root, path).split('\\').join('/'), text: readFileSync(path, 'utf8') }));

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

const ROUTE_MODULE = /^src\/(?:.+\/)?routes\.ts$/;
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
  });

  for (const rule of RULES) {
    it(`${rule.name}: ${rule.why}`, () => {
      expect(imports.filter((i) => rule.forbidden(i)).map((i) => `${i.from} -> ${i.to}`)).toEqual([]);
    });
  }

  it('route modules and feature services never reach a database handle (services.db, fhir.db, a destructured db)', () => {
    // Whoever is handed the route-facing Services (src/services.ts), apart from the composition that builds it.
    const receivesServices = (path: string) => imports.some((i) => i.from === path && i.to === 'src/services.ts') && !['src/server.ts', 'src/app.ts'].includes(path);
    const handle = /\.db\b|\{[^}]*\bdb\b[^}]*\}\s*=/;
    const offenders = sources.filter((f) => (ROUTE_MODULE.test(f.path) || receivesServices(f.path)) && handle.test(f.text)).map((f) => f.path);
    expect(offenders).toEqual([]);
  });
});

// A rule that cannot fail is no rule: each one, applied to an import that breaks it.
describe('dependency rules catch what they forbid', () => {
  const cases: Array<[string, Import]> = [
    ['routes-no-database', { from: 'src/inventory/routes.ts', to: 'src/db/database.ts', names: ['Database'] }],
    ['routes-no-store', { from: 'src/fhir/routes.ts', to: 'src/fhir/store/history.ts', names: ['readVersion'] }],
    ['routes-no-store', { from: 'src/fhir/routes.ts', to: 'src/fhir/store.ts', names: ['checkType', 'readVersion'] }],
    ['adapters-inside-db', { from: 'src/services.ts', to: 'src/db/postgres.ts', names: ['openPostgres'] }],
    ['composition-opens-database', { from: 'src/inventory/blood.ts', to: 'src/db/open.ts', names: ['openDatabase'] }],
  ];
  for (const [name, i] of cases) {
    it(`${name} refuses ${i.from} -> ${i.to}`, () => {
      expect(RULES.find((r) => r.name === name)!.forbidden(i)).toBe(true);
    });
  }
  it('the store barrel is allowed for its pure checks only', () => {
    const rule = RULES.find((r) => r.name === 'routes-no-store')!;
    expect(rule.forbidden({ from: 'src/fhir/routes.ts', to: 'src/fhir/store.ts', names: ['checkType'] })).toBe(false);
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
