/**
 * What a SQL session keeps between the reads of its queries, so that a query repeated while a
 * table's lake snapshot stays the same (most queries between two tiering rounds) reads only what
 * is new:
 *
 *   lake tables  a lake table as loaded, by lake, table id and creation time (a table's lake
 *                table is never replaced: a table created again gets a new id; a cluster started
 *                anew, or another one on a warehouse of the same name, counts ids from 0 again,
 *                but not at the same moment); reused while its version is still the current one
 *                (LakeStorage.loadTable with the one known: on an Iceberg lake one probe for the
 *                next version), and by a union read, with no request, while its latest tiered
 *                snapshot is the one the coordinator registered. Kept for the whole process, not
 *                per session: a version never changes, so every session may start from the last
 *                one any session loaded, and one that opens a session per query (the REST API, a
 *                script) asks the warehouse at most whether there is a newer version.
 *   lake plans   the read of a snapshot planned from one version of a lake table, by that version
 *                (LakeTable.version, which a purged and re-created namesake does not share) and the
 *                snapshot: a snapshot's files never change. A plan kept holds its remote files in
 *                the lake file cache; one pushed out is released.
 *   tails        the log rows that union reads loaded into DuckDB (union-reader.ts), each in its
 *                own tables, by what the read asked for (table, columns, partitions). A tail says
 *                which table version and lake snapshot it was read for and where each bucket's
 *                rows end: records below the high watermark never change, so the next read for
 *                the same version and snapshot only appends what the log gained since.
 *   union reads  the table each relation's last union read was of, so that the next read of it
 *                can start catching up its tail before the table's current metadata arrives.
 *
 * Each kind is bounded, the least recently used dropped first (a dropped tail's tables with it).
 * Closing the cache releases the plans it keeps: a session that ends must close it, or their files
 * stay pinned in the lake file cache for as long as the process runs.
 */
import type { Table } from '../client/table.js';
import type { TableInfo } from '../common/schema.js';
import type { LakeReadPlan, LakeStorage, LakeTable } from '../lake/lake-format.js';
import type { DuckSession } from './duckdb/session.js';
import type { BucketStart } from './log-reader.js';

const LAKE_TABLES_KEPT = 64;
const LAKE_PLANS_KEPT = 32;
const TAILS_KEPT = 16;
const UNION_READS_KEPT = 64;
/** Tails named so far in this process: sessions of one DuckDB database never share a name. */
let tailsNamed = 0;
/** The last lake table any session loaded, by lake, table id and creation time (ReadCache.lakeTable). */
const lakeTables = new Map<string, LakeTable>();

/** A tail loaded into DuckDB: its tables, what it was read for, and where each bucket's rows end. */
export interface LoadedTail {
  /** The DuckDB tables holding it (`schema.table`), the first the one reads use. */
  tables: string[];
  /** The table version and the lake snapshot it was read for. */
  tableId: number;
  schemaId: number;
  snapshotId: bigint;
  /** The buckets it holds, each from where it was first read. */
  ranges: BucketStart[];
  /** Where each bucket's rows end, by bucketKey (log-reader.ts). */
  ends: Map<string, bigint>;
}

export class ReadCache {
  private readonly lakePlans = new Map<string, Promise<LakeReadPlan>>();
  private readonly tails = new Map<string, LoadedTail>();
  private readonly unionReads = new Map<string, Table>();

  constructor(private readonly duck: DuckSession) {}

  /**
   * The lake table (its current version) of Tributary table `info`. With
   * `registered`, the lake snapshot registered with the coordinator, which a union read reads: a
   * version whose latest tiered snapshot is that one serves as it is. The snapshot's files never
   * change, and a newer version differs only in what such a read does not use (later snapshots,
   * expired older ones, columns added after the snapshot's files were written, which read as
   * NULL either way); the commits that move the registered snapshot, tiering's and compaction's,
   * are registered, so a read after them loads the version that holds them.
   */
  async lakeTable(lake: LakeStorage, info: TableInfo, registered?: bigint): Promise<LakeTable> {
    const key = `${lake.format}|${lake.warehouse}|${info.tableId}|${info.createdTime}`;
    const known = lakeTables.get(key);
    if (known && registered !== undefined && known.tieredSnapshot(info.tableId)?.snapshotId === registered) {
      keep(lakeTables, key, known, LAKE_TABLES_KEPT);
      return known;
    }
    const loaded = await lake.loadTable(info.path, known);
    keep(lakeTables, key, loaded, LAKE_TABLES_KEPT);
    return loaded;
  }

  /** The read of a snapshot of `table`, the current one by default; in the table's current schema with `currentSchema`, else in the snapshot's. */
  lakePlan(table: LakeTable, snapshotId?: bigint, options: { currentSchema?: boolean } = {}): Promise<LakeReadPlan> {
    const key = `${table.version}#${snapshotId ?? 'current'}${options.currentSchema ? '#current-schema' : ''}`;
    let plan = this.lakePlans.get(key);
    if (!plan) {
      plan = table.planRead(snapshotId, options);
      plan.catch(() => this.lakePlans.delete(key)); // a failed plan is planned again next time
    }
    // A plan pushed out lets its files in the lake file cache go (a plan kept holds them).
    for (const dropped of keep(this.lakePlans, key, plan, LAKE_PLANS_KEPT)) dropped.then((p) => p.release(), () => {});
    return plan;
  }

  /** Releases the plans kept (the session's DuckDB tables go with its DuckDB session). */
  async close(): Promise<void> {
    const plans = [...this.lakePlans.values()];
    this.lakePlans.clear();
    for (const plan of await Promise.allSettled(plans)) if (plan.status === 'fulfilled') plan.value.release();
  }

  /** The tail kept for `key`, marked as used. */
  tail(key: string): LoadedTail | undefined {
    const tail = this.tails.get(key);
    if (tail) keep(this.tails, key, tail, TAILS_KEPT);
    return tail;
  }

  /** A table name for a new tail of the DuckDB relation `name`. */
  tailTableName(schema: string, name: string): string {
    return `${schema}.${name}#${++tailsNamed}`;
  }

  /** Keeps `tail` for `key`; a tail pushed out drops its tables. */
  async keepTail(key: string, tail: LoadedTail): Promise<void> {
    for (const dropped of keep(this.tails, key, tail, TAILS_KEPT)) await this.dropTables(dropped);
  }

  /** Forgets the tail of `key` and drops its tables: it no longer holds what it says. */
  async forgetTail(key: string): Promise<void> {
    const tail = this.tails.get(key);
    if (!tail) return;
    this.tails.delete(key);
    await this.dropTables(tail);
  }

  /** The table that the last union read of DuckDB relation `name` read. */
  lastUnionRead(name: string): Table | undefined {
    return this.unionReads.get(name);
  }

  rememberUnionRead(name: string, table: Table): void {
    keep(this.unionReads, name, table, UNION_READS_KEPT);
  }

  private async dropTables(tail: LoadedTail): Promise<void> {
    for (const table of tail.tables) await this.duck.dropTable(table);
  }
}

/** Sets `key` as the most recently used entry of `map`; returns the entries pushed out past `max`. */
function keep<K, V>(map: Map<K, V>, key: K, value: V, max: number): V[] {
  map.delete(key);
  map.set(key, value);
  const dropped: V[] = [];
  for (const [k, v] of map) {
    if (map.size <= max) break;
    map.delete(k);
    dropped.push(v);
  }
  return dropped;
}
