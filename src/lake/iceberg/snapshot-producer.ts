/**
 * The operations that commit one new snapshot to the main branch, sharing one producer (spec:
 * "Snapshots", "Sequence Numbers", "Manifest Lists", "Commit Conflict Resolution and Retry"):
 *
 *   commitAppend    data files                  → "append"
 *   commitRowDelta  data files, delete files    → "append" (no deletes), "delete" (deletes only),
 *                                                 "overwrite" (both)
 *   commitRewrite   removed files → added files → "replace"
 *
 * Files a commit writes under <location>/metadata/:
 *   <commit uuid>-m<K>.avro  manifests. The added data files go to one manifest and the added
 *       delete files to another, as ADDED entries with null snapshot id and file sequence number
 *       (inherited from the manifest list), so every retry reuses them. A rewrite also writes, per
 *       attempt, a new version of each parent manifest holding removed files: removed entries
 *       become DELETED, the others EXISTING, all with explicit snapshot id and sequence numbers.
 *       An attempt may also write merged manifests (see manifest-merge.ts and its table
 *       properties), each replacing a bin of the manifests it would list, worked out anew on each
 *       attempt's parent; the added or rewritten manifests that the committed attempt merged away
 *       are deleted after the commit.
 *   snap-<snapshot id>-<attempt>-<commit uuid>.avro  the manifest list of one attempt: the new
 *       manifests, then the parent's manifests that still list live files, with each merged bin
 *       in the place of its newest manifest.
 *
 * An attempt loads the latest table version, runs the caller's `validate` on it (whatever that
 * throws aborts the commit), gives the snapshot sequence number last-sequence-number + 1 and
 * commits version + 1. A commit lost to another writer (COMMIT_FAILED) is re-applied on the new
 * version, up to `commit.retry.num-retries` times with exponential back-off. Files of attempts that
 * did not commit are deleted; when the catalog's commit fails for another reason the outcome is
 * unknown, and its files stay.
 *
 * A rewrite's added files get, as their data sequence number, the sequence number of the snapshot
 * the rewrite read: equality deletes committed after that snapshot (also those racing with the
 * rewrite) still apply to the new files, and the deletes the rewrite has applied (sequence numbers
 * up to it) do not apply again.
 */
import crypto from 'node:crypto';
import { TributaryError } from '../../common/errors.js';
import { joinLocation } from '../../storage/object-store.js';
import { objectStoreFor } from '../../storage/stores.js';
import { backOffBeforeRetry, type FileSystemCatalog, type LoadedTable } from './catalog.js';
import {
  type DataFile,
  FileContent,
  ManifestContent,
  type ManifestEntry,
  ManifestEntryStatus,
  type ManifestFile,
  type PartitionFieldType,
  type PartitionValue,
} from './data-file.js';
import { decodeManifest, encodeManifest } from './manifest.js';
import { binsToMerge, type ManifestMergePolicy, manifestMergePolicy, mergedEntries } from './manifest-merge.js';
import { encodeManifestList } from './manifest-list.js';
import { isLive, partitionKey, readManifest, readManifestList, readMetadataFile, type ResolvedEntry } from './scan.js';
import { toSingleValue } from './single-value.js';
import {
  currentSchema,
  currentSnapshot,
  newSnapshotId,
  type PartitionSpec,
  partitionSpecById,
  type SnapshotOperation,
  type SnapshotSummary,
  snapshotById,
  type TableMetadata,
  withSnapshot,
} from './table-metadata.js';
import { parseTransform } from './transforms.js';
import type { IcebergSchema } from './types.js';

export interface CommitOptions {
  /** Snapshot summary properties of the caller; the computed metrics and operation take precedence. */
  summary?: Record<string, string>;
  /**
   * Checks a precondition on the latest table metadata before each attempt; an exception from it
   * aborts the commit without retrying.
   */
  validate?: (metadata: TableMetadata) => void | Promise<void>;
  /**
   * Resolves once the added files are durable, which they need not be yet: the manifests are
   * written meanwhile, and the new table version only after it resolves. A rejection aborts the
   * commit.
   */
  addedFilesDurable?: Promise<void>;
  /**
   * The table as the caller loaded it before: while it is still the current version (one look for
   * the next version), the first attempt starts from it instead of reading the metadata again.
   */
  base?: LoadedTable;
}

/** Commits `dataFiles` (possibly none: an empty snapshot still records its summary). Returns the snapshot id. */
export async function commitAppend(catalog: FileSystemCatalog, db: string, table: string, options: CommitOptions & { dataFiles: DataFile[] }): Promise<bigint> {
  expectContent(options.dataFiles, true, 'appended');
  return new SnapshotProducer(catalog, db, table, { operation: 'append', added: options.dataFiles, removed: [], addedSequenceNumber: null }, options).commit();
}

/** Commits data files and position/equality delete files together. Returns the snapshot id. */
export async function commitRowDelta(
  catalog: FileSystemCatalog,
  db: string,
  table: string,
  options: CommitOptions & { dataFiles: DataFile[]; deleteFiles: DataFile[] },
): Promise<bigint> {
  const { dataFiles, deleteFiles } = options;
  expectContent(dataFiles, true, 'added as data');
  expectContent(deleteFiles, false, 'added as deletes');
  const operation: SnapshotOperation = deleteFiles.length === 0 ? 'append' : dataFiles.length === 0 ? 'delete' : 'overwrite';
  return new SnapshotProducer(catalog, db, table, { operation, added: [...dataFiles, ...deleteFiles], removed: [], addedSequenceNumber: null }, options).commit();
}

/**
 * Replaces live files (data and delete files) of the table by `added` without changing the table's
 * rows, as compaction does. `startingSequenceNumber` is the sequence number of the snapshot the
 * rewrite read (ScanPlan.sequenceNumber). Returns the snapshot id.
 */
export async function commitRewrite(
  catalog: FileSystemCatalog,
  db: string,
  table: string,
  options: CommitOptions & { removed: DataFile[]; added: DataFile[]; startingSequenceNumber: bigint },
): Promise<bigint> {
  if (options.removed.length === 0) throw new TributaryError('INVALID_ARGUMENT', 'a rewrite must remove files');
  expectContent(options.added, undefined, 'added');
  return new SnapshotProducer(
    catalog,
    db,
    table,
    { operation: 'replace', added: options.added, removed: options.removed, addedSequenceNumber: options.startingSequenceNumber },
    options,
  ).commit();
}

interface Change {
  operation: SnapshotOperation;
  added: DataFile[];
  /** Files that must be live in the parent snapshot, matched by path. */
  removed: DataFile[];
  /** Explicit data sequence number of the added files; null inherits the new snapshot's. */
  addedSequenceNumber: bigint | null;
}

/** A manifest this commit wrote: its manifest-list entry but for what the snapshot decides. */
type WrittenManifest = Omit<ManifestFile, 'sequenceNumber' | 'minSequenceNumber' | 'addedSnapshotId'> & {
  /** Smallest explicit data sequence number of a live entry; entries that inherit are left out. */
  minLiveSequenceNumber?: bigint;
};

class SnapshotProducer {
  private readonly commitId = crypto.randomUUID();
  private manifestCount = 0;
  private snapshotId: bigint | undefined;
  /** Manifests of the added files, written by the first attempt and reused by the others. */
  private addedManifests: WrittenManifest[] | undefined;

  constructor(
    private readonly catalog: FileSystemCatalog,
    private readonly db: string,
    private readonly table: string,
    private readonly change: Change,
    private readonly options: CommitOptions,
  ) {}

  async commit(): Promise<bigint> {
    // A failure is seen before the version is committed, unless the commit failed before that.
    this.options.addedFilesDurable?.catch(() => {});
    let tableUuid: string | undefined;
    let latest: TableMetadata | undefined;
    for (let attempt = 1; ; attempt++) {
      const attemptFiles: string[] = [];
      let committing = false;
      try {
        const base = await this.catalog.loadTable(this.db, this.table, attempt === 1 ? this.options.base : undefined);
        latest = base.metadata;
        if (tableUuid !== undefined && base.metadata.tableUuid !== tableUuid) {
          throw new TributaryError('TABLE_NOT_EXIST', `lake table ${this.db}.${this.table} was dropped and re-created during the commit`);
        }
        tableUuid = base.metadata.tableUuid;
        await this.options.validate?.(base.metadata);
        const { next, mergedAway } = await this.apply(base.metadata, attempt, attemptFiles);
        await this.options.addedFilesDurable;
        committing = true;
        await this.catalog.commit(this.db, this.table, base.version, next);
        await deleteQuietly(mergedAway);
        return next.currentSnapshotId!;
      } catch (err) {
        const lost = err instanceof TributaryError && err.errorName === 'COMMIT_FAILED';
        if (committing && !lost) throw err;
        await deleteQuietly(attemptFiles);
        if (lost && latest && (await backOffBeforeRetry(latest, attempt))) continue;
        await deleteQuietly((this.addedManifests ?? []).map((m) => m.manifestPath));
        throw err;
      }
    }
  }

  /**
   * The metadata with the new snapshot, and the manifests of this commit its manifest list does not
   * hold (merged into another); writes the attempt's manifests and manifest list.
   */
  private async apply(metadata: TableMetadata, attempt: number, attemptFiles: string[]): Promise<{ next: TableMetadata; mergedAway: string[] }> {
    const mergePolicy = manifestMergePolicy(metadata.properties, `${this.db}.${this.table}`);
    if (this.snapshotId === undefined || snapshotById(metadata, this.snapshotId)) this.snapshotId = newSnapshotId(metadata);
    const snapshotId = this.snapshotId;
    const sequenceNumber = metadata.lastSequenceNumber + 1n;
    const parent = currentSnapshot(metadata);
    const schema = currentSchema(metadata);

    this.addedManifests ??= await this.writeAddedManifests(metadata, schema);
    const carried: ManifestFile[] = [];
    const rewritten: WrittenManifest[] = [];
    const removed: { specId: number; entry: ResolvedEntry }[] = [];
    const toRemove = new Set(this.change.removed.map((f) => f.filePath));
    const contentsToRemove = new Set(this.change.removed.map((f) => manifestContentOf(f)));
    for (const manifest of parent ? await readManifestList(parent.manifestList) : []) {
      if (contentsToRemove.has(manifest.content)) {
        const { entries, partitionType } = await readManifest(manifest);
        const hit = entries.filter((e) => isLive(e) && toRemove.has(e.dataFile.filePath));
        if (hit.length > 0) {
          for (const entry of hit) removed.push({ specId: manifest.partitionSpecId, entry });
          const spec = partitionSpecById(metadata, manifest.partitionSpecId);
          const kept = entries.filter(isLive).map((e): ManifestEntry => {
            const gone = toRemove.has(e.dataFile.filePath);
            return {
              status: gone ? ManifestEntryStatus.DELETED : ManifestEntryStatus.EXISTING,
              snapshotId: gone ? snapshotId : e.snapshotId,
              sequenceNumber: e.sequenceNumber,
              fileSequenceNumber: e.fileSequenceNumber,
              dataFile: e.dataFile,
            };
          });
          const written = await this.writeManifest(metadata, schema, spec, partitionType, manifest.content, kept);
          attemptFiles.push(written.manifestPath);
          rewritten.push(written);
          continue;
        }
      }
      // A manifest left with DELETED entries only has told its snapshot's readers all it had to.
      if (manifest.addedFilesCount + manifest.existingFilesCount > 0) carried.push(manifest);
    }
    if (removed.length !== toRemove.size) {
      const found = new Set(removed.map((r) => r.entry.dataFile.filePath));
      const missing = [...toRemove].filter((p) => !found.has(p));
      throw new TributaryError('INVALID_ARGUMENT', `files to rewrite are not live in lake table ${this.db}.${this.table} (removed meanwhile?): ${missing.join(', ')}`);
    }

    const unmerged = [...this.addedManifests, ...rewritten].map((w) => manifestFileOf(w, snapshotId, sequenceNumber));
    unmerged.push(...carried);
    const manifests = await this.mergeManifests(metadata, schema, unmerged, mergePolicy, snapshotId, sequenceNumber, attemptFiles);
    const listed = new Set(manifests.map((m) => m.manifestPath));
    const manifestList = joinLocation(metadata.location, 'metadata', `snap-${snapshotId}-${attempt}-${this.commitId}.avro`);
    const listBytes = await encodeManifestList({ snapshotId, parentSnapshotId: parent?.snapshotId ?? null, sequenceNumber, manifests });
    await objectStoreFor(manifestList).put(manifestList, listBytes);
    attemptFiles.push(manifestList);

    const addedSpecId = this.addedManifests[0]?.partitionSpecId ?? metadata.defaultSpecId;
    const next = withSnapshot(metadata, {
      snapshotId,
      parentSnapshotId: parent?.snapshotId ?? null,
      sequenceNumber,
      timestampMs: Date.now(),
      manifestList,
      summary: summarize(
        this.change.operation,
        parent?.summary,
        this.change.added.map((file) => ({ specId: addedSpecId, file })),
        removed.map((r) => ({ specId: r.specId, file: r.entry.dataFile })),
        this.options.summary,
      ),
      schemaId: schema['schema-id'],
    });
    return { next, mergedAway: [...this.addedManifests, ...rewritten].map((m) => m.manifestPath).filter((p) => !listed.has(p)) };
  }

  /** `manifests` with each bin that `policy` merges replaced by one merged manifest, where its newest manifest was. */
  private async mergeManifests(
    metadata: TableMetadata,
    schema: IcebergSchema,
    manifests: ManifestFile[],
    policy: ManifestMergePolicy,
    snapshotId: bigint,
    sequenceNumber: bigint,
    attemptFiles: string[],
  ): Promise<ManifestFile[]> {
    const replaced = new Map<ManifestFile, ManifestFile | null>();
    for (const bin of binsToMerge(manifests, policy)) {
      const decoded = await Promise.all(bin.map(async (m) => decodeManifest(await readMetadataFile(m.manifestPath))));
      const entries = bin.flatMap((m, i) => mergedEntries(m, decoded[i].entries, snapshotId));
      const spec = partitionSpecById(metadata, bin[0].partitionSpecId);
      const merged = await this.writeManifest(metadata, schema, spec, decoded[0].partitionType, bin[0].content, entries);
      attemptFiles.push(merged.manifestPath);
      bin.forEach((m, i) => replaced.set(m, i === 0 ? manifestFileOf(merged, snapshotId, sequenceNumber) : null));
    }
    return manifests.flatMap((m) => {
      const r = replaced.get(m);
      return r === undefined ? [m] : r === null ? [] : [r];
    });
  }

  private async writeAddedManifests(metadata: TableMetadata, schema: IcebergSchema): Promise<WrittenManifest[]> {
    const spec = partitionSpecById(metadata, metadata.defaultSpecId);
    const partitionType = partitionTypeOf(spec, schema);
    const out: WrittenManifest[] = [];
    for (const content of [ManifestContent.DATA, ManifestContent.DELETES]) {
      const files = this.change.added.filter((f) => manifestContentOf(f) === content);
      if (files.length === 0) continue;
      const entries = files.map(
        (dataFile): ManifestEntry => ({
          status: ManifestEntryStatus.ADDED,
          snapshotId: null,
          sequenceNumber: this.change.addedSequenceNumber,
          fileSequenceNumber: null,
          dataFile,
        }),
      );
      try {
        out.push(await this.writeManifest(metadata, schema, spec, partitionType, content, entries));
      } catch (err) {
        await deleteQuietly(out.map((m) => m.manifestPath));
        throw err;
      }
    }
    return out;
  }

  private async writeManifest(
    metadata: TableMetadata,
    schema: IcebergSchema,
    spec: PartitionSpec,
    partitionType: PartitionFieldType[],
    content: ManifestContent,
    entries: ManifestEntry[],
  ): Promise<WrittenManifest> {
    const bytes = await encodeManifest({ schema, specId: spec['spec-id'], partitionSpec: spec, partitionType, content, entries });
    const file = joinLocation(metadata.location, 'metadata', `${this.commitId}-m${this.manifestCount++}.avro`);
    await objectStoreFor(file).put(file, bytes);
    const written: WrittenManifest = {
      manifestPath: file,
      manifestLength: bytes.length,
      partitionSpecId: spec['spec-id'],
      content,
      addedFilesCount: 0,
      existingFilesCount: 0,
      deletedFilesCount: 0,
      addedRowsCount: 0n,
      existingRowsCount: 0n,
      deletedRowsCount: 0n,
      partitions: partitionSummaries(
        partitionType,
        entries.map((e) => e.dataFile.partition),
      ),
    };
    for (const e of entries) {
      const rows = BigInt(e.dataFile.recordCount);
      if (e.status === ManifestEntryStatus.ADDED) {
        written.addedFilesCount++;
        written.addedRowsCount += rows;
      } else if (e.status === ManifestEntryStatus.EXISTING) {
        written.existingFilesCount++;
        written.existingRowsCount += rows;
      } else {
        written.deletedFilesCount++;
        written.deletedRowsCount += rows;
      }
      if (isLive(e) && e.sequenceNumber !== null && (written.minLiveSequenceNumber === undefined || e.sequenceNumber < written.minLiveSequenceNumber)) {
        written.minLiveSequenceNumber = e.sequenceNumber;
      }
    }
    return written;
  }
}

/** The manifest-list entry of a manifest this commit wrote. */
function manifestFileOf({ minLiveSequenceNumber, ...w }: WrittenManifest, snapshotId: bigint, sequenceNumber: bigint): ManifestFile {
  return { ...w, sequenceNumber, minSequenceNumber: minLiveSequenceNumber ?? sequenceNumber, addedSnapshotId: snapshotId };
}

/** The partition tuple type of a spec: one field per partition field, typed by its transform. */
export function partitionTypeOf(spec: PartitionSpec, schema: IcebergSchema): PartitionFieldType[] {
  return spec.fields.map((f) => {
    const source = schema.fields.find((s) => s.id === f['source-id']);
    if (!source) throw new TributaryError('INVALID_TABLE_EXCEPTION', `partition field ${f.name} has unknown source id ${f['source-id']}`);
    return { fieldId: f['field-id'], name: f.name, type: parseTransform(f.transform).resultType(source.type) };
  });
}

/** Per partition field: null and NaN presence, and bounds of the other values in single-value encoding. */
function partitionSummaries(partitionType: PartitionFieldType[], tuples: readonly PartitionValue[][]): NonNullable<ManifestFile['partitions']> {
  return partitionType.map((field, i) => {
    let containsNull = false;
    let containsNan = false;
    let lower: PartitionValue = null;
    let upper: PartitionValue = null;
    for (const tuple of tuples) {
      const v = tuple[i];
      if (v === null) containsNull = true;
      else if (typeof v === 'number' && Number.isNaN(v)) containsNan = true;
      else {
        if (lower === null || comparePartitionValues(v, lower) < 0) lower = v;
        if (upper === null || comparePartitionValues(v, upper) > 0) upper = v;
      }
    }
    return {
      containsNull,
      containsNan,
      ...(lower === null ? {} : { lowerBound: toSingleValue(field.type, lower) }),
      ...(upper === null ? {} : { upperBound: toSingleValue(field.type, upper) }),
    };
  });
}

/** Order of two non-null values of one partition field: numeric, -0 before +0, strings by code point, bytes unsigned. */
function comparePartitionValues(a: Exclude<PartitionValue, null>, b: Exclude<PartitionValue, null>): number {
  if (typeof a === 'number' && typeof b === 'number') {
    if (a !== b) return a < b ? -1 : 1;
    return Object.is(a, b) ? 0 : Object.is(a, -0) ? -1 : 1;
  }
  if (typeof a === 'bigint' && typeof b === 'bigint') return a < b ? -1 : a > b ? 1 : 0;
  if (typeof a === 'boolean' && typeof b === 'boolean') return Number(a) - Number(b);
  if (typeof a === 'string' && typeof b === 'string') return Buffer.compare(Buffer.from(a), Buffer.from(b));
  if (a instanceof Uint8Array && b instanceof Uint8Array) return Buffer.compare(a, b);
  throw new TributaryError('INVALID_ARGUMENT', `partition values ${String(a)} and ${String(b)} are of different kinds`);
}

/** Counts the spec's snapshot summary metrics name, per kind of change. */
interface Tally {
  dataFiles: bigint;
  records: bigint;
  filesSize: bigint;
  deleteFiles: bigint;
  equalityDeleteFiles: bigint;
  positionDeleteFiles: bigint;
  equalityDeletes: bigint;
  positionDeletes: bigint;
}

const ADDED_METRICS: Record<keyof Tally, string> = {
  dataFiles: 'added-data-files',
  records: 'added-records',
  filesSize: 'added-files-size',
  deleteFiles: 'added-delete-files',
  equalityDeleteFiles: 'added-equality-delete-files',
  positionDeleteFiles: 'added-position-delete-files',
  equalityDeletes: 'added-equality-deletes',
  positionDeletes: 'added-position-deletes',
};
const REMOVED_METRICS: Record<keyof Tally, string> = {
  dataFiles: 'deleted-data-files',
  records: 'deleted-records',
  filesSize: 'removed-files-size',
  deleteFiles: 'removed-delete-files',
  equalityDeleteFiles: 'removed-equality-delete-files',
  positionDeleteFiles: 'removed-position-delete-files',
  equalityDeletes: 'removed-equality-deletes',
  positionDeletes: 'removed-position-deletes',
};
const TOTAL_METRICS: Partial<Record<keyof Tally, string>> = {
  dataFiles: 'total-data-files',
  records: 'total-records',
  filesSize: 'total-files-size',
  deleteFiles: 'total-delete-files',
  equalityDeletes: 'total-equality-deletes',
  positionDeletes: 'total-position-deletes',
};

function tally(files: readonly { file: DataFile }[]): Tally {
  const t: Tally = { dataFiles: 0n, records: 0n, filesSize: 0n, deleteFiles: 0n, equalityDeleteFiles: 0n, positionDeleteFiles: 0n, equalityDeletes: 0n, positionDeletes: 0n };
  for (const { file } of files) {
    const rows = BigInt(file.recordCount);
    t.filesSize += BigInt(file.fileSizeInBytes);
    if (file.content === FileContent.DATA) {
      t.dataFiles++;
      t.records += rows;
    } else {
      t.deleteFiles++;
      if (file.content === FileContent.EQUALITY_DELETES) {
        t.equalityDeleteFiles++;
        t.equalityDeletes += rows;
      } else {
        t.positionDeleteFiles++;
        t.positionDeletes += rows;
      }
    }
  }
  return t;
}

/**
 * The snapshot summary: the caller's properties, the added and removed metrics that are not zero,
 * the totals (carried from the parent's; left out when the parent has none to carry),
 * changed-partition-count and the operation.
 */
function summarize(
  operation: SnapshotOperation,
  parent: SnapshotSummary | undefined,
  added: readonly { specId: number; file: DataFile }[],
  removed: readonly { specId: number; file: DataFile }[],
  extra: Record<string, string> | undefined,
): SnapshotSummary {
  const summary: Record<string, string> = { ...extra };
  const plus = tally(added);
  const minus = tally(removed);
  for (const key of Object.keys(ADDED_METRICS) as (keyof Tally)[]) {
    if (plus[key] !== 0n) summary[ADDED_METRICS[key]] = String(plus[key]);
    if (minus[key] !== 0n) summary[REMOVED_METRICS[key]] = String(minus[key]);
    const total = TOTAL_METRICS[key];
    if (total === undefined) continue;
    const before = parent === undefined ? '0' : parent[total];
    if (before !== undefined && /^\d+$/.test(before)) summary[total] = String(BigInt(before) + plus[key] - minus[key]);
  }
  const partitions = new Set([...added, ...removed].map(({ specId, file }) => partitionKey(specId, file.partition)));
  summary['changed-partition-count'] = String(partitions.size);
  return { ...summary, operation };
}

function manifestContentOf(file: DataFile): ManifestContent {
  return file.content === FileContent.DATA ? ManifestContent.DATA : ManifestContent.DELETES;
}

/** Checks the kind of files handed in: data only (true), deletes only (false) or any (undefined). */
function expectContent(files: readonly DataFile[], data: boolean | undefined, role: string): void {
  for (const f of files) {
    if (data !== undefined && (f.content === FileContent.DATA) !== data) {
      throw new TributaryError('INVALID_ARGUMENT', `${f.filePath} (content ${f.content}) cannot be ${role}`);
    }
    if (f.content === FileContent.EQUALITY_DELETES && !f.equalityIds?.length) {
      throw new TributaryError('INVALID_ARGUMENT', `equality delete file ${f.filePath} has no equality field ids`);
    }
  }
}

/** Deletes files an attempt wrote and no committed version references. */
async function deleteQuietly(files: readonly string[]): Promise<void> {
  await Promise.all(files.map((f) => objectStoreFor(f).delete(f).catch(() => {})));
}
