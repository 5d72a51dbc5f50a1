/**
 * Loads the Tributary tables a query names into DuckDB, as `<database>.<table>`, with only the
 * columns the query may use (the projection goes to the server):
 *
 *   log table            its log up to the high watermark                         plan 'scan'
 *   primary-key table    its current state (batch scan of the committed state)     plan 'scan'
 *                        or, for a key lookup (duckdb/query-shapes.ts), only the
 *                        rows of the looked-up keys                                plan 'lookup'
 *   table$changelog      the table's log with change type, offset and commit
 *                        timestamp in front (log-reader.ts), for either kind       plan 'scan'
 *   table$lake           the rows of the current snapshot of the table's lake
 *                        (Iceberg) table, deletes applied (lake-reader.ts)         plan 'lake'
 *   table$lake$snapshots the snapshots of that lake table                          plan 'lake'
 *
 * The lake tables of a lake-enabled table are read straight from the warehouse the server names
 * (GetLakeTieringStatus), so they must be reachable at the same path from here.
 *
 * DuckDB then runs the query as written, so a lookup gives the same result as a scan.
 */
import { tableOption } from '../common/config.js';
import { TributaryError } from '../common/errors.js';
import { type Column, type TableInfo, type TablePath, tablePathString } from '../common/schema.js';
import type { DataType } from '../common/types.js';
import type { Row } from '../common/values.js';
import type { Connection } from '../client/connection.js';
import type { Table } from '../client/table.js';
import { FileSystemCatalog } from '../lake/iceberg/catalog.js';
import { toArrowSchema } from '../record/arrow-schema.js';
import { keyLookupOf } from './duckdb/query-shapes.js';
import { referencesOf, type TableReference } from './duckdb/references.js';
import type { DuckSession } from './duckdb/session.js';
import type { SyntaxTree } from './duckdb/syntax-tree.js';
import { duckTypeName } from './duckdb/type-name.js';
import { loadLakeSnapshots, loadLakeTable } from './lake-reader.js';
import { CHANGELOG_COLUMNS, readChangelogUpToHighWatermark, readLogUpToHighWatermark } from './log-reader.js';
import { lookupState, readState } from './state-reader.js';

/** How a statement read its table: whole (log or state), by key lookups, from table stats, or from the lake. */
export type ReadPlan = 'scan' | 'lookup' | 'stats' | 'lake';

/** The most keys a query may look up; more are read by a scan. */
const MAX_LOOKUP_KEYS = 1024;

/** The read-only views of a table, named `<table><suffix>`, and what each shows. */
export type SystemTable = '$changelog' | '$lake' | '$lake$snapshots';
const SYSTEM_TABLES: Record<SystemTable, string> = {
  $changelog: 'the changelog of a table',
  // Before '$lake', which it ends in too.
  $lake$snapshots: 'the lake snapshots of a table',
  $lake: 'the lake rows of a table',
};

export const quoteIdentifier = (name: string): string => `"${name.replaceAll('"', '""')}"`;

export class TableLoader {
  constructor(
    private readonly conn: Connection,
    private readonly duck: DuckSession,
  ) {}

  /** The table a query's reference names, in the current `database` unless qualified. */
  static pathOf(ref: TableReference, database: string): TablePath {
    return { database: ref.schema ?? database, table: ref.table };
  }

  /** The system table a reference names (`t$changelog`, `t$lake`, `t$lake$snapshots`), with the table it belongs to. */
  static systemTableOf(ref: TableReference): { system: SystemTable; table: string; shows: string } | undefined {
    const lower = ref.table.toLowerCase();
    for (const [system, shows] of Object.entries(SYSTEM_TABLES) as [SystemTable, string][]) {
      if (lower.endsWith(system)) return { system, table: ref.table.slice(0, -system.length), shows };
    }
    return undefined;
  }

  /** Loads every table the query reads; undefined when it reads none. */
  async load(tree: SyntaxTree, database: string): Promise<ReadPlan | undefined> {
    const refs = referencesOf(tree.json);
    const loaded = new Set<string>();
    let plan: ReadPlan | undefined;
    for (const ref of refs.tables) {
      const path = TableLoader.pathOf(ref, database);
      const name = `${path.database}.${path.table}`;
      if (loaded.has(name)) continue;
      loaded.add(name);
      const system = TableLoader.systemTableOf(ref);
      const table = await this.conn.getTable({ ...path, table: system?.table ?? path.table });
      if (system?.system === '$lake' || system?.system === '$lake$snapshots') {
        const catalog = await this.lakeCatalog(table.info, system.system);
        const { database: db, table: lakeTable } = table.info.path;
        if (system.system === '$lake') await loadLakeTable(this.duck, name, catalog, db, lakeTable, refs.columns === '*' ? {} : { columns: refs.columns });
        else await loadLakeSnapshots(this.duck, name, catalog, db, lakeTable);
        plan = 'lake';
        continue;
      }
      const columns = columnsToRead(table.info, refs.columns);
      if (system?.system === '$changelog') {
        const clash = table.info.schema.columns.find((c) => CHANGELOG_COLUMNS.includes(c.name.toLowerCase()));
        if (clash) throw new TributaryError('SQL_UNSUPPORTED', `'${tablePathString(table.info.path)}' has a column named '${clash.name}', which ${system.system} uses for its metadata`);
        const { schema, batches } = await readChangelogUpToHighWatermark(this.conn, table, columns);
        await this.duck.loadArrowTable(name, schema, batches);
        plan = 'scan';
      } else if (!table.info.schema.primaryKey) {
        const projected = columns.map((c) => table.info.schema.columns.findIndex((x) => x.name === c));
        await this.duck.loadArrowTable(name, toArrowSchema(table.info.schema, projected), await readLogUpToHighWatermark(this.conn, table, columns));
        plan = 'scan';
      } else {
        const keys = refs.tables.length === 1 ? await this.lookupKeys(tree, table) : undefined;
        const { schema, batches } = keys ? await lookupState(table, keys, columns) : await readState(table, columns);
        await this.duck.loadArrowTable(name, schema, batches);
        plan = keys ? 'lookup' : 'scan';
      }
    }
    // The current database is DuckDB's default schema, so unqualified names resolve as in Tributary.
    await this.duck.run(`CREATE SCHEMA IF NOT EXISTS ${quoteIdentifier(database)}; SET search_path = '${database.replaceAll("'", "''")}'`);
    return plan;
  }

  /** The filesystem catalog of the lake that a lake-enabled table is tiered into. */
  private async lakeCatalog(info: TableInfo, system: SystemTable): Promise<FileSystemCatalog> {
    if (tableOption(info.properties, 'table.datalake.enabled') !== 'true') {
      throw new TributaryError('INVALID_TABLE_EXCEPTION', `'${tablePathString(info.path)}' is not lake-enabled ('table.datalake.enabled'), so it has no ${system}`);
    }
    const { warehouse } = await this.conn.getAdmin().getLakeTieringStatus(info.path);
    return new FileSystemCatalog(warehouse);
  }

  /**
   * The primary keys a key-lookup query reads (see query-shapes.ts), cast by DuckDB to the key
   * columns' types as its comparison would; undefined when the query is not a key lookup.
   */
  private async lookupKeys(tree: SyntaxTree, table: Table): Promise<Row[] | undefined> {
    const schema = table.info.schema;
    const keyColumns = (schema.primaryKey ?? []).map((k) => schema.columns.find((c) => c.name === k)!);
    const literals = keyLookupOf(tree.json, keyColumns, MAX_LOOKUP_KEYS);
    if (!literals) return undefined;
    if (literals.length === 0) return [];
    const values = literals.map((key) => `(${key.map((sql, i) => `TRY_CAST(${sql} AS ${duckTypeName(keyColumns[i].type)})`).join(', ')})`);
    const cast = await this.duck.run(`SELECT DISTINCT * FROM (VALUES ${values.join(', ')})`);
    // A literal that does not convert to the column's type equals no stored key.
    return cast.rows.filter((r) => r.every((v) => v !== null)).map((r) => Object.fromEntries(keyColumns.map((c, i) => [c.name, r[i]])));
  }
}

/** The columns a query may read; at least one, so that row counts survive. */
function columnsToRead(info: TableInfo, used: Set<string> | '*'): string[] {
  const all = info.schema.columns.map((c) => c.name);
  if (used === '*') return all;
  const lower = new Set([...used].map((c) => c.toLowerCase()));
  const chosen = all.filter((c) => lower.has(c.toLowerCase()));
  return chosen.length > 0 ? chosen : [narrowest(info.schema.columns)];
}

/** The column cheapest to read, for queries that use none (e.g. COUNT(*)). */
function narrowest(columns: Column[]): string {
  const width = (t: DataType): number => (['BOOLEAN', 'TINYINT'].includes(t.kind) ? 1 : t.kind === 'SMALLINT' ? 2 : ['INT', 'FLOAT', 'DATE'].includes(t.kind) ? 4 : ['STRING', 'BYTES', 'CHAR', 'BINARY'].includes(t.kind) ? 16 : 8);
  return [...columns].sort((a, b) => width(a.type) - width(b.type))[0].name;
}
