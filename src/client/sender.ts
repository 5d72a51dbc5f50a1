/**
 * The sender of one writer: ships closed batches to their buckets' leaders in ProduceLog (or PutKv)
 * requests, one per leader, and retries them without ever duplicating a row.
 *
 * Per bucket it keeps a queue of closed batches in sequence order and at most
 * `client.writer.max-inflight-requests-per-bucket` requests carrying them in flight. A request
 * takes every queued batch of a bucket it has room for: batches that queued while the bucket's
 * requests were out leave together in the next one, so a bucket allowed one request at a time
 * sends what gathered during each round trip instead of falling behind one small batch per round
 * trip. With idempotence, every batch
 * carries (writer id, bucket sequence); the server acknowledges a re-sent batch it already holds with
 * its original offset, so a retry after a timeout, a dropped connection or a leader change (the
 * retry goes to the new leader, leader-requests.ts) is safe. When a batch fails
 * with a retriable error, the batches behind it in the same bucket fail too (the server sees a
 * sequence gap): all of them go back to the queue in order and are re-sent once nothing of that
 * bucket is in flight.
 */
import { type ErrorName, TributaryError } from '../common/errors.js';
import type { TableInfo } from '../common/schema.js';
import { ApiKeys } from '../rpc/api-keys.js';
import { type BucketRecordsRequest, encodeBucketRecordsRequest } from '../rpc/bucket-records-request.js';
import type { ConnectionCore } from './connection-core.js';
import { type BucketAnswer, outcomeError, retriableAtLeader, retryBackoffMs, roundToLeaders } from './leader-requests.js';
import type { WriteBatch } from './write-batch.js';

/** ProduceLog for log tables, PutKv for primary-key tables: the same per-bucket request shape. */
export type SendApi = 'ProduceLog' | 'PutKv';

export interface SenderOptions {
  api: SendApi;
  /** PutKv partial updates: the target column positions. */
  targetColumns?: number[];
  table: TableInfo;
  acks: number;
  maxInflightPerBucket: number;
  requestMaxBytes: number;
  retries: number;
  /** client.writer.delivery-timeout: a batch is not retried once this long has passed since it was made. */
  deliveryTimeoutMs: number;
  requestTimeoutMs: number;
  idempotent: boolean;
}

interface BucketQueue {
  queued: WriteBatch[];
  /** Requests carrying batches of the bucket that are not answered yet. */
  inflight: number;
  /** Set after a retriable failure: hold sending until in-flight requests of the bucket return. */
  retrying: boolean;
}

export class Sender {
  private readonly buckets = new Map<string, BucketQueue>();
  private pending = 0;
  private idleWaiters: (() => void)[] = [];
  private failure?: TributaryError;
  private scheduled = false;
  private retryTimer?: NodeJS.Timeout;

  constructor(
    private readonly conn: ConnectionCore,
    private readonly options: SenderOptions,
    /**
     * Called once per batch when it is acknowledged (`acknowledged`: the server answered for it, so
     * its bytes have left the process and may be reused) or dropped (acks = 0, fatal failure).
     */
    private readonly onDone: (batch: WriteBatch, acknowledged: boolean) => void,
  ) {}

  get error(): TributaryError | undefined {
    return this.failure;
  }

  enqueue(batch: WriteBatch): void {
    if (this.failure) {
      this.onDone(batch, false);
      return;
    }
    let q = this.buckets.get(batch.target.key);
    if (!q) {
      q = { queued: [], inflight: 0, retrying: false };
      this.buckets.set(batch.target.key, q);
    }
    q.queued.push(batch);
    this.pending++;
    this.schedule();
  }

  /** Resolves when every enqueued batch is acknowledged; rejects with the writer's fatal error. */
  idle(): Promise<void> {
    if (this.failure) return Promise.reject(this.failure);
    if (this.pending === 0) return Promise.resolve();
    return new Promise((resolve, reject) => {
      this.idleWaiters.push(() => (this.failure ? reject(this.failure) : resolve()));
    });
  }

  close(): void {
    clearTimeout(this.retryTimer);
  }

  /**
   * Drains on the next microtask: batches closed in the same synchronous stretch share requests,
   * and a producer that only awaits microtasks (a tight append loop) still gets its batches sent
   * while it keeps encoding.
   */
  private schedule(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    queueMicrotask(() => {
      this.scheduled = false;
      this.drain();
    });
  }

  /** Builds requests from every bucket that may send, each up to the request size limit. */
  private drain(): void {
    if (this.failure) return;
    let request: WriteBatch[] = [];
    let size = 0;
    for (const q of this.buckets.values()) {
      if (q.retrying && q.inflight > 0) continue;
      q.retrying = false;
      // Whether `request` already counts as one of the bucket's requests in flight.
      let counted = false;
      while (q.queued.length > 0 && (counted || q.inflight < this.options.maxInflightPerBucket)) {
        const batch = q.queued[0];
        if (request.length > 0 && size + batch.bytes.length > this.options.requestMaxBytes) {
          this.send(request);
          request = [];
          size = 0;
          counted = false;
          continue;
        }
        if (!counted) {
          q.inflight++;
          counted = true;
        }
        q.queued.shift();
        request.push(batch);
        size += batch.bytes.length;
      }
    }
    if (request.length > 0) this.send(request);
  }

  private send(batches: WriteBatch[]): void {
    // One request entry per bucket; a bucket's batches stay in sequence order inside its records.
    const byBucket = new Map<string, WriteBatch[]>();
    for (const b of batches) {
      const list = byBucket.get(b.target.key);
      if (list) list.push(b);
      else byBucket.set(b.target.key, [b]);
    }
    const entries = [...byBucket.values()].map((list) => ({ ...list[0].target, list }));
    const { api, acks, table, requestTimeoutMs, targetColumns } = this.options;
    const round = roundToLeaders(this.conn, table, entries, (rpc, group) => {
      const request: BucketRecordsRequest = {
        acks,
        tableId: BigInt(table.tableId),
        timeoutMs: requestTimeoutMs,
        ...(api === 'PutKv' ? { targetColumns: targetColumns ?? [] } : {}),
        buckets: group.map((e) => ({
          ...(e.partitionId !== undefined ? { partitionId: BigInt(e.partitionId) } : {}),
          bucketId: e.bucket,
          batches: e.list.map((b) => b.bytes),
        })),
      };
      // Hand-encoded so that the batch bytes go to the socket without a protobuf copy.
      const encode = (): Uint8Array[] => encodeBucketRecordsRequest(request);
      const answered = api === 'PutKv' ? rpc.requestEncoded(ApiKeys.PutKv, encode) : rpc.requestEncoded(ApiKeys.ProduceLog, encode);
      if (acks === 0) {
        // Fire and forget: a batch is done once its request is handed to the connection.
        answered.catch(() => undefined);
        return Promise.resolve(group.map((): BucketAnswer => ({})));
      }
      return answered.then((resp): BucketAnswer[] => resp.bucketsResp);
    });
    void round
      .then((outcomes) =>
        Promise.all(
          outcomes.map(async (outcome, i) => {
            const err = outcomeError(outcome, 'write');
            // acks = 0 drops what could not be handed over, as it drops what the server refuses.
            if (acks === 0 || !err) this.succeeded(entries[i].list, acks !== 0);
            else this.failed(entries[i].list, err, await retriableAtLeader(this.conn, table, err));
          }),
        ),
      )
      .finally(() => this.schedule());
  }

  /** `list`: the batches of one bucket in one request. */
  private succeeded(list: WriteBatch[], acknowledged: boolean): void {
    this.buckets.get(list[0].target.key)!.inflight--;
    for (const b of list) this.finish(b, acknowledged);
  }

  /** `retriable`: whether the error allows sending the batches again (to the bucket's leader then). */
  private failed(list: WriteBatch[], err: TributaryError, retriable: boolean): void {
    const q = this.buckets.get(list[0].target.key)!;
    q.inflight--;
    if (this.failure) {
      list.forEach((b) => this.finish(b, false));
      return;
    }
    const now = Date.now();
    const exhausted = list.some((b) => b.attempts >= this.options.retries || now - b.createdMs >= this.options.deliveryTimeoutMs);
    if (!(retriable || isSequenceGapAfterRetry(err.errorName, q)) || exhausted || (!this.options.idempotent && err.errorName === 'REQUEST_TIME_OUT')) {
      this.fail(new TributaryError(err.errorName, `write to bucket ${list[0].target.bucket} failed: ${err.message}`, { cause: err }));
      return;
    }
    for (const b of list) b.attempts++;
    q.queued.unshift(...list);
    q.queued.sort((a, b) => a.sequence - b.sequence);
    q.retrying = true;
    clearTimeout(this.retryTimer);
    this.retryTimer = setTimeout(() => this.schedule(), retryBackoffMs(list[0].attempts));
  }

  private finish(batch: WriteBatch, acknowledged: boolean): void {
    this.pending--;
    this.onDone(batch, acknowledged);
    if (this.pending === 0 || this.failure) this.wakeIdle();
  }

  private fail(err: TributaryError): void {
    if (this.failure) return;
    this.failure = err;
    for (const q of this.buckets.values()) {
      for (const b of q.queued.splice(0)) this.finish(b, false);
    }
    this.wakeIdle();
  }

  private wakeIdle(): void {
    const waiters = this.idleWaiters;
    this.idleWaiters = [];
    for (const w of waiters) w();
  }
}

/** An out-of-order sequence is only a symptom when an earlier batch of the bucket is being retried. */
function isSequenceGapAfterRetry(name: ErrorName, q: BucketQueue): boolean {
  return name === 'OUT_OF_ORDER_SEQUENCE_EXCEPTION' && q.retrying;
}
