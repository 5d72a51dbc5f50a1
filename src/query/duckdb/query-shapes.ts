/**
 * Shapes of queries that need less than a whole table, recognised in DuckDB's syntax tree
 * (syntax-tree.ts; the node layout is described in references.ts).
 *
 *   count         SELECT count(*) [[AS] name] FROM table, and nothing else: no WHERE, GROUP BY,
 *                 HAVING, QUALIFY, ORDER BY, LIMIT, DISTINCT, sample, CTE or join.
 *   key lookup    a SELECT whose FROM is one base table that the whole query names only once, and
 *                 whose WHERE pins every key column to literals (every alternative it leaves does):
 *
 *                   cond   = cond AND cond      pins what either side pins (the other side only filters)
 *                          | cond OR cond       pins the union of what the sides pin, when both pin
 *                          | key = literal | literal = key
 *                          | key IN (literal, ...)
 *                   key    = a key column, bare or qualified by the table's name or alias
 *                   literal = a constant, or CAST(literal AS type) (which is how DuckDB writes
 *                            DATE '...', TRUE, x::T)
 *
 * A literal pins a key column only where DuckDB compares the two in the column's own type, so that
 * the cast literal is the one key that can match: a string pins any column (DuckDB casts string
 * literals to the other side's type), a number only numeric columns, a DATE/TIMESTAMP only date and
 * timestamp columns, and so on. A number never pins a string column, since DuckDB would then
 * compare the column cast to a number ('01' = 1 holds).
 *
 * The caller loads only the rows of the pinned keys and still runs the query as written, so a key
 * that matches nothing, or a row the rest of the WHERE rejects, changes nothing in the result.
 *
 *   column filters  a SELECT over one base table named once (as for key lookups): the conditions
 *                 its WHERE implies for single columns, one per conjunct of its top-level ANDs:
 *
 *                   filter = column op literal | literal op column      op = '=' '<' '<=' '>' '>='
 *                          | column IN (literal, ...)
 *                          | column BETWEEN literal AND literal         (two filters: >= and <=)
 *
 *                 with literals that compare in the column's own type, as above. Every row the
 *                 query can see passes them all, so a reader may skip files and partitions whose
 *                 values cannot pass one; the query still runs as written.
 */
import type { DataType } from '../../common/types.js';
import { formatDecimal } from '../../common/values.js';
import type { TableReference } from './references.js';
import { isObject, type Json } from './syntax-tree.js';

/** The top query node of a tree, when the tree holds one statement. */
function topNode(json: unknown): Json | undefined {
  if (!isObject(json) || !Array.isArray(json.statements) || json.statements.length !== 1) return undefined;
  const statement = json.statements[0] as unknown;
  return isObject(statement) && isObject(statement.node) ? statement.node : undefined;
}

const isEmptyList = (x: unknown): boolean => Array.isArray(x) && x.length === 0;

function tableOf(from: Json): TableReference {
  const catalog = String(from.catalog_name ?? '');
  const schema = String(from.schema_name ?? '');
  return { ...(catalog ? { catalog } : {}), ...(schema ? { schema } : {}), table: String(from.table_name) };
}

/** `SELECT count(*) FROM table` (see the header): the table and the name of the result column. */
export function countStarOf(json: unknown): { table: TableReference; column: string } | undefined {
  const node = topNode(json);
  if (!node || node.type !== 'SELECT_NODE') return undefined;
  const from = node.from_table;
  if (!isObject(from) || from.type !== 'BASE_TABLE' || from.sample || from.at_clause) return undefined;
  if (!isEmptyList(node.modifiers) || !isObject(node.cte_map) || !isEmptyList(node.cte_map.map)) return undefined;
  if (node.where_clause || node.having || node.qualify || node.sample) return undefined;
  if (!isEmptyList(node.group_expressions) || !isEmptyList(node.group_sets)) return undefined;
  const list = node.select_list;
  if (!Array.isArray(list) || list.length !== 1 || !isObject(list[0])) return undefined;
  const f = list[0];
  const orders = isObject(f.order_bys) ? f.order_bys.orders : [];
  if (f.class !== 'FUNCTION' || f.function_name !== 'count_star' || f.schema || f.catalog || !isEmptyList(f.children) || f.filter || f.distinct || !isEmptyList(orders)) return undefined;
  return { table: tableOf(from), column: f.alias ? String(f.alias) : 'count_star()' };
}

// --- key lookups ---------------------------------------------------------------------------------

type Family = 'string' | 'numeric' | 'boolean' | 'time' | 'datetime' | 'binary';

/** A literal as SQL text DuckDB can cast; null for the NULL literal, which equals nothing. */
type Literal = { sql: string; family: Family } | null;

const INTEGER_TYPES = ['TINYINT', 'SMALLINT', 'INTEGER', 'BIGINT', 'HUGEINT', 'UTINYINT', 'USMALLINT', 'UINTEGER', 'UBIGINT', 'UHUGEINT'];

/** Types a literal may be cast to: DuckDB's type id → SQL name and family. */
const CAST_TYPES: Record<string, [string, Family]> = {
  VARCHAR: ['VARCHAR', 'string'],
  BOOLEAN: ['BOOLEAN', 'boolean'],
  FLOAT: ['FLOAT', 'numeric'],
  DOUBLE: ['DOUBLE', 'numeric'],
  DATE: ['DATE', 'datetime'],
  TIMESTAMP: ['TIMESTAMP', 'datetime'],
  'TIMESTAMP WITH TIME ZONE': ['TIMESTAMPTZ', 'datetime'],
  TIME: ['TIME', 'time'],
  BLOB: ['BLOB', 'binary'],
  ...Object.fromEntries(INTEGER_TYPES.map((t) => [t, [t, 'numeric']])),
};

/** The family of literals that a column of type `t` is compared with in its own type. */
function familyOf(t: DataType): Family {
  switch (t.kind) {
    case 'CHAR':
    case 'STRING':
      return 'string';
    case 'BOOLEAN':
      return 'boolean';
    case 'TIME':
      return 'time';
    case 'DATE':
    case 'TIMESTAMP':
    case 'TIMESTAMP_LTZ':
      return 'datetime';
    case 'BINARY':
    case 'BYTES':
      return 'binary';
    default:
      return 'numeric';
  }
}

/** An integer as DuckDB writes it: a number, a string of digits, or a HUGEINT's { upper, lower }. */
function integerOf(v: unknown): bigint | undefined {
  if (typeof v === 'number' && Number.isSafeInteger(v)) return BigInt(v);
  if (typeof v === 'string' && /^-?\d+$/.test(v)) return BigInt(v);
  if (isObject(v) && v.upper !== undefined && v.lower !== undefined) {
    const upper = integerOf(v.upper);
    const lower = integerOf(v.lower);
    return upper === undefined || lower === undefined ? undefined : (upper << 64n) + lower;
  }
  return undefined;
}

const sqlString = (s: string): string => `'${s.replaceAll("'", "''")}'`;

/** A constant (or a cast of one) as SQL text, undefined for any other expression. */
function literalOf(x: unknown): Literal | undefined {
  if (!isObject(x)) return undefined;
  if (x.class === 'CONSTANT' && isObject(x.value)) {
    const { type, is_null: isNull, value } = x.value;
    if (isNull) return null;
    const id = isObject(type) ? String(type.id) : '';
    if (id === 'VARCHAR' && typeof value === 'string') return { sql: sqlString(value), family: 'string' };
    if (id === 'BOOLEAN' && typeof value === 'boolean') return { sql: value ? 'TRUE' : 'FALSE', family: 'boolean' };
    if (INTEGER_TYPES.includes(id)) {
      const n = integerOf(value);
      return n === undefined ? undefined : { sql: `CAST('${n}' AS ${id})`, family: 'numeric' };
    }
    if (id === 'DECIMAL' && isObject(type) && isObject(type.type_info)) {
      const { width, scale } = type.type_info;
      const unscaled = integerOf(value);
      if (unscaled === undefined || typeof width !== 'number' || typeof scale !== 'number') return undefined;
      return { sql: `CAST('${formatDecimal(unscaled, scale)}' AS DECIMAL(${width}, ${scale}))`, family: 'numeric' };
    }
    if ((id === 'DOUBLE' || id === 'FLOAT') && typeof value === 'number') return { sql: `CAST('${value}' AS ${id})`, family: 'numeric' };
    return undefined;
  }
  if (x.class === 'CAST' && !x.try_cast && isObject(x.cast_type)) {
    const child = literalOf(x.child);
    if (child === undefined) return undefined;
    const t = x.cast_type;
    let target = CAST_TYPES[String(t.id)];
    if (t.id === 'DECIMAL' && isObject(t.type_info)) target = [`DECIMAL(${Number(t.type_info.width)}, ${Number(t.type_info.scale)})`, 'numeric'];
    if (!target) return undefined;
    return child === null ? null : { sql: `CAST(${child.sql} AS ${target[0]})`, family: target[1] };
  }
  return undefined;
}

/** Key column position → the literal it equals; a disjunction of these is what a condition pins. */
type Pins = Map<number, Literal>[];

/** Column references to one table of a FROM clause, bare or qualified by its name or alias. */
class ColumnRefs {
  private readonly qualifiers: Set<string>;

  constructor(
    readonly columns: readonly { name: string; type: DataType }[],
    from: Json,
  ) {
    const table = String(from.table_name).toLowerCase();
    this.qualifiers = new Set([table, ...(from.alias ? [String(from.alias).toLowerCase()] : [])]);
    if (from.schema_name) this.qualifiers.add(`${String(from.schema_name).toLowerCase()}.${table}`);
  }

  /** The position of the column a column reference names, or -1. */
  indexOf(x: unknown): number {
    if (!isObject(x) || x.class !== 'COLUMN_REF' || !Array.isArray(x.column_names)) return -1;
    const parts = x.column_names.map((p) => String(p).toLowerCase());
    const column = parts.pop()!;
    if (parts.length > 0 && !this.qualifiers.has(parts.join('.'))) return -1;
    return this.columns.findIndex((c) => c.name.toLowerCase() === column);
  }

  /** Whether DuckDB compares column `index` with the literal in the column's own type (see the header). */
  comparesInType(index: number, literal: Literal): boolean {
    return literal === null || literal.family === 'string' || literal.family === familyOf(this.columns[index].type);
  }
}

class KeyConditions {
  private readonly refs: ColumnRefs;

  constructor(
    keyColumns: { name: string; type: DataType }[],
    from: Json,
    private readonly maxKeys: number,
  ) {
    this.refs = new ColumnRefs(keyColumns, from);
  }

  /** `key = literal` pins when the literal compares in the key column's type (see the header). */
  private pin(key: number, literal: Literal | undefined): Map<number, Literal> | undefined {
    if (key < 0 || literal === undefined || !this.refs.comparesInType(key, literal)) return undefined;
    return new Map([[key, literal]]);
  }

  /** What `x` pins, or undefined when it pins nothing (or more keys than allowed). */
  pins(x: unknown): Pins | undefined {
    if (!isObject(x)) return undefined;
    const children = Array.isArray(x.children) ? (x.children as unknown[]) : [];
    let out: Pins | undefined;
    switch (x.type) {
      case 'CONJUNCTION_AND':
        for (const child of children) {
          const pinned = this.pins(child);
          if (!pinned) continue;
          // Each combination of one alternative per side; a column pinned twice keeps the first literal.
          out = out ? out.flatMap((a) => pinned.map((b) => new Map([...b, ...a]))) : pinned;
          if (out.length > this.maxKeys) return undefined;
        }
        return out;
      case 'CONJUNCTION_OR':
        out = [];
        for (const child of children) {
          const pinned = this.pins(child);
          if (!pinned) return undefined;
          out.push(...pinned);
          if (out.length > this.maxKeys) return undefined;
        }
        return out;
      case 'COMPARE_EQUAL': {
        const pinned = this.pin(this.refs.indexOf(x.left), literalOf(x.right)) ?? this.pin(this.refs.indexOf(x.right), literalOf(x.left));
        return pinned ? [pinned] : undefined;
      }
      case 'COMPARE_IN': {
        const key = this.refs.indexOf(children[0]);
        if (children.length - 1 > this.maxKeys) return undefined;
        out = [];
        for (const c of children.slice(1)) {
          const pinned = this.pin(key, literalOf(c));
          if (!pinned) return undefined;
          out.push(pinned);
        }
        return out;
      }
      default:
        return undefined;
    }
  }
}

/**
 * The FROM table and WHERE condition of a SELECT with a WHERE over one base table that the whole
 * query names only once: a CTE of the same name would hide the table, and a second reference
 * (join, subquery) would read rows the WHERE does not filter.
 */
function singleTableSelect(json: unknown): { from: Json; where: unknown } | undefined {
  const node = topNode(json);
  if (!node || node.type !== 'SELECT_NODE' || !node.where_clause) return undefined;
  const from = node.from_table;
  if (!isObject(from) || from.type !== 'BASE_TABLE' || from.sample || from.at_clause) return undefined;
  if (!isObject(node.cte_map) || !isEmptyList(node.cte_map.map) || countBaseTables(json) !== 1) return undefined;
  return { from, where: node.where_clause };
}

function countBaseTables(x: unknown): number {
  if (Array.isArray(x)) return x.reduce((n: number, item) => n + countBaseTables(item), 0);
  if (!isObject(x)) return 0;
  let n = x.type === 'BASE_TABLE' ? 1 : 0;
  for (const key of Object.keys(x)) n += countBaseTables(x[key]);
  return n;
}

/**
 * The keys a query reads when it is a key lookup (see the header) on the table of `keyColumns`:
 * per key, the SQL text of one literal per key column, in order; to be cast to the columns' types.
 * Keys with a NULL literal are left out (they match nothing). Undefined when the query is not a key
 * lookup or would pin more than `maxKeys` keys.
 */
export function keyLookupOf(json: unknown, keyColumns: { name: string; type: DataType }[], maxKeys: number): string[][] | undefined {
  const select = singleTableSelect(json);
  if (!select) return undefined;
  const pinned = new KeyConditions(keyColumns, select.from, maxKeys).pins(select.where);
  if (!pinned || !pinned.every((p) => p.size === keyColumns.length)) return undefined;
  const keys: string[][] = [];
  for (const p of pinned) {
    const literals = keyColumns.map((_, i) => p.get(i)!);
    if (literals.every((l) => l !== null)) keys.push(literals.map((l) => l!.sql));
  }
  return keys;
}

// --- column filters ------------------------------------------------------------------------------

export type FilterOp = '=' | '<' | '<=' | '>' | '>=' | 'in';

/** A condition on one column that every row a query sees passes (see the header). */
export interface ColumnFilter {
  /** The column as `columns` names it. */
  column: string;
  op: FilterOp;
  /** SQL text of each literal (one, or the IN list), for DuckDB to cast; null for NULL. */
  literals: (string | null)[];
}

const COMPARISONS: Record<string, [FilterOp, FilterOp]> = {
  // The operator as written (column op literal), and flipped (literal op column).
  COMPARE_EQUAL: ['=', '='],
  COMPARE_LESSTHAN: ['<', '>'],
  COMPARE_LESSTHANOREQUALTO: ['<=', '>='],
  COMPARE_GREATERTHAN: ['>', '<'],
  COMPARE_GREATERTHANOREQUALTO: ['>=', '<='],
};

/** The column filters (see the header) of a query over the table with these columns; [] when it is not of that shape. */
export function columnFiltersOf(json: unknown, columns: readonly { name: string; type: DataType }[]): ColumnFilter[] {
  const select = singleTableSelect(json);
  if (!select) return [];
  const refs = new ColumnRefs(columns, select.from);
  const out: ColumnFilter[] = [];
  const add = (column: unknown, op: FilterOp, literals: unknown[]): void => {
    const index = refs.indexOf(column);
    if (index < 0) return;
    const parsed = literals.map(literalOf);
    if (parsed.some((l) => l === undefined || !refs.comparesInType(index, l))) return;
    out.push({ column: columns[index].name, op, literals: parsed.map((l) => (l ? l.sql : null)) });
  };
  const visit = (x: unknown): void => {
    if (!isObject(x)) return;
    const children = Array.isArray(x.children) ? (x.children as unknown[]) : [];
    const type = String(x.type);
    if (type === 'CONJUNCTION_AND') for (const child of children) visit(child);
    else if (type === 'COMPARE_IN') add(children[0], 'in', children.slice(1));
    else if (type === 'COMPARE_BETWEEN') {
      add(x.input, '>=', [x.lower]);
      add(x.input, '<=', [x.upper]);
    } else if (COMPARISONS[type]) {
      const [op, flipped] = COMPARISONS[type];
      if (refs.indexOf(x.left) >= 0) add(x.left, op, [x.right]);
      else add(x.right, flipped, [x.left]);
    }
  };
  visit(select.where);
  return out;
}
