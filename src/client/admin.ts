/**
 * `Admin`: databases, tables, partitions, offsets and where buckets live. Metadata and DDL go to
 * the coordinator (retried while none is active: ConnectionCore.withCoordinator; creations carry a
 * token so that a retry the coordinator already committed is not TABLE_ALREADY_EXIST), offsets and stats to each bucket's leader (retried at a new leader until
 * `client.request-timeout`), and failures reject with a `TributaryError` whose `errorName` says
 * what went wrong.
 */
import { randomUUID } from 'node:crypto';
import { ErrorCodes, TributaryError } from '../common/errors.js';
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
import { codeOf, nameOf, REBALANCE_GOALS, REBALANCE_STATUSES, type RebalanceGoal, type RebalanceStatus, SERVER_TAGS, type ServerTag } from '../rpc/cluster-admin.js';
import { fromPbLakeSnapshot } from '../rpc/lake-offsets.js';
import type { ConnectionCore } from './connection-core.js';
import { type BucketAddress, type LeaderSend, outcomeError, requestLeaders, roundToLeaders } from './leader-requests.js';
import { hasError, throwIfError, toPartitionInfo } from './responses.js';

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
/** ListOffsets type of a bucket's log end offset (LEO): where its local log ends, at or above the high watermark. */
const LOG_END_OFFSET = 3;

const pbPath = (p: TablePath) => ({ databaseName: p.database, tableName: p.table });
const pbSpec = (spec: Record<string, string>) => Object.entries(spec).map(([key, value]) => ({ key, value: String(value) }));

export interface LakeTieringStatus {
  tableId: number;
  /** The lake's warehouse holding the lake table, and its format (datalake.format). */
  warehouse: string;
  lakeFormat: string;
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

export type { RebalanceGoal, RebalanceStatus, ServerTag };

/** A Kafka consumer group (listConsumerGroups), with its lag per topic it committed offsets of. */
/** What one bucket's log takes, and where (SHOW TABLE STORAGE). */
export interface BucketStorageInfo {
  /** The partition's name, for a partitioned table. */
  partition?: string;
  bucket: number;
  /** Bytes and segments of the log on its leader's local disk. */
  localBytes: bigint;
  localSegments: number;
  /** Bytes and segments of the log in remote storage; absent while the bucket has no remote log. */
  remoteBytes?: bigint;
  remoteSegments?: number;
}

export interface ConsumerGroupInfo {
  groupId: string;
  state: string;
  members: number;
  protocolType: string;
  /** The chosen assignor, empty while there is none. */
  protocol: string;
  /** Per topic: partitions with a committed offset and their summed lag (log end minus committed). */
  topics: { topic: string; partitions: number; lag: bigint }[];
}

/** A tablet server (listTabletServers); host, port and rack are null for one that is not registered now. */
export interface TabletServerInfo {
  nodeId: number;
  host: string | null;
  port: number | null;
  rack: string | null;
  alive: boolean;
  /** Its server tag (addServerTag), null when it has none. */
  tag: ServerTag | null;
  /** Buckets (of every table and partition) it leads, and bucket replicas it is assigned. */
  leaderCount: number;
  replicaCount: number;
}

/** Where a bucket lives, as the coordinator says. */
export interface BucketInfo {
  partition?: string;
  bucket: number;
  /** -1 while it has no leader. */
  leader: number;
  /** Replica ids in assignment order, and those in sync with the leader. */
  replicas: number[];
  isr: number[];
  leaderEpoch: number;
}

/** Where a rebalance task stands (listRebalanceProgress): its status and, per bucket it changes, the plan and how far it got. */
export interface RebalanceProgress {
  rebalanceId: string;
  status: RebalanceStatus;
  goals: RebalanceGoal[];
  createdTime: number;
  finishedTime?: number;
  buckets: {
    tableId: number;
    partitionId?: number;
    bucket: number;
    originalReplicas: number[];
    newReplicas: number[];
    originalLeader: number;
    newLeader: number;
    status: RebalanceStatus;
    error?: string;
  }[];
}

/** A bucket's placement and how far its log goes (listBuckets). */
export interface BucketStatus extends BucketInfo {
  highWatermark: bigint | null;
  logEndOffset: bigint | null;
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
      // A retry after a failover finds the table this call created, not TABLE_ALREADY_EXIST.
      creationToken: randomUUID(),
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
    const resp = await this.call(ApiKeys.CreatePartition, { tablePath: pbPath(path), partitionSpec: pbSpec(spec), ignoreIfExists: options.ignoreIfExists ?? false, creationToken: randomUUID() });
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
    const targets = buckets.map((bucket) => ({ ...(partitionId !== undefined ? { partitionId } : {}), bucket }));
    const answers = await requestLeaders(this.conn, info, targets, listOffsetsAt(info, partitionId, typeof spec === 'string' ? OFFSET_TYPE[spec] : spec));
    const out = new Map<number, bigint>();
    answers.forEach((answer, i) => {
      throwIfError(answer, 'list offsets');
      out.set(buckets[i], answer.offset);
    });
    return out;
  }

  /** Bytes and segments of each bucket's log, local and remote, of every partition, as each bucket's leader reports them. */
  async getTableStorage(path: TablePath): Promise<BucketStorageInfo[]> {
    const info = await this.conn.metadata.table(path);
    const partitions = info.partitionKeys.length === 0 ? [undefined] : await this.listPartitionInfos(path);
    const out: BucketStorageInfo[] = [];
    for (const p of partitions) {
      const all = Array.from({ length: info.bucketCount }, (_, bucket) => ({ ...(p ? { partitionId: p.partitionId } : {}), bucket }));
      const answers = await requestLeaders(this.conn, info, all, async (rpc, group) => {
        const resp = await rpc.request(ApiKeys.GetTableStats, { tableId: BigInt(info.tableId), ...(p ? { partitionId: BigInt(p.partitionId) } : {}), bucketId: group.map((b) => b.bucket) });
        return inBucketOrder(group, resp.bucketsResp);
      });
      answers.forEach((b, i) => {
        throwIfError(b, 'table storage');
        out.push({
          ...(p ? { partition: p.partitionName } : {}),
          bucket: all[i].bucket,
          localBytes: b.logSizeBytes ?? 0n,
          localSegments: b.logSegments ?? 0,
          ...(b.remoteLogSizeBytes !== undefined ? { remoteBytes: b.remoteLogSizeBytes, remoteSegments: b.remoteLogSegments ?? 0 } : {}),
        });
      });
    }
    return out;
  }

  /** Rows per bucket: live keys of a primary-key table, records in the log of a log table. */
  async getTableStats(path: TablePath, partitionName?: string): Promise<{ rowCount: bigint; buckets: Map<number, bigint> }> {
    const info = await this.conn.metadata.table(path);
    const partitionId = partitionName === undefined ? undefined : await this.partitionIdOf(info, partitionName);
    const all = Array.from({ length: info.bucketCount }, (_, bucket) => ({ ...(partitionId !== undefined ? { partitionId } : {}), bucket }));
    const answers = await requestLeaders(this.conn, info, all, async (rpc, group) => {
      const resp = await rpc.request(ApiKeys.GetTableStats, {
        tableId: BigInt(info.tableId),
        ...(partitionId !== undefined ? { partitionId: BigInt(partitionId) } : {}),
        bucketId: group.map((b) => b.bucket),
      });
      return inBucketOrder(group, resp.bucketsResp);
    });
    const buckets = new Map<number, bigint>();
    answers.forEach((b, i) => {
      throwIfError(b, 'table stats');
      buckets.set(all[i].bucket, b.rowCount);
    });
    return { rowCount: [...buckets.values()].reduce((a, b) => a + b, 0n), buckets };
  }

  /**
   * The tablet servers of the cluster: the registered ones (alive), and any that replicas are
   * assigned to but that are not registered now (not alive, address unknown), each with how many
   * bucket replicas of every table it holds and how many it leads.
   */
  /** The Kafka consumer groups every tablet server's Kafka listener coordinates, by group id. */
  async listConsumerGroups(): Promise<ConsumerGroupInfo[]> {
    await this.conn.metadata.refreshNodes();
    const answers = await Promise.all(this.conn.metadata.tabletServers.map(async (n) => (await this.conn.tabletServer(n.nodeId)).request(ApiKeys.ListConsumerGroups, {})));
    return answers
      .flatMap((r) => r.groups)
      .map((g) => ({ groupId: g.groupId, state: g.state, members: g.members, protocolType: g.protocolType, protocol: g.protocol, topics: g.topics.map((t) => ({ topic: t.topic, partitions: t.partitions, lag: t.lag })) }))
      .sort((a, b) => (a.groupId < b.groupId ? -1 : a.groupId > b.groupId ? 1 : 0));
  }

  async listTabletServers(): Promise<TabletServerInfo[]> {
    await this.conn.metadata.refreshNodes();
    const servers = new Map<number, TabletServerInfo>();
    for (const n of this.conn.metadata.tabletServers) {
      servers.set(n.nodeId, { nodeId: n.nodeId, host: n.host, port: n.port, rack: n.rack ?? null, alive: true, tag: this.conn.metadata.serverTag(n.nodeId) ?? null, leaderCount: 0, replicaCount: 0 });
    }
    const server = (nodeId: number): TabletServerInfo => {
      let s = servers.get(nodeId);
      if (!s) servers.set(nodeId, (s = { nodeId, host: null, port: null, rack: null, alive: false, tag: this.conn.metadata.serverTag(nodeId) ?? null, leaderCount: 0, replicaCount: 0 }));
      return s;
    };
    for (const database of await this.listDatabases()) {
      for (const table of await this.listTables(database)) {
        let buckets: BucketInfo[];
        try {
          buckets = await this.bucketsOf(await this.conn.metadata.table({ database, table }, true));
        } catch (err) {
          if (err instanceof TributaryError && (err.errorName === 'TABLE_NOT_EXIST' || err.errorName === 'DATABASE_NOT_EXIST' || err.errorName === 'PARTITION_NOT_EXISTS')) continue; // dropped since listed
          throw err;
        }
        for (const b of buckets) {
          if (b.leader >= 0) server(b.leader).leaderCount++;
          for (const r of b.replicas) server(r).replicaCount++;
        }
      }
    }
    return [...servers.values()].sort((a, b) => a.nodeId - b.nodeId);
  }

  /**
   * Where each bucket of a table (of every partition) lives and how far its log goes: leader,
   * replicas, in-sync replicas and leader epoch from the coordinator, high watermark and log end
   * offset from the leader (null where it cannot say, or the bucket has no leader).
   */
  async listBuckets(path: TablePath): Promise<BucketStatus[]> {
    const info = await this.conn.metadata.table(path, true);
    const buckets = await this.bucketsOf(info);
    const out: BucketStatus[] = [];
    const byPartition = new Map<number | undefined, typeof buckets>();
    for (const b of buckets) byPartition.set(b.partitionId, [...(byPartition.get(b.partitionId) ?? []), b]);
    for (const [partitionId, list] of byPartition) {
      // One round, to the buckets that have a leader: this shows where things stand, it does not wait for them.
      const led = list.filter((b) => b.leader >= 0);
      const targets = led.map((b) => ({ ...(partitionId !== undefined ? { partitionId } : {}), bucket: b.bucket }));
      const [hw, leo] = await Promise.all([OFFSET_TYPE.latest, LOG_END_OFFSET].map((type) => roundToLeaders(this.conn, info, targets, listOffsetsAt(info, partitionId, type))));
      const offsets = new Map(led.map((b, i) => [b.bucket, [hw[i], leo[i]].map((o) => (outcomeError(o, 'list offsets') ? null : (o as OffsetAnswer).offset))]));
      for (const b of list) {
        const [highWatermark, logEndOffset] = offsets.get(b.bucket) ?? [null, null];
        out.push({ ...(b.partition !== undefined ? { partition: b.partition } : {}), bucket: b.bucket, leader: b.leader, replicas: b.replicas, isr: b.isr, leaderEpoch: b.leaderEpoch, highWatermark, logEndOffset });
      }
    }
    return out;
  }

  /**
   * Tags tablet servers (a cluster's coordinator only): PERMANENT_OFFLINE for a server to drain (the
   * next rebalance moves every replica off it), TEMPORARY_OFFLINE for one about to be down for a
   * while (the next rebalance moves its leaderships off). SERVER_NOT_EXIST_EXCEPTION for an unknown
   * server, SEVER_TAG_ALREADY_EXIST_EXCEPTION for one with another tag.
   */
  async addServerTag(serverIds: number[], tag: ServerTag): Promise<void> {
    await this.call(ApiKeys.AddServerTag, { serverIds, serverTag: codeOf(SERVER_TAGS, tag, 'server tag') });
  }

  /** Takes the tag off the servers; SEVER_TAG_NOT_EXIST_EXCEPTION for one that does not carry it. */
  async removeServerTag(serverIds: number[], tag: ServerTag): Promise<void> {
    await this.call(ApiKeys.RemoveServerTag, { serverIds, serverTag: codeOf(SERVER_TAGS, tag, 'server tag') });
  }

  /**
   * Starts a rebalance for the goals (both, replicas first, when none are given) and answers its id;
   * REBALANCE_FAILURE_EXCEPTION while another one runs or when no plan can reach the goals.
   */
  async rebalance(goals: RebalanceGoal[] = []): Promise<string> {
    return (await this.call(ApiKeys.Rebalance, { goals: goals.map((g) => codeOf(REBALANCE_GOALS, g, 'rebalance goal')) })).rebalanceId;
  }

  /** The progress of rebalance `rebalanceId` (the latest one by default); NO_REBALANCE_IN_PROGRESS_EXCEPTION when there is none. */
  async listRebalanceProgress(rebalanceId?: string): Promise<RebalanceProgress> {
    const r = await this.call(ApiKeys.ListRebalanceProgress, rebalanceId !== undefined ? { rebalanceId } : {});
    return {
      rebalanceId: r.rebalanceId,
      status: nameOf(REBALANCE_STATUSES, r.status, 'rebalance status'),
      goals: r.goals.map((g) => nameOf(REBALANCE_GOALS, g, 'rebalance goal')),
      createdTime: Number(r.createdTime),
      ...(r.finishedTime !== undefined ? { finishedTime: Number(r.finishedTime) } : {}),
      buckets: r.buckets.map((b) => ({
        tableId: Number(b.tableId),
        ...(b.partitionId !== undefined ? { partitionId: Number(b.partitionId) } : {}),
        bucket: b.bucketId,
        originalReplicas: b.originalReplicas,
        newReplicas: b.newReplicas,
        originalLeader: b.originalLeader,
        newLeader: b.newLeader,
        status: nameOf(REBALANCE_STATUSES, b.status, 'rebalance status'),
        ...(b.errorMessage !== undefined ? { error: b.errorMessage } : {}),
      })),
    };
  }

  /** Cancels the running rebalance (`rebalanceId`, if given, must be it): moves in flight go back; NO_REBALANCE_IN_PROGRESS_EXCEPTION when none runs. */
  async cancelRebalance(rebalanceId?: string): Promise<void> {
    await this.call(ApiKeys.CancelRebalance, rebalanceId !== undefined ? { rebalanceId } : {});
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
    return fromPbLakeSnapshot(resp);
  }

  /** Where tiering of a lake-enabled table stands: its state, its lake snapshot and how far each bucket lags. */
  async getLakeTieringStatus(path: TablePath): Promise<LakeTieringStatus> {
    const r = await this.call(ApiKeys.GetLakeTieringStatus, { tablePath: pbPath(path) });
    return {
      tableId: Number(r.tableId),
      warehouse: r.warehouse,
      lakeFormat: r.lakeFormat,
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

  private async partitionIdOf(info: TableInfo, partitionName: string): Promise<number> {
    const p = await this.conn.metadata.partition(info, partitionName, true);
    if (!p) throw new TributaryError('PARTITION_NOT_EXISTS', `partition '${partitionName}' does not exist`);
    return p.partitionId;
  }

  /** Every bucket of a table (of each of its partitions) as the coordinator places it now. */
  private async bucketsOf(info: TableInfo): Promise<(BucketInfo & { partitionId?: number })[]> {
    const partitions = info.partitionKeys.length > 0 ? await this.conn.metadata.listPartitions(info.path) : [undefined];
    this.conn.metadata.invalidateLeaders(info);
    const out: (BucketInfo & { partitionId?: number })[] = [];
    for (const p of partitions) {
      for (const b of await this.conn.metadata.bucketLeaders(info, p?.partitionId)) {
        out.push({ ...(p ? { partition: p.partitionName, partitionId: p.partitionId } : {}), bucket: b.bucket, leader: b.leader, replicas: b.replicas, isr: b.isr, leaderEpoch: b.leaderEpoch });
      }
    }
    return out;
  }

  private async call<A extends Api>(api: A, init: RequestInit<A>): Promise<ResponseMessage<A>> {
    return this.conn.withCoordinator((rpc) => rpc.request(api, init));
  }
}

/** A bucket's ListOffsets answer. */
type OffsetAnswer = { errorCode?: number; errorMessage?: string; offset: bigint };

/** ListOffsets at a leader, of its buckets of `info` (of partition `partitionId`): an offset type, or a timestamp. */
function listOffsetsAt(info: TableInfo, partitionId: number | undefined, spec: number | { timestamp: number | Date }): LeaderSend<BucketAddress, OffsetAnswer> {
  return async (rpc, group) => {
    const resp = await rpc.request(ApiKeys.ListOffsets, {
      followerServerId: -1,
      offsetType: typeof spec === 'number' ? spec : OFFSET_TYPE.timestamp,
      tableId: BigInt(info.tableId),
      ...(partitionId !== undefined ? { partitionId: BigInt(partitionId) } : {}),
      bucketId: group.map((b) => b.bucket),
      ...(typeof spec === 'object' ? { startTimestamp: BigInt(spec.timestamp instanceof Date ? spec.timestamp.getTime() : spec.timestamp) } : {}),
    });
    return inBucketOrder(group, resp.bucketsResp);
  };
}

/** The answers of a per-bucket response in the order of the buckets asked (a server answers each bucket once, naming it). */
function inBucketOrder<R extends { bucketId: number; errorCode?: number; errorMessage?: string }>(asked: readonly { bucket: number }[], answers: readonly R[]): R[] {
  const byBucket = new Map(answers.map((a) => [a.bucketId, a]));
  return asked.map((b) => byBucket.get(b.bucket) ?? ({ bucketId: b.bucket, errorCode: ErrorCodes.UNKNOWN_TABLE_OR_BUCKET_EXCEPTION, errorMessage: `no answer for bucket ${b.bucket}` } as R));
}
