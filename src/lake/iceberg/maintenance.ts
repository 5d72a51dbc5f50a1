/**
 * Table maintenance: snapshot expiry (spec: "Snapshot Retention Policy") with the removal of the
 * files only expired snapshots reached, and removal of orphan files that no metadata references.
 *
 * Expiry keeps every ref's snapshot, and on each branch the ancestors until one is both older than
 * `olderThanMs` and past the first `retainLast`; snapshots on no branch are kept while younger than
 * `olderThanMs`. It commits the metadata without the others, then deletes their manifest lists,
 * the manifests no kept snapshot lists, and the data and delete files those manifests list live
 * that no manifest of a kept snapshot lists live.
 *
 * Orphan removal deletes files under the table location that are older than `olderThanMs` (default
 * 3 days: the files of commits in flight are younger) and are none of: the current metadata file and
 * those in its metadata log, metadata versions newer than the one loaded, the version hint, and the
 * manifest lists, manifests and files (live or not) of the current metadata's snapshots.
 */
import path from 'node:path';
import { isS3Location } from '../../storage/object-store.js';
import { objectStoreFor } from '../../storage/stores.js';
import { TributaryError } from '../../common/errors.js';
import { backOffBeforeRetry, type FileSystemCatalog } from './catalog.js';
import type { ManifestFile } from './data-file.js';
import { isLive, localPath, readManifest, readManifestList, type ResolvedEntry } from './scan.js';
import { ancestorsOf, intProperty, MAIN_BRANCH, type Snapshot, type SnapshotRef, type TableMetadata, withoutSnapshots } from './table-metadata.js';

const DAY_MS = 86_400_000;
/** Table properties of the retention policy, with Iceberg's names and defaults. */
const MAX_SNAPSHOT_AGE_MS = ['history.expire.max-snapshot-age-ms', 5 * DAY_MS] as const;
const MIN_SNAPSHOTS_TO_KEEP = ['history.expire.min-snapshots-to-keep', 1] as const;
const ORPHAN_MIN_AGE_MS = 3 * DAY_MS;
const VERSION_FILE = /^v(\d+)\.metadata\.json$/;

export interface ExpireOptions {
  /** Snapshots older than this (ms since epoch) may expire; default: now − history.expire.max-snapshot-age-ms. */
  olderThanMs?: number;
  /** Snapshots of each branch kept whatever their age, the head included; default history.expire.min-snapshots-to-keep. */
  retainLast?: number;
}

export interface ExpireResult {
  expiredSnapshotIds: bigint[];
  deletedFiles: string[];
}

export async function expireSnapshots(catalog: FileSystemCatalog, db: string, table: string, options: ExpireOptions = {}): Promise<ExpireResult> {
  for (let attempt = 1; ; attempt++) {
    const base = await catalog.loadTable(db, table);
    const expired = snapshotsToExpire(base.metadata, options);
    if (expired.length === 0) return { expiredSnapshotIds: [], deletedFiles: [] };
    let kept: TableMetadata;
    try {
      kept = (await catalog.commit(db, table, base.version, withoutSnapshots(base.metadata, new Set(expired.map((s) => s.snapshotId))))).metadata;
    } catch (err) {
      if (err instanceof TributaryError && err.errorName === 'COMMIT_FAILED' && (await backOffBeforeRetry(base.metadata, attempt))) continue;
      throw err;
    }
    return { expiredSnapshotIds: expired.map((s) => s.snapshotId), deletedFiles: await deleteUnreachable(expired, kept) };
  }
}

export async function removeOrphanFiles(catalog: FileSystemCatalog, db: string, table: string, options: { olderThanMs?: number } = {}): Promise<{ deletedFiles: string[] }> {
  const olderThanMs = options.olderThanMs ?? Date.now() - ORPHAN_MIN_AGE_MS;
  const { metadata, version, metadataLocation } = await catalog.loadTable(db, table);
  const referenced = new Set([metadataLocation, ...metadata.metadataLog.map((e) => e.metadataFile)].map(normalize));
  const manifests = new Map<string, ManifestFile>();
  for (const s of metadata.snapshots) {
    referenced.add(normalize(s.manifestList));
    for (const m of await readManifestList(s.manifestList)) manifests.set(normalize(m.manifestPath), m);
  }
  for (const [location, manifest] of manifests) {
    referenced.add(location);
    for (const e of (await readManifest(manifest)).entries) referenced.add(normalize(e.dataFile.filePath));
  }
  const orphans: string[] = [];
  for (const file of await filesUnder(normalize(metadata.location))) {
    if (referenced.has(file.path) || file.mtimeMs >= olderThanMs) continue;
    const name = path.basename(file.path);
    if (name === 'version-hint.text' || Number(VERSION_FILE.exec(name)?.[1] ?? 0) > version) continue;
    orphans.push(file.path);
  }
  return { deletedFiles: await deleteFiles(orphans) };
}

function snapshotsToExpire(metadata: TableMetadata, options: ExpireOptions): Snapshot[] {
  const olderThanMs = options.olderThanMs ?? Date.now() - intProperty(metadata, ...MAX_SNAPSHOT_AGE_MS);
  const retainLast = Math.max(1, options.retainLast ?? intProperty(metadata, ...MIN_SNAPSHOTS_TO_KEEP));
  const refs: SnapshotRef[] = Object.values(metadata.refs);
  if (metadata.currentSnapshotId !== null && !metadata.refs[MAIN_BRANCH]) refs.push({ snapshotId: metadata.currentSnapshotId, type: 'branch' });
  const retained = new Set<bigint>();
  const onBranch = new Set<bigint>();
  for (const ref of refs) {
    retained.add(ref.snapshotId);
    if (ref.type !== 'branch') continue;
    let keeping = true;
    ancestorsOf(metadata, ref.snapshotId).forEach((s, i) => {
      onBranch.add(s.snapshotId);
      keeping &&= i < retainLast || s.timestampMs >= olderThanMs;
      if (keeping) retained.add(s.snapshotId);
    });
  }
  return metadata.snapshots.filter((s) => !retained.has(s.snapshotId) && (onBranch.has(s.snapshotId) || s.timestampMs < olderThanMs));
}

/** Deletes what only the expired snapshots reached; returns the deleted files. */
async function deleteUnreachable(expired: readonly Snapshot[], kept: TableMetadata): Promise<string[]> {
  // Kept state must be read in full before anything goes: a read error here stops the deletion.
  const keptManifests = new Map<string, ManifestFile>();
  for (const s of kept.snapshots) for (const m of await readManifestList(s.manifestList)) keptManifests.set(normalize(m.manifestPath), m);
  const reachable = new Set<string>();
  for (const m of keptManifests.values()) for (const e of (await readManifest(m)).entries) if (isLive(e)) reachable.add(normalize(e.dataFile.filePath));

  const expiredManifests = new Map<string, ManifestFile>();
  for (const s of expired) {
    for (const m of (await ifPresent(readManifestList(s.manifestList))) ?? []) {
      if (!keptManifests.has(normalize(m.manifestPath))) expiredManifests.set(normalize(m.manifestPath), m);
    }
  }
  const unreachable = new Set<string>();
  for (const m of expiredManifests.values()) {
    const entries: ResolvedEntry[] = (await ifPresent(readManifest(m)))?.entries ?? [];
    for (const e of entries) {
      const file = normalize(e.dataFile.filePath);
      if (isLive(e) && !reachable.has(file)) unreachable.add(file);
    }
  }
  return deleteFiles([...unreachable, ...expiredManifests.keys(), ...expired.map((s) => normalize(s.manifestList))]);
}

/** The result of a metadata read, or undefined when the file is gone (an earlier run deleted it). */
async function ifPresent<T>(read: Promise<T>): Promise<T | undefined> {
  try {
    return await read;
  } catch (err) {
    if (((err as Error).cause as NodeJS.ErrnoException | undefined)?.code === 'ENOENT') return undefined;
    throw err;
  }
}

/** Deletes the files; returns those it deleted (those that were there), sorted. */
async function deleteFiles(files: readonly string[]): Promise<string[]> {
  const present = (await Promise.all(files.map(async (f) => ((await objectStoreFor(f).head(f)) ? f : undefined)))).filter((f) => f !== undefined);
  if (present.length > 0) await objectStoreFor(present[0]).deleteMany(present);
  return present.sort();
}

async function filesUnder(dir: string): Promise<{ path: string; mtimeMs: number }[]> {
  return (await objectStoreFor(dir).list(dir)).map((o) => ({ path: o.location, mtimeMs: o.lastModifiedMs }));
}

/** A location as listings give it: a local one as an absolute path, a remote one as it is. */
function normalize(location: string): string {
  return isS3Location(location) ? location : path.resolve(localPath(location));
}
