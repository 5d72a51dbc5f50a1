/**
 * `AppendWriter`: appends rows to a log table.
 *
 *   const writer = await table.newAppend().createWriter();
 *   for (const row of rows) await writer.append(row);   // resolves once buffered (waits when the buffer is full)
 *   await writer.flush();                               // resolves once everything appended is acknowledged
 *
 * Rows go to the bucket of their bucket key's hash, or, for keyless tables, to one sticky bucket per
 * partition that moves on when its batch closes (so batches stay large); each bucket accumulates
 * Arrow columns that close into a log batch. Batching, memory and retries: see bucket-writer.ts.
 *
 * A steady writer allocates almost nothing per batch: the column builder of a closed batch serves
 * the next one with the arrays it has grown (it is encoded, and so done with, when its batch
 * closes), and the payload memory of an acknowledged batch is handed to the next encoded one.
 */
import * as arrow from 'apache-arrow';
import { BucketAssigner } from '../common/bucketing.js';
import { tableOption } from '../common/config.js';
import { TributaryError } from '../common/errors.js';
import type { TableInfo } from '../common/schema.js';
import { type Row, RowReader, toInternal } from '../common/values.js';
import { encodeArrowPayload, recordBatchRows } from '../record/arrow-payload.js';
import { ColumnBatchBuilder } from '../record/column-batch-builder.js';
import type { ArrowCompression } from '../record/compression.js';
import { buildLogBatchInHeadroom, HEADER_SIZE as LOG_BATCH_HEADER_SIZE } from '../record/log-batch.js';
import { BucketWriter } from './bucket-writer.js';
import type { ConnectionCore } from './connection-core.js';
import type { WriteBatch } from './write-batch.js';

/** Builders and payload buffers kept for reuse; enough for a bucket's batches in flight to circulate. */
const SPARES = 4;

export class AppendWriter extends BucketWriter<ColumnBatchBuilder> {
  /** Keyless tables: the sticky bucket of each partition, and the one used before it. */
  private readonly sticky = new Map<number | undefined, number>();
  private readonly lastSticky = new Map<number | undefined, number>();
  private readonly assigner?: BucketAssigner;
  private readonly internal: unknown[];
  private readonly reader: RowReader;
  private readonly compression: ArrowCompression;
  private readonly zstdLevel: number;
  private readonly roundRobin: boolean;
  private readonly spareBuilders: ColumnBatchBuilder[] = [];
  private readonly payloadMemory = new RecycledMemory(SPARES);

  private constructor(conn: ConnectionCore, table: TableInfo, writerId: bigint | undefined) {
    super(conn, table, writerId, 'ProduceLog');
    if (table.schema.primaryKey) throw new TributaryError('INVALID_TABLE_EXCEPTION', 'append writers write log tables; this table has a primary key: use newUpsert()');
    if (table.bucketKeys.length > 0) this.assigner = new BucketAssigner(table);
    this.internal = new Array(table.schema.columns.length);
    this.reader = new RowReader(table.schema.columns);
    this.compression = tableOption(table.properties, 'table.log.arrow.compression.type')!.toUpperCase() as ArrowCompression;
    this.zstdLevel = Number(tableOption(table.properties, 'table.log.arrow.compression.zstd.level'));
    this.roundRobin = conn.options.enumValue('client.writer.bucket.no-key-assigner') === 'ROUND_ROBIN';
  }

  static async create(conn: ConnectionCore, table: TableInfo): Promise<AppendWriter> {
    return new AppendWriter(conn, table, await BucketWriter.writerIdFor(conn));
  }

  /** Appends one row (column name → value; see the value table in docs/client.md). */
  append(row: Row): Promise<void> {
    try {
      this.checkUsable();
      return this.appendInternal(this.reader.read(row, this.internal));
    } catch (err) {
      return Promise.reject(err);
    }
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
      const before = batch.content.estimatedSizeInBytes;
      if (isBatch) batch.content.appendRecordBatch(columns);
      else batch.content.appendColumns(columns);
      await this.grown(batch, before, this.roundRobin);
      return;
    }
    // Keyed or partitioned: each row needs its own bucket, so go row by row.
    const scratch = new ColumnBatchBuilder(this.table.schema);
    if (isBatch) scratch.appendRecordBatch(columns);
    else scratch.appendColumns(columns);
    const schemaColumns = this.table.schema.columns;
    for (const row of recordBatchRows(scratch.build(), this.table.schema)) {
      for (let i = 0; i < schemaColumns.length; i++) this.internal[i] = toInternal(schemaColumns[i], row[schemaColumns[i].name]);
      await this.appendInternal(this.internal);
    }
  }

  protected newContent(): ColumnBatchBuilder {
    return this.spareBuilders.pop() ?? new ColumnBatchBuilder(this.table.schema);
  }

  protected encode(content: ColumnBatchBuilder, sequence: number): Buffer {
    const recordCount = content.rowCount;
    const bytes = buildLogBatchInHeadroom({
      schemaId: this.table.schemaId,
      appendOnly: true,
      recordCount,
      payload: encodeArrowPayload(content.buildTransient(), this.compression, this.zstdLevel, LOG_BATCH_HEADER_SIZE, this.payloadMemory.take),
      ...(this.writerId !== undefined ? { writerId: this.writerId, batchSequence: sequence } : {}),
    });
    if (this.spareBuilders.length < SPARES) this.spareBuilders.push(content);
    return bytes;
  }

  protected override batchAcknowledged(batch: WriteBatch<ColumnBatchBuilder>): void {
    this.payloadMemory.give(batch.bytes.buffer as ArrayBuffer);
  }

  protected override batchClosed(batch: WriteBatch<ColumnBatchBuilder>): void {
    if (!this.assigner && this.sticky.get(batch.target.partitionId) === batch.target.bucket) {
      this.sticky.delete(batch.target.partitionId);
      this.lastSticky.set(batch.target.partitionId, batch.target.bucket);
    }
  }

  /** Adds `values` to its bucket's batch; waits only for a partition's id or for room (see `grown`). */
  private appendInternal(values: unknown[]): Promise<void> {
    if (this.partitions) return this.appendPartitioned(values);
    return this.appendTo(undefined, values);
  }

  private async appendPartitioned(values: unknown[]): Promise<void> {
    await this.appendTo(await this.partitionIdOf(this.partitions!.nameOf(values)), values);
  }

  private appendTo(partitionId: number | undefined, values: unknown[]): Promise<void> {
    const bucket = this.assigner ? this.assigner.bucketOf(values) : this.stickyBucket(partitionId);
    const batch = this.batchFor(partitionId, bucket);
    const before = batch.content.estimatedSizeInBytes;
    batch.content.appendInternalRow(values);
    return this.grown(batch, before, this.roundRobin);
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
}

/**
 * Memory of acknowledged payloads, handed out again: a steady writer's batches have similar sizes,
 * and reusing their memory spares allocating, zeroing and collecting megabytes per batch.
 */
class RecycledMemory {
  private readonly free: ArrayBuffer[] = [];

  constructor(private readonly maxBuffers: number) {}

  /** `size` bytes from a kept buffer large enough, else from a new one with an eighth to spare. */
  readonly take = (size: number): Uint8Array => {
    const i = this.free.findIndex((b) => b.byteLength >= size);
    const buffer = i >= 0 ? this.free.splice(i, 1)[0] : new ArrayBuffer(size + (size >> 3));
    return new Uint8Array(buffer, 0, size);
  };

  /** Keeps `buffer` for reuse; when full, in place of a smaller one. */
  give(buffer: ArrayBuffer): void {
    if (this.free.length < this.maxBuffers) {
      this.free.push(buffer);
      return;
    }
    let smallest = 0;
    for (let i = 1; i < this.free.length; i++) if (this.free[i].byteLength < this.free[smallest].byteLength) smallest = i;
    if (this.free[smallest].byteLength < buffer.byteLength) this.free[smallest] = buffer;
  }
}
