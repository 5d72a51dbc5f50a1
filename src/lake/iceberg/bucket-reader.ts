/**
 * The rows of one bucket of an Iceberg snapshot in offset order (LakeSnapshotReader,
 * lake-format.ts): what a LogScanner subscription below the log start reads before it continues in
 * the log (client/lake-backfill.ts, DESIGN.md §6).
 *
 *   plan     planScan of the snapshot (once per reader, shared by the buckets read from it): the
 *            data files, each with the delete files that apply to it
 *   choose   the data files of the bucket's lake partition (the bucket field, identity(__bucket)
 *            or bucket[N] of the bucket key, equals the bucket; identity fields of partition keys
 *            equal the partition's values) whose __offset bounds meet [from, end)
 *   group    files in order of their lowest __offset; files whose offset ranges overlap form one
 *            group (tiering writes disjoint ranges, so a group is mostly one file)
 *   read     one group at a time, each Parquet file whole (parquet-wasm → Arrow IPC →
 *            apache-arrow), dropping rows outside [from, end) and rows deleted by
 *              position deletes   (file_path, pos) rows that name the file
 *              equality deletes   key → the highest sequence number of a delete file of the
 *                                 bucket holding that key; a row is deleted when the data
 *                                 sequence number of its file is lower
 *            then ordering the rest by __offset
 *   present  the reader's columns, matched by name to lake fields and by field id
 *            (`PARQUET:field_id`, else the name) to the file's columns; a column the file lacks is
 *            null; the system columns are dropped. Rows come out as runs of consecutive offsets
 *            with one commit timestamp (__timestamp in ms), the shape of log batches, so a log
 *            table's lake rows come back in the batches they were written in.
 *
 * Memory holds one group's files at a time.
 */
import { createRequire } from 'node:module';
import * as arrow from 'apache-arrow';
import { TributaryError } from '../../common/errors.js';
import { LAKE_SYSTEM_COLUMNS } from '../../common/lake.js';
import { partitionSpecFromName, partitionValueOf } from '../../common/partitions.js';
import type { TableInfo } from '../../common/schema.js';
import { sameArrowType } from '../../record/arrow-schema.js';
import { nullColumn } from '../../record/batch-evolution.js';
import type { LakeBucketRows, LakeRowRun, LakeSnapshotReader } from '../lake-format.js';
import type { LoadedTable } from './catalog.js';
import { type DataFile, FileContent, ManifestContent, type PartitionValue } from './data-file.js';
import { isLive, planScan, readManifest, readManifestList, readMetadataFile, type ScanTask } from './scan.js';
import { fromSingleValue } from './single-value.js';
import { currentSchema, partitionSpecById, snapshotById, type TableMetadata } from './table-metadata.js';
import type { IcebergField } from './types.js';

const [BUCKET_COLUMN, OFFSET_COLUMN, TIMESTAMP_COLUMN] = LAKE_SYSTEM_COLUMNS;

const FIELD_ID_KEY = 'PARQUET:field_id';
/** Field ids of position delete files (spec: "Reserved Field IDs"). */
const DELETE_FILE_PATH_ID = 2147483546;
const DELETE_POS_ID = 2147483545;
/** Rows per Arrow batch decoded from Parquet. */
const READ_BATCH_ROWS = 65_536;

/** A planned snapshot, shared by the buckets read from it. */
interface SnapshotPlan {
  snapshotId: bigint;
  metadata: TableMetadata;
  tasks: ScanTask[];
  /** Data sequence numbers of the snapshot's delete files by location, read when first needed. */
  deleteSequenceNumbers?: Promise<Map<string, bigint>>;
}

/** Groups of tasks whose __offset ranges overlap, in order of their lowest offset. */
function offsetGroups(tasks: ScanTask[], reader: FileReader): ScanTask[][] {
  const ranged = tasks.map((task) => ({ task, ...reader.offsetRange(task.file) }));
  ranged.sort((a, b) => (a.lower === b.lower ? 0 : a.lower === undefined || (b.lower !== undefined && a.lower < b.lower) ? -1 : 1));
  const groups: ScanTask[][] = [];
  let upper: bigint | undefined; // of the last group; undefined: unbounded
  for (const r of ranged) {
    const last = groups.length === 0 ? undefined : groups[groups.length - 1];
    if (last && (upper === undefined || r.lower === undefined || r.lower <= upper)) {
      last.push(r.task);
      if (upper !== undefined && (r.upper === undefined || r.upper > upper)) upper = r.upper;
    } else {
      groups.push([r.task]);
      upper = r.upper;
    }
  }
  return groups;
}

/** Reads a snapshot's files for one scanner: the lake fields it needs and how file columns map to them. */
class FileReader {
  private readonly fields: Map<string, IcebergField>;
  readonly offsetId: number;
  readonly timestampId: number;

  constructor(
    readonly plan: SnapshotPlan,
    private readonly table: TableInfo,
    private readonly schema: () => arrow.Schema,
  ) {
    this.fields = new Map(currentSchema(plan.metadata).fields.map((f) => [f.name, f]));
    this.offsetId = this.fieldId(OFFSET_COLUMN);
    this.timestampId = this.fieldId(TIMESTAMP_COLUMN);
  }

  private fieldId(name: string): number {
    const field = this.fields.get(name);
    if (!field) throw new TributaryError('INVALID_TABLE_EXCEPTION', `the lake table of '${this.table.path.database}.${this.table.path.table}' has no column ${name}`);
    return field.id;
  }

  /** Whether a file's partition tuple is that of the bucket (and partition, key → value). */
  inPartition(tuple: readonly PartitionValue[], bucket: number, partition: Record<string, string>): boolean {
    const { metadata } = this.plan;
    const spec = partitionSpecById(metadata, metadata.defaultSpecId);
    if (tuple.length !== spec.fields.length) return false;
    return spec.fields.every((f, i) => {
      const source = metadata.schemas.flatMap((s) => s.fields).find((x) => x.id === f['source-id']);
      if (source?.name === BUCKET_COLUMN || f.transform.startsWith('bucket[')) return tuple[i] === bucket;
      const column = this.table.schema.columns.find((c) => c.name === source?.name);
      if (f.transform !== 'identity' || !column || !this.table.partitionKeys.includes(column.name)) return true;
      const value = tuple[i];
      return value !== null && partitionValueOf(column.type, typeof value === 'bigint' && column.type.kind === 'TIME' ? Number(value) : value) === partition[column.name];
    });
  }

  /** A data file's __offset bounds; an end is undefined when unknown. */
  offsetRange(file: DataFile): { lower?: bigint; upper?: bigint } {
    const lower = file.lowerBounds?.get(this.offsetId);
    const upper = file.upperBounds?.get(this.offsetId);
    return {
      ...(lower ? { lower: fromSingleValue('long', lower) as bigint } : {}),
      ...(upper ? { upper: fromSingleValue('long', upper) as bigint } : {}),
    };
  }

  /** Whether a data file may hold offsets in [from, end). */
  mayHold(file: DataFile, from: bigint, end: bigint): boolean {
    const { lower, upper } = this.offsetRange(file);
    return !(upper !== undefined && upper < from) && !(lower !== undefined && lower >= end);
  }

  /** The column of a file batch holding lake field `id` (by field id, else by the field's name). */
  column(batch: arrow.RecordBatch, id: number, name: string): arrow.Data | undefined {
    const fields = batch.schema.fields;
    let index = fields.findIndex((f) => f.metadata.get(FIELD_ID_KEY) === String(id));
    if (index < 0) index = fields.findIndex((f) => f.name === name && !f.metadata.has(FIELD_ID_KEY));
    return index < 0 ? undefined : batch.data.children[index];
  }

  /** A file batch in the scanner's schema (see the header). */
  present(batch: arrow.RecordBatch): arrow.RecordBatch {
    const rows = batch.numRows;
    const schema = this.schema();
    const children = schema.fields.map((target) => {
      const field = this.fields.get(target.name);
      const source = field && this.column(batch, field.id, field.name);
      return source ? converted(source, target) : nullColumn(target.type, rows);
    });
    return new arrow.RecordBatch(schema, arrow.makeData({ type: new arrow.Struct(schema.fields), length: rows, nullCount: 0, children }));
  }

  /** Data sequence numbers of the snapshot's delete files, by location. */
  deleteSequenceNumbers(): Promise<Map<string, bigint>> {
    const plan = this.plan;
    plan.deleteSequenceNumbers ??= (async () => {
      const bySequence = new Map<string, bigint>();
      for (const manifest of await readManifestList(snapshotById(plan.metadata, plan.snapshotId)!.manifestList)) {
        if (manifest.content !== ManifestContent.DELETES) continue;
        for (const e of (await readManifest(manifest)).entries) if (isLive(e)) bySequence.set(e.dataFile.filePath, e.sequenceNumber);
      }
      return bySequence;
    })();
    return plan.deleteSequenceNumbers;
  }

  /** The field of an id in any of the table's lake schemas. */
  fieldById(id: number): IcebergField | undefined {
    return this.plan.metadata.schemas.flatMap((s) => s.fields).find((f) => f.id === id);
  }
}

/** A lake column as a column of the scanner's type: the same, or Iceberg's int narrowed back to TINYINT/SMALLINT. */
function converted(source: arrow.Data, target: arrow.Field): arrow.Data {
  const to = target.type as arrow.DataType;
  const from = source.type as arrow.DataType;
  const sameStorage = sameArrowType(from, to) || (arrow.DataType.isTimestamp(from) && arrow.DataType.isTimestamp(to) && from.unit === to.unit);
  if (sameStorage) return source.clone(to);
  if (arrow.DataType.isInt(from) && arrow.DataType.isInt(to) && from.bitWidth === 32 && to.bitWidth < 32) {
    const values = to.bitWidth === 8 ? new Int8Array(source.length) : new Int16Array(source.length);
    values.set((source.values as Int32Array).subarray(0, source.length));
    return arrow.makeData({ type: to as arrow.Int8, offset: source.offset, length: source.length, nullCount: source.nullCount, nullBitmap: source.nullBitmap, data: values });
  }
  throw new TributaryError('INVALID_TYPE', `lake column '${target.name}' of Arrow type ${String(from)} cannot be read as ${String(to)}`);
}

/** One Parquet file as Arrow batches. */
type ParquetWasm = typeof import('parquet-wasm');
let parquetWasm: ParquetWasm | undefined;

async function readParquetFile(location: string): Promise<arrow.RecordBatch[]> {
  const bytes = await readMetadataFile(location);
  parquetWasm ??= createRequire(import.meta.url)('parquet-wasm') as ParquetWasm;
  try {
    return arrow.tableFromIPC(parquetWasm.readParquet(bytes, { batchSize: READ_BATCH_ROWS }).intoIPCStream()).batches;
  } catch (err) {
    throw new TributaryError('STORAGE_EXCEPTION', `cannot read lake file ${location}: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
  }
}

/** Per row of a column, a string equal for equal values (equality delete keys compare NULL-safely, as the spec says). */
function keyPart(data: arrow.Data | undefined): (row: number) => string {
  if (!data) return () => 'n';
  const type = data.type as arrow.DataType;
  const valid = (row: number): boolean => data.nullCount === 0 || data.getValid(row);
  if (arrow.DataType.isUtf8(type)) {
    const vector = arrow.makeVector(data);
    return (row) => (valid(row) ? JSON.stringify(vector.get(row)) : 'n');
  }
  const values = data.values as ArrayLike<number | bigint> & { length: number };
  if (arrow.DataType.isBinary(type)) {
    const offsets = data.valueOffsets as Int32Array;
    const bytes = data.values as Uint8Array;
    return (row) => (valid(row) ? `x${Buffer.from(bytes.buffer, bytes.byteOffset + offsets[row], offsets[row + 1] - offsets[row]).toString('hex')}` : 'n');
  }
  if (arrow.DataType.isBool(type)) {
    return (row) => (valid(row) ? String((data.values[(data.offset + row) >> 3] >> ((data.offset + row) & 7)) & 1) : 'n');
  }
  // Fixed width: one or more elements of the values array per row (decimals are four words).
  const stride = Math.max(1, values.length / Math.max(1, data.length)) | 0;
  return (row) => {
    if (!valid(row)) return 'n';
    if (stride === 1) return String(values[row]);
    let s = '';
    for (let i = row * stride; i < (row + 1) * stride; i++) s += `${values[i]},`;
    return s;
  };
}

function keyOf(parts: readonly ((row: number) => string)[], row: number): string {
  let key = '';
  for (const part of parts) key += `${part(row)}\u0000`;
  return key;
}

/** Equality deleted keys of a bucket: per set of equality field ids, key → highest delete sequence number. */
interface EqualityDeletes {
  ids: number[];
  keys: Map<string, bigint>;
}

/** The rows of one source batch that the part keeps, before ordering. */
interface Source {
  batch: arrow.RecordBatch;
  rows: number[];
  offsets: BigInt64Array;
  timestamps: BigInt64Array;
}

class BucketRows implements LakeBucketRows {
  private group = 0;
  private equality?: Promise<EqualityDeletes[]>;
  /** False until the first row at or after the start timestamp (when there is one). */
  private reached: boolean;

  constructor(
    private readonly reader: FileReader,
    private readonly groups: ScanTask[][],
    private readonly from: bigint,
    private readonly endOffset: bigint,
    private readonly startMicros: bigint | undefined,
  ) {
    this.reached = startMicros === undefined;
  }

  async next(): Promise<LakeRowRun[] | undefined> {
    while (this.group < this.groups.length) {
      const batches = await this.readGroup(this.groups[this.group++]);
      if (batches.length > 0) return batches;
    }
    return undefined;
  }

  private async readGroup(tasks: ScanTask[]): Promise<LakeRowRun[]> {
    const sources: Source[] = [];
    for (const task of tasks) {
      const batches = await readParquetFile(task.file.filePath);
      const positions = await this.deletedPositions(task);
      const equality = task.deletes.some((d) => d.content === FileContent.EQUALITY_DELETES) ? await this.equalityDeletes() : [];
      let position = 0;
      for (const batch of batches) {
        const offsets = this.reader.column(batch, this.reader.offsetId, OFFSET_COLUMN)?.values as BigInt64Array | undefined;
        const timestamps = this.reader.column(batch, this.reader.timestampId, TIMESTAMP_COLUMN)?.values as BigInt64Array | undefined;
        if (!offsets || !timestamps) throw new TributaryError('INVALID_TABLE_EXCEPTION', `lake file ${task.file.filePath} has no ${OFFSET_COLUMN} or ${TIMESTAMP_COLUMN} column`);
        const keys = equality.map((e) => ({ keys: e.keys, parts: e.ids.map((id) => keyPart(this.reader.column(batch, id, this.reader.fieldById(id)?.name ?? ''))) }));
        const rows: number[] = [];
        for (let row = 0; row < batch.numRows; row++) {
          const offset = offsets[row];
          if (offset < this.from || offset >= this.endOffset || positions?.has(position + row)) continue;
          if (keys.some((k) => (k.keys.get(keyOf(k.parts, row)) ?? -1n) > task.dataSequenceNumber)) continue;
          rows.push(row);
        }
        position += batch.numRows;
        if (rows.length > 0) sources.push({ batch, rows, offsets, timestamps });
      }
    }
    return this.runs(sources);
  }

  /** Row positions of the task's file that its position delete files delete, or undefined when none. */
  private async deletedPositions(task: ScanTask): Promise<Set<number> | undefined> {
    let deleted: Set<number> | undefined;
    for (const file of task.deletes) {
      if (file.content !== FileContent.POSITION_DELETES) continue;
      for (const batch of await readParquetFile(file.filePath)) {
        const paths = this.reader.column(batch, DELETE_FILE_PATH_ID, 'file_path');
        const positions = this.reader.column(batch, DELETE_POS_ID, 'pos');
        if (!paths || !positions) throw new TributaryError('INVALID_TABLE_EXCEPTION', `position delete file ${file.filePath} has no file_path or pos column`);
        const names = arrow.makeVector(paths);
        const values = positions.values as BigInt64Array;
        for (let row = 0; row < batch.numRows; row++) {
          if (names.get(row) === task.file.filePath) (deleted ??= new Set()).add(Number(values[row]));
        }
      }
    }
    return deleted;
  }

  /** The equality deletes of the bucket's files, read once per part. */
  private equalityDeletes(): Promise<EqualityDeletes[]> {
    this.equality ??= (async () => {
      const files = new Map<string, DataFile>();
      for (const task of this.groups.flat()) for (const d of task.deletes) if (d.content === FileContent.EQUALITY_DELETES) files.set(d.filePath, d);
      const sequence = await this.reader.deleteSequenceNumbers();
      const byIds = new Map<string, EqualityDeletes>();
      for (const file of files.values()) {
        const ids = [...(file.equalityIds ?? [])].sort((a, b) => a - b);
        if (ids.length === 0) throw new TributaryError('INVALID_TABLE_EXCEPTION', `equality delete file ${file.filePath} has no equality field ids`);
        const seq = sequence.get(file.filePath);
        if (seq === undefined) throw new TributaryError('INVALID_TABLE_EXCEPTION', `equality delete file ${file.filePath} is not in the snapshot's delete manifests`);
        let deletes = byIds.get(ids.join(','));
        if (!deletes) byIds.set(ids.join(','), (deletes = { ids, keys: new Map() }));
        for (const batch of await readParquetFile(file.filePath)) {
          const parts = ids.map((id) => keyPart(this.reader.column(batch, id, this.reader.fieldById(id)?.name ?? '')));
          for (let row = 0; row < batch.numRows; row++) {
            const key = keyOf(parts, row);
            if ((deletes.keys.get(key) ?? -1n) < seq) deletes.keys.set(key, seq);
          }
        }
      }
      return [...byIds.values()];
    })();
    return this.equality;
  }

  /** The kept rows in offset order, as batches of consecutive offsets sharing one commit timestamp (ms). */
  private runs(sources: Source[]): LakeRowRun[] {
    const count = sources.reduce((n, s) => n + s.rows.length, 0);
    const source = new Int32Array(count);
    const row = new Int32Array(count);
    const offset = new BigInt64Array(count);
    let n = 0;
    let sorted = true;
    sources.forEach((s, i) => {
      for (const r of s.rows) {
        source[n] = i;
        row[n] = r;
        offset[n] = s.offsets[r];
        if (n > 0 && offset[n] < offset[n - 1]) sorted = false;
        n++;
      }
    });
    const order = Uint32Array.from({ length: count }, (_, i) => i);
    if (!sorted) order.sort((a, b) => (offset[a] < offset[b] ? -1 : offset[a] > offset[b] ? 1 : source[a] - source[b] || row[a] - row[b]));
    const presented = new Map<number, arrow.RecordBatch>();
    const out: LakeRowRun[] = [];
    const ms = (micros: bigint): number => Number(micros / 1000n) - (micros % 1000n < 0n ? 1 : 0);
    let i = 0;
    while (i < count) {
      const first = order[i];
      const src = sources[source[first]];
      const timestamp = ms(src.timestamps[row[first]]);
      if (!this.reached) {
        if (src.timestamps[row[first]] < this.startMicros!) {
          i++;
          continue;
        }
        this.reached = true;
      }
      let j = i + 1;
      while (j < count) {
        const at = order[j];
        const prev = order[j - 1];
        if (source[at] !== source[first] || row[at] !== row[prev] + 1 || offset[at] !== offset[prev] + 1n || ms(src.timestamps[row[at]]) !== timestamp) break;
        j++;
      }
      let batch = presented.get(source[first]);
      if (!batch) presented.set(source[first], (batch = this.reader.present(src.batch)));
      out.push({ baseOffset: offset[first], timestamp, batch: batch.slice(row[first], row[first] + (j - i)) });
      i = j;
    }
    return out;
  }
}

/** Reads buckets of one planned snapshot of an Iceberg table. */
class IcebergSnapshotReader implements LakeSnapshotReader {
  constructor(
    private readonly plan: SnapshotPlan,
    private readonly table: TableInfo,
    private readonly schema: () => arrow.Schema,
  ) {}

  readBucket(ref: { bucket: number; partition?: string }, from: bigint, end: bigint, startTimestampMs?: number): LakeBucketRows {
    const files = new FileReader(this.plan, this.table, this.schema);
    const spec = ref.partition === undefined ? {} : partitionSpecFromName(this.table.partitionKeys, ref.partition);
    const tasks = this.plan.tasks.filter((t) => files.inPartition(t.file.partition, ref.bucket, spec) && files.mayHold(t.file, from, end));
    const start = startTimestampMs === undefined ? undefined : BigInt(Math.ceil(startTimestampMs)) * 1000n;
    return new BucketRows(files, offsetGroups(tasks, files), from, end, start);
  }
}

/** Plans snapshot `snapshotId` of `loaded` for reading buckets of Tributary table `table` in `schema` (see the header). */
export async function snapshotReader(loaded: LoadedTable, snapshotId: bigint, table: TableInfo, schema: () => arrow.Schema): Promise<LakeSnapshotReader> {
  const { dataFiles } = await planScan(loaded, { snapshotId });
  return new IcebergSnapshotReader({ snapshotId, metadata: loaded.metadata, tasks: dataFiles }, table, schema);
}
