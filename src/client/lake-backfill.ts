/**
 * The past of a bucket, read from its lake table: what a LogScanner subscription below the log
 * start reads before it continues in the log (DESIGN.md §6).
 *
 * The coordinator registers, per lake-enabled table, a lake snapshot and per bucket the first log
 * offset O_b the lake does not hold; log retention deletes only segments below O_b. The lake part
 * of a subscription from offset `from` is the snapshot's rows of the bucket with
 * `from` <= __offset < O_b, in offset order; the log continues at O_b. The lake format reads them
 * (LakeSnapshotReader, lake/lake-format.ts; Iceberg's: lake/iceberg/bucket-reader.ts), in the
 * lake and warehouse the server names, planning each snapshot once for the buckets of a scanner,
 * and gives them in the scanner's columns as runs of consecutive offsets with one commit
 * timestamp, the shape of log batches. The registered snapshot and the lake's location come from
 * the coordinator through `LakeSnapshots` (a client's Admin; the server side of the Kafka listener
 * asks through the node's own APIs), so Kafka fetches below the log start read the same rows.
 *
 * Change types: a log table's rows are +A. A primary-key table's lake holds state, not history:
 * each key's last row, at the offset of its last change, comes as +I; earlier changes and deletes
 * before O_b are not replayed.
 */
import type * as arrow from 'apache-arrow';
import { CHANGE_TYPE_BYTE } from '../common/change-type.js';
import { tableOption } from '../common/config.js';
import { TributaryError } from '../common/errors.js';
import { type LakeSnapshot, lakeBucketKey } from '../common/lake.js';
import type { TablePath, TableInfo } from '../common/schema.js';
import { lakeFormat } from '../lake/formats/index.js';
import type { LakeBucketRows, LakeSnapshotReader, LakeStorage } from '../lake/lake-format.js';
import type { ScanBatch } from './scan-batch.js';
/** Attempts at a registered snapshot that lake maintenance expires meanwhile (a newer one is registered then). */
const MAX_ATTEMPTS = 3;

/** The bucket a lake part reads: its number and, for partitioned tables, its partition's name. */
export interface LakeBucketRef {
  bucket: number;
  partition?: string;
}

/** The lake rows of one bucket, read group by group. */
export interface LakePart {
  /** The first offset the lake part does not hold: where the log continues. */
  readonly endOffset: bigint;
  /** The next rows in offset order; undefined once the part is read to its end. */
  next(): Promise<ScanBatch[] | undefined>;
}

/** What the backfill asks the coordinator: a client's Admin answers it. */
export interface LakeSnapshots {
  /** The lake snapshot registered for the table; LAKE_SNAPSHOT_NOT_EXIST when none is. */
  getLakeSnapshot(path: TablePath): Promise<LakeSnapshot>;
  /** The lake format and warehouse that hold the table's lake table. */
  getLakeTieringStatus(path: TablePath): Promise<{ lakeFormat: string; warehouse: string }>;
}

/** Opens the lake parts of a LogScanner's buckets: the registered snapshot and its end offsets, from the coordinator. */
export class LakeBackfill {
  private reader?: Promise<LakeReader>;

  /** `schema`: the Arrow schema rows are presented in now (the scanner's, projection applied; it grows when the scanner takes on a newer schema). */
  constructor(
    private readonly snapshots: LakeSnapshots,
    private readonly table: TableInfo,
    private readonly schema: () => arrow.Schema,
  ) {}

  static enabledFor(table: TableInfo): boolean {
    return tableOption(table.properties, 'table.datalake.enabled') === 'true';
  }

  /**
   * The lake part of a bucket from offset `from` (and, with `startTimestampMs`, from its first
   * row committed at or after then); undefined when the lake holds nothing of the bucket at or
   * after `from` (no registered snapshot, or its end offset for the bucket is not above `from`).
   */
  async open(ref: { bucket: number; partition?: { name: string; id: number } }, from: bigint, startTimestampMs?: number): Promise<LakePart | undefined> {
    for (let attempt = 1; ; attempt++) {
      let snapshot: LakeSnapshot;
      try {
        snapshot = await this.snapshots.getLakeSnapshot(this.table.path);
      } catch (err) {
        if (err instanceof TributaryError && err.errorName === 'LAKE_SNAPSHOT_NOT_EXIST') return undefined;
        throw err;
      }
      if (snapshot.tableId !== this.table.tableId) return undefined;
      const wanted = lakeBucketKey(ref.partition ? { partitionId: ref.partition.id, bucket: ref.bucket } : { bucket: ref.bucket });
      const end = snapshot.bucketOffsets.find((o) => lakeBucketKey(o) === wanted)?.endOffset;
      if (end === undefined || end <= from) return undefined;
      // Read only: a format holds nothing until one of its writers runs.
      this.reader ??= this.snapshots
        .getLakeTieringStatus(this.table.path)
        .then((s) => new LakeReader(lakeFormat(s.lakeFormat).open(s.warehouse), this.table, this.schema));
      const bucket: LakeBucketRef = { bucket: ref.bucket, ...(ref.partition ? { partition: ref.partition.name } : {}) };
      try {
        return await (await this.reader).read(snapshot.snapshotId, bucket, from, end, startTimestampMs);
      } catch (err) {
        // Expired by lake maintenance since it was registered: a newer one is registered now.
        if (err instanceof TributaryError && err.errorName === 'LAKE_SNAPSHOT_NOT_EXIST' && attempt < MAX_ATTEMPTS) continue;
        throw err;
      }
    }
  }
}

/** Reads buckets of snapshots of a table's lake table; plans each snapshot once. */
export class LakeReader {
  private plan?: { snapshotId: bigint; reader: Promise<LakeSnapshotReader> };
  private readonly changeType: number;

  /** `schema`: the Arrow schema rows are presented in when they are read, columns of `table` (or of a newer schema of it) by name. */
  constructor(
    private readonly lake: LakeStorage,
    private readonly table: TableInfo,
    private readonly schema: () => arrow.Schema,
  ) {
    this.changeType = CHANGE_TYPE_BYTE[table.schema.primaryKey ? '+I' : '+A'];
  }

  /**
   * The rows of a bucket in a snapshot with `from` <= __offset < `end` (from the first one
   * committed at or after `startTimestampMs`, when given), in offset order, read lazily.
   */
  async read(snapshotId: bigint, ref: LakeBucketRef, from: bigint, end: bigint, startTimestampMs?: number): Promise<LakePart> {
    const reader = await this.readerOf(snapshotId);
    return new BucketPart(reader.readBucket(ref, from, end, startTimestampMs), ref, end, this.changeType);
  }

  private async readerOf(snapshotId: bigint): Promise<LakeSnapshotReader> {
    const cached = this.plan?.snapshotId === snapshotId && (await this.plan.reader.catch(() => undefined));
    if (cached) return cached;
    const reader = this.lake.loadTable(this.table.path).then((t) => t.snapshotReader(snapshotId, this.table, this.schema));
    this.plan = { snapshotId, reader };
    return reader;
  }
}

/** A bucket's lake rows as ScanBatches: the bucket, its partition and the change type added. */
class BucketPart implements LakePart {
  constructor(
    private readonly rows: LakeBucketRows,
    private readonly ref: LakeBucketRef,
    readonly endOffset: bigint,
    private readonly changeType: number,
  ) {}

  async next(): Promise<ScanBatch[] | undefined> {
    const runs = await this.rows.next();
    return runs?.map((r) => ({
      bucket: this.ref.bucket,
      ...(this.ref.partition !== undefined ? { partition: this.ref.partition } : {}),
      baseOffset: r.baseOffset,
      timestamp: r.timestamp,
      batch: r.batch,
      ...(this.changeType === CHANGE_TYPE_BYTE['+A'] ? {} : { changeTypes: new Uint8Array(r.batch.numRows).fill(this.changeType) }),
    }));
  }
}
