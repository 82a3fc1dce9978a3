/**
 * The one builder of dynamic SQL (FHIR search, the access policy's predicate), after Medplum's
 * packages/server/src/fhir/sql.ts: a statement is composed from `sql` fragments, and
 * - every value interpolated into a fragment is a bind parameter (`$n`, numbered when the statement is rendered,
 *   so fragments compose in any order); values never enter SQL text;
 * - identifiers are quoted (`ident`): a table or column name from a map, however hostile, stays one identifier;
 * - aliases come from an allocator (`alias`): each gets a name of its own in the statement, so nested subqueries
 *   (chains, `_has`, the policy's EXISTS) never capture each other's rows;
 * - `and` / `or` / `not` combine conditions with the parentheses their precedence needs.
 * Hand-written SQL stays for fixed statements and batched writes.
 */

/** A bound value: `param(v)` interpolated twice binds once (one `$n`). */
export class Param {
  constructor(readonly value: unknown) {}
}

/** A quoted identifier (`ident`), or an alias whose name is allocated when the statement is rendered (`alias`). */
export class Identifier {
  /** The quoted name of a fixed identifier; undefined for an allocated alias. */
  readonly quoted: string | undefined;
  /** `name` of a fixed identifier; the prefix of an allocated alias. */
  constructor(
    readonly name: string,
    readonly allocated: boolean,
  ) {
    this.quoted = allocated ? (quoteIdentifier(name), undefined) : quoteIdentifier(name);
  }
  private readonly columns = new Map<string, Sql>();
  /** `"alias"."column"` (one fragment per column: the hot read path asks for the same few again and again). */
  col(column: string): Sql {
    let c = this.columns.get(column);
    if (!c) this.columns.set(column, (c = new Sql(['', '.', ''], [this, ident(column)])));
    return c;
  }
}

type Part = Sql | Identifier | Param;

/** A fragment of SQL: the text between its parts, and the parts (fragments, identifiers, parameters). */
export class Sql {
  constructor(
    readonly strings: readonly string[],
    readonly parts: readonly Part[],
  ) {}

  /** The statement as `Queryable.query` takes it: text with `$1…$n`, and the values they bind. */
  render(): { text: string; values: unknown[] } {
    const values: unknown[] = [];
    const numbers = new Map<Param, string>();
    const aliases = new Map<Identifier, string>();
    const write = (s: Sql): string => {
      let out = s.strings[0]!;
      s.parts.forEach((part, i) => {
        if (part instanceof Sql) out += write(part);
        else if (part instanceof Param) {
          let n = numbers.get(part);
          if (n === undefined) numbers.set(part, (n = `$${values.push(part.value)}`));
          out += n;
        } else if (part.quoted !== undefined) out += part.quoted;
        else {
          let name = aliases.get(part);
          if (name === undefined) aliases.set(part, (name = quoteIdentifier(`${part.name}${aliases.size + 1}`)));
          out += name;
        }
        out += s.strings[i + 1]!;
      });
      return out;
    };
    const text = write(this);
    return { text, values };
  }
}

/** `"name"`, with any `"` doubled: one identifier, whatever it holds. */
export function quoteIdentifier(name: string): string {
  if (!name || name.includes('\0')) throw new Error(`Not an SQL identifier: ${JSON.stringify(name)}`);
  return `"${name.replace(/"/g, '""')}"`;
}

/**
 * The SQL tag: sql`x = ${value}` binds `value`; a fragment, identifier or `param` interpolated is placed as
 * such. The template text itself is code, never data.
 */
export function sql(strings: TemplateStringsArray, ...values: unknown[]): Sql {
  return new Sql(
    strings,
    values.map((v) => (v instanceof Sql || v instanceof Identifier || v instanceof Param ? v : new Param(v))),
  );
}

/** A bound value to interpolate more than once under one `$n`. */
export const param = (value: unknown) => new Param(value);

const fixed = new Map<string, Identifier>();
/** A quoted identifier: a table, column or fixed alias (one object per name). */
export function ident(name: string): Identifier {
  let id = fixed.get(name);
  if (!id) fixed.set(name, (id = new Identifier(name, false)));
  return id;
}

/**
 * A new alias, named `prefix` + a number unique in the statement when it is rendered (aliases are numbered in the
 * order they first appear). Fixed identifiers of the same statement should not end in a digit.
 */
export const alias = (prefix: string) => new Identifier(prefix, true);

/** `parts` joined by `separator` (SQL text of code, e.g. ', '). */
export function join(parts: readonly Sql[], separator: string): Sql {
  if (!parts.length) return sql``;
  return new Sql(['', ...parts.slice(1).map(() => separator), ''], parts);
}

/**
 * A string constant of code (a resource type, a data class) written as an SQL literal, for the few tables that
 * the planner must see as constants (the data class of each type). Request values bind: use `sql` for them.
 */
export function literal(text: string): Sql {
  if (text.includes('\0')) throw new Error('An SQL literal cannot hold NUL');
  return new Sql([`'${text.replace(/'/g, "''")}'`], []);
}

/**
 * A fragment of code constants (no parameters, no aliases) rendered once into plain text: a large constant that
 * every statement repeats (the data class of each resource type) then costs one string, not a tree, per render.
 */
export function constant(fragment: Sql): Sql {
  const variable = (s: Sql): boolean => s.parts.some((p) => p instanceof Param || (p instanceof Identifier ? p.allocated : variable(p)));
  if (variable(fragment)) throw new Error('constant(): the fragment binds values or allocates aliases');
  return new Sql([fragment.render().text], []);
}

/** At most this many rows are written as a VALUES list by `rowsOf`; longer lists are unnest()ed arrays. */
const VALUES_AT_MOST = 16;
const SQL_TYPE = /^[a-z]+$/;

/**
 * A one-dimensional array parameter as PostgreSQL's array literal (`{"a",NULL,"b\\"c"}`), the text the pg driver would
 * make of it, made at half its cost: the import and the Bridge send tens of thousands of index values a statement.
 * Strings, numbers and nulls; an array holding anything else is returned as it is, for the driver.
 */
export function arrayLiteral(values: readonly unknown[]): string | readonly unknown[] {
  let out = '{';
  for (let i = 0; i < values.length; i++) {
    const v = values[i];
    if (i) out += ',';
    if (v === null || v === undefined) out += 'NULL';
    else if (typeof v === 'number') out += `"${v}"`;
    else if (typeof v === 'string') out += NEEDS_ESCAPE.test(v) ? `"${v.replace(/[\\"]/g, '\\$&')}"` : `"${v}"`;
    else return values;
  }
  return `${out}}`;
}
const NEEDS_ESCAPE = /["\\]/;

/**
 * A relation of bound rows for a FROM, `name(column…)`: `columns` name each column and its SQL type (code), `rows` the
 * values. A few rows are a VALUES list, whose row count is in the text: a prepared statement of it gets a generic plan,
 * planned once per connection. One text for any count, unnest() of array parameters, is planned anew at every
 * execution (a generic plan assumes it yields 10 rows, each custom plan sees the real count and looks cheaper): kept
 * for long lists, whose planning is spread over many rows.
 */
export function rowsOf(name: string, columns: ReadonlyArray<readonly [string, string]>, rows: ReadonlyArray<readonly unknown[]>): Sql {
  const types = columns.map(([, type]) => {
    if (!SQL_TYPE.test(type)) throw new Error(`rowsOf: not an SQL type name: ${JSON.stringify(type)}`);
    return type;
  });
  const relation = sql`${ident(name)}(${join(columns.map(([column]) => sql`${ident(column)}`), ', ')})`;
  if (rows.length && rows.length <= VALUES_AT_MOST) {
    const tuple = (row: readonly unknown[]) => sql`(${join(types.map((type, i) => sql`${row[i]}::${new Sql([type], [])}`), ', ')})`;
    return sql`(VALUES ${join(rows.map(tuple), ', ')}) AS ${relation}`;
  }
  return sql`unnest(${join(types.map((type, i) => sql`${arrayLiteral(rows.map((row) => row[i]))}::${new Sql([`${type}[]`], [])}`), ', ')}) AS ${relation}`;
}

/**
 * `rows` with the last one repeated up to a power of two, for a `rowsOf` whose statement a repeated row does not change
 * (a join whose matches are kept by key, an EXISTS test): a VALUES list is a statement text per count of rows, and
 * PostgreSQL plans each text custom on each connection until it has seen it ten times; up to VALUES_AT_MOST rows this
 * makes five texts of sixteen, which reach their generic plans sooner (beyond, rowsOf's unnest() is one text already).
 */
export function paddedRows<T>(rows: readonly T[]): T[] {
  const out = [...rows];
  while (out.length && out.length < VALUES_AT_MOST && (out.length & (out.length - 1)) !== 0) out.push(out.at(-1)!);
  return out;
}

type Condition = Sql | undefined | false;
const present = (conditions: Condition[]) => conditions.filter((c): c is Sql => c instanceof Sql);
const wrapped = (c: Sql) => sql`(${c})`;

/** Every condition (absent ones left out); `true` for none. */
export function and(...conditions: Condition[]): Sql {
  const cs = present(conditions);
  if (!cs.length) return sql`true`;
  return cs.length === 1 ? cs[0]! : wrapped(join(cs.map(wrapped), ' AND '));
}

/** Any condition (absent ones left out); `false` for none. */
export function or(...conditions: Condition[]): Sql {
  const cs = present(conditions);
  if (!cs.length) return sql`false`;
  return cs.length === 1 ? cs[0]! : wrapped(join(cs.map(wrapped), ' OR '));
}

export const not = (condition: Sql) => sql`NOT (${condition})`;
