/**
 * `AppendWriter`: appends rows to a log table.
 *
 *   const writer = await table.newAppend().createWriter();
 *   for (const row of rows) await writer.append(row);   // resolves once buffered (waits when the buffer is full)
 *   await writer.flush();                               // resolves once everything appended is acknowledged
 *
 * Rows are routed to a partition (created on first write when missing) and a bucket (hash of the
 * bucket key, or one sticky bucket per partition for keyless tables, switched when its batch
 * closes), accumulated per bucket into Arrow columns, and closed into a log batch at
 * `client.writer.batch-size` bytes or after `client.writer.batch-timeout`. Buffered bytes are bounded
 * by `client.writer.buffer.memory-size`: `append` waits for room, and fails with BUFFER_EXHAUSTED
 * after `client.writer.buffer.wait-timeout`. A send that fails for good makes the writer fail: the
 * next `append` or `flush` rejects with that error.
 */
import * as arrow from 'apache-arrow';
import { BucketAssigner } from '../common/bucketing.js';
import { TributaryError } from '../common/errors.js';
import { PartitionGetter, partitionSpecFromName } from '../common/partitions.js';
import { tableOption } from '../common/config.js';
import type { TableInfo } from '../common/schema.js';
import { type Row, toInternal } from '../common/values.js';
import { encodeArrowPayload, recordBatchRows } from '../record/arrow-payload.js';
import { ColumnBatchBuilder } from '../record/column-batch-builder.js';
import type { ArrowCompression } from '../record/compression.js';
import { buildLogBatch } from '../record/log-batch.js';
import { ApiKeys } from '../rpc/api-keys.js';
import type { Connection } from './connection.js';
import { Sender } from './sender.js';
import { bucketTarget, WriteBatch } from './write-batch.js';

const ACKS: Record<string, number> = { '0': 0, '1': 1, all: -1, '-1': -1 };

export class AppendWriter {
  private readonly open = new Map<string, WriteBatch>();
  /** Keyless tables: the sticky bucket of each partition, and the one used before it. */
  private readonly sticky = new Map<number | undefined, number>();
  private readonly lastSticky = new Map<number | undefined, number>();
  private readonly nextSequence = new Map<string, number>();
  private readonly partitionIds = new Map<string, number>();
  private readonly sender: Sender;
  private readonly assigner?: BucketAssigner;
  private readonly partitions?: PartitionGetter;
  private readonly internal: unknown[];
  private readonly compression: ArrowCompression;
  private readonly zstdLevel: number;
  private readonly batchSize: number;
  private readonly lingerMs: number;
  private readonly bufferLimit: number;
  private readonly bufferWaitMs: number;
  private readonly roundRobin: boolean;
  private buffered = 0;
  private memoryWaiters: (() => void)[] = [];
  private closed = false;

  private constructor(
    private readonly conn: Connection,
    private readonly table: TableInfo,
    private readonly writerId: bigint | undefined,
  ) {
    const o = conn.options;
    if (table.schema.primaryKey) throw new TributaryError('INVALID_TABLE_EXCEPTION', 'append writers write log tables; this table has a primary key');
    if (table.bucketKeys.length > 0) this.assigner = new BucketAssigner(table);
    if (table.partitionKeys.length > 0) this.partitions = new PartitionGetter(table.schema, table.partitionKeys);
    this.internal = new Array(table.schema.columns.length);
    this.compression = tableOption(table.properties, 'table.log.arrow.compression.type')!.toUpperCase() as ArrowCompression;
    this.zstdLevel = Number(tableOption(table.properties, 'table.log.arrow.compression.zstd.level'));
    this.batchSize = o.bytes('client.writer.batch-size');
    this.lingerMs = o.durationMs('client.writer.batch-timeout');
    this.bufferLimit = o.bytes('client.writer.buffer.memory-size');
    this.bufferWaitMs = o.durationMs('client.writer.buffer.wait-timeout');
    this.roundRobin = o.enumValue('client.writer.bucket.no-key-assigner') === 'ROUND_ROBIN';
    this.sender = new Sender(
      conn,
      {
        tableId: table.tableId,
        acks: ACKS[o.raw('client.writer.acks')!],
        maxInflightPerBucket: writerId === undefined ? 1 : o.int('client.writer.max-inflight-requests-per-bucket'),
        requestMaxBytes: o.bytes('client.writer.request-max-size'),
        retries: o.int('client.writer.retries'),
        requestTimeoutMs: o.durationMs('client.request-timeout'),
        idempotent: writerId !== undefined,
      },
      (batch) => this.release(batch.reservedBytes),
    );
  }

  static async create(conn: Connection, table: TableInfo): Promise<AppendWriter> {
    let writerId: bigint | undefined;
    if (conn.options.bool('client.writer.enable-idempotence')) {
      writerId = (await (await conn.server()).request(ApiKeys.InitWriter, {})).writerId;
    }
    return new AppendWriter(conn, table, writerId);
  }

  /** Appends one row (column name → value; see the value table in docs/client.md). */
  async append(row: Row): Promise<void> {
    this.checkUsable();
    if (row === null || typeof row !== 'object') throw new TributaryError('INVALID_ROW', 'a row must be an object of column names to values');
    const columns = this.table.schema.columns;
    for (const name in row) {
      if (!columns.some((c) => c.name === name)) throw new TributaryError('INVALID_ROW', `unknown column '${name}'`);
    }
    for (let i = 0; i < columns.length; i++) this.internal[i] = toInternal(columns[i], row[columns[i].name]);
    await this.appendInternal(this.internal);
  }

  /**
   * Appends rows given as columns: an Arrow RecordBatch of the table's Arrow schema, or column
   * name → array (typed arrays of the column's Arrow width are taken as they are). For keyless,
   * unpartitioned tables the columns go to one bucket without per-row work.
   */
  async appendColumns(columns: arrow.RecordBatch | Record<string, ArrayLike<unknown> | arrow.Vector>): Promise<void> {
    this.checkUsable();
    const isBatch = columns instanceof arrow.RecordBatch;
    if (!this.assigner && !this.partitions) {
      const batch = this.batchFor(undefined, this.stickyBucket(undefined));
      const before = batch.builder.estimatedSizeInBytes;
      if (isBatch) batch.builder.appendRecordBatch(columns as arrow.RecordBatch);
      else batch.builder.appendColumns(columns as Record<string, ArrayLike<unknown>>);
      await this.grown(batch, before);
      return;
    }
    // Keyed or partitioned: each row needs its own bucket, so go row by row.
    const scratch = new ColumnBatchBuilder(this.table.schema);
    if (isBatch) scratch.appendRecordBatch(columns as arrow.RecordBatch);
    else scratch.appendColumns(columns as Record<string, ArrayLike<unknown>>);
    const schemaColumns = this.table.schema.columns;
    for (const row of recordBatchRows(scratch.build(), this.table.schema)) {
      for (let i = 0; i < schemaColumns.length; i++) this.internal[i] = toInternal(schemaColumns[i], row[schemaColumns[i].name]);
      await this.appendInternal(this.internal);
    }
  }

  /** Sends every buffered row and resolves once all rows appended so far are acknowledged. */
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

  private checkUsable(): void {
    if (this.closed) throw new TributaryError('INVALID_ARGUMENT', 'the writer is closed');
    if (this.sender.error) throw this.sender.error;
  }

  private async appendInternal(values: unknown[]): Promise<void> {
    const partitionId = this.partitions ? await this.partitionIdOf(this.partitions.nameOf(values)) : undefined;
    const bucket = this.assigner ? this.assigner.bucketOf(values) : this.stickyBucket(partitionId);
    const batch = this.batchFor(partitionId, bucket);
    const before = batch.builder.estimatedSizeInBytes;
    batch.builder.appendInternalRow(values);
    await this.grown(batch, before);
  }

  /** Accounts for what a batch grew by, closes it when full and applies backpressure. */
  private async grown(batch: WriteBatch, before: number): Promise<void> {
    const grew = batch.builder.estimatedSizeInBytes - before;
    batch.reservedBytes += grew;
    this.buffered += grew;
    if (batch.builder.estimatedSizeInBytes >= this.batchSize || this.roundRobin) this.closeBatch(batch);
    if (this.buffered >= this.bufferLimit) await this.waitForMemory();
  }

  private stickyBucket(partitionId: number | undefined): number {
    let b = this.sticky.get(partitionId);
    if (b === undefined) {
      const previous = this.lastSticky.get(partitionId);
      b = Math.floor(Math.random() * this.table.bucketCount);
      if (this.table.bucketCount > 1 && b === previous) b = (b + 1) % this.table.bucketCount;
      this.sticky.set(partitionId, b);
    }
    return b;
  }

  private batchFor(partitionId: number | undefined, bucket: number): WriteBatch {
    const target = bucketTarget(partitionId, bucket);
    let batch = this.open.get(target.key);
    if (!batch) {
      batch = new WriteBatch(target, new ColumnBatchBuilder(this.table.schema));
      this.open.set(target.key, batch);
      const b = batch;
      b.lingerTimer = setTimeout(() => this.closeBatch(b), this.lingerMs);
    }
    return batch;
  }

  /** Encodes an open batch into log batch bytes with the bucket's next sequence and hands it to the sender. */
  private closeBatch(batch: WriteBatch): void {
    if (this.open.get(batch.target.key) !== batch) return;
    this.open.delete(batch.target.key);
    clearTimeout(batch.lingerTimer);
    if (!this.assigner && this.sticky.get(batch.target.partitionId) === batch.target.bucket) {
      this.sticky.delete(batch.target.partitionId);
      this.lastSticky.set(batch.target.partitionId, batch.target.bucket);
    }
    const recordCount = batch.builder.rowCount;
    if (recordCount === 0) {
      this.release(batch.reservedBytes);
      return;
    }
    const payload = encodeArrowPayload(batch.builder.build(), this.compression, this.zstdLevel);
    const sequence = this.nextSequence.get(batch.target.key) ?? 0;
    this.nextSequence.set(batch.target.key, sequence + 1);
    batch.sequence = sequence;
    batch.bytes = buildLogBatch({
      schemaId: this.table.schemaId,
      appendOnly: true,
      recordCount,
      payload,
      ...(this.writerId !== undefined ? { writerId: this.writerId, batchSequence: sequence } : {}),
    });
    // The encoded bytes replace the builder's estimate in the memory account.
    this.buffered += batch.bytes.length - batch.reservedBytes;
    batch.reservedBytes = batch.bytes.length;
    this.sender.enqueue(batch);
  }

  private async partitionIdOf(name: string): Promise<number> {
    const known = this.partitionIds.get(name);
    if (known !== undefined) return known;
    let p = await this.conn.metadata.partition(this.table, name);
    if (!p) {
      if (!this.conn.options.bool('client.writer.dynamic-create-partition.enabled')) {
        throw new TributaryError('PARTITION_NOT_EXISTS', `partition '${name}' does not exist and dynamic partition creation is off`);
      }
      await this.conn.getAdmin().createPartition(this.table.path, partitionSpecFromName(this.table.partitionKeys, name), { ignoreIfExists: true });
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
