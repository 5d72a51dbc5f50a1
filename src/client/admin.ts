/**
 * `Admin`: databases, tables, partitions and offsets. Every method is one RPC (ListOffsets one per
 * call), and failures reject with a `TributaryError` whose `errorName` says what went wrong.
 */
import { TributaryError } from '../common/errors.js';
import {
  type ColumnSpec,
  type PartitionInfo,
  type Schema,
  schemaFromJson,
  type TableDescriptor,
  type TableInfo,
  type TablePath,
  tableInfoFromJson,
} from '../common/schema.js';
import { formatDataType } from '../common/types.js';
import type { LakeSnapshot } from '../common/lake.js';
import { type Api, ApiKeys, type RequestInit, type ResponseMessage } from '../rpc/api-keys.js';
import { fromPbLakeOffset } from '../rpc/lake-offsets.js';
import type { ConnectionCore } from './connection-core.js';
import { throwIfError, toPartitionInfo } from './responses.js';

/** Where to start reading a bucket, or which offset ListOffsets should return. */
export type OffsetSpec = 'earliest' | 'latest' | { timestamp: number | Date };

/** A bucket's KV snapshot: the changelog offset it contains up to (exclusive) and its row count. */
export interface KvSnapshot {
  bucket: number;
  snapshotId?: number;
  logOffset?: bigint;
  rowCount?: number;
}

function toKvSnapshot(s: { bucketId: number; snapshotId?: bigint; logOffset?: bigint; rowCount?: bigint }): KvSnapshot {
  return {
    bucket: s.bucketId,
    ...(s.snapshotId !== undefined ? { snapshotId: Number(s.snapshotId) } : {}),
    ...(s.logOffset !== undefined ? { logOffset: s.logOffset } : {}),
    ...(s.rowCount !== undefined ? { rowCount: Number(s.rowCount) } : {}),
  };
}

export const OFFSET_TYPE = { earliest: 0, latest: 1, timestamp: 2 } as const;

const pbPath = (p: TablePath) => ({ databaseName: p.database, tableName: p.table });
const pbSpec = (spec: Record<string, string>) => Object.entries(spec).map(([key, value]) => ({ key, value: String(value) }));

export interface LakeTieringStatus {
  tableId: number;
  /** The Iceberg filesystem catalog (directory) holding the lake table. */
  warehouse: string;
  /** SCHEDULED (waiting for its freshness), PENDING (queued for a worker) or TIERING. */
  state: 'SCHEDULED' | 'PENDING' | 'TIERING';
  tieringEpoch?: bigint;
  snapshotId?: bigint;
  /** When the last round ended (ms). */
  lastTieredTime?: number;
  /** Rounds failed or timed out since the last success. */
  failures: number;
  /** 0 when the lake holds every record; else how long ago the registered lake snapshot was committed (or the table created). */
  lagMs: number;
  buckets: { partition?: string; bucket: number; lakeEndOffset: bigint; highWatermark: bigint; recordsBehind: bigint }[];
}

/** A lake table of the warehouse (listLakeTables). */
export interface LakeTable {
  path: TablePath;
  /** The id of the Tributary table it was created for. */
  tableId?: number;
  /** Whether a live table of that path and id owns it; false for one left by a plain DROP TABLE. */
  owned: boolean;
  /** Its directory. */
  location: string;
}

export class Admin {
  constructor(private readonly conn: ConnectionCore) {}

  async createDatabase(name: string, options: { comment?: string; ignoreIfExists?: boolean } = {}): Promise<void> {
    await this.call(ApiKeys.CreateDatabase, {
      databaseName: name,
      databaseJson: JSON.stringify(options.comment ? { comment: options.comment } : {}),
      ignoreIfExists: options.ignoreIfExists ?? false,
    });
  }

  async dropDatabase(name: string, options: { ignoreIfNotExists?: boolean; cascade?: boolean } = {}): Promise<void> {
    await this.call(ApiKeys.DropDatabase, { databaseName: name, ignoreIfNotExists: options.ignoreIfNotExists ?? false, cascade: options.cascade ?? false });
  }

  async listDatabases(): Promise<string[]> {
    return (await this.call(ApiKeys.ListDatabases, {})).databaseNames;
  }

  async databaseExists(name: string): Promise<boolean> {
    return (await this.call(ApiKeys.DatabaseExists, { databaseName: name })).exists;
  }

  /** Creates a table; returns its table id. Column types may be given in SQL spelling ('DECIMAL(10, 2)'). */
  async createTable(path: TablePath, descriptor: TableDescriptor, options: { ignoreIfExists?: boolean } = {}): Promise<number> {
    const columns = descriptor.columns.map((c) => ({ ...c, type: typeof c.type === 'string' ? c.type : formatDataType(c.type) }));
    const resp = await this.call(ApiKeys.CreateTable, {
      tablePath: pbPath(path),
      tableJson: JSON.stringify({ ...descriptor, columns }),
      ignoreIfExists: options.ignoreIfExists ?? false,
    });
    this.conn.metadata.invalidate(path);
    return Number(resp.tableId);
  }

  /**
   * Drops a table. Its lake table (of a lake-enabled table) stays in the warehouse unless `purge`,
   * which deletes it too: its Iceberg metadata and files, under its own directory.
   */
  async dropTable(path: TablePath, options: { ignoreIfNotExists?: boolean; purge?: boolean } = {}): Promise<void> {
    await this.call(ApiKeys.DropTable, { tablePath: pbPath(path), ignoreIfNotExists: options.ignoreIfNotExists ?? false, purge: options.purge ?? false });
    this.conn.metadata.invalidate(path);
  }

  /** The lake tables of the warehouse, each with whether a live table owns it (a plain drop leaves one that none owns). */
  async listLakeTables(): Promise<{ warehouse: string; tables: LakeTable[] }> {
    const r = await this.call(ApiKeys.ListLakeTables, {});
    return {
      warehouse: r.warehouse,
      tables: r.tables.map((t) => ({
        path: { database: t.tablePath!.databaseName, table: t.tablePath!.tableName },
        ...(t.tableId !== undefined ? { tableId: Number(t.tableId) } : {}),
        owned: t.owned,
        location: t.location,
      })),
    };
  }

  /** Deletes a lake table that no live table owns: LAKE_TABLE_IN_USE for one a table owns, LAKE_TABLE_NOT_EXIST for none. */
  async dropLakeTable(path: TablePath, options: { ignoreIfNotExists?: boolean } = {}): Promise<void> {
    await this.call(ApiKeys.DropLakeTable, { tablePath: pbPath(path), ignoreIfNotExists: options.ignoreIfNotExists ?? false });
  }

  /**
   * ALTER TABLE: SET (`set`) and RESET (`reset`) of table options, and ADD COLUMN (`addColumns`,
   * nullable columns appended in order, as one new schema id). Column types may be given in SQL
   * spelling. Writers, scanners and lookupers made before keep the schema they were made with.
   */
  async alterTable(
    path: TablePath,
    changes: { set?: Record<string, string>; reset?: string[]; addColumns?: ColumnSpec[] },
    options: { ignoreIfNotExists?: boolean } = {},
  ): Promise<void> {
    const configChanges = [
      ...Object.entries(changes.set ?? {}).map(([configKey, configValue]) => ({ configKey, configValue, opType: 0 })),
      ...(changes.reset ?? []).map((configKey) => ({ configKey, opType: 1 })),
    ];
    const addColumns = (changes.addColumns ?? []).map((c) => ({
      columnName: c.name,
      dataType: typeof c.type === 'string' ? c.type : formatDataType(c.type),
      notNull: c.nullable === false,
      ...(c.comment !== undefined ? { comment: c.comment } : {}),
    }));
    await this.call(ApiKeys.AlterTable, { tablePath: pbPath(path), configChanges, addColumns, ignoreIfNotExists: options.ignoreIfNotExists ?? false });
    this.conn.metadata.invalidate(path);
  }

  async getTableInfo(path: TablePath): Promise<TableInfo> {
    const resp = await this.call(ApiKeys.GetTableInfo, { tablePath: pbPath(path) });
    return tableInfoFromJson(JSON.parse(resp.tableJson));
  }

  async getTableSchema(path: TablePath, schemaId?: number): Promise<{ schemaId: number; schema: Schema }> {
    const resp = await this.call(ApiKeys.GetTableSchema, { tablePath: pbPath(path), ...(schemaId !== undefined ? { schemaId } : {}) });
    return { schemaId: resp.schemaId, schema: schemaFromJson(JSON.parse(resp.schemaJson)) };
  }

  async listTables(database: string): Promise<string[]> {
    return (await this.call(ApiKeys.ListTables, { databaseName: database })).tableNames;
  }

  async tableExists(path: TablePath): Promise<boolean> {
    return (await this.call(ApiKeys.TableExists, { tablePath: pbPath(path) })).exists;
  }

  async listPartitionInfos(path: TablePath, partialSpec: Record<string, string> = {}): Promise<PartitionInfo[]> {
    const resp = await this.call(ApiKeys.ListPartitionInfos, { tablePath: pbPath(path), partialSpec: pbSpec(partialSpec) });
    return resp.partitionsInfo.map(toPartitionInfo);
  }

  async createPartition(path: TablePath, spec: Record<string, string>, options: { ignoreIfExists?: boolean } = {}): Promise<number> {
    const resp = await this.call(ApiKeys.CreatePartition, { tablePath: pbPath(path), partitionSpec: pbSpec(spec), ignoreIfExists: options.ignoreIfExists ?? false });
    return Number(resp.partitionId);
  }

  async dropPartition(path: TablePath, spec: Record<string, string>, options: { ignoreIfNotExists?: boolean } = {}): Promise<void> {
    await this.call(ApiKeys.DropPartition, { tablePath: pbPath(path), partitionSpec: pbSpec(spec), ignoreIfNotExists: options.ignoreIfNotExists ?? false });
  }

  /**
   * Offsets of buckets: the earliest kept, the latest (high watermark), or the first at or after a
   * commit timestamp. For a partitioned table name the partition.
   */
  async listOffsets(path: TablePath, buckets: number[], spec: OffsetSpec, partitionName?: string): Promise<Map<number, bigint>> {
    const info = await this.conn.metadata.table(path);
    const partitionId = partitionName === undefined ? undefined : await this.partitionIdOf(info, partitionName);
    const resp = await this.call(ApiKeys.ListOffsets, {
      followerServerId: -1,
      offsetType: typeof spec === 'string' ? OFFSET_TYPE[spec] : OFFSET_TYPE.timestamp,
      tableId: BigInt(info.tableId),
      ...(partitionId !== undefined ? { partitionId } : {}),
      bucketId: buckets,
      ...(typeof spec === 'object' ? { startTimestamp: BigInt(spec.timestamp instanceof Date ? spec.timestamp.getTime() : spec.timestamp) } : {}),
    });
    const out = new Map<number, bigint>();
    for (const b of resp.bucketsResp) {
      throwIfError(b, 'list offsets');
      out.set(b.bucketId, b.offset);
    }
    return out;
  }

  /** Rows per bucket: live keys of a primary-key table, records in the log of a log table. */
  async getTableStats(path: TablePath, partitionName?: string): Promise<{ rowCount: bigint; buckets: Map<number, bigint> }> {
    const info = await this.conn.metadata.table(path);
    const partitionId = partitionName === undefined ? undefined : await this.partitionIdOf(info, partitionName);
    const resp = await this.call(ApiKeys.GetTableStats, {
      tableId: BigInt(info.tableId),
      ...(partitionId !== undefined ? { partitionId } : {}),
      bucketId: Array.from({ length: info.bucketCount }, (_, b) => b),
    });
    const buckets = new Map<number, bigint>();
    for (const b of resp.bucketsResp) {
      throwIfError(b, 'table stats');
      buckets.set(b.bucketId, b.rowCount);
    }
    return { rowCount: [...buckets.values()].reduce((a, b) => a + b, 0n), buckets };
  }

  /** The latest KV snapshot of each bucket of a primary-key table (or partition). */
  async getLatestKvSnapshots(path: TablePath, partitionName?: string): Promise<KvSnapshot[]> {
    const resp = await this.call(ApiKeys.GetLatestKvSnapshots, { tablePath: pbPath(path), ...(partitionName !== undefined ? { partitionName } : {}) });
    return resp.latestSnapshots.map(toKvSnapshot);
  }

  /** Takes a KV snapshot of every bucket of a primary-key table now. */
  async triggerKvSnapshot(path: TablePath): Promise<KvSnapshot[]> {
    return (await this.call(ApiKeys.TriggerKvSnapshot, { tablePath: pbPath(path) })).snapshots.map(toKvSnapshot);
  }

  /** The lake snapshot registered for a lake-enabled table: Iceberg snapshot id and per-bucket offsets it holds. */
  async getLakeSnapshot(path: TablePath): Promise<LakeSnapshot> {
    const resp = await this.call(ApiKeys.GetLakeSnapshot, { tablePath: pbPath(path) });
    return { tableId: Number(resp.tableId), snapshotId: resp.snapshotId, bucketOffsets: resp.bucketOffsets.map(fromPbLakeOffset), commitTimestamp: Number(resp.commitTimestamp) };
  }

  /** Where tiering of a lake-enabled table stands: its state, its lake snapshot and how far each bucket lags. */
  async getLakeTieringStatus(path: TablePath): Promise<LakeTieringStatus> {
    const r = await this.call(ApiKeys.GetLakeTieringStatus, { tablePath: pbPath(path) });
    return {
      tableId: Number(r.tableId),
      warehouse: r.warehouse,
      state: r.state as LakeTieringStatus['state'],
      failures: Number(r.failures),
      lagMs: Number(r.lagMs),
      ...(r.tieringEpoch !== undefined ? { tieringEpoch: r.tieringEpoch } : {}),
      ...(r.snapshotId !== undefined ? { snapshotId: r.snapshotId } : {}),
      ...(r.lastTieredTime !== undefined ? { lastTieredTime: Number(r.lastTieredTime) } : {}),
      buckets: r.buckets.map((b) => ({
        ...(b.partitionName !== undefined ? { partition: b.partitionName } : {}),
        bucket: b.bucketId,
        lakeEndOffset: b.lakeEndOffset,
        highWatermark: b.highWatermark,
        recordsBehind: b.highWatermark > b.lakeEndOffset ? b.highWatermark - b.lakeEndOffset : 0n,
      })),
    };
  }

  private async partitionIdOf(info: TableInfo, partitionName: string): Promise<bigint> {
    const p = await this.conn.metadata.partition(info, partitionName, true);
    if (!p) throw new TributaryError('PARTITION_NOT_EXISTS', `partition '${partitionName}' does not exist`);
    return BigInt(p.partitionId);
  }

  private async call<A extends Api>(api: A, init: RequestInit<A>): Promise<ResponseMessage<A>> {
    return (await this.conn.server()).request(api, init);
  }
}
