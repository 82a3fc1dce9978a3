import { createRequire } from 'node:module';
import { beforeAll, describe, expect, it } from 'vitest';
import { alias, and, arrayLiteral, constant, ident, join, literal, not, or, paddedRows, param, quoteIdentifier, rowsOf, sql } from '../src/db/sql';
import { loadFhirDefinitions } from '../src/core/fhir-definitions';
import { parseSearch } from '../src/fhir/search/parse';
import { filterSql, notFilterSql, sortSql } from '../src/fhir/search/sql';
import { pagesStatement } from '../src/fhir/store/search';
import { accessPolicyFor } from '../src/policy/index';

/** The SQL builder (src/db/sql.ts): what FHIR search and the access policy write their SQL with. */

// The search parameter definitions, for the searches below (seconds on a busy machine).
beforeAll(() => loadFhirDefinitions(), 120_000);

/** The pg driver's own conversion of a parameter (an array: its literal), which arrayLiteral stands in for. */
const { prepareValue } = createRequire(import.meta.url)('pg/lib/utils.js') as { prepareValue(value: unknown): unknown };

const HOSTILE = `x'); DROP TABLE fhir_resources; --"\\`;

describe('identifiers', () => {
  it('are quoted, a hostile name staying one identifier', () => {
    expect(sql`SELECT * FROM ${ident('fhir_resources')}`.render().text).toBe('SELECT * FROM "fhir_resources"');
    expect(quoteIdentifier('a"b')).toBe('"a""b"');
    expect(sql`SELECT 1 FROM ${ident(HOSTILE)} t`.render().text).toBe(`SELECT 1 FROM "x'); DROP TABLE fhir_resources; --""\\" t`);
    expect(ident('r').col(`c"ol`).render().text).toBe('"r"."c""ol"');
  });
  it('refuses what cannot be one', () => {
    expect(() => ident('')).toThrow(/Not an SQL identifier/);
    expect(() => ident('a\0b')).toThrow(/Not an SQL identifier/);
    expect(() => alias('\0')).toThrow(/Not an SQL identifier/);
  });
  it('literals of code quote their quotes', () => {
    expect(literal("O'Brien").render().text).toBe(`'O''Brien'`);
    expect(() => literal('\0')).toThrow();
  });
});

describe('parameters', () => {
  it('every interpolated value binds, in the order the statement reads', () => {
    const { text, values } = sql`SELECT ${1} WHERE a = ${HOSTILE} AND b = ANY(${['x', 'y']}::text[])`.render();
    expect(text).toBe('SELECT $1 WHERE a = $2 AND b = ANY($3::text[])');
    expect(values).toEqual([1, HOSTILE, ['x', 'y']]);
    expect(text).not.toContain('DROP');
  });
  it('are numbered when rendered, across nested fragments built in any order', () => {
    const inner = sql`b = ${'second'}`;
    const outer = sql`a = ${'first'} AND ${inner} AND c = ${'third'}`;
    expect(outer.render()).toEqual({ text: 'a = $1 AND b = $2 AND c = $3', values: ['first', 'second', 'third'] });
    // The same fragment rendered inside another statement is numbered afresh.
    expect(sql`SELECT ${0} WHERE ${inner}`.render()).toEqual({ text: 'SELECT $1 WHERE b = $2', values: [0, 'second'] });
  });
  it('param() binds once however often it is used; a plain value binds at each use', () => {
    const org = param('org-a');
    expect(sql`x = ${org} OR y = ${org} OR z = ${'org-a'}`.render()).toEqual({ text: 'x = $1 OR y = $1 OR z = $2', values: ['org-a', 'org-a'] });
  });
  it('null, undefined and objects bind too (never written as text)', () => {
    expect(sql`${null}, ${undefined}, ${{ a: 1 }}`.render()).toEqual({ text: '$1, $2, $3', values: [null, undefined, { a: 1 }] });
  });
});

describe('aliases', () => {
  it('each alias gets a name of its own, the same wherever it is used', () => {
    const a = alias('c');
    const b = alias('c');
    const { text } = sql`SELECT ${a.col('id')} FROM t ${a} JOIN t ${b} ON ${b.col('id')} = ${a.col('id')}`.render();
    expect(text).toBe('SELECT "c1"."id" FROM t "c1" JOIN t "c2" ON "c2"."id" = "c1"."id"');
  });
  it('are numbered in the order they first appear, per statement', () => {
    const h = alias('h');
    const c = alias('c');
    expect(sql`${c} ${h} ${c}`.render().text).toBe('"c1" "h2" "c1"');
    expect(sql`${h}`.render().text).toBe('"h1"');
  });
  it('a chain within a chain, and a _has within it, never share an alias', () => {
    const search = parseSearch(
      'Patient',
      { 'organization:Organization.partof:Organization.name': 'ann', '_has:Observation:subject:subject:Patient.name': 'bo', '_has:Observation:subject:code': 'x' },
      'http://x',
    );
    const { text } = and(...search.filters.map((f) => filterSql(f, ident('r')))).render();
    const declared = [...text.matchAll(/(?:FROM|JOIN) \w+ ("\w+")/g)].map((m) => m[1]);
    expect(declared.length).toBe(10); // each chain and _has joins a reference row to a resource: 2 + 2 (chain in chain), 2 + 2 (_has with a chain), 2
    expect(new Set(declared).size).toBe(declared.length);
  }, 60_000); // the first search of a type builds its parameters' index (seconds on a busy machine)
});

describe('conditions', () => {
  const a = sql`a = ${1}`;
  const b = sql`b = ${2}`;
  const c = sql`c = ${3}`;
  it('and/or of none, one and several; absent ones left out', () => {
    expect(and().render().text).toBe('true');
    expect(or().render().text).toBe('false');
    expect(and(undefined, a, false).render().text).toBe('a = $1');
    expect(or(a, b).render().text).toBe('((a = $1) OR (b = $2))');
    expect(and(a, b).render().text).toBe('((a = $1) AND (b = $2))');
  });
  it('nest with the parentheses their precedence needs', () => {
    expect(and(a, or(b, c)).render().text).toBe('((a = $1) AND (((b = $2) OR (c = $3))))');
    expect(or(and(a, b), not(c)).render().text).toBe('((((a = $1) AND (b = $2))) OR (NOT (c = $3)))');
    expect(join([a, b, c], ', ').render()).toEqual({ text: 'a = $1, b = $2, c = $3', values: [1, 2, 3] });
  });
});

describe('FHIR search and the policy write through it', () => {
  it('a hostile search value binds; it is never SQL text', () => {
    const search = parseSearch('Patient', { name: HOSTILE, identifier: `${HOSTILE}|${HOSTILE}`, _sort: '-birthdate' }, 'http://x');
    const r = ident('r');
    const { text, values } = sql`SELECT 1 FROM fhir_resources r WHERE ${and(...search.filters.map((f) => filterSql(f, r)))} ORDER BY ${sortSql(search.sort[0]!, r)}`.render();
    expect(text).not.toContain('DROP');
    expect(values.some((v) => typeof v === 'string' && v.includes('drop table'))).toBe(true); // normalised for the string index
    expect(text).toMatch(/\(SELECT max\("s\d+"\."high"\) FROM "fhir_idx_date" "s\d+"/);
  }, 60_000);
  it('a negated filter is a probe of the row, never NOT IN a set of the whole table (which PostgreSQL hashes whole)', () => {
    const r = ident('r');
    const search = parseSearch('Observation', { category: 'laboratory', 'code:not': 'x|1', 'value-quantity:missing': 'true', '_has:DiagnosticReport:result:category': 'LAB' }, 'http://x');
    for (const f of search.filters) {
      const { text } = notFilterSql(f, r).render();
      // Correlated with the row (its rid, or its id for what refers to it), through the index tables' indexes.
      expect(text, f.kind).toMatch(/^(NOT )?EXISTS \(SELECT 1 FROM "?fhir_idx_\w+"? "\w+"/);
      expect(text, f.kind).toMatch(/= "r"\."(rid|id)"/);
      expect(text).not.toMatch(/ IN \(SELECT/);
    }
  }, 60_000);
  it("the pages of one patient's resources of one type read them once, and test their tokens in what was read", () => {
    const access = accessPolicyFor({ kind: 'client', clientId: 'c', organizationId: 'org-a', scopes: ['fhir:read', 'labs:read', 'patients:read'] }, 'connect');
    const page = (type: string, query: Record<string, string>) => ({ search: parseSearch(type, { patient: 'Patient/p1', _sort: '-date', _count: '10', _total: 'none', ...query }, 'http://x'), offset: 0 });
    const { text } = pagesStatement(
      [
        page('Observation', { category: 'laboratory' }),
        page('Observation', { 'category:missing': 'true', '_has:DiagnosticReport:result:category': 'LAB' }),
        page('Encounter', {}),
      ],
      access,
    );
    // One walk: the patient's Observations under the caller's rule, each with its token entries.
    expect(text.match(/MATERIALIZED/g)).toHaveLength(1);
    expect(text).toMatch(/^WITH "walk\d+" AS MATERIALIZED \(SELECT r\.rid, r\.id, r\.last_updated, ARRAY\(SELECT t FROM fhir_idx_token t WHERE t\.rid = r\.rid\) AS token_entries FROM fhir_resources r WHERE \(\(r\.resource_type = \$\d+\) AND \(NOT r\.deleted\) AND \("r"\."rid" IN \(SELECT rid FROM "fhir_idx_reference"/);
    // Both Observation pages read the walk; their category tests read the entries, with no probe of the token index;
    // what refers to a row is probed by its id.
    expect(text.match(/FROM "walk\d+" "w\d+"/g)).toHaveLength(2);
    expect(text.match(/EXISTS \(SELECT 1 FROM unnest\("w\d+"\."token_entries"\) "x\d+" WHERE/g)).toHaveLength(2);
    expect(text).not.toMatch(/"fhir_idx_token" "x\d+" WHERE "x\d+"\."rid" = "w/);
    expect(text).toMatch(/AND "ref\d+"\."target_id" = "w\d+"\."id"\)/);
    // A type one page reads is read as before, from the table.
    expect(text).toMatch(/FROM fhir_resources r WHERE \(\(r\.resource_type = \$\d+\) AND \(NOT r\.deleted\)/);
  });
  it("the organisation binds once in a row's access condition", () => {
    const policy = accessPolicyFor({ kind: 'client', clientId: 'c', organizationId: HOSTILE, scopes: ['fhir:read'] }, 'fhir');
    const { text, values } = policy.rowFilter!(ident('r'))!.render();
    expect(text).not.toContain('DROP');
    expect(values).toEqual([HOSTILE]);
    expect(text).toContain('"r"."author_org" IS NOT DISTINCT FROM $1');
  });
});

describe('constants', () => {
  it('a fragment of code constants renders once into text; one with values or aliases is refused', () => {
    const c = constant(sql`CASE t ${join([literal('a'), literal("b'")], ' ')} END`);
    expect(c.strings).toEqual([`CASE t 'a' 'b''' END`]);
    expect(sql`${c} = ${1}`.render()).toEqual({ text: `CASE t 'a' 'b''' END = $1`, values: [1] });
    expect(() => constant(sql`x = ${1}`)).toThrow(/binds values or allocates aliases/);
    expect(() => constant(sql`FROM t ${alias('a')}`)).toThrow(/binds values or allocates aliases/);
    expect(constant(sql`FROM ${ident('t')}`).render().text).toBe('FROM "t"');
  });
});

describe('rows of bound values (rowsOf)', () => {
  const columns = [['p', 'text'], ['n', 'int']] as const;

  it('a few rows are a VALUES list: each value bound and cast, the count in the text (one generic plan a count)', () => {
    const { text, values } = sql`SELECT k.p FROM ${rowsOf('k', columns, [[HOSTILE, 1], ['b', 2]])}`.render();
    expect(text).toBe('SELECT k.p FROM (VALUES ($1::text, $2::int), ($3::text, $4::int)) AS "k"("p", "n")');
    expect(values).toEqual([HOSTILE, 1, 'b', 2]);
  });

  it('more rows, or none, are arrays unnest()ed: one text whatever their number', () => {
    const many = Array.from({ length: 17 }, (_, i) => [`p${i}`, i]);
    const { text, values } = sql`SELECT k.p FROM ${rowsOf('k', columns, many)}`.render();
    expect(text).toBe('SELECT k.p FROM unnest($1::text[], $2::int[]) AS "k"("p", "n")');
    expect(values).toEqual([arrayLiteral(many.map((r) => r[0])), arrayLiteral(many.map((r) => r[1]))]);
    expect(sql`${rowsOf('k', columns, [])}`.render()).toEqual({ text: 'unnest($1::text[], $2::int[]) AS "k"("p", "n")', values: ['{}', '{}'] });
  });

  it('paddedRows repeats the last row up to a power of two within the VALUES lists: five texts for 1 to 16 rows', () => {
    const texts = new Set<string>();
    for (let n = 1; n <= 16; n++) texts.add(sql`${rowsOf('k', columns, paddedRows(Array.from({ length: n }, (_, i) => [`p${i}`, i])))}`.render().text);
    expect(texts.size).toBe(5);
    expect(paddedRows([['a', 1], ['b', 2], ['c', 3]])).toEqual([['a', 1], ['b', 2], ['c', 3], ['c', 3]]);
    expect(paddedRows([])).toEqual([]);
    const many = Array.from({ length: 17 }, (_, i) => [`p${i}`, i]);
    expect(paddedRows(many)).toEqual(many);
  });

  it('arrays go as the literal the pg driver would write, hostile text included; other values are left to it', () => {
    const hostile = [HOSTILE, '', 'NULL', 'null', null, undefined, '{a,b}', 'a,b', ' spaced ', 'back\\slash\\', 'quo"te""', '\\"', 'Ωμέγα 😀', 'line\nbreak', '-12', '7'];
    expect(arrayLiteral(hostile)).toBe(prepareValue(hostile));
    expect(arrayLiteral([1, -2.5, 1e21, null, 0])).toBe(prepareValue([1, -2.5, 1e21, null, 0]));
    expect(arrayLiteral([])).toBe('{}');
    const dated = [new Date(0), 'x'];
    expect(arrayLiteral(dated)).toBe(dated);
  });

  it('a type is code: anything but a plain type name is refused', () => {
    expect(() => rowsOf('k', [['p', 'text); DROP TABLE x; --']], [['a']])).toThrow(/not an SQL type name/);
  });
});
