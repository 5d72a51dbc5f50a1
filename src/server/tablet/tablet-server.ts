/**
 * The tablet server: hosts the buckets of every table and partition and serves their data APIs
 * (ProduceLog, FetchLog, ListOffsets, LimitScan). It learns about buckets from the coordinator through
 * the BucketLifecycle calls and about schemas through a TableMetadataSource.
 *
 * Bucket directories: `<data.dir>/log/<db>/<table>-<tableId>/[<partition>-p<partitionId>/]log-<bucket>`.
 */
import fs from 'node:fs';
import path from 'node:path';
import type { MessageInitShape } from '@bufbuild/protobuf';
import type * as arrow from 'apache-arrow';
import { type Options, parseDuration, tableOption } from '../../common/config.js';
import { TributaryError } from '../../common/errors.js';
import { type PartitionInfo, projectionIn, type Schema, type TableInfo } from '../../common/schema.js';
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
  PbFetchLogRespForBucketSchema,
  ProduceLogRequest,
  ProduceLogResponseSchema,
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
import { KvTablet } from './kv/kv-tablet.js';
import { type KvSnapshotInfo, KvSnapshotStore } from './kv/kv-snapshot-store.js';
import { type LogConfig, LogTablet } from './log/log-tablet.js';
import type { BatchCutter } from './log/log-segment.js';
import { bucketKey, type Replica, type TableBucket } from './replica.js';

/** One hosted bucket, as the node's metrics (server/metrics.ts) read it. */
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
}

/** What the tablet server needs to know about tables, answered by the coordinator. */
export interface TableMetadataSource {
  getTableInfoById(tableId: number): TableInfo | undefined;
  schemaById(tableId: number, schemaId: number): Schema | undefined;
  partitionById(partitionId: number): (PartitionInfo & { tableId: number }) | undefined;
}

const ACKS = new Set([0, 1, -1]);
/** Stored bytes a projected fetch of a bucket may pass through to fill its byte budget, as a multiple of that budget. */
const MAX_PROJECTED_STORED = 16;
const OFFSET_EARLIEST = 0;
const OFFSET_LATEST = 1;
const OFFSET_TIMESTAMP = 2;

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

  constructor(
    private readonly dataDir: string,
    private readonly options: Options,
    private readonly metadata: TableMetadataSource,
    private readonly log: Logger,
    /** Writes wait while the data disk is full. */
    readonly disk: DataDisk,
    /** Times the periodic tasks and the log's fsyncs. */
    private readonly activity: ServerActivity,
  ) {
    this.maxBatchBytes = options.bytes('log.segment.file-size');
    this.kvService = new KvService(this, activity);
  }

  /** Opens (and recovers) the buckets of every existing table, then starts retention and checkpoints. */
  async start(tables: { table: TableInfo; partitions: PartitionInfo[] }[]): Promise<void> {
    for (const { table, partitions } of tables) {
      if (table.partitionKeys.length === 0) await this.createBuckets(table);
      for (const p of partitions) await this.createBuckets(table, p);
    }
    const every = (task: string, key: string, work: () => Promise<unknown>): void => {
      this.timers.push(this.activity.every(task, this.options.durationMs(key), work));
    };
    every('log-retention', 'log.retention.check-interval', () => this.deleteExpiredSegments());
    every('log-checkpoint', 'log.flush.offset.checkpoint-interval', () => this.checkpointAll());
    every('kv-snapshot', 'kv.snapshot.interval', () => this.snapshotAll());
  }

  /** Answers waiting fetches now; called before the RPC server drains its requests. */
  stopServing(): void {
    this.serving.abort();
  }

  async stop(): Promise<void> {
    this.stopServing();
    this.kvService.close();
    for (const t of this.timers) clearInterval(t);
    this.timers = [];
    for (const r of this.replicas.values()) {
      await r.kv?.close();
      await r.log.close();
    }
    this.replicas.clear();
  }

  // ------------------------------------------------------------------ BucketLifecycle

  async createBuckets(table: TableInfo, partition?: PartitionInfo): Promise<void> {
    for (let b = 0; b < table.bucketCount; b++) {
      const bucket: TableBucket = { tableId: table.tableId, bucket: b, ...(partition ? { partitionId: partition.partitionId } : {}) };
      const key = bucketKey(bucket);
      if (this.replicas.has(key)) continue;
      const dir = path.join(this.tableDir(table, partition), `log-${b}`);
      const logger = this.log.child({ bucket: key });
      const log = await LogTablet.open(dir, this.logConfig(table), logger, { onFlush: (start, ms) => this.activity.flushed(start, ms) });
      let kv: KvTablet | undefined;
      if (table.schema.primaryKey) {
        const snapshots = new KvSnapshotStore(path.join(this.snapshotDir(table, partition), String(b)), this.options.int('kv.snapshot.num-retained'));
        const schemas = (schemaId: number): Schema | undefined => this.metadata.schemaById(table.tableId, schemaId);
        kv = await KvTablet.open(path.join(this.tableDir(table, partition), `kv-${b}`), log, table, schemas, snapshots, logger);
      }
      this.replicas.set(key, { bucket, table, ...(partition ? { partition } : {}), log, ...(kv ? { kv } : {}), leaderEpoch: 0 });
    }
  }

  async dropBuckets(table: TableInfo, partition?: PartitionInfo): Promise<void> {
    for (const [key, r] of this.replicas) {
      if (r.bucket.tableId !== table.tableId) continue;
      if (partition && r.bucket.partitionId !== partition.partitionId) continue;
      this.replicas.delete(key);
      await r.kv?.close();
      await r.log.close();
    }
    await fs.promises.rm(this.tableDir(table, partition), { recursive: true, force: true });
    await fs.promises.rm(this.snapshotDir(table, partition), { recursive: true, force: true });
  }

  tableAltered(table: TableInfo): void {
    const config = this.logConfig(table);
    for (const r of this.replicas.values()) {
      if (r.bucket.tableId !== table.tableId) continue;
      r.table = table;
      r.log.updateConfig(config);
      r.kv?.tableAltered(table);
    }
  }

  lakeOffsetsChanged(table: TableInfo, offsets: readonly LakeBucketOffset[]): void {
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
      ...(r.kv ? { kvRows: r.kv.rowCount } : {}),
    }));
  }

  /** The high watermark of every bucket of a table, for tiering lag. */
  highWatermarks(tableId: number): { partitionId?: number; partitionName?: string; bucket: number; highWatermark: bigint }[] {
    const out = [];
    for (const r of this.replicas.values()) {
      if (r.bucket.tableId !== tableId) continue;
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
          // acks=-1 (all): below the high watermark, i.e. durable per the flush policy; 0 and 1: written.
          const results = await replica.log.append(batches, replica.leaderEpoch, req.acks === -1 ? 'high-watermark' : 'written');
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

  async fetchLog(req: FetchLogRequest): Promise<MessageInitShape<typeof FetchLogResponseSchema>> {
    const maxWait = Math.min(Math.max(req.maxWaitMs, 0), this.options.durationMs('rpc.max-wait'));
    const deadline = Date.now() + maxWait;
    for (;;) {
      const { response, bytes, replicas } = await this.readFetch(req);
      const remaining = deadline - Date.now();
      const hasError = response.tablesResp.some((t) => t.bucketsResp.some((b) => b.errorCode !== undefined));
      if (bytes >= Math.max(req.minBytes, 1) || remaining <= 0 || hasError || replicas.length === 0 || this.serving.signal.aborted) return response;
      await this.waitForData(replicas, remaining);
    }
  }

  /**
   * The buckets of a fetch, in request order. Each bucket may send up to its own limit and what the
   * request's limit has left; the buckets whose share fits, counting every bucket before them as
   * full, are read side by side, and the others after them one by one, from what is left once the
   * reads before are counted. The records sent stay within the request's limit, but for the first
   * batch found (as Kafka's fetch.max.bytes).
   */
  private async readFetch(req: FetchLogRequest) {
    const maxBytes = req.maxBytes > 0 ? req.maxBytes : Number.MAX_SAFE_INTEGER;
    const api = ApiKeys.FetchLog;
    const ids = req.tablesReq.map((t, i) => ({
      tableId: idOf(api, `tables_req[${i}].table_id`, t.tableId),
      partitionIds: t.bucketsReq.map((b, j) => optionalIdOf(api, `tables_req[${i}].buckets_req[${j}].partition_id`, b.partitionId)),
    }));
    const replicas: Replica[] = [];
    const items = req.tablesReq.flatMap((t, table) => t.bucketsReq.map((b, bucket) => ({ table, bucket, b, limit: Math.max(1, b.maxFetchBytes > 0 ? b.maxFetchBytes : maxBytes) })));
    const read = async (item: (typeof items)[number], limit: number): Promise<MessageInitShape<typeof PbFetchLogRespForBucketSchema>> => {
      const t = req.tablesReq[item.table];
      const { b } = item;
      const head = { ...(b.partitionId !== undefined ? { partitionId: b.partitionId } : {}), bucketId: b.bucketId };
      try {
        const replica = this.replica(ids[item.table].tableId, ids[item.table].partitionIds[item.bucket], b.bucketId);
        replicas.push(replica);
        const hw = replica.log.highWatermark;
        const logStartOffset = replica.log.logStartOffset;
        const records = limit > 0 ? await this.readBucket(replica, b.fetchOffset, limit, t.projectionPushdownEnabled ? t.projectedFields : undefined) : Buffer.alloc(0);
        return { ...head, highWatermark: hw, logStartOffset, records };
      } catch (err) {
        return { ...head, highWatermark: -1n, logStartOffset: -1n, ...bucketError(err) };
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
  private async readBucket(replica: Replica, offset: bigint, maxBytes: number, projection: number[] | undefined): Promise<Buffer> {
    if (!projection) return (await replica.log.read(offset, maxBytes)).records;
    const cutter = this.cutterOf(replica.table, projection);
    const parts: Buffer[] = [];
    let size = 0;
    let storedBudget = MAX_PROJECTED_STORED * maxBytes;
    while (size < maxBytes && storedBudget > 0) {
      const { batches, storedBytes, highWatermark } = await replica.log.readCut(offset, maxBytes - size, storedBudget, cutter);
      if (batches.length === 0) break;
      for (const batch of batches) {
        parts.push(batch);
        size += batch.length;
      }
      storedBudget -= storedBytes;
      const last = readLogBatchHeader(batches[batches.length - 1]);
      offset = last.baseOffset + BigInt(last.lastOffsetDelta) + 1n;
      if (offset >= highWatermark) break;
    }
    return parts.length === 1 ? parts[0] : Buffer.concat(parts);
  }

  private waitForData(replicas: Replica[], timeoutMs: number): Promise<void> {
    return new Promise((resolve) => {
      const unsubscribes: (() => void)[] = [];
      const done = (): void => {
        clearTimeout(timer);
        for (const u of unsubscribes) u();
        this.serving.signal.removeEventListener('abort', done);
        resolve();
      };
      const timer = setTimeout(done, timeoutMs);
      for (const r of replicas) unsubscribes.push(r.log.onHighWatermark(done));
      this.serving.signal.addEventListener('abort', done);
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
          if (req.offsetType === OFFSET_EARLIEST) offset = log.logStartOffset;
          else if (req.offsetType === OFFSET_LATEST) offset = log.highWatermark;
          else if (req.offsetType === OFFSET_TIMESTAMP) {
            if (req.startTimestamp === undefined) throw new TributaryError('INVALID_TIMESTAMP_EXCEPTION', 'offset type TIMESTAMP needs start_timestamp');
            offset = await log.offsetForTimestamp(req.startTimestamp);
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

  async deleteExpiredSegments(nowMs = Date.now()): Promise<number> {
    let deleted = 0;
    for (const r of this.replicas.values()) {
      // The changelog a KV snapshot still needs for recovery is kept, and so is what the lake does not hold yet.
      const snapshotOffset = r.kv?.snapshots.latest()?.logOffset;
      const lakeOffset = r.table.properties['table.datalake.enabled'] === 'true' ? (r.lakeEndOffset ?? -1n) : undefined;
      const canDelete = (segmentEnd: bigint): boolean =>
        (!r.kv || (snapshotOffset !== undefined && segmentEnd <= snapshotOffset)) && (lakeOffset === undefined || segmentEnd <= lakeOffset);
      deleted += await r.log.deleteExpiredSegments(nowMs, canDelete);
    }
    if (deleted > 0) this.log.info({ segments: deleted }, 'expired log segments deleted');
    return deleted;
  }

  /** Takes a KV snapshot of every primary-key bucket (of one table when given). */
  async snapshotAll(tableId?: number): Promise<{ replica: Replica; snapshot: KvSnapshotInfo }[]> {
    const taken = [];
    for (const r of this.replicas.values()) {
      if (!r.kv || (tableId !== undefined && r.bucket.tableId !== tableId)) continue;
      try {
        taken.push({ replica: r, snapshot: await r.kv.snapshot() });
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

  /** The replica of a bucket, or the named error saying why there is none. */
  replica(tableId: number, partitionId: number | undefined, bucket: number): Replica {
    const replica = this.replicas.get(bucketKey({ tableId, bucket, ...(partitionId !== undefined ? { partitionId } : {}) }));
    if (replica) return replica;
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

  /** Where KV snapshots of a table (or partition) go: `<remote.data.dir>/kv/<db>/<table>-<id>/[<partition>-p<id>/]`. */
  private snapshotDir(table: TableInfo, partition?: PartitionInfo): string {
    const remote = this.options.string('remote.data.dir') ?? path.join(this.dataDir, 'remote');
    const base = path.join(path.resolve(remote), 'kv', table.path.database, `${table.path.table}-${table.tableId}`);
    return partition ? path.join(base, `${partition.partitionName}-p${partition.partitionId}`) : base;
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
      flushIntervalMessages: this.options.int('log.flush.interval-messages'),
      flushIntervalMs: this.options.durationMs('log.flush.interval'),
      ttlMs: parseDuration(tableOption(table.properties, 'table.log.ttl')!)!,
      writerIdExpirationMs: this.options.durationMs('server.writer-id.expiration-time'),
    };
  }
}
