/**
 * The files of a tiering round in an Iceberg table (LakeWriter, lake-format.ts), one set per
 * bucket of the round:
 *
 *  - Log tables: log batches become lake batches (system columns added, columns shared,
 *    lake-batch.ts), appended every `CHUNK_BYTES` to the bucket's Parquet data file, which a thread
 *    of the writer pool encodes while the next chunk is read; after `FILE_ROWS` rows the file ends
 *    and the bucket's next rows start another.
 *  - Primary-key tables: the newest row of each changed key becomes a data row, and each key that
 *    existed before the round gets an equality delete on the primary key, which removes its older
 *    lake rows (deletes apply to files of earlier sequence numbers only, so the round's rows survive).
 *
 * Files go to `<location>/data/<partition path>/<uuid>[-deletes].parquet`, the partition tuple being
 * the partition keys' values through the spec's transforms, then the bucket (bucket[N] of the key
 * or identity(__bucket)), which is Tributary's bucket by construction (table-shape.ts).
 */
import { joinLocation } from '../../storage/object-store.js';
import crypto from 'node:crypto';
import type * as arrow from 'apache-arrow';
import { TributaryError } from '../../common/errors.js';
import { LAKE_SYSTEM_COLUMNS } from '../../common/lake.js';
import { type TableInfo, tablePathString } from '../../common/schema.js';
import type { DataType } from '../../common/types.js';
import type { LakeBucketWriter, LakeRowPositions, LakeWriter, LakeWriteResult } from '../lake-format.js';
import { type DataFile, FileContent, type PartitionValue } from './data-file.js';
import type { DataFileWriterPool, OpenDataFile } from './data-file-writer.js';
import { consecutiveOffsets, toLakeBatch } from './lake-batch.js';
import { rowGroupRowLimit } from './parquet.js';
import { currentSchema, type PartitionSpec, partitionSpecById, type TableMetadata } from './table-metadata.js';
import { parseTransform } from './transforms.js';
import type { IcebergSchema } from './types.js';

const [BUCKET_COLUMN] = LAKE_SYSTEM_COLUMNS;

/**
 * Rows per data file of a log table bucket; a bucket with more in one round gets several files.
 * A file's rows are encoded as they arrive (the writer holds a row group, not the file), so the
 * bound is there for readers: files of tens to hundreds of MB, several row groups each.
 */
const FILE_ROWS = 8_000_000;
/**
 * Lake batches of a bucket collected before they go to its data file as one Arrow IPC stream:
 * large enough that messages to the writer thread cost nothing, small enough that reading and
 * encoding overlap from the first rows on. While the writer encodes one chunk of a file, the next
 * is read.
 */
const CHUNK_BYTES = 2 << 20;

/** The files a round wrote, and when they are durable (what the commit waits for). */
interface RoundFiles {
  files: DataFile[];
  durable(): Promise<void>;
}

/** The files of each result of an IcebergRoundWriter. */
const roundFiles = new WeakMap<LakeWriteResult, RoundFiles>();

/** The files behind `written`; INVALID_ARGUMENT when another format's writer made it. */
export function filesOf(written: LakeWriteResult): RoundFiles {
  const files = roundFiles.get(written);
  if (!files) throw new TributaryError('INVALID_ARGUMENT', 'the write result is not of an Iceberg writer');
  return files;
}

export class IcebergRoundWriter implements LakeWriter {
  readonly lakeSchema: IcebergSchema;
  readonly deleteSchema?: IcebergSchema;
  readonly spec: PartitionSpec;
  /** Rows per row group of the data files (write.parquet.row-group-row-limit); the writer's default when absent. */
  readonly maxRowGroupRows?: number;
  private readonly location: string;
  private readonly buckets: IcebergBucketWriter[] = [];
  private readonly written: Promise<DataFile>[] = [];
  /** Per data file complete but maybe still syncing: settles once it is durable. */
  private readonly syncing: Promise<void>[] = [];

  constructor(
    readonly info: TableInfo,
    metadata: TableMetadata,
    readonly pool: DataFileWriterPool,
  ) {
    this.lakeSchema = currentSchema(metadata);
    this.location = metadata.location;
    this.spec = partitionSpecById(metadata, metadata.defaultSpecId);
    this.maxRowGroupRows = rowGroupRowLimit(metadata.properties, tablePathString(info.path));
    const pk = info.schema.primaryKey ?? [];
    if (pk.length > 0) {
      const ids = new Set(pk);
      this.deleteSchema = { type: 'struct', 'schema-id': this.lakeSchema['schema-id'], fields: this.lakeSchema.fields.filter((f) => ids.has(f.name)) };
    }
  }

  bucket(bucket: number, partitionValues: ReadonlyMap<string, unknown>): LakeBucketWriter {
    const writer = new IcebergBucketWriter(this, bucket, partitionValues);
    this.buckets.push(writer);
    return writer;
  }

  async complete(): Promise<LakeWriteResult> {
    const files = await Promise.all(this.written);
    const deleteFiles = files.filter((f) => f.content !== FileContent.DATA).length;
    const result: LakeWriteResult = {
      rows: files.reduce((n, f) => n + (f.content === FileContent.DATA ? f.recordCount : 0), 0),
      dataFiles: files.length - deleteFiles,
      deleteFiles,
      partitions: files.map((f) => f.partition),
    };
    roundFiles.set(result, { files, durable: async () => void (await Promise.all(this.syncing)) });
    return result;
  }

  async abort(): Promise<void> {
    await Promise.all(this.buckets.map((b) => b.abort()));
  }

  /** Keeps a file being written for `complete()`; its failure surfaces there. */
  track(file: Promise<DataFile>): void {
    file.catch(() => {});
    this.written.push(file);
  }

  /** Keeps a data file's durability for the commit; its failure surfaces there, or at `complete()` first. */
  trackDurable(durable: Promise<void>): void {
    durable.catch(() => {});
    this.syncing.push(durable);
  }

  filePath(partitionPath: readonly string[], content: FileContent): string {
    return joinLocation(this.location, 'data', ...partitionPath, `${crypto.randomUUID()}${content === FileContent.DATA ? '' : '-deletes'}.parquet`);
  }
}

interface OpenFile {
  sink: OpenDataFile;
  /** Rows sent to it so far. */
  rows: number;
  /** The chunk the writer is encoding. */
  appending?: Promise<void>;
}

class IcebergBucketWriter implements LakeBucketWriter {
  private readonly partition: PartitionValue[];
  private readonly partitionPath: string[];
  /** Log tables: lake batches not sent to the data file yet, and their bytes. */
  private pending: arrow.RecordBatch[] = [];
  private pendingBytes = 0;
  /** Log tables: the data file being written. */
  private file?: OpenFile;

  constructor(
    private readonly round: IcebergRoundWriter,
    private readonly bucket: number,
    partitionValues: ReadonlyMap<string, unknown>,
  ) {
    const { spec, lakeSchema, info } = round;
    const columns = new Map(info.schema.columns.map((c) => [c.name, c]));
    const sources = spec.fields.map((f) => lakeSchema.fields.find((x) => x.id === f['source-id'])!);
    this.partition = spec.fields.map((f, i) => {
      const source = sources[i];
      if (source.name === BUCKET_COLUMN || f.transform.startsWith('bucket')) return bucket;
      const column = columns.get(source.name);
      if (!column || !partitionValues.has(source.name)) throw new TributaryError('INVALID_TABLE_EXCEPTION', `lake partition field ${f.name} has no value`);
      return parseTransform(f.transform).apply(source.type, sourceValue(column.type, partitionValues.get(source.name)) as never);
    });
    this.partitionPath = spec.fields.map((f, i) => {
      const source = sources[i];
      const text = f.transform.startsWith('bucket') || source.name === BUCKET_COLUMN ? String(bucket) : parseTransform(f.transform).toHumanString(source.type, this.partition[i] as never);
      return `${f.name}=${encodeURIComponent(text)}`;
    });
  }

  async append(batch: arrow.RecordBatch, firstOffset: bigint, timestampMs: number): Promise<void> {
    const rows = batch.numRows;
    const timestamps = new BigInt64Array(rows).fill(BigInt(timestampMs) * 1000n);
    const lake = toLakeBatch(batch, this.round.info, this.round.lakeSchema, { bucket: this.bucket, offsets: consecutiveOffsets(firstOffset, rows), timestamps });
    this.pending.push(lake);
    this.pendingBytes += lake.data.byteLength;
    if (this.pendingBytes >= CHUNK_BYTES) await this.sendChunk();
  }

  writeChanges(rows: arrow.RecordBatch | undefined, positions: LakeRowPositions, deletedKeys: arrow.RecordBatch | undefined): void {
    const { info, lakeSchema, deleteSchema } = this.round;
    if (rows && rows.numRows > 0) {
      this.write([toLakeBatch(rows, info, lakeSchema, { bucket: this.bucket, ...positions })], FileContent.DATA, lakeSchema);
    }
    if (deletedKeys && deletedKeys.numRows > 0) {
      const n = deletedKeys.numRows;
      const batch = toLakeBatch(deletedKeys, info, deleteSchema!, { bucket: this.bucket, offsets: new BigInt64Array(n), timestamps: new BigInt64Array(n) });
      this.write([batch], FileContent.EQUALITY_DELETES, deleteSchema!);
    }
  }

  async flush(): Promise<void> {
    if (this.pending.length > 0) await this.sendChunk();
    if (this.file) this.finishFile();
  }

  /** Gives up the data file still being written. */
  async abort(): Promise<void> {
    await this.file?.sink.abort().catch(() => {});
  }

  /**
   * Sends the pending lake batches to the data file (opened on the first chunk), then waits for
   * the writer to finish the chunk before: the writer always has the next chunk at hand, and
   * reading runs at most two chunks ahead of it.
   */
  private async sendChunk(): Promise<void> {
    const round = this.round;
    const file = (this.file ??= { sink: round.pool.open(round.filePath(this.partitionPath, FileContent.DATA), round.lakeSchema, round.maxRowGroupRows), rows: 0 });
    const batches = this.pending.splice(0);
    this.pendingBytes = 0;
    file.rows += batches.reduce((n, b) => n + b.numRows, 0);
    const previous = file.appending;
    file.appending = file.sink.append(batches);
    // Its failure is seen by the next append or by finish.
    file.appending.catch(() => {});
    if (file.rows >= FILE_ROWS) this.finishFile();
    await previous;
  }

  /** Completes the data file once the writer has its last chunk; the next chunk opens another. */
  private finishFile(): void {
    const file = this.file!;
    this.file = undefined;
    const completed = file.sink.complete();
    const partition = this.partition;
    this.round.track(completed.then(({ file: w }) => ({ ...w, content: FileContent.DATA, partition })));
    this.round.trackDurable(completed.then((c) => c.durable));
  }

  /** Writes a primary-key table's data or delete file in one go. */
  private write(batches: arrow.RecordBatch[], content: FileContent, schema: IcebergSchema): void {
    const partition = this.partition;
    this.round.track(
      this.round.pool.write({ batches, path: this.round.filePath(this.partitionPath, content), schema, maxRowGroupRows: this.round.maxRowGroupRows }).then((w) => ({
        ...w,
        content,
        partition,
        ...(content === FileContent.EQUALITY_DELETES ? { equalityIds: schema.fields.map((f) => f.id) } : {}),
      })),
    );
  }
}

/** An internal value (values.ts) as Iceberg transforms take it. */
function sourceValue(type: DataType, v: unknown): PartitionValue {
  if (v === null || v === undefined) return null;
  return type.kind === 'TIME' ? BigInt(v as number) : (v as PartitionValue);
}
