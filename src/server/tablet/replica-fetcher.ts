/**
 * ReplicaFetcher: copies the logs of the buckets this server follows from one leader server (Kafka's
 * ReplicaFetcherThread), one loop of FetchLog requests over one connection for all of them.
 *
 * A bucket added (on becoming follower) is first reconciled with the leader's log: OffsetForLeaderEpoch
 * with the replica's latest epoch tells where that epoch ends in the leader's log, and the replica
 * truncates its log there (to its high watermark when the leader has no such epoch), so a deposed
 * leader never keeps a tail the new leader does not have. Then each round fetches from every
 * bucket's log end (its durable end: the leader takes the fetch offset as the follower's log end),
 * appends what comes as the leader wrote it, and takes the leader's high watermark up to its own
 * log end.
 *
 * A bucket error makes that bucket wait log.replica.fetch.backoff-interval; a failed request or
 * connection makes the whole fetcher wait. NOT_LEADER_OR_FOLLOWER or UNKNOWN_TABLE_OR_BUCKET just
 * after a bucket was added is retried within milliseconds instead: the coordinator tells the new
 * leader and its followers at once, and the leader may take its NotifyLeaderAndIsr a moment after a
 * follower asks. A bucket removed while a response is being applied is not
 * written to after `remove` resolves.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { MessageInitShape } from '@bufbuild/protobuf';
import type { Options } from '../../common/config.js';
import { errorFromCode, errorNameOf, TributaryError } from '../../common/errors.js';
import type { Logger } from '../../common/logger.js';
import { splitLogBatches } from '../../record/log-batch.js';
import { ApiKeys } from '../../rpc/api-keys.js';
import type { RpcConnection } from '../../rpc/connection.js';
import type { FetchLogRequestSchema } from '../../rpc/gen/tributary_pb.js';
import { asBuffer } from './bucket-responses.js';
import type { WriterStateManager } from './log/writer-state.js';
import { bucketKey, type Replica } from './replica.js';

interface FetchState {
  replica: Replica;
  /** The leader epoch this fetcher follows the bucket in. */
  leaderEpoch: number;
  /** Set until the log is reconciled with the leader's (OffsetForLeaderEpoch, truncation). */
  reconcile: boolean;
  /** Not fetched before this time (ms) after an error. */
  retryAt: number;
  /** When the bucket was added (ms). */
  addedAt: number;
}

/** Retry interval of a bucket whose new leader has not taken its leadership yet. */
const NEW_LEADER_RETRY_MS = 10;

export interface FetcherSettings {
  serverId: number;
  maxBytes: number;
  maxBytesForBucket: number;
  minBytes: number;
  maxWaitMs: number;
  backoffMs: number;
}

export function fetcherSettings(serverId: number, options: Options): FetcherSettings {
  return {
    serverId,
    maxBytes: options.bytes('log.replica.fetch.max-bytes'),
    maxBytesForBucket: options.bytes('log.replica.fetch.max-bytes-for-bucket'),
    minBytes: options.bytes('log.replica.fetch.min-bytes'),
    maxWaitMs: options.durationMs('log.replica.fetch.wait-max-time'),
    backoffMs: options.durationMs('log.replica.fetch.backoff-interval'),
  };
}

export class ReplicaFetcher {
  private readonly buckets = new Map<string, FetchState>();
  private readonly stopping = new AbortController();
  private connection: RpcConnection | undefined;
  /** Resolves the loop's wait for work when a bucket is added. */
  private wake: (() => void) | undefined;
  /** The response (or reconciliation) being applied; `remove` waits for it. */
  private applying: Promise<void> = Promise.resolve();
  private readonly loop: Promise<void>;

  constructor(
    readonly leaderId: number,
    private readonly settings: FetcherSettings,
    /** A connection to the leader server, wherever it is now. */
    private readonly connect: () => Promise<RpcConnection>,
    /** The writer state below an offset from the remote log, for a log that starts again there. */
    private readonly remoteWriterStateAt: (replica: Replica, offset: bigint) => Promise<WriterStateManager | undefined>,
    private readonly log: Logger,
  ) {
    this.loop = this.run();
  }

  get size(): number {
    return this.buckets.size;
  }

  /** Follows `replica` from its current leader epoch, starting with the reconciliation. */
  add(replica: Replica): void {
    this.buckets.set(bucketKey(replica.bucket), { replica, leaderEpoch: replica.leaderEpoch, reconcile: true, retryAt: 0, addedAt: Date.now() });
    this.wake?.();
  }

  /** Stops following `replica`; once this resolves the fetcher writes nothing more to its log. */
  async remove(replica: Replica): Promise<void> {
    this.buckets.delete(bucketKey(replica.bucket));
    await this.applying;
  }

  /** Ends the loop; a fetch waiting at the leader ends with the connection, so that stopping does not wait for it. */
  async stop(): Promise<void> {
    this.stopping.abort();
    this.wake?.();
    await this.connection?.close();
    await this.loop;
    await this.connection?.close();
  }

  private async run(): Promise<void> {
    const signal = this.stopping.signal;
    while (!signal.aborted) {
      const now = Date.now();
      const states = [...this.buckets.values()];
      const ready = states.filter((s) => s.retryAt <= now);
      try {
        if (states.length === 0) await new Promise<void>((resolve) => (this.wake = resolve));
        else if (ready.length === 0) await sleep(Math.min(...states.map((s) => s.retryAt)) - now, undefined, { signal });
        else await this.round(ready);
      } catch (err) {
        if (signal.aborted) break;
        this.log.warn({ err, leader: this.leaderId }, 'fetch from the leader failed: retrying after the backoff');
        void this.connection?.close();
        this.connection = undefined;
        await sleep(this.settings.backoffMs, undefined, { signal }).catch(() => undefined);
      } finally {
        this.wake = undefined;
      }
    }
  }

  private async round(ready: FetchState[]): Promise<void> {
    this.connection ??= await this.connect();
    if (this.connection.isClosed) {
      this.connection = undefined;
      throw new TributaryError('NETWORK_EXCEPTION', `the connection to tablet server ${this.leaderId} closed`);
    }
    const conn = this.connection;
    const toReconcile = ready.filter((s) => s.reconcile);
    if (toReconcile.length > 0) await this.reconcile(conn, toReconcile);
    const toFetch = ready.filter((s) => !s.reconcile && this.isCurrent(s));
    if (toFetch.length > 0) await this.fetch(conn, toFetch);
  }

  private isCurrent(s: FetchState): boolean {
    return this.buckets.get(bucketKey(s.replica.bucket)) === s;
  }

  private later(s: FetchState, errorName: string | undefined): void {
    const now = Date.now();
    const leaderNotReady = (errorName === 'NOT_LEADER_OR_FOLLOWER' || errorName === 'UNKNOWN_TABLE_OR_BUCKET_EXCEPTION') && now - s.addedAt < this.settings.maxWaitMs;
    s.retryAt = now + (leaderNotReady ? NEW_LEADER_RETRY_MS : this.settings.backoffMs);
  }

  /** Truncates each log to where its latest epoch ends in the leader's log. */
  private async reconcile(conn: RpcConnection, states: FetchState[]): Promise<void> {
    const response = await conn.request(ApiKeys.OffsetForLeaderEpoch, {
      followerServerId: this.settings.serverId,
      buckets: states.map((s) => ({ ...ids(s.replica), leaderEpoch: s.replica.log.latestEpoch, currentLeaderEpoch: s.leaderEpoch })),
    });
    await this.apply(async () => {
      for (const [i, s] of states.entries()) {
        const answer = response.buckets[i];
        if (!this.isCurrent(s)) continue;
        if (answer === undefined || answer.errorCode !== undefined) {
          this.log.info({ bucket: bucketKey(s.replica.bucket), error: answer?.errorMessage }, 'leader did not say where the epoch ends: retrying');
          this.later(s, answer?.errorCode !== undefined ? errorNameOf(answer.errorCode) : undefined);
          continue;
        }
        const log = s.replica.log;
        let to: bigint;
        if (answer.leaderEpoch < 0) to = log.highWatermark;
        else if (answer.leaderEpoch === log.latestEpoch) to = answer.endOffset;
        // The leader has an older epoch only: ours diverges from where that epoch ends in our log.
        else to = min(answer.endOffset, log.endOffsetForEpoch(answer.leaderEpoch).endOffset);
        if (to < log.logEndOffset) {
          this.log.info({ bucket: bucketKey(s.replica.bucket), from: String(log.logEndOffset), to: String(to) }, 'follower log truncated to the leader');
          await log.truncateTo(to);
        }
        s.reconcile = false;
      }
    });
  }

  private async fetch(conn: RpcConnection, states: FetchState[]): Promise<void> {
    const byTable = new Map<number, FetchState[]>();
    for (const s of states) {
      const list = byTable.get(s.replica.bucket.tableId) ?? [];
      list.push(s);
      byTable.set(s.replica.bucket.tableId, list);
    }
    const tables = [...byTable.values()];
    const request: MessageInitShape<typeof FetchLogRequestSchema> = {
      followerServerId: this.settings.serverId,
      maxBytes: this.settings.maxBytes,
      minBytes: this.settings.minBytes,
      maxWaitMs: this.settings.maxWaitMs,
      tablesReq: tables.map((list) => ({
        tableId: BigInt(list[0].replica.bucket.tableId),
        bucketsReq: list.map((s) => {
          const { partitionId, bucketId } = ids(s.replica);
          return { partitionId, bucketId, fetchOffset: s.replica.log.logEndOffset, maxFetchBytes: this.settings.maxBytesForBucket, currentLeaderEpoch: s.leaderEpoch };
        }),
      })),
    };
    const response = await conn.request(ApiKeys.FetchLog, request, { timeoutMs: this.settings.maxWaitMs + 30_000 });
    await this.apply(async () => {
      for (const [t, list] of tables.entries()) {
        for (const [i, s] of list.entries()) {
          const answer = response.tablesResp[t]?.bucketsResp[i];
          if (!answer || !this.isCurrent(s)) continue;
          const log = s.replica.log;
          if (answer.errorCode !== undefined) {
            const error = errorFromCode(answer.errorCode, answer.errorMessage ?? '');
            if (error.errorName === 'LOG_OFFSET_OUT_OF_RANGE_EXCEPTION' && answer.logStartOffset > log.logEndOffset) {
              // Retention at the leader removed what this replica lacks: start over at its log start,
              // with the writer state of what lies below from the remote log (Kafka's tiered
              // storage does the same), so that its writers stay known should this replica lead.
              let writers: WriterStateManager | undefined;
              try {
                writers = await this.remoteWriterStateAt(s.replica, answer.logStartOffset);
              } catch (err) {
                this.log.warn({ err, bucket: bucketKey(s.replica.bucket) }, 'cannot read the writer state from the remote log: retrying');
                this.later(s, 'LOG_STORAGE_EXCEPTION');
                continue;
              }
              this.log.info({ bucket: bucketKey(s.replica.bucket), from: String(log.logEndOffset), to: String(answer.logStartOffset), writers: writers?.writerCount ?? 0 }, 'follower log restarts at the leader log start');
              await log.truncateFullyAndStartAt(answer.logStartOffset, writers);
            } else {
              if (error.errorName === 'LOG_OFFSET_OUT_OF_RANGE_EXCEPTION') s.reconcile = true;
              this.log.info({ bucket: bucketKey(s.replica.bucket), error: error.message }, 'follower fetch of a bucket failed: retrying');
              this.later(s, error.errorName);
            }
            continue;
          }
          if (answer.records.length > 0) await log.appendAsFollower(splitLogBatches(asBuffer(answer.records)));
          log.advanceHighWatermark(min(answer.highWatermark, log.logEndOffset));
        }
      }
    });
  }

  private async apply(work: () => Promise<void>): Promise<void> {
    const run = work();
    this.applying = run.catch(() => undefined);
    await run;
  }
}

function ids(r: Replica): { tableId: bigint; partitionId?: bigint; bucketId: number } {
  const { tableId, partitionId, bucket } = r.bucket;
  return { tableId: BigInt(tableId), ...(partitionId !== undefined ? { partitionId: BigInt(partitionId) } : {}), bucketId: bucket };
}

function min(a: bigint, b: bigint): bigint {
  return a < b ? a : b;
}
