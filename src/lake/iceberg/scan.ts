/**
 * Scan planning (spec: "Scan Planning", "Sequence Number Inheritance"): the data files of a snapshot,
 * each with the delete files a reader must apply to it.
 *
 *   snapshot → manifest list → data manifests   → live entries (ADDED, EXISTING) = data files
 *                            → delete manifests → live entries = position / equality delete files
 *
 * Entries written with null snapshot id or sequence numbers inherit them from their manifest's
 * manifest-list entry. A delete file applies to a data file of the same partition (spec id and
 * values) when
 *   - equality deletes: data sequence number of the data file <  that of the delete file; an
 *     equality delete file of an unpartitioned spec applies to every partition;
 *   - position deletes: data sequence number of the data file <= that of the delete file, unless
 *     the delete file's `file_path` bounds exclude the data file's path.
 */
import { TributaryError } from '../../common/errors.js';
import { filePathOf } from '../../storage/object-store.js';
import { getImmutable, objectStoreFor } from '../../storage/stores.js';
import {
  type DataFile,
  FileContent,
  ManifestContent,
  ManifestEntryStatus,
  type ManifestFile,
  type PartitionFieldType,
  type PartitionValue,
} from './data-file.js';
import { decodeManifest } from './manifest.js';
import { decodeManifestList } from './manifest-list.js';
import { currentSnapshot, partitionSpecById, snapshotById, type TableMetadata } from './table-metadata.js';

/** Field id of `file_path` in position delete files (spec: "Reserved Field IDs"). */
const DELETE_FILE_PATH_FIELD_ID = 2147483546;

export interface ScanTask {
  file: DataFile;
  dataSequenceNumber: bigint;
  /** Delete files to apply to `file`, in ascending data sequence number. */
  deletes: DataFile[];
}

export interface ScanPlan {
  /** The snapshot scanned; null for a table without snapshots. */
  snapshotId: bigint | null;
  /** Its sequence number (0 without snapshots): what a rewrite of the planned files started from. */
  sequenceNumber: bigint;
  dataFiles: ScanTask[];
}

/** A manifest entry with inherited snapshot id and sequence numbers resolved. */
export interface ResolvedEntry {
  status: ManifestEntryStatus;
  snapshotId: bigint;
  sequenceNumber: bigint;
  fileSequenceNumber: bigint;
  dataFile: DataFile;
}

export async function planScan(table: { metadata: TableMetadata }, options: { snapshotId?: bigint } = {}): Promise<ScanPlan> {
  const { metadata } = table;
  const snapshot = options.snapshotId === undefined ? currentSnapshot(metadata) : snapshotById(metadata, options.snapshotId);
  if (options.snapshotId !== undefined && !snapshot) {
    throw new TributaryError('LAKE_SNAPSHOT_NOT_EXIST', `lake snapshot ${options.snapshotId} is not in table ${metadata.location}`);
  }
  if (!snapshot) return { snapshotId: null, sequenceNumber: 0n, dataFiles: [] };

  const manifests = await readManifestList(snapshot.manifestList);
  const read = await Promise.all(manifests.map(async (m) => ({ manifest: m, entries: (await readManifest(m)).entries.filter(isLive) })));
  const deletes = new DeleteIndex();
  for (const { manifest, entries } of read) {
    if (manifest.content !== ManifestContent.DELETES) continue;
    const unpartitioned = partitionSpecById(metadata, manifest.partitionSpecId).fields.length === 0;
    for (const e of entries) deletes.add(manifest.partitionSpecId, unpartitioned, e);
  }
  deletes.sort();
  const dataFiles: ScanTask[] = [];
  for (const { manifest, entries } of read) {
    if (manifest.content !== ManifestContent.DATA) continue;
    for (const e of entries) {
      dataFiles.push({ file: e.dataFile, dataSequenceNumber: e.sequenceNumber, deletes: deletes.forDataFile(manifest.partitionSpecId, e) });
    }
  }
  return { snapshotId: snapshot.snapshotId, sequenceNumber: snapshot.sequenceNumber, dataFiles };
}

export async function readManifestList(location: string): Promise<ManifestFile[]> {
  return decodeManifestList(await readImmutableMetadataFile(location));
}

/** All entries of a manifest (DELETED ones too), with inherited values taken from `manifest`. */
export async function readManifest(manifest: ManifestFile): Promise<{ entries: ResolvedEntry[]; partitionType: PartitionFieldType[] }> {
  const { entries, partitionType } = await decodeManifest(await readImmutableMetadataFile(manifest.manifestPath));
  return {
    partitionType,
    entries: entries.map((e) => ({
      status: e.status,
      snapshotId: e.snapshotId ?? manifest.addedSnapshotId,
      sequenceNumber: e.sequenceNumber ?? manifest.sequenceNumber,
      fileSequenceNumber: e.fileSequenceNumber ?? manifest.sequenceNumber,
      dataFile: e.dataFile,
    })),
  };
}

export function isLive(entry: { status: ManifestEntryStatus }): boolean {
  return entry.status !== ManifestEntryStatus.DELETED;
}

/**
 * A key equal for equal partitions: spec id and values, where floats compare by bits (-0 ≠ 0,
 * as Java's floatToIntBits does) and values of different kinds never collide.
 */
export function partitionKey(specId: number, values: readonly PartitionValue[]): string {
  let key = String(specId);
  for (const v of values) {
    if (v === null) key += '|n';
    else if (typeof v === 'number') key += `|d${Object.is(v, -0) ? '-0' : v}`;
    else if (typeof v === 'bigint') key += `|l${v}`;
    else if (typeof v === 'string') key += `|s${JSON.stringify(v)}`;
    else if (typeof v === 'boolean') key += `|b${v ? 1 : 0}`;
    else key += `|x${Buffer.from(v.buffer, v.byteOffset, v.byteLength).toString('hex')}`;
  }
  return key;
}

/** Reads a lake file (manifest, manifest list, metadata or a data file) whole, by its location, from its store. */
export async function readMetadataFile(location: string): Promise<Uint8Array> {
  const bytes = await objectStoreFor(location).get(location);
  if (!bytes) throw new TributaryError('STORAGE_EXCEPTION', `cannot read ${location}: there is no such file`, { cause: missingFile() });
  return bytes;
}

/** A manifest or manifest list, which never changes once written: remote ones are kept in memory (stores.ts). */
async function readImmutableMetadataFile(location: string): Promise<Uint8Array> {
  const bytes = await getImmutable(location);
  if (!bytes) throw new TributaryError('STORAGE_EXCEPTION', `cannot read ${location}: there is no such file`, { cause: missingFile() });
  return bytes;
}

/** The cause of a read of a file that is not there, as the filesystem names it. */
function missingFile(): Error {
  return Object.assign(new Error('no such file'), { code: 'ENOENT' });
}

/** The filesystem path of a local location, which other writers may give as a `file:` URI; other locations as they are. */
export function localPath(location: string): string {
  return filePathOf(location);
}

/** Delete files by partition, each list in ascending data sequence number. */
class DeleteIndex {
  private readonly equality = new Map<string, ResolvedEntry[]>();
  private readonly globalEquality: ResolvedEntry[] = [];
  private readonly position = new Map<string, ResolvedEntry[]>();

  add(specId: number, unpartitioned: boolean, e: ResolvedEntry): void {
    if (e.dataFile.content === FileContent.EQUALITY_DELETES && unpartitioned) {
      this.globalEquality.push(e);
      return;
    }
    const byPartition = e.dataFile.content === FileContent.EQUALITY_DELETES ? this.equality : this.position;
    const key = partitionKey(specId, e.dataFile.partition);
    const list = byPartition.get(key);
    if (list) list.push(e);
    else byPartition.set(key, [e]);
  }

  sort(): void {
    for (const list of [this.globalEquality, ...this.equality.values(), ...this.position.values()]) {
      list.sort((a, b) => (a.sequenceNumber < b.sequenceNumber ? -1 : a.sequenceNumber > b.sequenceNumber ? 1 : 0));
    }
  }

  forDataFile(specId: number, data: ResolvedEntry): DataFile[] {
    const key = partitionKey(specId, data.dataFile.partition);
    const seq = data.sequenceNumber;
    const out: DataFile[] = [];
    let pathBytes: Buffer | undefined;
    for (const e of newerThan(this.position.get(key), seq, true)) {
      pathBytes ??= Buffer.from(data.dataFile.filePath);
      if (mayReference(e.dataFile, pathBytes)) out.push(e.dataFile);
    }
    const equality = [...newerThan(this.equality.get(key), seq, false), ...newerThan(this.globalEquality, seq, false)];
    if (this.globalEquality.length > 0) equality.sort((a, b) => (a.sequenceNumber < b.sequenceNumber ? -1 : a.sequenceNumber > b.sequenceNumber ? 1 : 0));
    for (const e of equality) out.push(e.dataFile);
    return out;
  }
}

/** The tail of a list sorted by sequence number with numbers > seq (or >= seq when `inclusive`). */
function newerThan(list: ResolvedEntry[] | undefined, seq: bigint, inclusive: boolean): ResolvedEntry[] {
  if (!list) return [];
  let lo = 0;
  let hi = list.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    const s = list[mid].sequenceNumber;
    if (s < seq || (!inclusive && s === seq)) lo = mid + 1;
    else hi = mid;
  }
  return list.slice(lo);
}

/** False when the position delete file's `file_path` bounds show it holds no row of `path`. */
function mayReference(deleteFile: DataFile, path: Buffer): boolean {
  const lower = deleteFile.lowerBounds?.get(DELETE_FILE_PATH_FIELD_ID);
  const upper = deleteFile.upperBounds?.get(DELETE_FILE_PATH_FIELD_ID);
  return !(lower && Buffer.compare(path, lower) < 0) && !(upper && Buffer.compare(path, upper) > 0);
}
