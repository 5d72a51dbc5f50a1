/**
 * The sender of one append writer: ships closed batches to the server in ProduceLog requests and
 * retries them without ever duplicating a row.
 *
 * Per bucket it keeps a queue of closed batches in sequence order and at most
 * `client.writer.max-inflight-requests-per-bucket` of them in flight. With idempotence, every batch
 * carries (writer id, bucket sequence); the server acknowledges a re-sent batch it already holds with
 * its original offset, so a retry after a timeout or a dropped connection is safe. When a batch fails
 * with a retriable error, the batches behind it in the same bucket fail too (the server sees a
 * sequence gap): all of them go back to the queue in order and are re-sent once nothing of that
 * bucket is in flight.
 */
import { type ErrorName, errorFromCode, TributaryError } from '../common/errors.js';
import { ApiKeys } from '../rpc/api-keys.js';
import { type BucketRecordsRequest, encodeBucketRecordsRequest } from '../rpc/bucket-records-request.js';
import type { ConnectionCore } from './connection-core.js';
import { hasError } from './responses.js';
import type { WriteBatch } from './write-batch.js';

/** ProduceLog for log tables, PutKv for primary-key tables: the same per-bucket request shape. */
export type SendApi = 'ProduceLog' | 'PutKv';

export interface SenderOptions {
  api: SendApi;
  /** PutKv partial updates: the target column positions. */
  targetColumns?: number[];
  tableId: number;
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
  inflight: number;
  /** Set after a retriable failure: hold sending until in-flight requests of the bucket return. */
  retrying: boolean;
}

const RETRY_BACKOFF_MS = 100;
const MAX_BACKOFF_MS = 2000;

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
      while (q.queued.length > 0 && q.inflight < this.options.maxInflightPerBucket) {
        const batch = q.queued[0];
        if (request.length > 0 && size + batch.bytes.length > this.options.requestMaxBytes) {
          this.send(request);
          request = [];
          size = 0;
        }
        q.queued.shift();
        q.inflight++;
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
    const entries = [...byBucket.values()];
    const request: BucketRecordsRequest = {
      acks: this.options.acks,
      tableId: BigInt(this.options.tableId),
      timeoutMs: this.options.requestTimeoutMs,
      ...(this.options.api === 'PutKv' ? { targetColumns: this.options.targetColumns ?? [] } : {}),
      buckets: entries.map((list) => ({
        ...(list[0].target.partitionId !== undefined ? { partitionId: BigInt(list[0].target.partitionId) } : {}),
        bucketId: list[0].target.bucket,
        batches: list.map((b) => b.bytes),
      })),
    };
    type BucketResults = { bucketsResp: { errorCode?: number; errorMessage?: string }[] };
    // Hand-encoded so that the batch bytes go to the socket without a protobuf copy.
    const call = async (): Promise<BucketResults> => {
      const rpc = await this.conn.server();
      const encode = (): Uint8Array[] => encodeBucketRecordsRequest(request);
      return this.options.api === 'PutKv' ? rpc.requestEncoded(ApiKeys.PutKv, encode) : rpc.requestEncoded(ApiKeys.ProduceLog, encode);
    };
    if (this.options.acks === 0) {
      // Fire and forget: the batches count as done once handed to the connection.
      call().catch(() => undefined);
      for (const list of entries) list.forEach((b) => this.succeeded(b, false));
      this.schedule();
      return;
    }
    call()
      .then(
        (resp) => {
          resp.bucketsResp.forEach((r, i) => {
            const list = entries[i];
            if (!hasError(r)) list.forEach((b) => this.succeeded(b, true));
            else this.failed(list, errorFromCode(r.errorCode!, r.errorMessage ?? 'write failed'));
          });
        },
        (err: unknown) => {
          const e = err instanceof TributaryError ? err : new TributaryError('NETWORK_EXCEPTION', String(err));
          for (const list of entries) this.failed(list, e);
        },
      )
      .finally(() => this.schedule());
  }

  private succeeded(batch: WriteBatch, acknowledged: boolean): void {
    const q = this.buckets.get(batch.target.key)!;
    q.inflight--;
    this.finish(batch, acknowledged);
  }

  private failed(list: WriteBatch[], err: TributaryError): void {
    const q = this.buckets.get(list[0].target.key)!;
    q.inflight -= list.length;
    if (this.failure) {
      list.forEach((b) => this.finish(b, false));
      return;
    }
    const retriable = err.retriable || isSequenceGapAfterRetry(err.errorName, q);
    const now = Date.now();
    const exhausted = list.some((b) => b.attempts >= this.options.retries || now - b.createdMs >= this.options.deliveryTimeoutMs);
    if (!retriable || exhausted || (!this.options.idempotent && err.errorName === 'REQUEST_TIME_OUT')) {
      this.fail(new TributaryError(err.errorName, `write to bucket ${list[0].target.bucket} failed: ${err.message}`, { cause: err }));
      return;
    }
    for (const b of list) b.attempts++;
    q.queued.unshift(...list);
    q.queued.sort((a, b) => a.sequence - b.sequence);
    q.retrying = true;
    const backoff = Math.min(MAX_BACKOFF_MS, RETRY_BACKOFF_MS * 2 ** Math.min(list[0].attempts - 1, 5));
    clearTimeout(this.retryTimer);
    this.retryTimer = setTimeout(() => this.schedule(), backoff);
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
