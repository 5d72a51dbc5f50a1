/**
 * The content files of an Iceberg table as manifests describe them (spec: "Manifests", the
 * `data_file` struct): data files, position delete files and equality delete files, with their
 * partition tuple and column metrics keyed by field id.
 */
import type { IcebergPrimitive } from './types.js';

export const enum FileContent {
  DATA = 0,
  POSITION_DELETES = 1,
  EQUALITY_DELETES = 2,
}

/**
 * A partition tuple: one value per partition field, in spec order, as the transform produced it
 * (int/date/hour/month/year → number, long → bigint, string → string, binary → Uint8Array,
 * null for a null source value).
 */
export type PartitionValue = number | bigint | string | boolean | Uint8Array | null;

export interface DataFile {
  content: FileContent;
  /** Absolute location, as readers open it. */
  filePath: string;
  fileFormat: 'PARQUET';
  partition: PartitionValue[];
  recordCount: number;
  fileSizeInBytes: number;
  columnSizes?: Map<number, number>;
  valueCounts?: Map<number, number>;
  nullValueCounts?: Map<number, number>;
  nanValueCounts?: Map<number, number>;
  /** Single-value binary encoding of each column's lower/upper bound (spec Appendix D). */
  lowerBounds?: Map<number, Uint8Array>;
  upperBounds?: Map<number, Uint8Array>;
  splitOffsets?: number[];
  /** Field ids of the equality delete key; equality delete files only. */
  equalityIds?: number[];
  sortOrderId?: number;
}

export const enum ManifestEntryStatus {
  EXISTING = 0,
  ADDED = 1,
  DELETED = 2,
}

export interface ManifestEntry {
  status: ManifestEntryStatus;
  /** Snapshot that added (or deleted) the file; null inherits the manifest's snapshot on read. */
  snapshotId: bigint | null;
  /** Data sequence number; null inherits the manifest's sequence number on read. */
  sequenceNumber: bigint | null;
  fileSequenceNumber: bigint | null;
  dataFile: DataFile;
}

/** A partition field as the manifest's `partition` struct needs it: id, name and result type. */
export interface PartitionFieldType {
  fieldId: number;
  name: string;
  type: IcebergPrimitive;
}

export const enum ManifestContent {
  DATA = 0,
  DELETES = 1,
}

/** An entry of a manifest list (spec: "Manifest Lists", the `manifest_file` struct). */
export interface ManifestFile {
  manifestPath: string;
  manifestLength: number;
  partitionSpecId: number;
  content: ManifestContent;
  sequenceNumber: bigint;
  minSequenceNumber: bigint;
  addedSnapshotId: bigint;
  addedFilesCount: number;
  existingFilesCount: number;
  deletedFilesCount: number;
  addedRowsCount: bigint;
  existingRowsCount: bigint;
  deletedRowsCount: bigint;
  /** Per partition field: null/NaN presence and bounds in single-value encoding. */
  partitions?: { containsNull: boolean; containsNan?: boolean; lowerBound?: Uint8Array; upperBound?: Uint8Array }[];
}
