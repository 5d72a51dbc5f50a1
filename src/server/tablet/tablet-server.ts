/**
 * The tablet server: hosts the buckets of every table and partition and serves their data APIs
 * (ProduceLog, FetchLog, ListOffsets, LimitScan). Two ways to run it, chosen by its construction:
 * - on one node (`tributary start`), given a TableMetadataSource (the coordinator in the same
 *   process): it hosts every bucket, as its only replica and leader, learning of them through the
 *   BucketLifecycle calls; the high watermark of each log is its durable end;
 * - in a cluster, given a ClusterMembership: the coordinator's requests (NotifyLeaderAndIsr,
 *   StopReplica, UpdateMetadata) make each replica leader or follower, its logs are replicated
 *   (replica-manager.ts) and clients are served by the leaders only (NOT_LEADER_OR_FOLLOWER elsewhere).
 *
 * With remote.data.dir set, the leaders' closed segments also go to the remote log
 * (remote-log-manager.ts), and fetches below a leader's local log start read it.
 *
 * Bucket directories: `<data.dir>/log/<db>/<table>-<tableId>/[<partition>-p<partitionId>/]log-<bucket>`.
 */
import fs from 'node:fs';
import path from 'node:path';
import type { MessageInitShape } from '@bufbuild/protobuf';
import type * as arrow from 'apache-arrow';
import { type Options, parseDuration, tableOption } from '../../common/config.js';
import { TributaryError } from '../../common/errors.js';
import { type PartitionInfo, projectionIn, type Schema, type TableInfo, type TablePath } from '../../common/schema.js';
import { toArrowSchema } from '../../record/arrow-schema.js';
import { logBatchPayload, readLogBatchHeader, splitLogBatches } from '../../record/log-batch.js';
import { cutLogBatch } from '../../record/batch-projection.js';
import { checkArrowPayload } from '../../record/arrow-payload.js';
import type {
  FetchLogRequest,
  FetchLogResponseSchema,
  LimitScanRequest,
  LimitScanResponseSchema,
  ListOffsetsRequest,
  ListOffsetsResponseSchema,
  NotifyLakeTableOffsetRequest,
  NotifyLakeTableOffsetResponseSchema,
  NotifyLeaderAndIsrRequest,
  NotifyRemoteLogOffsetsRequest,
  NotifyRemoteLogOffsetsResponseSchema,
  NotifyLeaderAndIsrResponseSchema,
  OffsetForLeaderEpochRequest,
  OffsetForLeaderEpochResponseSchema,
  PbFetchLogReqForBucket,
  PbFetchLogRespForBucketSchema,
  ProduceLogRequest,
  ProduceLogResponseSchema,
  StopReplicaRequest,
  StopReplicaResponseSchema,
  UpdateMetadataRequest,
  UpdateMetadataResponseSchema,
} from '../../rpc/gen/tributary_pb.js';
import { ApiKeys } from '../../rpc/api-keys.js';
import { idOf, intIn, optionalIdOf } from '../../rpc/request-fields.js';
import type { BucketLifecycle } from '../coordinator/coordinator.js';
import type { LakeBucketOffset } from '../../common/lake.js';
import type { Logger } from '../../common/logger.js';
import type { ServerActivity } from '../../common/activity.js';
import type { DataDisk } from './data-disk.js';
import { asBuffer, bucketError } from './bucket-responses.js';
import { KvService } from './kv-service.js';
import { type KvRecoverySource, KvTablet } from './kv/kv-tablet.js';
import { KvSnapshotStore, type KvSnapshotUpload } from './kv/kv-snapshot-store.js';
import type { KvSnapshotHandle } from '../../common/kv-snapshot.js';
import type { KvSnapshotCommit, SnapshotBucket } from '../coordinator/kv-snapshot-registry.js';
import type { RemoteLogCommit } from '../coordinator/remote-log-registry.js';
import type { RemoteLogHandle } from '../../common/remote-log.js';
import { RemoteLogManager, type RemoteLogUsage } from './remote-log-manager.js';
import { localSegmentDeletable } from './retention.js';
import { type LogConfig, LogTablet } from './log/log-tablet.js';
import { isS3Location, joinLocation } from '../../storage/object-store.js';
import type { BatchCutter } from './log/log-segment.js';
import { bucketKey, type Replica, type TableBucket } from './replica.js';
import type { TableMetadataSource } from './table-metadata.js';
import { type ClusterMembership, notLeader, type ReplicaHost, ReplicaManager, type ServerNode } from './replica-manager.js';

/** One hosted bucket, as the node's metrics (server/metrics.ts) read it. */
/** KV states opened by where they came from, and what KV snapshots uploaded. */
export interface KvSnapshotMetrics {
  restores: Record<KvRecoverySource, number>;
  uploads: KvSnapshotUpload;
}

export interface BucketMetrics {
  database: string;
  table: string;
  /** Partition name; empty for tables without partitions. */
  partition: string;
  bucket: number;
  logStartOffset: bigint;
  logEndOffset: bigint;
  highWatermark: bigint;
  logSizeBytes: number;
  segments: number;
  /** Rows of a primary-key bucket's state. */
  kvRows?: number;
  /** With a remote log: its segments and bytes, and (led buckets) the closed segments and bytes still to upload. */
  remote?: RemoteLogUsage;
  /** This server leads the bucket (always on one node). */
  leader: boolean;
  replicas: number;
  inSyncReplicas: number;
  /** Led, with fewer in-sync replicas than replicas. */
  underReplicated: boolean;
}

/** A follower of a bucket this server leads, as the node's metrics read it. */
export interface FollowerMetrics {
  database: string;
  table: string;
  partition: string;
  bucket: number;
  follower: number;
  /** Records between its log end and the leader's; undefined before its first fetch of this leader epoch. */
  lagRecords?: bigint;
  /** Time since it last caught up with the leader's log end. */
  sinceCaughtUpMs: number;
}

/** The buckets this server leads, for the node's metrics. */
export interface ReplicaMetrics {
  led: number;
  /** Led, with fewer in-sync replicas than replicas. */
  underReplicated: number;
  followers: FollowerMetrics[];
}

const ACKS = new Set([0, 1, -1]);
/** Stored bytes a projected fetch of a bucket may pass through to fill its byte budget, as a multiple of that budget. */
const MAX_PROJECTED_STORED = 16;
const OFFSET_EARLIEST = 0;
const OFFSET_LATEST = 1;
const OFFSET_TIMESTAMP = 2;
/** The log end offset, past what readers see (replication lag, t$buckets). */
const OFFSET_LOG_END = 3;
/** On one node the server is tablet server 0, every bucket's only replica. */
const EMBEDDED_SERVER_ID = 0;

/** The one-process node's coordinator, as its tablet server uses it: tables, and the registered KV snapshots. */
export interface NodeCoordinator extends TableMetadataSource {
  readonly kvSnapshots: { latest(bucket: SnapshotBucket): KvSnapshotHandle | undefined };
  commitKvSnapshot(request: KvSnapshotCommit): Promise<void>;
  readonly remoteLogs: { latest(bucket: SnapshotBucket): RemoteLogHandle | undefined };
  commitRemoteLogManifest(request: RemoteLogCommit): Promise<void>;
}

/** One bucket's bytes and segments on local disk and in the remote log (SHOW TABLE STORAGE). */
export interface BucketStorage {
  partitionId?: number;
  partition?: string;
  bucket: number;
  localBytes: number;
  localSegments: number;
  localLogStartOffset: bigint;
  remoteBytes: number;
  remoteSegments: number;
  /** Undefined without a committed remote log. */
  remoteLogStartOffset?: bigint;
  remoteLogEndOffset?: bigint;
}

export class TabletServer implements BucketLifecycle {
  private readonly replicas = new Map<string, Replica>();
  /** Arrow schemas (full and projected) by table/schema/projection, so projection plans are reused. */
  private readonly arrowSchemas = new Map<string, arrow.Schema>();
  private timers: NodeJS.Timeout[] = [];
  /** Aborted when the server stops serving, so that long-polling fetches answer at once. */
  private readonly serving = new AbortController();
  /** A batch never exceeds a segment (`log.segment.file-size`), read once. */
  private readonly maxBatchBytes: number;
  /** The primary-key APIs, over the same replicas. */
  readonly kvService: KvService;
  private readonly metadata: TableMetadataSource;
  /** The cluster side: set when the server is a member of a cluster. */
  readonly replication: ReplicaManager | undefined;
  /** The one-process node's coordinator, which registers its KV snapshots. */
  private readonly node: NodeCoordinator | undefined;
  /** The remote log (remote.data.dir set): uploads of closed segments by the buckets led here, and reads below their local start. */
  readonly remoteLog: RemoteLogManager | undefined;
  /** KV states opened (as leader or standby), by what they were recovered from: a promoted standby opens its local state. */
  readonly kvRestores: Record<KvRecoverySource, number> = { snapshot: 0, local: 0, none: 0 };
  /** What the KV snapshots taken here uploaded to remote.data.dir, summed. */
  readonly kvSnapshotUploads: KvSnapshotUpload = { bytes: 0, uploadedBytes: 0, chunks: 0, uploadedChunks: 0 };

  constructor(
    private readonly dataDir: string,
    private readonly options: Options,
    /** The coordinator of this node, or what this server is in a cluster. */
    source: NodeCoordinator | { cluster: ClusterMembership },
    private readonly log: Logger,
    /** Writes wait while the data disk is full. */
    readonly disk: DataDisk,
    /** Times the periodic tasks and the log's fsyncs. */
    private readonly activity: ServerActivity,
  ) {
    this.maxBatchBytes = options.bytes('log.segment.file-size');
    this.kvService = new KvService(this, activity);
    if ('cluster' in source) {
      this.replication = new ReplicaManager(this.replicaHost(), source.cluster, options, log.child({ role: 'replica-manager' }));
      this.metadata = this.replication.tables;
      this.node = undefined;
    } else {
      this.replication = undefined;
      this.metadata = source;
      this.node = source;
    }
    const remoteDataDir = options.string('remote.data.dir');
    this.remoteLog =
      remoteDataDir !== undefined && options.durationMs('remote.log.task-interval-duration') > 0
        ? new RemoteLogManager(remoteDataDir, options, path.join(dataDir, 'remote-log-cache'), log.child({ role: 'remote-log' }), (replica, handle) => this.commitRemoteLog(replica, handle))
        : undefined;
  }

  /** Opens (and recovers) the buckets of every existing table, then starts retention and checkpoints. */
  async start(tables: { table: TableInfo; partitions: PartitionInfo[] }[]): Promise<void> {
    // Copies of snapshots a killed server was uploading.
    await fs.promises.rm(this.snapshotStagingDir(), { recursive: true, force: true });
    for (const { table, partitions } of tables) {
      if (table.partitionKeys.length === 0) await this.createBuckets(table);
      for (const p of partitions) await this.createBuckets(table, p);
    }
    // The data dir's background writers run one at a time: a checkpoint and a KV snapshot writing
    // at once made the append path's fsyncs wait for both (the worst latencies of the soak). The
    // remote log's uploads, which may take long and write elsewhere, keep their own pace.
    const every = (task: string, key: string, work: () => Promise<unknown>, lane?: string): void => {
      this.timers.push(this.activity.every(task, this.options.durationMs(key), work, lane));
    };
    const dataDir = 'data-dir writes';
    every('log-retention', 'log.retention.check-interval', () => this.deleteExpiredSegments(), dataDir);
    if (this.remoteLog) every('remote-log', 'remote.log.task-interval-duration', () => this.tierRemoteLogs());
    every('log-checkpoint', 'log.flush.offset.checkpoint-interval', () => this.checkpointAll(), dataDir);
    every('kv-snapshot', 'kv.snapshot.interval', () => this.snapshotAll(), dataDir);
    if (this.replication) {
      every('high-watermark-checkpoint', 'log.replica.high-watermark.checkpoint-interval', () => this.checkpointAll(), dataDir);
      this.replication.start(this.activity);
    }
  }

  /** Answers waiting fetches now; called before the RPC server drains its requests. */
  stopServing(): void {
    this.serving.abort();
  }

  async stop(): Promise<void> {
    this.stopServing();
    await this.replication?.stop();
    this.kvService.close();
    for (const t of this.timers) clearInterval(t);
    this.timers = [];
    for (const r of this.replicas.values()) {
      await r.kv?.close();
      await r.log.close();
    }
    this.replicas.clear();
    await this.remoteLog?.close();
  }

  // ------------------------------------------------------------------ BucketLifecycle

  async createBuckets(table: TableInfo, partition?: PartitionInfo): Promise<void> {
    for (let b = 0; b < table.bucketCount; b++) {
      const bucket: TableBucket = { tableId: table.tableId, bucket: b, ...(partition ? { partitionId: partition.partitionId } : {}) };
      if (this.replicas.has(bucketKey(bucket))) continue;
      const replica = await this.openReplica(table, partition, b);
      if (table.schema.primaryKey) await this.openKv(replica);
    }
  }

  /**
   * Opens (recovering) or creates a bucket's log, hosted from now on. On one node the replica is
   * the leader at epoch 0 at once; in a cluster its log is replicated and it is a follower of no
   * leader until the coordinator says otherwise.
   */
  private async openReplica(table: TableInfo, partition: PartitionInfo | undefined, b: number): Promise<Replica> {
    const bucket: TableBucket = { tableId: table.tableId, bucket: b, ...(partition ? { partitionId: partition.partitionId } : {}) };
    const dir = path.join(this.tableDir(table, partition), `log-${b}`);
    const replicated = this.replication !== undefined;
    // A state left by an earlier run of a cluster's server may hold a tail its log is about to
    // truncate: a replica's KV state is made anew each time it leads or stands by.
    if (replicated) await fs.promises.rm(this.kvDir(table, partition, b), { recursive: true, force: true });
    const log = await LogTablet.open(dir, this.logConfig(table), this.log.child({ bucket: bucketKey(bucket) }), { onFlush: (start, ms) => this.activity.flushed(start, ms), replicated });
    const place = replicated
      ? { role: 'follower' as const, leaderId: -1, leaderEpoch: -1, replicas: [], isr: [] }
      : { role: 'leader' as const, leaderId: EMBEDDED_SERVER_ID, leaderEpoch: 0, replicas: [EMBEDDED_SERVER_ID], isr: [EMBEDDED_SERVER_ID] };
    const replica: Replica = {
      bucket,
      table,
      ...(partition ? { partition } : {}),
      log,
      ...(table.schema.primaryKey ? { snapshots: this.snapshotStore(table, partition, b, bucket) } : {}),
      ...place,
      bucketEpoch: 0,
    };
    // On one node the committed remote log is at hand; in a cluster NotifyLeaderAndIsr brings it.
    const remote = this.node?.remoteLogs.latest(bucket);
    if (remote) replica.remoteLog = remote;
    this.replicas.set(bucketKey(bucket), replica);
    return replica;
  }

  /**
   * Opens a primary-key bucket's state over its log: its own state, or else the registered
   * snapshot, then the changelog after it (to the high watermark only for a standby).
   */
  private async openKv(replica: Replica, role: 'leader' | 'standby' = 'leader'): Promise<void> {
    const { table, bucket } = replica;
    const schemas = (schemaId: number): Schema | undefined => this.metadata.schemaById(table.tableId, schemaId);
    const logger = this.log.child({ bucket: bucketKey(bucket) });
    const kv = await KvTablet.open(this.kvDir(replica.table, replica.partition, bucket.bucket), replica.log, table, schemas, replica.snapshots!, logger, () => replica.leaderEpoch, role, this.options.durationMs('kv.flush.interval'));
    this.kvRestores[kv.recoveredFrom]++;
    replica.kv = kv;
  }

  private snapshotStore(table: TableInfo, partition: PartitionInfo | undefined, b: number, bucket: TableBucket): KvSnapshotStore {
    const store = new KvSnapshotStore(joinLocation(this.snapshotDir(table, partition), String(b)), this.snapshotStagingDir(), this.options.bytes('kv.snapshot.chunk-size'), (u) => {
      for (const k of ['bytes', 'uploadedBytes', 'chunks', 'uploadedChunks'] as const) this.kvSnapshotUploads[k] += u[k];
    });
    // On one node the registered handles are at hand; in a cluster NotifyLeaderAndIsr brings them.
    store.learn(this.node?.kvSnapshots.latest(bucket));
    return store;
  }

  /** Commits a snapshot a led bucket's KV state took: to the node's own coordinator, or to the cluster's. */
  private async registerSnapshot(replica: Replica, snapshot: KvSnapshotHandle): Promise<void> {
    if (this.replication) return this.replication.commitKvSnapshot(replica, snapshot);
    const { tableId, partitionId, bucket } = replica.bucket;
    await this.node!.commitKvSnapshot({ bucket: { tableId, ...(partitionId !== undefined ? { partitionId } : {}), bucket }, snapshot, leaderEpoch: replica.leaderEpoch, coordinatorEpoch: 0 });
  }

  /** Commits a led bucket's remote log manifest: to the node's own coordinator, or to the cluster's. */
  private async commitRemoteLog(replica: Replica, manifest: RemoteLogHandle): Promise<void> {
    if (this.replication) return this.replication.commitRemoteLogManifest(replica, manifest);
    const { tableId, partitionId, bucket } = replica.bucket;
    await this.node!.commitRemoteLogManifest({ bucket: { tableId, ...(partitionId !== undefined ? { partitionId } : {}), bucket }, manifest, leaderEpoch: replica.leaderEpoch, coordinatorEpoch: 0 });
  }

  private kvDir(table: TableInfo, partition: PartitionInfo | undefined, bucket: number): string {
    return path.join(this.tableDir(table, partition), `kv-${bucket}`);
  }

  /** What the replica manager drives: the hosted replicas, their logs and KV states. */
  private replicaHost(): ReplicaHost {
    return {
      hosted: (bucket) => this.hosted(bucket),
      hostedReplicas: () => this.replicas.values(),
      remoteWriterStateAt: async (replica, offset) => this.remoteLog?.writerStateAt(replica, offset),
      openReplica: (table, partition, bucket) => this.openReplica(table, partition, bucket),
      closeReplica: async (replica, deleteData) => {
        this.replicas.delete(bucketKey(replica.bucket));
        this.remoteLog?.forget(replica);
        await replica.kv?.close();
        await replica.log.close();
        if (deleteData) {
          await fs.promises.rm(replica.log.dir, { recursive: true, force: true });
          await fs.promises.rm(this.kvDir(replica.table, replica.partition, replica.bucket.bucket), { recursive: true, force: true });
        }
      },
      deleteStrayReplicas: (keep) => this.deleteStrayReplicas(keep),
      alterReplica: (replica, table) => this.alterReplica(replica, table),
      lakeOffsetsChanged: (table, offsets) => this.lakeOffsetsChanged(table, offsets),
      remoteLogCommitted: (bucket, manifest) => this.remoteLogCommitted(bucket, manifest),
      openKv: (replica, role) => this.openKv(replica, role),
      closeKv: async (replica, keepState) => {
        const kv = replica.kv;
        replica.kv = undefined;
        this.kvService.closeScannersOf(replica);
        await kv?.close();
        if (!keepState) await fs.promises.rm(this.kvDir(replica.table, replica.partition, replica.bucket.bucket), { recursive: true, force: true });
      },
    };
  }

  /**
   * Deletes the bucket directories (`log-<b>`, `kv-<b>`) under `<data.dir>/log` of replicas not
   * hosted whose bucket `keep` refuses, then the table and partition directories left empty. Only
   * directories named as the layout names them are looked at: anything else stays.
   */
  private async deleteStrayReplicas(keep: (bucket: TableBucket) => boolean): Promise<void> {
    const entries = async (dir: string): Promise<fs.Dirent[]> => (await fs.promises.readdir(dir, { withFileTypes: true }).catch(() => [])).filter((e) => e.isDirectory());
    const sweep = async (dir: string, tableId: number, partitionId: number | undefined): Promise<void> => {
      for (const e of await entries(dir)) {
        const m = /^(?:log|kv)-(\d+)$/.exec(e.name);
        if (!m) continue;
        const bucket: TableBucket = { tableId, bucket: Number(m[1]), ...(partitionId !== undefined ? { partitionId } : {}) };
        if (this.replicas.has(bucketKey(bucket)) || keep(bucket)) continue;
        const where = path.join(dir, e.name);
        await fs.promises.rm(where, { recursive: true, force: true });
        this.log.info({ dir: where, bucket: bucketKey(bucket) }, 'deleted the data of a replica the coordinator no longer assigns here');
      }
    };
    const removeIfEmpty = async (dir: string): Promise<void> => {
      if ((await fs.promises.readdir(dir).catch(() => [null])).length === 0) await fs.promises.rmdir(dir).catch(() => undefined);
    };
    const root = path.join(this.dataDir, 'log');
    for (const db of await entries(root)) {
      for (const t of await entries(path.join(root, db.name))) {
        const table = /-(\d+)$/.exec(t.name);
        if (!table) continue;
        const tableDir = path.join(root, db.name, t.name);
        await sweep(tableDir, Number(table[1]), undefined);
        for (const p of await entries(tableDir)) {
          const partition = /-p(\d+)$/.exec(p.name);
          if (!partition) continue;
          await sweep(path.join(tableDir, p.name), Number(table[1]), Number(partition[1]));
          await removeIfEmpty(path.join(tableDir, p.name));
        }
        await removeIfEmpty(tableDir);
      }
    }
  }

  async dropBuckets(table: TableInfo, partition?: PartitionInfo): Promise<void> {
    for (const [key, r] of this.replicas) {
      if (r.bucket.tableId !== table.tableId) continue;
      if (partition && r.bucket.partitionId !== partition.partitionId) continue;
      this.replicas.delete(key);
      this.remoteLog?.forget(r);
      await r.kv?.close();
      await r.log.close();
    }
    await fs.promises.rm(this.tableDir(table, partition), { recursive: true, force: true });
    await fs.promises.rm(this.snapshotDir(table, partition), { recursive: true, force: true });
    // On one node the remote log goes too (a cluster leaves it: cluster.md, Not yet); a store that
    // is down leaves it behind rather than fail a drop already committed.
    if (!this.replication) {
      await this.remoteLog?.deleteTable(table, partition).catch((err: unknown) => this.log.warn({ err, table: table.tableId }, 'could not delete the remote log of a dropped table'));
    }
  }

  tableAltered(table: TableInfo): void {
    for (const r of this.replicas.values()) if (r.bucket.tableId === table.tableId) this.alterReplica(r, table);
  }

  private alterReplica(replica: Replica, table: TableInfo): void {
    replica.table = table;
    replica.log.updateConfig(this.logConfig(table));
    replica.kv?.tableAltered(table);
  }

  lakeOffsetsChanged(table: { tableId: number }, offsets: readonly LakeBucketOffset[]): void {
    for (const o of offsets) {
      const r = this.replicas.get(bucketKey({ tableId: table.tableId, bucket: o.bucket, ...(o.partitionId !== undefined ? { partitionId: o.partitionId } : {}) }));
      if (r) r.lakeEndOffset = o.endOffset;
    }
  }

  /** Every hosted bucket's offsets, log size and state rows, for the node's metrics. */
  bucketMetrics(): BucketMetrics[] {
    return [...this.replicas.values()].map((r) => ({
      database: r.table.path.database,
      table: r.table.path.table,
      partition: r.partition?.partitionName ?? '',
      bucket: r.bucket.bucket,
      logStartOffset: r.log.logStartOffset,
      logEndOffset: r.log.logEndOffset,
      highWatermark: r.log.highWatermark,
      logSizeBytes: r.log.sizeInBytes,
      segments: r.log.segmentCount,
      ...(r.kv && !r.kv.standby ? { kvRows: r.kv.rowCount } : {}),
      ...(this.remoteLog ? { remote: this.remoteLog.usage(r) } : {}),
      leader: r.role === 'leader',
      replicas: r.replicas.length,
      inSyncReplicas: r.isr.length,
      underReplicated: r.role === 'leader' && r.isr.length < r.replicas.length,
    }));
  }

  /** The buckets this server leads and, in a cluster, their followers' lag behind the leader's log end. */
  replicaMetrics(nowMs = Date.now()): ReplicaMetrics {
    const out: ReplicaMetrics = { led: 0, underReplicated: 0, followers: [] };
    for (const r of this.replicas.values()) {
      if (r.role !== 'leader') continue;
      out.led++;
      if (r.isr.length < r.replicas.length) out.underReplicated++;
      const where = { database: r.table.path.database, table: r.table.path.table, partition: r.partition?.partitionName ?? '', bucket: r.bucket.bucket };
      for (const lag of r.leader?.followerLags(r.log.logEndOffset, nowMs) ?? []) out.followers.push({ ...where, ...lag });
    }
    return out;
  }

  /** The buckets this server leads: a controlled shutdown waits until the coordinator has moved them all. */
  ledBuckets(): TableBucket[] {
    return [...this.replicas.values()].filter((r) => r.role === 'leader').map((r) => r.bucket);
  }

  leaderCount(): number {
    return this.ledBuckets().length;
  }

  // ------------------------------------------------------------------ coordinator requests (cluster)

  notifyLeaderAndIsr(req: NotifyLeaderAndIsrRequest): Promise<MessageInitShape<typeof NotifyLeaderAndIsrResponseSchema>> {
    return this.inCluster().notifyLeaderAndIsr(req);
  }

  stopReplica(req: StopReplicaRequest): Promise<MessageInitShape<typeof StopReplicaResponseSchema>> {
    return this.inCluster().stopReplica(req);
  }

  updateMetadata(req: UpdateMetadataRequest): Promise<MessageInitShape<typeof UpdateMetadataResponseSchema>> {
    return this.inCluster().updateMetadata(req);
  }

  notifyLakeTableOffset(req: NotifyLakeTableOffsetRequest): Promise<MessageInitShape<typeof NotifyLakeTableOffsetResponseSchema>> {
    return this.inCluster().notifyLakeTableOffset(req);
  }

  notifyRemoteLogOffsets(req: NotifyRemoteLogOffsetsRequest): Promise<MessageInitShape<typeof NotifyRemoteLogOffsetsResponseSchema>> {
    return this.inCluster().notifyRemoteLogOffsets(req);
  }

  offsetForLeaderEpoch(req: OffsetForLeaderEpochRequest): Promise<MessageInitShape<typeof OffsetForLeaderEpochResponseSchema>> {
    return this.inCluster().offsetForLeaderEpoch(req);
  }

  /** The servers of the cluster as the coordinator last named them, for GetMetadata answered here. */
  /** Calls `listener` whenever this server begins or stops leading a bucket of a cluster; returns the unsubscribe. */
  onLeadershipChange(listener: (bucket: TableBucket, leading: boolean) => void): () => void {
    return this.inCluster().onLeadershipChange(listener);
  }

  /** The high watermark of each bucket of a table without partitions that this server hosts, leader or follower (a follower's as its leader last sent it). */
  hostedHighWatermarks(path: TablePath): Map<number, bigint> | undefined {
    let out: Map<number, bigint> | undefined;
    for (const r of this.replicas.values()) {
      if (r.partition || r.table.path.database !== path.database || r.table.path.table !== path.table) continue;
      (out ??= new Map()).set(r.bucket.bucket, r.log.highWatermark);
    }
    return out;
  }

  clusterNodes(): { coordinator?: ServerNode; tabletServers: ServerNode[] } {
    return this.inCluster().cluster;
  }

  private inCluster(): ReplicaManager {
    if (!this.replication) throw new TributaryError('INVALID_ARGUMENT', 'this server is not a tablet server of a cluster');
    return this.replication;
  }

  /** The high watermark of every bucket of a table this server leads, for tiering lag. */
  highWatermarks(tableId: number): { partitionId?: number; partitionName?: string; bucket: number; highWatermark: bigint }[] {
    const out = [];
    for (const r of this.replicas.values()) {
      if (r.bucket.tableId !== tableId || r.role !== 'leader') continue;
      out.push({ ...(r.partition ? { partitionId: r.partition.partitionId, partitionName: r.partition.partitionName } : {}), bucket: r.bucket.bucket, highWatermark: r.log.highWatermark });
    }
    return out;
  }

  // ------------------------------------------------------------------ ProduceLog

  async produceLog(req: ProduceLogRequest): Promise<MessageInitShape<typeof ProduceLogResponseSchema>> {
    const api = ApiKeys.ProduceLog;
    if (!ACKS.has(req.acks)) throw new TributaryError('INVALID_REQUIRED_ACKS', `acks must be 0, 1 or -1 (all), got ${req.acks}`);
    const tableId = idOf(api, 'table_id', req.tableId);
    intIn(api, 'timeout_ms', req.timeoutMs, 0, 2 ** 31 - 1);
    const partitionIds = req.bucketsReq.map((b, i) => optionalIdOf(api, `buckets_req[${i}].partition_id`, b.partitionId));
    const bucketsResp = await Promise.all(
      req.bucketsReq.map(async (b, i) => {
        const partitionId = partitionIds[i];
        const head = { ...(b.partitionId !== undefined ? { partitionId: b.partitionId } : {}), bucketId: b.bucketId };
        try {
          const replica = this.replica(tableId, partitionId, b.bucketId);
          const batches = splitLogBatches(asBuffer(b.records));
          if (batches.length === 0) throw new TributaryError('CORRUPT_MESSAGE', 'produce request for a bucket holds no record batch');
          for (const batch of batches) this.checkIncomingBatch(replica, batch);
          this.disk.checkWritable();
          const replication = req.acks === -1 ? this.replication : undefined;
          if (!replication) {
            // acks=-1 (all) on one node: below the high watermark, i.e. durable per the flush policy; 0 and 1: written.
            const results = await replica.log.append(batches, replica.leaderEpoch, req.acks === -1 ? 'high-watermark' : 'written');
            return { ...head, baseOffset: results[0].baseOffset };
          }
          // acks=-1 in a cluster: durable here, then held by every in-sync replica.
          replication.checkEnoughReplicas(replica);
          const results = await replica.log.append(batches, replica.leaderEpoch, 'durable');
          await replication.awaitHighWatermark(replica, results[results.length - 1].lastOffset + 1n, req.timeoutMs);
          return { ...head, baseOffset: results[0].baseOffset };
        } catch (err) {
          return { ...head, baseOffset: -1n, ...bucketError(this.disk.writeFailed(err)) };
        }
      }),
    );
    return { bucketsResp };
  }

  /** Rejects batches that do not belong to this table before they reach the log. */
  private checkIncomingBatch(replica: Replica, batch: Buffer): void {
    const header = readLogBatchHeader(batch);
    const maxBatch = this.maxBatchBytes;
    if (header.sizeInBytes > maxBatch) {
      throw new TributaryError('RECORD_TOO_LARGE_EXCEPTION', `record batch of ${header.sizeInBytes} bytes exceeds log.segment.file-size ${maxBatch}`);
    }
    if (replica.kv) throw new TributaryError('INVALID_TABLE_EXCEPTION', 'primary-key tables take writes through PutKv (an upsert writer), not ProduceLog');
    if (!header.appendOnly) throw new TributaryError('CORRUPT_MESSAGE', 'log tables take append-only batches');
    const schema = this.metadata.schemaById(replica.table.tableId, header.schemaId);
    if (!schema) throw new TributaryError('SCHEMA_NOT_EXIST', `schema ${header.schemaId} of table ${replica.table.tableId} does not exist`);
    checkArrowPayload(logBatchPayload(batch), this.arrowSchema(replica.table.tableId, header.schemaId, schema), header.recordCount);
  }

  // ------------------------------------------------------------------ FetchLog

  /**
   * Client fetches read below the high watermark and wait for it to move. In a cluster, a fetch
   * with follower_server_id >= 0 is a follower's: it reads up to the durable end, waits for that to
   * move, and its fetch offset is the follower's log end (ReplicaManager.followerFetch). Records
   * read from local segments are read into memory from `allocate` (the RPC server's response
   * memory, reused once the response is written).
   */
  async fetchLog(req: FetchLogRequest, allocate: (length: number) => Buffer = Buffer.allocUnsafe): Promise<MessageInitShape<typeof FetchLogResponseSchema>> {
    const maxWait = Math.min(Math.max(req.maxWaitMs, 0), this.options.durationMs('rpc.max-wait'));
    const deadline = Date.now() + maxWait;
    const follower = this.replication !== undefined && req.followerServerId >= 0;
    for (;;) {
      const { response, bytes, replicas } = await this.readFetch(req, follower, allocate);
      const remaining = deadline - Date.now();
      const hasError = response.tablesResp.some((t) => t.bucketsResp.some((b) => b.errorCode !== undefined));
      if (bytes >= Math.max(req.minBytes, 1) || remaining <= 0 || hasError || replicas.length === 0 || this.serving.signal.aborted) return response;
      if (follower) {
        const waitMs = this.inCluster().followerFetchWaitMs(req.followerServerId, replicas.map((r) => r.replica), remaining);
        await this.waitForData(replicas, waitMs, req.followerServerId);
        if (waitMs < remaining) return (await this.readFetch(req, follower, allocate)).response;
      } else await this.waitForData(replicas, remaining);
    }
  }

  /**
   * The buckets of a fetch, in request order. Each bucket may send up to its own limit and what the
   * request's limit has left; the buckets whose share fits, counting every bucket before them as
   * full, are read side by side, and the others after them one by one, from what is left once the
   * reads before are counted. The records sent stay within the request's limit, but for the first
   * batch found (as Kafka's fetch.max.bytes).
   */
  private async readFetch(req: FetchLogRequest, follower: boolean, allocate: (length: number) => Buffer) {
    const maxBytes = req.maxBytes > 0 ? req.maxBytes : Number.MAX_SAFE_INTEGER;
    const api = ApiKeys.FetchLog;
    const ids = req.tablesReq.map((t, i) => ({
      tableId: idOf(api, `tables_req[${i}].table_id`, t.tableId),
      partitionIds: t.bucketsReq.map((b, j) => optionalIdOf(api, `tables_req[${i}].buckets_req[${j}].partition_id`, b.partitionId)),
    }));
    /** The buckets read, with the end each read was bounded by when it began. */
    const replicas: { replica: Replica; end: bigint }[] = [];
    const items = req.tablesReq.flatMap((t, table) => t.bucketsReq.map((b, bucket) => ({ table, bucket, b, limit: Math.max(1, b.maxFetchBytes > 0 ? b.maxFetchBytes : maxBytes) })));
    const read = async (item: (typeof items)[number], limit: number): Promise<MessageInitShape<typeof PbFetchLogRespForBucketSchema>> => {
      const t = req.tablesReq[item.table];
      const { b } = item;
      const head = { ...(b.partitionId !== undefined ? { partitionId: b.partitionId } : {}), bucketId: b.bucketId };
      const tableId = ids[item.table].tableId;
      const partitionId = ids[item.table].partitionIds[item.bucket];
      let replica: Replica | undefined;
      try {
        replica = follower ? this.followerFetch(req.followerServerId, tableId, partitionId, b) : this.replica(tableId, partitionId, b.bucketId);
        replicas.push({ replica, end: readEnd(replica, follower) });
        const hw = replica.log.highWatermark;
        const logStartOffset = follower ? replica.log.logStartOffset : this.earliestOffset(replica);
        const isolation = follower ? 'durable-end' : 'high-watermark';
        const records = limit > 0 ? await this.readBucket(replica, b.fetchOffset, limit, t.projectionPushdownEnabled ? t.projectedFields : undefined, isolation, allocate) : Buffer.alloc(0);
        return { ...head, highWatermark: hw, logStartOffset, records };
      } catch (err) {
        // A follower out of range learns where the leader's log starts, to start over there.
        const known = follower && replica ? { highWatermark: replica.log.highWatermark, logStartOffset: replica.log.logStartOffset } : { highWatermark: -1n, logStartOffset: -1n };
        return { ...head, ...known, ...bucketError(err) };
      }
    };
    let share = maxBytes;
    const sideBySide = [];
    for (const item of items) {
      if (share <= 0) break;
      const limit = Math.min(item.limit, share);
      share -= limit;
      sideBySide.push(read(item, limit));
    }
    const answers = await Promise.all(sideBySide);
    let bytes = 0;
    // A bucket reads at least one batch; past the first records sent, one that would go over the limit is not sent.
    const send = (answer: (typeof answers)[number]): void => {
      const size = answer.records?.length ?? 0;
      if (size > 0 && bytes > 0 && bytes + size > maxBytes) answer.records = Buffer.alloc(0);
      else bytes += size;
    };
    answers.forEach(send);
    for (const item of items.slice(answers.length)) {
      const left = maxBytes - bytes;
      const answer = await read(item, left > 0 || bytes === 0 ? Math.max(1, Math.min(item.limit, left)) : 0);
      send(answer);
      answers.push(answer);
    }
    let next = 0;
    const tablesResp = req.tablesReq.map((t) => ({ tableId: t.tableId, bucketsResp: answers.slice(next, (next += t.bucketsReq.length)) }));
    return { response: { tablesResp }, bytes, replicas };
  }

  /**
   * Up to `maxBytes` of a bucket's log from `offset`. The limit counts what is sent: with a
   * projection, batches are cut (only their kept buffers read) across segments until the cuts
   * fill it or MAX_PROJECTED_STORED times the limit of stored batches has been passed, so narrow
   * projections are not starved by wide stored rows.
   */
  private async readBucket(
    replica: Replica,
    offset: bigint,
    maxBytes: number,
    projection: number[] | undefined,
    isolation: 'high-watermark' | 'durable-end',
    allocate: (length: number) => Buffer,
  ): Promise<Buffer> {
    const cutter = projection && this.cutterOf(replica.table, projection);
    // Below the local start a client's fetch reads the remote log, one remote segment at a time, with the same cut.
    if (isolation === 'high-watermark' && this.remoteLog?.holds(replica, offset)) {
      const read = await this.remoteLog.read(replica, offset, maxBytes, MAX_PROJECTED_STORED * maxBytes, cutter);
      return Buffer.isBuffer(read) ? read : Buffer.concat(read.batches);
    }
    if (!cutter) return (await replica.log.read(offset, maxBytes, isolation, allocate)).records;
    const parts: Buffer[] = [];
    let size = 0;
    let storedBudget = MAX_PROJECTED_STORED * maxBytes;
    while (size < maxBytes && storedBudget > 0) {
      const { batches, storedBytes, highWatermark } = await replica.log.readCut(offset, maxBytes - size, storedBudget, cutter, isolation);
      if (batches.length === 0) break;
      for (const batch of batches) {
        parts.push(batch);
        size += batch.length;
      }
      storedBudget -= storedBytes;
      const last = readLogBatchHeader(batches[batches.length - 1]);
      offset = last.baseOffset + BigInt(last.lastOffsetDelta) + 1n;
      if (offset >= (isolation === 'durable-end' ? replica.log.durableEndOffset : highWatermark)) break;
    }
    return parts.length === 1 ? parts[0] : Buffer.concat(parts);
  }

  /** A follower's fetch of a bucket this server leads, taken by the replica manager first. */
  private followerFetch(followerId: number, tableId: number, partitionId: number | undefined, b: PbFetchLogReqForBucket): Replica {
    const bucket = { tableId, bucket: b.bucketId, ...(partitionId !== undefined ? { partitionId } : {}) };
    const replica = this.replicas.get(bucketKey(bucket));
    if (!replica) throw new TributaryError('UNKNOWN_TABLE_OR_BUCKET_EXCEPTION', `bucket ${bucketKey(bucket)} has no replica on this server`);
    this.inCluster().followerFetch(replica, followerId, b.fetchOffset, b.currentLeaderEpoch);
    return replica;
  }

  /**
   * Waits until the end bounding a read of one of `replicas` has moved (also if it already did since
   * the read), or `timeoutMs`; a follower's fetch also when this server begins to lead a bucket it follows.
   */
  private waitForData(replicas: { replica: Replica; end: bigint }[], timeoutMs: number, followerId?: number): Promise<void> {
    const follower = followerId !== undefined;
    return new Promise((resolve) => {
      const unsubscribes: (() => void)[] = [];
      const done = (): void => {
        clearTimeout(timer);
        for (const u of unsubscribes) u();
        this.serving.signal.removeEventListener('abort', done);
        resolve();
      };
      const timer = setTimeout(done, timeoutMs);
      for (const { replica } of replicas) unsubscribes.push(follower ? replica.log.onDurableEnd(done) : replica.log.onHighWatermark(done));
      if (follower) unsubscribes.push(this.inCluster().onLeadershipFor(followerId, done));
      this.serving.signal.addEventListener('abort', done);
      if (replicas.some(({ replica, end }) => readEnd(replica, follower) !== end)) done();
    });
  }

  /**
   * Server-side column projection: cuts each stored batch down to the chosen columns' buffers.
   * `columns` index the table's current schema; a batch written with an older one keeps those of
   * them it has (projectionIn), which the reader, knowing the batch's schema id, maps back.
   */
  private cutterOf(table: TableInfo, columns: number[]): BatchCutter {
    if (columns.length === 0) throw new TributaryError('INVALID_COLUMN_PROJECTION', 'projection must name at least one column');
    const current = table.schema.columns;
    for (const c of columns) {
      if (!Number.isInteger(c) || c < 0 || c >= current.length) {
        throw new TributaryError('INVALID_COLUMN_PROJECTION', `projected field ${c} is out of range: the table has ${current.length} columns`);
      }
    }
    const wanted = columns.map((c) => current[c]);
    return (head) =>
      cutLogBatch(head, (header) => {
        const schema = this.metadata.schemaById(table.tableId, header.schemaId);
        if (!schema) throw new TributaryError('SCHEMA_NOT_EXIST', `schema ${header.schemaId} of table ${table.tableId} does not exist`);
        return {
          arrowSchema: this.arrowSchema(table.tableId, header.schemaId, schema),
          columns: header.schemaId === table.schemaId ? columns : projectionIn(schema, wanted),
        };
      });
  }

  // ------------------------------------------------------------------ ListOffsets / LimitScan

  async listOffsets(req: ListOffsetsRequest): Promise<MessageInitShape<typeof ListOffsetsResponseSchema>> {
    const tableId = idOf(ApiKeys.ListOffsets, 'table_id', req.tableId);
    const partitionId = optionalIdOf(ApiKeys.ListOffsets, 'partition_id', req.partitionId);
    const bucketsResp = await Promise.all(
      req.bucketId.map(async (bucketId) => {
        try {
          const log = this.replica(tableId, partitionId, bucketId).log;
          let offset: bigint;
          const replica = this.replica(tableId, partitionId, bucketId);
          if (req.offsetType === OFFSET_EARLIEST) offset = this.earliestOffset(replica);
          else if (req.offsetType === OFFSET_LATEST) offset = log.highWatermark;
          else if (req.offsetType === OFFSET_LOG_END) offset = log.logEndOffset;
          else if (req.offsetType === OFFSET_TIMESTAMP) {
            if (req.startTimestamp === undefined) throw new TributaryError('INVALID_TIMESTAMP_EXCEPTION', 'offset type TIMESTAMP needs start_timestamp');
            offset = (await this.remoteLog?.offsetForTimestamp(replica, Number(req.startTimestamp))) ?? (await log.offsetForTimestamp(req.startTimestamp));
          } else throw new TributaryError('INVALID_ARGUMENT', `unknown offset type ${req.offsetType}`);
          return { bucketId, offset };
        } catch (err) {
          return { bucketId, offset: -1n, ...bucketError(err) };
        }
      }),
    );
    return { bucketsResp };
  }

  async limitScan(req: LimitScanRequest): Promise<MessageInitShape<typeof LimitScanResponseSchema>> {
    try {
      if (req.limit <= 0) throw new TributaryError('INVALID_ARGUMENT', `limit must be positive, got ${req.limit}`);
      const replica = this.replica(idOf(ApiKeys.LimitScan, 'table_id', req.tableId), optionalIdOf(ApiKeys.LimitScan, 'partition_id', req.partitionId), req.bucketId);
      if (replica.kv) {
        // A primary-key table's "last rows" are rows of its state (Fluss: N KV rows).
        const scan = replica.kv.scanAll();
        try {
          const values: Uint8Array[] = [];
          for (const v of scan.values) {
            if (values.length >= req.limit) break;
            values.push(Uint8Array.from(v));
          }
          return { values };
        } finally {
          scan.done();
        }
      }
      return { records: Buffer.concat(await replica.log.readTail(req.limit)) };
    } catch (err) {
      return bucketError(err);
    }
  }

  // ------------------------------------------------------------------ housekeeping

  /** Deletes the local segments retention lets go (retention.ts: ttl, or held by the remote log; never what the lake or a KV snapshot still needs). */
  async deleteExpiredSegments(nowMs = Date.now()): Promise<number> {
    let deleted = 0;
    for (const r of this.replicas.values()) deleted += await r.log.deleteOldestSegments(localSegmentDeletable(r, this.remoteLog !== undefined, nowMs));
    if (deleted > 0) this.log.info({ segments: deleted }, 'log segments deleted');
    return deleted;
  }

  /** One remote log round: the buckets led here upload closed segments and commit their manifests, then local segments the remote log holds go. */
  async tierRemoteLogs(nowMs = Date.now()): Promise<void> {
    await this.remoteLog?.runOnce([...this.replicas.values()], nowMs);
    await this.deleteExpiredSegments(nowMs);
  }

  /** The first offset a client can read of the bucket: in the remote log when it holds offsets below the local start. */
  private earliestOffset(replica: Replica): bigint {
    return this.remoteLog?.earliestOffset(replica) ?? replica.log.logStartOffset;
  }

  /** Bytes and segments of each hosted bucket of the table, local and remote (SHOW TABLE STORAGE). */
  bucketStorage(tableId: number): BucketStorage[] {
    const out: BucketStorage[] = [];
    for (const r of this.replicas.values()) {
      if (r.bucket.tableId !== tableId) continue;
      const remote = this.remoteLog?.usage(r);
      out.push({
        ...(r.partition ? { partitionId: r.partition.partitionId, partition: r.partition.partitionName } : {}),
        bucket: r.bucket.bucket,
        localBytes: r.log.sizeInBytes,
        localSegments: r.log.segmentCount,
        localLogStartOffset: r.log.logStartOffset,
        remoteBytes: remote?.remoteBytes ?? 0,
        remoteSegments: remote?.remoteSegments ?? 0,
        ...(r.remoteLog ? { remoteLogStartOffset: r.remoteLog.remoteLogStartOffset, remoteLogEndOffset: r.remoteLog.remoteLogEndOffset } : {}),
      });
    }
    return out;
  }

  /** A bucket's leader committed its remote log (one node: this server itself; a cluster: NotifyRemoteLogOffsets). */
  remoteLogCommitted(bucket: SnapshotBucket, manifest: RemoteLogHandle): void {
    const r = this.replicas.get(bucketKey(bucket));
    if (r && (!r.remoteLog || r.remoteLog.remoteLogEndOffset <= manifest.remoteLogEndOffset)) r.remoteLog = manifest;
  }

  /** Takes and registers a KV snapshot of every primary-key bucket this server leads (of one table when given). */
  async snapshotAll(tableId?: number): Promise<{ replica: Replica; snapshot: KvSnapshotHandle }[]> {
    const taken = [];
    for (const r of this.replicas.values()) {
      if (!r.kv || r.kv.standby || r.role !== 'leader' || (tableId !== undefined && r.bucket.tableId !== tableId)) continue;
      try {
        taken.push({ replica: r, snapshot: await r.kv.snapshot((handle) => this.registerSnapshot(r, handle)) });
      } catch (err) {
        // One failing bucket must not hold back the others; on demand the caller hears of it.
        if (tableId !== undefined) throw err;
        this.log.error({ err, bucket: bucketKey(r.bucket) }, 'kv snapshot failed');
      }
    }
    if (taken.length > 0) this.log.info({ snapshots: taken.length, tableId }, 'kv snapshots taken');
    return taken;
  }

  private async checkpointAll(): Promise<void> {
    for (const r of this.replicas.values()) await r.log.checkpoint();
  }

  // ------------------------------------------------------------------ internals

  /** The replica of a bucket hosted here, leader or follower. */
  hosted(bucket: TableBucket): Replica | undefined {
    return this.replicas.get(bucketKey(bucket));
  }

  /** The replica of a bucket that clients use, which this server leads, or the named error saying why there is none. */
  replica(tableId: number, partitionId: number | undefined, bucket: number): Replica {
    const replica = this.replicas.get(bucketKey({ tableId, bucket, ...(partitionId !== undefined ? { partitionId } : {}) }));
    if (replica) {
      if (replica.role !== 'leader') throw notLeader(replica);
      return replica;
    }
    if (this.replication) throw new TributaryError('UNKNOWN_TABLE_OR_BUCKET_EXCEPTION', `bucket ${bucket} of table ${tableId}${partitionId !== undefined ? ` (partition ${partitionId})` : ''} has no replica on this server`);
    const table = this.metadata.getTableInfoById(tableId);
    if (!table) throw new TributaryError('UNKNOWN_TABLE_OR_BUCKET_EXCEPTION', `table ${tableId} does not exist on this server`);
    if (table.partitionKeys.length > 0 && partitionId === undefined) {
      throw new TributaryError('PARTITION_NOT_EXISTS', `table '${table.path.database}.${table.path.table}' is partitioned: the request must name a partition`);
    }
    if (partitionId !== undefined && this.metadata.partitionById(partitionId)?.tableId !== tableId) {
      throw new TributaryError('PARTITION_NOT_EXISTS', `partition ${partitionId} of table ${tableId} does not exist`);
    }
    throw new TributaryError('UNKNOWN_TABLE_OR_BUCKET_EXCEPTION', `bucket ${bucket} does not exist: table ${tableId} has ${table.bucketCount} bucket(s)`);
  }

  private arrowSchema(tableId: number, schemaId: number, schema: Schema): arrow.Schema {
    const key = `${tableId}/${schemaId}`;
    let s = this.arrowSchemas.get(key);
    if (!s) {
      s = toArrowSchema(schema);
      this.arrowSchemas.set(key, s);
    }
    return s;
  }

  /** Where KV snapshots of a table (or partition) go: `<remote.data.dir>/kv/<db>/<table>-<id>/[<partition>-p<id>/]`, a directory or an s3:// prefix. */
  private snapshotDir(table: TableInfo, partition?: PartitionInfo): string {
    const remote = this.options.string('remote.data.dir') ?? path.join(this.dataDir, 'remote');
    const base = joinLocation(isS3Location(remote) ? remote : path.resolve(remote), 'kv', table.path.database, `${table.path.table}-${table.tableId}`);
    return partition ? joinLocation(base, `${partition.partitionName}-p${partition.partitionId}`) : base;
  }

  /** Where the lmdb copy of a KV snapshot is made before its upload. */
  private snapshotStagingDir(): string {
    return path.join(this.dataDir, 'kv-snapshot-staging');
  }

  private tableDir(table: TableInfo, partition?: PartitionInfo): string {
    const base = path.join(this.dataDir, 'log', table.path.database, `${table.path.table}-${table.tableId}`);
    return partition ? path.join(base, `${partition.partitionName}-p${partition.partitionId}`) : base;
  }

  private logConfig(table: TableInfo): LogConfig {
    return {
      segmentBytes: this.options.bytes('log.segment.file-size'),
      indexIntervalBytes: this.options.bytes('log.index.interval-size'),
      recentBytes: this.options.bytes('log.recent-batches.size'),
      preallocateBytes: this.options.bytes('log.preallocate.size'),
      flushIntervalMessages: this.options.int('log.flush.interval-messages'),
      flushIntervalMs: this.options.durationMs('log.flush.interval'),
      ttlMs: parseDuration(tableOption(table.properties, 'table.log.ttl')!)!,
      writerIdExpirationMs: this.options.durationMs('server.writer-id.expiration-time'),
    };
  }
}

/** What bounds a read of the replica's log: the durable end for a follower, the high watermark for clients. */
function readEnd(replica: Replica, follower: boolean): bigint {
  return follower ? replica.log.durableEndOffset : replica.log.highWatermark;
}
