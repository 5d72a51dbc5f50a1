/**
 * The tablet server's primary-key APIs: PutKv, Lookup, PrefixLookup, GetTableStats, ScanKv and the KV
 * snapshot calls. Per-bucket failures travel inside responses, like ProduceLog's.
 */
import { randomBytes } from 'node:crypto';
import type { MessageInitShape } from '@bufbuild/protobuf';
import { TributaryError } from '../../common/errors.js';
import type { TableInfo } from '../../common/schema.js';
import { splitKvBatches } from '../../record/kv-batch.js';
import { ApiKeys } from '../../rpc/api-keys.js';
import type * as pb from '../../rpc/gen/tributary_pb.js';
import { fieldError, idOf, intIn, optionalIdOf } from '../../rpc/request-fields.js';
import { type LookupRequestRead, LookupResponseWriter } from '../../rpc/lookup-messages.js';
import { EncodedResponse } from '../../rpc/server.js';
import { asBuffer, bucketError } from './bucket-responses.js';
import type { ServerActivity } from '../../common/activity.js';
import type { DataDisk } from './data-disk.js';
import type { Replica } from './replica.js';
import type { ReplicaManager } from './replica-manager.js';

const SCANNER_TTL_MS = 60_000;
const DEFAULT_SCAN_BYTES = 4 * 1024 * 1024;

interface ScanSession {
  replica: Replica;
  offset: bigint;
  values: Iterator<Uint8Array>;
  done: () => void;
  lastUsed: number;
}

/** What the KV APIs use of the tablet server, which creates them: its replicas (those it leads), the data disk's write lock and, in a cluster, replication. */
interface TabletReplicas {
  replica(tableId: number, partitionId: number | undefined, bucket: number): Replica;
  /** The remote log, when remote.data.dir is set: each bucket's usage of it. */
  readonly remoteLog: { usage(r: Replica): { remoteBytes: number; remoteSegments: number } } | undefined;
  readonly disk: DataDisk;
  readonly replication: ReplicaManager | undefined;
}

export class KvService {
  private readonly scanners = new Map<string, ScanSession>();
  private readonly sweeper: NodeJS.Timeout;

  constructor(
    private readonly tablets: TabletReplicas,
    activity: ServerActivity,
  ) {
    this.sweeper = activity.every('kv-scanner-sweep', SCANNER_TTL_MS / 2, () => this.expireScanners(Date.now()));
  }

  close(): void {
    clearInterval(this.sweeper);
    for (const s of this.scanners.values()) s.done();
    this.scanners.clear();
  }

  private kvReplica(tableId: number, partitionId: number | undefined, bucket: number): Replica & { kv: NonNullable<Replica['kv']> } {
    const r = this.tablets.replica(tableId, partitionId, bucket);
    if (!r.kv) throw new TributaryError('NON_PRIMARY_KEY_TABLE_EXCEPTION', `table '${r.table.path.database}.${r.table.path.table}' has no primary key`);
    return r as Replica & { kv: NonNullable<Replica['kv']> };
  }

  async putKv(req: pb.PutKvRequest): Promise<MessageInitShape<typeof pb.PutKvResponseSchema>> {
    const api = ApiKeys.PutKv;
    if (![0, 1, -1].includes(req.acks)) throw new TributaryError('INVALID_REQUIRED_ACKS', `acks must be 0, 1 or -1 (all), got ${req.acks}`);
    const tableId = idOf(api, 'table_id', req.tableId);
    intIn(api, 'timeout_ms', req.timeoutMs, 0, 2 ** 31 - 1);
    const partitionIds = req.bucketsReq.map((b, i) => optionalIdOf(api, `buckets_req[${i}].partition_id`, b.partitionId));
    const bucketsResp = await Promise.all(
      req.bucketsReq.map(async (b, i) => {
        const head = { ...(b.partitionId !== undefined ? { partitionId: b.partitionId } : {}), bucketId: b.bucketId };
        try {
          const r = this.kvReplica(tableId, partitionIds[i], b.bucketId);
          const batches = splitKvBatches(asBuffer(b.records));
          if (batches.length === 0) throw new TributaryError('CORRUPT_MESSAGE', 'PutKv request for a bucket holds no KV batch');
          this.tablets.disk.checkWritable();
          const targetColumns = req.targetColumns.length > 0 ? req.targetColumns : undefined;
          const replication = req.acks === -1 ? this.tablets.replication : undefined;
          if (!replication) {
            const result = await r.kv.putKv(batches, targetColumns, req.acks === -1 ? 'high-watermark' : 'written');
            return { ...head, logEndOffset: result.logEndOffset };
          }
          // acks=-1 in a cluster: the changelog is held by every in-sync replica (as ProduceLog's).
          replication.checkEnoughReplicas(r);
          const result = await r.kv.putKv(batches, targetColumns, 'written');
          await replication.awaitHighWatermark(r, result.endOffset, req.timeoutMs);
          return { ...head, logEndOffset: result.logEndOffset };
        } catch (err) {
          return { ...head, logEndOffset: -1n, ...bucketError(this.tablets.disk.writeFailed(err)) };
        }
      }),
    );
    return { bucketsResp };
  }

  /** The request is read by hand, and each value goes from the store straight into the hand-encoded response (lookup-messages.ts). */
  async lookup(req: LookupRequestRead): Promise<EncodedResponse> {
    // Read by hand, ids arrive as plain varints; the response echoes partition and bucket ids, which it writes unsigned.
    const api = ApiKeys.Lookup;
    if (!Number.isSafeInteger(req.tableId)) throw fieldError(api, 'table_id', `${req.tableId} is out of range (0 to 2^53 - 1)`);
    req.buckets.forEach((b, i) => {
      if (b.partitionId !== undefined && !Number.isSafeInteger(b.partitionId)) throw fieldError(api, `buckets_req[${i}].partition_id`, `${b.partitionId} is out of range (0 to 2^53 - 1)`);
      intIn(api, `buckets_req[${i}].bucket_id`, b.bucketId, 0, 2 ** 31 - 1, 'UNKNOWN_TABLE_OR_BUCKET_EXCEPTION');
    });
    const out = new LookupResponseWriter(req.buckets.reduce((n, b) => n + b.keys.length, 0));
    const value = (v: Uint8Array | undefined): void => out.value(v);
    for (const b of req.buckets) {
      out.bucket(b.partitionId, b.bucketId);
      try {
        this.kvReplica(req.tableId, b.partitionId, b.bucketId).kv.lookup(b.keys, value);
      } catch (err) {
        const { errorCode, errorMessage } = bucketError(err);
        out.error(errorCode, errorMessage);
      }
    }
    return new EncodedResponse(out.finish());
  }

  async prefixLookup(req: pb.PrefixLookupRequest): Promise<MessageInitShape<typeof pb.PrefixLookupResponseSchema>> {
    const api = ApiKeys.PrefixLookup;
    const tableId = idOf(api, 'table_id', req.tableId);
    const partitionIds = req.bucketsReq.map((b, i) => optionalIdOf(api, `buckets_req[${i}].partition_id`, b.partitionId));
    return {
      bucketsResp: await Promise.all(
        req.bucketsReq.map(async (b, i) => {
          const head = { ...(b.partitionId !== undefined ? { partitionId: b.partitionId } : {}), bucketId: b.bucketId };
          try {
            const r = this.kvReplica(tableId, partitionIds[i], b.bucketId);
            return { ...head, valueLists: (await r.kv.prefixLookup(b.keys)).map((values) => ({ values })) };
          } catch (err) {
            return { ...head, ...bucketError(err) };
          }
        }),
      ),
    };
  }

  /** Row counts (live keys for primary-key tables, records in the log, HW − start, for log tables) and the bytes and segments of each bucket's log. */
  async getTableStats(req: pb.GetTableStatsRequest): Promise<MessageInitShape<typeof pb.GetTableStatsResponseSchema>> {
    const tableId = idOf(ApiKeys.GetTableStats, 'table_id', req.tableId);
    const partitionId = optionalIdOf(ApiKeys.GetTableStats, 'partition_id', req.partitionId);
    return {
      bucketsResp: req.bucketId.map((bucketId) => {
        try {
          const r = this.tablets.replica(tableId, partitionId, bucketId);
          const rowCount = r.kv ? BigInt(r.kv.rowCount) : r.log.highWatermark - r.log.logStartOffset;
          const remote = this.tablets.remoteLog?.usage(r);
          return {
            bucketId,
            rowCount,
            logSizeBytes: BigInt(r.log.sizeInBytes),
            logSegments: r.log.segmentCount,
            ...(remote ? { remoteLogSizeBytes: BigInt(remote.remoteBytes), remoteLogSegments: remote.remoteSegments } : {}),
          };
        } catch (err) {
          return { bucketId, rowCount: -1n, ...bucketError(err) };
        }
      }),
    };
  }

  /** Pages through a consistent read of a bucket's state; the first call opens the scanner. */
  async scanKv(req: pb.ScanKvRequest): Promise<MessageInitShape<typeof pb.ScanKvResponseSchema>> {
    try {
      let id: string;
      let session: ScanSession | undefined;
      if (req.scannerId === undefined || req.scannerId.length === 0) {
        const replica = this.kvReplica(idOf(ApiKeys.ScanKv, 'table_id', req.tableId), optionalIdOf(ApiKeys.ScanKv, 'partition_id', req.partitionId), req.bucketId);
        const scan = replica.kv.scanAll();
        id = randomBytes(16).toString('hex');
        session = { replica, offset: scan.offset, values: scan.values[Symbol.iterator](), done: scan.done, lastUsed: Date.now() };
        this.scanners.set(id, session);
      } else {
        id = Buffer.from(req.scannerId).toString('hex');
        session = this.scanners.get(id);
        if (!session) throw new TributaryError('INVALID_ARGUMENT', 'unknown or expired scanner id (scanners expire after 60 s without a call)');
      }
      if (req.closeScanner) {
        this.closeScanner(id);
        return { scannerId: Buffer.from(id, 'hex'), hasMoreResults: false, values: [], logOffset: session.offset };
      }
      session.lastUsed = Date.now();
      const budget = req.batchSizeBytes > 0 ? req.batchSizeBytes : DEFAULT_SCAN_BYTES;
      const values: Uint8Array[] = [];
      let bytes = 0;
      let hasMore = true;
      while (bytes < budget) {
        const next = session.values.next();
        if (next.done) {
          hasMore = false;
          break;
        }
        // lmdb hands out views of its memory map: copy before the read transaction moves on.
        const copy = Uint8Array.from(next.value);
        values.push(copy);
        bytes += copy.length;
      }
      if (!hasMore) this.closeScanner(id);
      return { scannerId: Buffer.from(id, 'hex'), hasMoreResults: hasMore, values, logOffset: session.offset };
    } catch (err) {
      return { scannerId: new Uint8Array(0), hasMoreResults: false, values: [], logOffset: -1n, ...bucketError(err) };
    }
  }

  /** Ends the state scans of a replica whose KV state closes (it stops leading). */
  closeScannersOf(replica: Replica): void {
    for (const [id, s] of this.scanners) if (s.replica === replica) this.closeScanner(id);
  }

  private closeScanner(id: string): void {
    this.scanners.get(id)?.done();
    this.scanners.delete(id);
  }

  private expireScanners(now: number): void {
    for (const [id, s] of this.scanners) if (now - s.lastUsed > SCANNER_TTL_MS) this.closeScanner(id);
  }
}
