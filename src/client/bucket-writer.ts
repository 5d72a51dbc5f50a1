/**
 * What append and upsert writers share: rows are routed to a partition (created on first write when
 * missing) and a bucket, accumulated per bucket, and closed into a batch at
 * `client.writer.batch-size` bytes or after `client.writer.batch-timeout`; each closed batch gets the
 * bucket's next sequence and goes to the Sender. Buffered bytes are bounded by
 * `client.writer.buffer.memory-size`: writes wait for room, and fail with BUFFER_EXHAUSTED after
 * `client.writer.buffer.wait-timeout`. A send that fails for good makes the writer fail: the next
 * write or `flush` rejects with that error.
 */
import { PartitionGetter, partitionSpecFromName } from '../common/partitions.js';
import { TributaryError } from '../common/errors.js';
import type { TableInfo } from '../common/schema.js';
import { ApiKeys } from '../rpc/api-keys.js';
import { Admin } from './admin.js';
import type { ConnectionCore } from './connection-core.js';
import { Sender, type SendApi } from './sender.js';
import { type BatchContent, type BucketTarget, bucketTarget, WriteBatch } from './write-batch.js';

const ACKS: Record<string, number> = { '0': 0, '1': 1, all: -1, '-1': -1 };
/** What a write that need not wait returns: one settled promise for all, not one per row. */
const WRITTEN: Promise<void> = Promise.resolve();

export abstract class BucketWriter<C extends BatchContent> {
  private readonly open = new Map<string, WriteBatch<C>>();
  /** Each partition's bucket targets, made once: a row's lookup of its batch allocates nothing. */
  private readonly targets = new Map<number | undefined, BucketTarget[]>();
  private readonly nextSequence = new Map<string, number>();
  private readonly partitionIds = new Map<string, number>();
  private readonly sender: Sender;
  protected readonly partitions?: PartitionGetter;
  private readonly batchSize: number;
  private readonly lingerMs: number;
  private readonly bufferLimit: number;
  private readonly bufferWaitMs: number;
  private buffered = 0;
  private memoryWaiters: (() => void)[] = [];
  private closed = false;

  protected constructor(
    protected readonly conn: ConnectionCore,
    protected readonly table: TableInfo,
    protected readonly writerId: bigint | undefined,
    api: SendApi,
    targetColumns?: number[],
  ) {
    const o = conn.options;
    if (table.partitionKeys.length > 0) this.partitions = new PartitionGetter(table.schema, table.partitionKeys);
    this.batchSize = o.bytes('client.writer.batch-size');
    this.lingerMs = o.durationMs('client.writer.batch-timeout');
    this.bufferLimit = o.bytes('client.writer.buffer.memory-size');
    this.bufferWaitMs = o.durationMs('client.writer.buffer.wait-timeout');
    this.sender = new Sender(
      conn,
      {
        api,
        ...(targetColumns ? { targetColumns } : {}),
        table,
        acks: ACKS[o.raw('client.writer.acks')!],
        maxInflightPerBucket: writerId === undefined ? 1 : o.int('client.writer.max-inflight-requests-per-bucket'),
        requestMaxBytes: o.bytes('client.writer.request-max-size'),
        retries: o.int('client.writer.retries'),
        deliveryTimeoutMs: o.durationMs('client.writer.delivery-timeout'),
        requestTimeoutMs: o.durationMs('client.request-timeout'),
        idempotent: writerId !== undefined,
      },
      (batch, acknowledged) => {
        this.release(batch.reservedBytes);
        if (acknowledged) this.batchAcknowledged(batch as WriteBatch<C>);
      },
    );
  }

  /** A writer id from the server when idempotence is on (the default). */
  protected static async writerIdFor(conn: ConnectionCore): Promise<bigint | undefined> {
    if (!conn.options.bool('client.writer.enable-idempotence')) return undefined;
    return (await conn.withCoordinator((rpc) => rpc.request(ApiKeys.InitWriter, {}))).writerId;
  }

  /** A new, empty batch content. */
  protected abstract newContent(): C;

  /** The wire bytes of a closed batch, carrying the writer id and `sequence`. */
  protected abstract encode(content: C, sequence: number): Buffer;

  /** Called when a batch closes (sticky bucket assignment moves on). */
  protected batchClosed(_batch: WriteBatch<C>): void {}

  /** Called when the server acknowledged a batch: nothing reads its bytes any more. */
  protected batchAcknowledged(_batch: WriteBatch<C>): void {}

  /** Sends every buffered row and resolves once all rows written so far are acknowledged. */
  async flush(): Promise<void> {
    for (const batch of [...this.open.values()]) this.closeBatch(batch);
    await this.sender.idle();
  }

  /** Flushes, then releases the writer. */
  async close(): Promise<void> {
    if (this.closed) return;
    try {
      await this.flush();
    } finally {
      this.closed = true;
      this.sender.close();
    }
  }

  protected checkUsable(): void {
    if (this.closed) throw new TributaryError('INVALID_ARGUMENT', 'the writer is closed');
    if (this.sender.error) throw this.sender.error;
  }

  protected batchFor(partitionId: number | undefined, bucket: number): WriteBatch<C> {
    let targets = this.targets.get(partitionId);
    if (!targets) this.targets.set(partitionId, (targets = []));
    const target = (targets[bucket] ??= bucketTarget(partitionId, bucket));
    let batch = this.open.get(target.key);
    if (!batch) {
      const b = new WriteBatch(target, this.newContent());
      b.lingerTimer = setTimeout(() => this.closeBatch(b), this.lingerMs);
      this.open.set(target.key, b);
      batch = b;
    }
    return batch;
  }

  /**
   * Accounts for what a batch grew by, closes it when full (or when `closeNow`) and applies
   * backpressure. Most rows neither close a batch nor wait for memory: they get WRITTEN, so that
   * a steady writer makes no promise per row.
   */
  protected grown(batch: WriteBatch<C>, before: number, closeNow = false): Promise<void> {
    const grew = batch.content.estimatedSizeInBytes - before;
    batch.reservedBytes += grew;
    this.buffered += grew;
    if (closeNow || batch.content.estimatedSizeInBytes >= this.batchSize) return this.closeAndYield(batch);
    return this.buffered >= this.bufferLimit ? this.waitForMemory() : WRITTEN;
  }

  private async closeAndYield(batch: WriteBatch<C>): Promise<void> {
    this.closeBatch(batch);
    // Let the event loop run once per closed batch: socket writes drain and acknowledgements
    // arrive while a tight write loop keeps producing, so client and server overlap.
    await new Promise<void>((resolve) => setImmediate(resolve));
    if (this.buffered >= this.bufferLimit) await this.waitForMemory();
  }

  /** Encodes an open batch with the bucket's next sequence and hands it to the sender. */
  private closeBatch(batch: WriteBatch<C>): void {
    if (this.open.get(batch.target.key) !== batch) return;
    this.open.delete(batch.target.key);
    clearTimeout(batch.lingerTimer);
    this.batchClosed(batch);
    if (batch.content.rowCount === 0) {
      this.release(batch.reservedBytes);
      return;
    }
    const sequence = this.nextSequence.get(batch.target.key) ?? 0;
    this.nextSequence.set(batch.target.key, sequence + 1);
    batch.sequence = sequence;
    batch.bytes = this.encode(batch.content, sequence);
    // The encoded bytes replace the estimate in the memory account.
    this.buffered += batch.bytes.length - batch.reservedBytes;
    batch.reservedBytes = batch.bytes.length;
    this.sender.enqueue(batch);
  }

  /** The id of a partition by name, creating it first when dynamic creation is on. */
  protected async partitionIdOf(name: string): Promise<number> {
    const known = this.partitionIds.get(name);
    if (known !== undefined) return known;
    let p = await this.conn.metadata.partition(this.table, name);
    if (!p) {
      if (!this.conn.options.bool('client.writer.dynamic-create-partition.enabled')) {
        throw new TributaryError('PARTITION_NOT_EXISTS', `partition '${name}' does not exist and dynamic partition creation is off`);
      }
      await new Admin(this.conn).createPartition(this.table.path, partitionSpecFromName(this.table.partitionKeys, name), { ignoreIfExists: true });
      p = await this.conn.metadata.partition(this.table, name, true);
      if (!p) throw new TributaryError('PARTITION_NOT_EXISTS', `partition '${name}' could not be created`);
    }
    this.partitionIds.set(name, p.partitionId);
    return p.partitionId;
  }

  private async waitForMemory(): Promise<void> {
    // Everything open goes out now so that acknowledgements can free memory.
    for (const batch of [...this.open.values()]) this.closeBatch(batch);
    const deadline = Date.now() + this.bufferWaitMs;
    while (this.buffered >= this.bufferLimit) {
      if (this.sender.error) throw this.sender.error;
      const remaining = deadline - Date.now();
      if (remaining <= 0) {
        throw new TributaryError('BUFFER_EXHAUSTED', `writer buffer of ${this.bufferLimit} bytes stayed full for ${this.bufferWaitMs} ms (client.writer.buffer.wait-timeout)`);
      }
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, remaining);
        this.memoryWaiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
  }

  private release(bytes: number): void {
    this.buffered -= bytes;
    const waiters = this.memoryWaiters;
    this.memoryWaiters = [];
    for (const w of waiters) w();
  }
}
