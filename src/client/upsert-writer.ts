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
 * row, no row for a delete); the server merges them with the stored state through the table's merge
 * engine and writes the resulting changelog. Batching, memory and retries: see bucket-writer.ts.
 */
import { TributaryError } from '../common/errors.js';
import type { TableInfo } from '../common/schema.js';
import type { Row } from '../common/values.js';
import { buildKvBatch } from '../record/kv-batch.js';
import { BucketWriter } from './bucket-writer.js';
import type { Connection } from './connection.js';
import { KvEncoding } from './kv-encoding.js';

/** KV records of one bucket. */
class KvRecords {
  readonly records: { key: Uint8Array; row: Uint8Array | null }[] = [];
  estimatedSizeInBytes = 28;

  get rowCount(): number {
    return this.records.length;
  }

  add(key: Uint8Array, row: Uint8Array | null): void {
    this.records.push({ key, row });
    this.estimatedSizeInBytes += 9 + key.length + (row?.length ?? 0);
  }
}

export class UpsertWriter extends BucketWriter<KvRecords> {
  private readonly encoding: KvEncoding;

  private constructor(conn: Connection, table: TableInfo, writerId: bigint | undefined, private readonly targetColumns: number[] | undefined) {
    super(conn, table, writerId, 'PutKv', targetColumns);
    this.encoding = new KvEncoding(table, conn.metadata);
  }

  static async create(conn: Connection, table: TableInfo, partialUpdate?: string[]): Promise<UpsertWriter> {
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
  async upsert(row: Row): Promise<void> {
    this.checkUsable();
    const values = this.encoding.internalRow(row);
    if (this.targetColumns) {
      const target = new Set(this.targetColumns);
      values.forEach((_, i) => {
        if (!target.has(i)) values[i] = null;
      });
    }
    await this.write(values, this.encoding.rowEncoder.encode(values));
  }

  /** Deletes the row of a primary key; `key` needs only the primary-key (and partition) columns. */
  async delete(key: Row): Promise<void> {
    this.checkUsable();
    await this.write(this.encoding.keyRow(key), null);
  }

  protected newContent(): KvRecords {
    return new KvRecords();
  }

  protected encode(content: KvRecords, sequence: number): Buffer {
    return buildKvBatch({
      schemaId: this.table.schemaId,
      records: content.records,
      ...(this.writerId !== undefined ? { writerId: this.writerId, batchSequence: sequence } : {}),
    });
  }

  private async write(values: unknown[], row: Uint8Array | null): Promise<void> {
    const partitionId = this.encoding.partitions ? await this.partitionIdOf(this.encoding.partitions.nameOf(values)) : undefined;
    const batch = this.batchFor(partitionId, this.encoding.assigner.bucketOf(values));
    const before = batch.content.estimatedSizeInBytes;
    batch.content.add(this.encoding.keyEncoder.encode(values), row);
    await this.grown(batch, before);
  }
}
