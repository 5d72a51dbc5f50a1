/**
 * RemoteLogManager (Fluss's and Kafka's): with remote.data.dir set, the leader of each bucket
 * copies its closed log segments to the remote log (remote/remote-log-manifest.ts) and serves
 * reads below its local log start from there.
 *
 * Every remote.log.task-interval-duration, for each bucket this server leads:
 * 1. up to remote.log.task-max-upload-segments closed segments above the remote end (and, of a
 *    lake-enabled table, neither held by the lake nor still waiting for it: retention.ts) are uploaded, each with its indexes, the writer state and the
 *    leader epochs, under a fresh segment id;
 * 2. remote segments from the start that retention lets go leave the manifest;
 * 3. a new manifest is written under a new name, then committed to the coordinator
 *    (CommitRemoteLogManifest on a cluster, the node's coordinator on one node; fenced by both
 *    epochs); only then are the previous manifest and the dropped segments deleted, and local
 *    retention may delete local segments below the new remote end.
 * Rounds run one at a time. A crash anywhere leaves the committed manifest naming complete
 * objects only; what a failed or interrupted round uploaded stays unnamed until the first round
 * of the bucket's next leadership deletes it (remote.log.orphan-min-age). A bucket whose round
 * fails (the store is down) backs off, doubling its wait up to remote.log.upload.max-backoff;
 * appends never wait for any of it.
 *
 * Reads below the local start are served here, on the server (not by client downloads as Fluss
 * does): the segment is downloaded once into a bounded cache and read with the same code as local
 * segments, column projection included, so clients need no store access or credentials.
 */
import crypto from 'node:crypto';
import type { Options } from '../../common/config.js';
import { TributaryError } from '../../common/errors.js';
import type { Logger } from '../../common/logger.js';
import type { RemoteLogHandle } from '../../common/remote-log.js';
import type { PartitionInfo, TableInfo } from '../../common/schema.js';
import { objectStoreFor } from '../../storage/stores.js';
import type { ObjectStore } from '../../storage/object-store.js';
import type { BatchCutter, CutBatches } from './log/log-segment.js';
import { WriterStateManager } from './log/writer-state.js';
import {
  decodeManifest,
  encodeManifest,
  endOffsetOf,
  handleOf,
  newManifestLocation,
  type RemoteLogManifest,
  type RemoteSegment,
  remoteLogRoot,
  remoteTableDir,
  segmentHolding,
  segmentObject,
  segmentObjects,
} from './remote/remote-log-manifest.js';
import { RemoteSegmentCache } from './remote/remote-segment-cache.js';
import { bucketKey, type Replica } from './replica.js';
import { needsRemoteCopy, remoteSegmentExpired } from './retention.js';

interface BucketState {
  /** The manifest of `manifestPath`, as loaded or written. */
  manifestPath?: string;
  manifest?: RemoteLogManifest;
  failures: number;
  retryAtMs: number;
  /** The leader epoch whose first round swept the bucket's unnamed objects. */
  sweptEpoch?: number;
}

/** What the metrics and SHOW TABLE STORAGE read of one bucket's remote log. */
export interface RemoteLogUsage {
  remoteSegments: number;
  remoteBytes: number;
  /** Led buckets: closed local segments that need a remote copy now (not those waiting for the lake), and their bytes. */
  pendingSegments: number;
  pendingBytes: number;
}

export class RemoteLogManager {
  readonly root: string;
  private readonly store: ObjectStore;
  private readonly states = new Map<string, BucketState>();
  private readonly cache: RemoteSegmentCache;
  private readonly maxUploadSegments: number;
  private readonly intervalMs: number;
  private readonly maxBackoffMs: number;
  private readonly orphanMinAgeMs: number;
  private running: Promise<void> | undefined;
  /** Requests to the remote store (uploads, manifest reads and writes, deletes), segments and bytes uploaded, failed rounds. */
  readonly counters = { requests: 0, uploadedSegments: 0, uploadedBytes: 0, failedRounds: 0 };

  constructor(
    remoteDataDir: string,
    options: Options,
    cacheDir: string,
    private readonly log: Logger,
    /** Commits a manifest handle of a bucket the replica leads; rejects with the named error it was refused with. */
    private readonly commit: (replica: Replica, handle: RemoteLogHandle) => Promise<void>,
  ) {
    this.root = remoteLogRoot(remoteDataDir);
    this.store = objectStoreFor(this.root);
    this.maxUploadSegments = options.int('remote.log.task-max-upload-segments');
    this.intervalMs = options.durationMs('remote.log.task-interval-duration');
    this.maxBackoffMs = options.durationMs('remote.log.upload.max-backoff');
    this.orphanMinAgeMs = options.durationMs('remote.log.orphan-min-age');
    this.cache = new RemoteSegmentCache(cacheDir, options.bytes('remote.log.cache.max-size'), options.int('remote.log.read.max-concurrent-downloads'), {
      indexIntervalBytes: options.bytes('log.index.interval-size'),
      recentBytes: 0,
    });
  }

  get remoteReads(): RemoteSegmentCache['counters'] {
    return this.cache.counters;
  }

  async close(): Promise<void> {
    await this.cache.close();
  }

  /** The remote directory of a bucket. */
  bucketDir(r: Replica): string {
    return `${remoteTableDir(this.root, r.table, r.partition)}/${r.bucket.bucket}`;
  }

  /** The remote directory of a table or partition, deleted when it is dropped. */
  tableDir(table: TableInfo, partition?: PartitionInfo): string {
    return remoteTableDir(this.root, table, partition);
  }

  async deleteTable(table: TableInfo, partition?: PartitionInfo): Promise<void> {
    this.counters.requests++;
    await this.store.deleteDirectory(this.tableDir(table, partition));
  }

  /** The first offset a client can read: the remote log start when the remote log holds offsets below the local start. */
  earliestOffset(r: Replica): bigint {
    const local = r.log.logStartOffset;
    const remote = r.remoteLog;
    return remote && remote.remoteLogStartOffset < remote.remoteLogEndOffset && remote.remoteLogStartOffset < local ? remote.remoteLogStartOffset : local;
  }

  /** Whether `offset` is below the local log start and in the committed remote log. */
  holds(r: Replica, offset: bigint): boolean {
    const remote = r.remoteLog;
    return remote !== undefined && offset < r.log.logStartOffset && offset >= remote.remoteLogStartOffset && offset < remote.remoteLogEndOffset;
  }

  /**
   * Whole batches from the one holding `offset` within its remote segment, as LogTablet.read reads
   * a local one (with `cutter`: cut, as readCut does).
   */
  async read(r: Replica, offset: bigint, maxBytes: number, maxStoredBytes: number, cutter?: BatchCutter): Promise<Buffer | CutBatches> {
    try {
      const segment = await this.remoteSegment(r, offset);
      return await this.cache.read(this.store, this.bucketDir(r), segment, (s): Promise<Buffer | CutBatches> => (cutter ? s.readCut(offset, maxBytes, maxStoredBytes, s.size, cutter) : s.read(offset, maxBytes, s.size)));
    } catch (err) {
      // A projection refused stays what it is; anything else is the remote log failing to be read.
      if (err instanceof TributaryError && err.errorName !== 'LOG_STORAGE_EXCEPTION' && err.errorName !== 'STORAGE_EXCEPTION') throw err;
      throw new TributaryError('LOG_STORAGE_EXCEPTION', `cannot read offset ${offset} of bucket ${bucketKey(r.bucket)} from the remote log: ${(err as Error).message}`, { cause: err });
    }
  }

  /** The first remote offset whose batch has a commit timestamp >= `timestamp`; undefined when the remote log has none (look locally). */
  async offsetForTimestamp(r: Replica, timestamp: number): Promise<bigint | undefined> {
    if (!r.remoteLog || r.remoteLog.remoteLogStartOffset >= r.log.logStartOffset) return undefined;
    const manifest = await this.manifestOf(r);
    for (const s of manifest.segments) {
      if (s.startOffset >= r.log.logStartOffset) break;
      if (s.maxTimestamp < timestamp) continue;
      const found = await this.cache.read(this.store, this.bucketDir(r), s, (seg) => seg.locateTimestamp(timestamp, seg.size));
      if (found) return found.header.baseOffset < s.startOffset ? s.startOffset : found.header.baseOffset;
    }
    return undefined;
  }

  /**
   * The writer state below `offset` that the remote log saved with its segment ending there, for
   * a follower whose log starts again at `offset` (the leader's log start): without it the
   * follower, once leader, would not know a writer whose last batches are all below, and refuse
   * its next batch (UNKNOWN_WRITER_ID). Undefined when no committed remote segment ends at
   * `offset` (a lake-enabled table's history is in the lake). Rejects when the store cannot be read.
   */
  async writerStateAt(r: Replica, offset: bigint): Promise<WriterStateManager | undefined> {
    const segment = (await this.manifestOf(r)).segments.find((s) => s.endOffset === offset);
    if (!segment) return undefined;
    const location = segmentObject(this.bucketDir(r), segment, '.writer_snapshot');
    this.counters.requests++;
    const bytes = await this.store.get(location);
    if (!bytes) throw new TributaryError('LOG_STORAGE_EXCEPTION', `the remote log object ${location} named by the committed manifest is missing`);
    return WriterStateManager.below(offset, Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength), location);
  }

  /** Remote segments and bytes of the bucket (as far as this server has loaded its manifest), and, led, what is due for upload. */
  usage(r: Replica, nowMs = Date.now()): RemoteLogUsage {
    const state = this.states.get(bucketKey(r.bucket));
    const segments = state?.manifestPath === r.remoteLog?.manifestPath ? (state?.manifest?.segments ?? []) : [];
    const out: RemoteLogUsage = { remoteSegments: segments.length, remoteBytes: segments.reduce((n, s) => n + s.size, 0), pendingSegments: 0, pendingBytes: 0 };
    if (r.role !== 'leader') return out;
    const end = r.remoteLog?.remoteLogEndOffset ?? -1n;
    for (const s of r.log.closedSegments()) {
      if (s.endOffset <= end || !needsRemoteCopy(r, s, nowMs)) continue;
      out.pendingSegments++;
      out.pendingBytes += s.sizeBytes;
    }
    return out;
  }

  /**
   * One round over the buckets this server leads; while one runs, a call shares it. One round at a
   * time: two would build manifests from the same committed one, and the later commit would name
   * segments the earlier one deleted.
   */
  runOnce(replicas: Iterable<Replica>, nowMs = Date.now()): Promise<void> {
    this.running ??= this.round(replicas, nowMs).finally(() => (this.running = undefined));
    return this.running;
  }

  private async round(replicas: Iterable<Replica>, nowMs: number): Promise<void> {
    for (const r of replicas) {
      if (r.role !== 'leader') continue;
      const state = this.stateOf(r);
      if (state.retryAtMs > nowMs) continue;
      try {
        await this.tierBucket(r, state, nowMs);
        state.failures = 0;
      } catch (err) {
        state.failures++;
        this.counters.failedRounds++;
        const backoff = Math.min(this.maxBackoffMs, this.intervalMs * 2 ** Math.min(state.failures - 1, 30));
        state.retryAtMs = nowMs + backoff;
        this.log.warn({ err, bucket: bucketKey(r.bucket), failures: state.failures, retryInMs: backoff }, 'remote log upload failed: retrying later');
      }
    }
  }

  /** Forgets a bucket no longer hosted. */
  forget(r: Replica): void {
    this.states.delete(bucketKey(r.bucket));
  }

  private stateOf(r: Replica): BucketState {
    const key = bucketKey(r.bucket);
    let state = this.states.get(key);
    if (!state) this.states.set(key, (state = { failures: 0, retryAtMs: 0 }));
    return state;
  }

  /** The manifest of the replica's committed remote log (empty without one), loaded once per handle. */
  private async manifestOf(r: Replica): Promise<RemoteLogManifest> {
    const state = this.stateOf(r);
    const handle = r.remoteLog;
    if (!handle) return { tableId: r.bucket.tableId, ...(r.bucket.partitionId !== undefined ? { partitionId: r.bucket.partitionId } : {}), bucket: r.bucket.bucket, segments: [] };
    if (state.manifestPath === handle.manifestPath && state.manifest) return state.manifest;
    this.counters.requests++;
    const bytes = await this.store.get(handle.manifestPath);
    if (!bytes) throw new Error(`the committed remote log manifest ${handle.manifestPath} is missing`);
    const manifest = decodeManifest(bytes, handle.manifestPath);
    state.manifestPath = handle.manifestPath;
    state.manifest = manifest;
    return manifest;
  }

  private async remoteSegment(r: Replica, offset: bigint): Promise<RemoteSegment> {
    const segment = segmentHolding(await this.manifestOf(r), offset);
    if (!segment) throw new Error(`the remote log manifest of bucket ${bucketKey(r.bucket)} holds no segment with offset ${offset}`);
    return segment;
  }

  private async tierBucket(r: Replica, state: BucketState, nowMs: number): Promise<void> {
    const committed = r.remoteLog;
    const current = await this.manifestOf(r);
    const leaderEpoch = r.leaderEpoch;
    let end = committed?.remoteLogEndOffset;
    let expired = 0;
    while (expired < current.segments.length && remoteSegmentExpired(r, current.segments[expired], nowMs)) expired++;
    const segments = current.segments.slice(expired);
    const dir = this.bucketDir(r);
    if (state.sweptEpoch !== leaderEpoch) {
      await this.sweepUnnamed(r, dir, current, nowMs);
      state.sweptEpoch = leaderEpoch;
    }
    const uploads = r.log
      .closedSegments()
      .filter((s) => (end === undefined || s.endOffset > end) && needsRemoteCopy(r, s, nowMs))
      .slice(0, this.maxUploadSegments);
    for (const s of uploads) {
      if (r.role !== 'leader' || r.leaderEpoch !== leaderEpoch) return;
      const startOffset = end !== undefined && s.baseOffset < end ? end : s.baseOffset;
      // A gap (the lake holds what lies between) starts the remote log anew: what it held before, the lake holds too.
      if (segments.length > 0 && segments[segments.length - 1].endOffset !== startOffset) segments.splice(0);
      const remote: RemoteSegment = { id: crypto.randomUUID(), baseOffset: s.baseOffset, startOffset, endOffset: s.endOffset, size: s.sizeBytes, maxTimestamp: s.maxTimestamp };
      const { writerSnapshot, epochs } = r.log.logState();
      await this.putFile(segmentObject(dir, remote, '.log'), s.files.log);
      await this.putFile(segmentObject(dir, remote, '.index'), s.files.index);
      await this.putFile(segmentObject(dir, remote, '.timeindex'), s.files.timeindex);
      await this.put(segmentObject(dir, remote, '.writer_snapshot'), writerSnapshot);
      await this.put(segmentObject(dir, remote, '.leader_epoch'), JSON.stringify(epochs.map(([e, o]) => [Number(e), o.toString()])));
      segments.push(remote);
      end = s.endOffset;
      this.counters.uploadedSegments++;
      this.counters.uploadedBytes += s.sizeBytes;
    }
    if (uploads.length === 0 && expired === 0) return;
    const dropped = current.segments.filter((s) => !segments.includes(s));
    const next: RemoteLogManifest = { ...current, segments };
    const emptyAt = end ?? r.log.logStartOffset;
    const location = newManifestLocation(dir, endOffsetOf(next, emptyAt));
    await this.put(location, encodeManifest(next, emptyAt));
    const handle = handleOf(next, location, emptyAt);
    await this.commit(r, handle);
    r.remoteLog = handle;
    state.manifestPath = location;
    state.manifest = next;
    this.log.info({ bucket: bucketKey(r.bucket), uploaded: uploads.length, expired: dropped.length, remoteLogStartOffset: String(handle.remoteLogStartOffset), remoteLogEndOffset: String(handle.remoteLogEndOffset) }, 'remote log manifest committed');
    // Only what no committed manifest names any more goes; a failure leaves an unnamed object behind.
    const garbage = [...(committed ? [committed.manifestPath] : []), ...dropped.flatMap((s) => segmentObjects(dir, s))];
    this.counters.requests++;
    await this.store.deleteMany(garbage).catch((err: unknown) => this.log.warn({ err, bucket: bucketKey(r.bucket) }, 'could not delete remote objects no manifest names'));
  }

  /**
   * Deletes the bucket's objects that the committed manifest does not name. Run in the first round
   * of a leadership, before it uploads: this server's rounds of earlier epochs are over (rounds run
   * one at a time), and an earlier leader still uploading is fenced (its commit names an old
   * epoch), so nothing unnamed can still become named. The manifest is the one the coordinator
   * handed the new leader, never one a commit in doubt may have replaced.
   */
  private async sweepUnnamed(r: Replica, dir: string, committed: RemoteLogManifest, nowMs: number): Promise<void> {
    const named = new Set([...(r.remoteLog ? [r.remoteLog.manifestPath] : []), ...committed.segments.flatMap((s) => segmentObjects(dir, s))]);
    this.counters.requests++;
    const unnamed = (await this.store.list(dir)).filter((o) => !named.has(o.location) && nowMs - o.lastModifiedMs >= this.orphanMinAgeMs).map((o) => o.location);
    if (unnamed.length === 0) return;
    this.counters.requests++;
    await this.store.deleteMany(unnamed);
    this.log.info({ bucket: bucketKey(r.bucket), objects: unnamed.length }, 'deleted remote log objects no committed manifest names');
  }

  private put(location: string, body: string | Buffer): Promise<void> {
    this.counters.requests++;
    return this.store.put(location, body);
  }

  private putFile(location: string, file: string): Promise<void> {
    this.counters.requests++;
    return this.store.putFile(location, file);
  }
}
