/**
 * The base tables and columns a query reads, found in the syntax tree that DuckDB's own parser
 * gives as JSON (`json_serialize_sql`), so that only those tables are fetched, with a column
 * projection pushed to the server.
 *
 * The parts of that tree used here:
 *   query nodes (SELECT_NODE, SET_OPERATION_NODE, RECURSIVE_CTE_NODE) carry `cte_map.map`, a list
 *     of { key: name, value: { query: { node } } }; a CTE is visible in the node, in the CTEs after
 *     it and, when its body is a RECURSIVE_CTE_NODE, in itself
 *   table refs: { type: 'BASE_TABLE', catalog_name, schema_name, table_name, alias },
 *     { type: 'JOIN', left, right, ref_type ('NATURAL' joins on unnamed columns), using_columns },
 *     { type: 'SUBQUERY' | 'TABLE_FUNCTION' | 'EXPRESSION_LIST' | 'PIVOT' | ... }
 *   expressions: { class: 'COLUMN_REF', column_names: [..., name] }, { class: 'STAR', ... },
 *     { class: 'POSITIONAL_REFERENCE' }
 *
 * Columns are a superset: every part of every column reference (a part may be a table alias or a
 * struct field), names in USING lists, and so on; intersect them with a table's columns. The
 * answer is '*' whenever the columns cannot be known without binding: a star over a base table,
 * a NATURAL join, a PIVOT, a positional reference (#1), or a table's name used as a value.
 */
import { isObject, type Json } from './syntax-tree.js';

export interface TableReference {
  catalog?: string;
  schema?: string;
  table: string;
}

export interface TableReferences {
  /** Distinct base tables, names as written (CTE names are not base tables). */
  tables: TableReference[];
  /** Names that may be columns of those tables, or '*' when all columns may be read. */
  columns: Set<string> | '*';
}


class Collector {
  readonly tables = new Map<string, TableReference>();
  readonly columns = new Set<string>();
  /** Lower-cased names and aliases of the base tables, to spot a table used as a value. */
  readonly relationNames = new Set<string>();
  /** Lower-cased single-part column references, checked against those names at the end. */
  readonly singleNames: string[] = [];
  allColumns = false;

  /** Visits any part of the tree; `scope` holds the lower-cased CTE names visible there. */
  visit(x: unknown, scope: ReadonlySet<string>, starReadsBase: boolean): void {
    if (Array.isArray(x)) {
      for (const item of x) this.visit(item, scope, starReadsBase);
      return;
    }
    if (!isObject(x)) return;
    let inner = scope;
    const ctes = isObject(x.cte_map) && Array.isArray(x.cte_map.map) ? (x.cte_map.map as Json[]) : [];
    for (const cte of ctes) {
      const name = String(cte.key).toLowerCase();
      const query = isObject(cte.value) ? cte.value.query : undefined;
      const recursive = isObject(query) && isObject(query.node) && query.node.type === 'RECURSIVE_CTE_NODE';
      this.visit(query, recursive ? new Set([...inner, name]) : inner, false);
      inner = new Set([...inner, name]);
    }
    if (x.type === 'SELECT_NODE') starReadsBase = this.readsBaseTable(x.from_table, inner);
    switch (x.type) {
      case 'BASE_TABLE':
        this.baseTable(x, inner);
        return;
      case 'PIVOT':
      case 'UNPIVOT':
        this.allColumns = true;
        break;
      case 'JOIN':
        if (x.ref_type === 'NATURAL') this.allColumns = true;
        if (Array.isArray(x.using_columns)) for (const c of x.using_columns) this.columns.add(String(c));
        break;
    }
    switch (x.class) {
      case 'COLUMN_REF': {
        const parts = (x.column_names as unknown[]).map(String);
        for (const p of parts) this.columns.add(p);
        if (parts.length === 1) this.singleNames.push(parts[0].toLowerCase());
        break;
      }
      case 'STAR':
        if (starReadsBase) this.allColumns = true;
        break;
      case 'POSITIONAL_REFERENCE':
        this.allColumns = true;
        break;
    }
    for (const key of Object.keys(x)) if (key !== 'cte_map') this.visit(x[key], inner, starReadsBase);
  }

  private baseTable(ref: Json, scope: ReadonlySet<string>): void {
    const catalog = String(ref.catalog_name ?? '');
    const schema = String(ref.schema_name ?? '');
    const table = String(ref.table_name);
    if (!catalog && !schema && scope.has(table.toLowerCase())) return; // a CTE
    this.tables.set(JSON.stringify([catalog, schema, table]), { ...(catalog ? { catalog } : {}), ...(schema ? { schema } : {}), table });
    this.relationNames.add(table.toLowerCase());
    if (ref.alias) this.relationNames.add(String(ref.alias).toLowerCase());
  }

  /** Whether a star in a SELECT with this FROM clause expands the columns of a base table. */
  private readsBaseTable(from: unknown, scope: ReadonlySet<string>): boolean {
    if (!isObject(from)) return false;
    if (from.type === 'BASE_TABLE') return Boolean(from.schema_name || from.catalog_name) || !scope.has(String(from.table_name).toLowerCase());
    if (from.type === 'JOIN') return this.readsBaseTable(from.left, scope) || this.readsBaseTable(from.right, scope);
    return false;
  }
}

/** Reads the output of `json_serialize_sql` (already checked to hold no error). */
export function referencesOf(serialized: unknown): TableReferences {
  const collector = new Collector();
  const statements = isObject(serialized) && Array.isArray(serialized.statements) ? serialized.statements : [];
  collector.visit(statements, new Set(), false);
  const tableAsValue = collector.singleNames.some((n) => collector.relationNames.has(n));
  return {
    tables: [...collector.tables.values()],
    columns: collector.allColumns || tableAsValue ? '*' : collector.columns,
  };
}
