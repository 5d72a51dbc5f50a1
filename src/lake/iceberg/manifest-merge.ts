/**
 * Manifest merging on commit, as Iceberg's merge append does it, so that a table committed to every
 * few seconds keeps a short manifest list. Table properties, with Iceberg's names and defaults:
 *
 *   commit.manifest-merge.enabled       true | false                    (true)
 *   commit.manifest.min-count-to-merge  manifests of one group          (100)
 *   commit.manifest.target-size-bytes   bytes of manifest per bin       (8388608)
 *
 * The manifests of a new manifest list are grouped by (content, partition spec id). A group of at
 * least min-count-to-merge manifests is bin-packed by manifest length into bins of up to
 * target-size-bytes, newest first, filling bins from the oldest manifest on: the bins of old
 * manifests come out full and alike from one commit to the next, and the newest bin takes the
 * remainder. Each bin of more than one manifest becomes one new manifest; a bin of one manifest is
 * left as it is.
 *
 * The entries of a merged manifest (spec: "Sequence Number Inheritance"):
 *   ADDED by this commit         as written: ADDED, inheriting what they did (this commit's
 *                                snapshot id and sequence number, the merged manifest's)
 *   DELETED by this commit       as written: DELETED, all explicit
 *   DELETED by an earlier one    dropped: the snapshot that deleted the file has told its readers
 *   any other live entry         EXISTING, with the snapshot id and the data and file sequence
 *                                numbers it had, written explicitly
 */
import { TributaryError } from '../../common/errors.js';
import { type ManifestEntry, ManifestEntryStatus, type ManifestFile } from './data-file.js';

export interface ManifestMergePolicy {
  enabled: boolean;
  minCountToMerge: number;
  targetSizeBytes: number;
}

const ENABLED = 'commit.manifest-merge.enabled';
const MIN_COUNT_TO_MERGE = 'commit.manifest.min-count-to-merge';
const TARGET_SIZE_BYTES = 'commit.manifest.target-size-bytes';

/** The merge policy of a table's properties; INVALID_CONFIG_EXCEPTION names a malformed one. */
export function manifestMergePolicy(properties: Readonly<Record<string, string>>, table: string): ManifestMergePolicy {
  const invalid = (key: string, expected: string) =>
    new TributaryError('INVALID_CONFIG_EXCEPTION', `table property ${key} of lake table ${table} must be ${expected}, got '${properties[key]}'`);
  const integer = (key: string, fallback: number, min: number): number => {
    const text = properties[key];
    if (text === undefined) return fallback;
    const value = /^\d+$/.test(text) ? Number(text) : Number.NaN;
    if (!Number.isSafeInteger(value) || value < min) throw invalid(key, `an integer >= ${min}`);
    return value;
  };
  const enabled = properties[ENABLED]?.toLowerCase() ?? 'true';
  if (enabled !== 'true' && enabled !== 'false') throw invalid(ENABLED, 'true or false');
  return {
    enabled: enabled === 'true',
    minCountToMerge: integer(MIN_COUNT_TO_MERGE, 100, 0),
    targetSizeBytes: integer(TARGET_SIZE_BYTES, 8 * 1024 * 1024, 1),
  };
}

/** The bins to merge, each of more than one manifest, newest manifest first. */
export function binsToMerge(manifests: readonly ManifestFile[], policy: ManifestMergePolicy): ManifestFile[][] {
  if (!policy.enabled) return [];
  const groups = new Map<string, ManifestFile[]>();
  for (const m of manifests) {
    const key = `${m.content}/${m.partitionSpecId}`;
    const group = groups.get(key);
    if (group) group.push(m);
    else groups.set(key, [m]);
  }
  const bins: ManifestFile[][] = [];
  for (const group of groups.values()) {
    if (group.length < policy.minCountToMerge) continue;
    for (const bin of packNewestFirst(group, policy.targetSizeBytes)) if (bin.length > 1) bins.push(bin);
  }
  return bins;
}

/**
 * Splits a newest-first list into bins of up to `target` bytes, keeping the order: filled from the
 * oldest end, one bin open at a time; a manifest larger than `target` gets a bin of its own.
 */
function packNewestFirst(group: readonly ManifestFile[], target: number): ManifestFile[][] {
  const bins: ManifestFile[][] = [];
  let bin: ManifestFile[] = [];
  let weight = 0;
  for (let i = group.length - 1; i >= 0; i--) {
    const m = group[i];
    if (bin.length > 0 && weight + m.manifestLength > target) {
      bins.push(bin.reverse());
      bin = [];
      weight = 0;
    }
    bin.push(m);
    weight += m.manifestLength;
  }
  if (bin.length > 0) bins.push(bin.reverse());
  return bins.reverse();
}

/**
 * The entries a merged manifest takes from `manifest`, given as decoded (inherited values null), for
 * the commit of snapshot `snapshotId`.
 */
export function mergedEntries(manifest: ManifestFile, entries: readonly ManifestEntry[], snapshotId: bigint): ManifestEntry[] {
  const out: ManifestEntry[] = [];
  for (const e of entries) {
    const entrySnapshotId = e.snapshotId ?? manifest.addedSnapshotId;
    if (entrySnapshotId === snapshotId) out.push(e);
    else if (e.status !== ManifestEntryStatus.DELETED) {
      out.push({
        status: ManifestEntryStatus.EXISTING,
        snapshotId: entrySnapshotId,
        sequenceNumber: e.sequenceNumber ?? manifest.sequenceNumber,
        fileSequenceNumber: e.fileSequenceNumber ?? manifest.sequenceNumber,
        dataFile: e.dataFile,
      });
    }
  }
  return out;
}
