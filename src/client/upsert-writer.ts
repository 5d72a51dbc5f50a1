/**
 * `UpsertWriter`: writes a primary-key table.
 *
 *   const writer = await table.newUpsert().createWriter();
 *   await writer.upsert({ id: 1n, name: 'ann', score: 10 });
 *   await writer.delete({ id: 2n });                // only the primary key is needed
 *   await writer.flush();
 *
 *   const partial = await table.newUpsert().partialUpdate(['id', 'score']).createWriter();
 *   await partial.upsert({ id: 1n, score: 11 });   // other columns keep their stored values
 *
 * Rows go to the bucket of their bucket key's hash as KV records (encoded primary key + compacted
 * row, no row for a delete), encoded straight into the bytes of that bucket's KV batch; the server
 * merges them with the stored state through the table's merge engine and writes the resulting
 * changelog. Batching, memory and retries: see bucket-writer.ts.
 */
import { TributaryError } from '../common/errors.js';
import type { TableInfo } from '../common/schema.js';
import type { Row } from '../common/values.js';
import { KvBatchBuilder } from '../record/kv-batch.js';
import { BucketWriter } from './bucket-writer.js';
import type { ConnectionCore } from './connection-core.js';
import { KvEncoding } from './kv-encoding.js';
import type { WriteBatch } from './write-batch.js';

/** Where a bucket's batch starts; it doubles as it fills, up to client.writer.batch-size. */
const INITIAL_BATCH_BYTES = 16 * 1024;

/** KV records of one bucket, laid out as the wire bytes of its KV batch as they come. */
class KvRecords {
  readonly batch = new KvBatchBuilder(INITIAL_BATCH_BYTES);

  get rowCount(): number {
    return this.batch.recordCount;
  }

  get estimatedSizeInBytes(): number {
    return this.batch.sizeInBytes;
  }
}

export class UpsertWriter extends BucketWriter<KvRecords> {
  private readonly encoding: KvEncoding;
  /** Non-target columns of a partial update, which are sent as null. */
  private readonly othersOfPartial?: number[];
  /** The open batch of each bucket of an unpartitioned table, so that rows find theirs without a lookup. */
  private readonly openByBucket: (WriteBatch<KvRecords> | undefined)[] = [];

  private constructor(conn: ConnectionCore, table: TableInfo, writerId: bigint | undefined, targetColumns: number[] | undefined) {
    super(conn, table, writerId, 'PutKv', targetColumns);
    this.encoding = new KvEncoding(table, conn.metadata);
    if (targetColumns) this.othersOfPartial = table.schema.columns.map((_, i) => i).filter((i) => !targetColumns.includes(i));
  }

  static async create(conn: ConnectionCore, table: TableInfo, partialUpdate?: string[]): Promise<UpsertWriter> {
    let targetColumns: number[] | undefined;
    if (partialUpdate) {
      const pk = table.schema.primaryKey ?? [];
      for (const k of pk) {
        if (!partialUpdate.includes(k)) throw new TributaryError('INVALID_TARGET_COLUMN', `partial update columns must include the primary key column '${k}'`);
      }
      targetColumns = partialUpdate.map((name) => {
        const i = table.schema.columns.findIndex((c) => c.name === name);
        if (i < 0) throw new TributaryError('INVALID_TARGET_COLUMN', `'${name}' is not a column of '${table.path.database}.${table.path.table}'`);
        return i;
      });
    }
    if (!table.schema.primaryKey) throw new TributaryError('NON_PRIMARY_KEY_TABLE_EXCEPTION', `table '${table.path.database}.${table.path.table}' has no primary key: use newAppend()`);
    return new UpsertWriter(conn, table, await BucketWriter.writerIdFor(conn), targetColumns);
  }

  /** Inserts or updates the row of its primary key (with partial update: only the target columns). */
  upsert(row: Row): Promise<void> {
    try {
      this.checkUsable();
      const values = this.encoding.internalRow(row);
      if (this.othersOfPartial) for (const i of this.othersOfPartial) values[i] = null;
      return this.write(values, true);
    } catch (err) {
      return Promise.reject(err);
    }
  }

  /** Deletes the row of a primary key; `key` needs only the primary-key (and partition) columns. */
  delete(key: Row): Promise<void> {
    try {
      this.checkUsable();
      return this.write(this.encoding.keyRow(key), false);
    } catch (err) {
      return Promise.reject(err);
    }
  }

  protected newContent(): KvRecords {
    return new KvRecords();
  }

  protected encode(content: KvRecords, sequence: number): Buffer {
    return this.writerId !== undefined ? content.batch.finish(this.table.schemaId, this.writerId, sequence) : content.batch.finish(this.table.schemaId);
  }

  protected override batchClosed(batch: WriteBatch<KvRecords>): void {
    if (this.openByBucket[batch.target.bucket] === batch) this.openByBucket[batch.target.bucket] = undefined;
  }

  /** Adds the record of `values` (its row too for an upsert) to its bucket's batch. */
  private write(values: unknown[], upsert: boolean): Promise<void> {
    if (this.encoding.partitions) return this.writePartitioned(values, upsert);
    const key = this.encoding.keyEncoder.encodeView(values);
    const bucket = this.encoding.bucketOfKey(values, key);
    let batch = this.openByBucket[bucket];
    if (!batch) this.openByBucket[bucket] = batch = this.batchFor(undefined, bucket);
    return this.add(batch, key, upsert ? this.encoding.rowEncoder.encodeView(values) : null);
  }

  private async writePartitioned(values: unknown[], upsert: boolean): Promise<void> {
    const partitionId = await this.partitionIdOf(this.encoding.partitions!.nameOf(values));
    const key = this.encoding.keyEncoder.encodeView(values);
    const batch = this.batchFor(partitionId, this.encoding.bucketOfKey(values, key));
    await this.add(batch, key, upsert ? this.encoding.rowEncoder.encodeView(values) : null);
  }

  private add(batch: WriteBatch<KvRecords>, key: Uint8Array, row: Uint8Array | null): Promise<void> {
    const before = batch.content.estimatedSizeInBytes;
    batch.content.batch.add(key, row);
    return this.grown(batch, before);
  }
}
