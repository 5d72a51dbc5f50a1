/**
 * What may leave a bucket's log, decided in one place from everything that holds it elsewhere:
 *
 * - the lake (lake-enabled tables): offsets below the lake end are in the lake, and the lake is
 *   their history, so they need no remote copy, and local or remote copies may go;
 * - the remote log (remote.data.dir set): offsets below the committed remote end are remote;
 * - a primary-key bucket's registered KV snapshot: recovery replays the local changelog from its
 *   offset, which therefore stays local.
 *
 * Without a remote log, a local segment goes once table.log.ttl expired it and the lake (if any)
 * holds it. With one, a local segment goes once the remote log or the lake holds it, keeping the
 * newest table.log.tiered.local-segments; table.log.ttl then applies to remote segments (of a
 * lake-enabled table, only to those the lake holds, which go at once anyway). A lake-enabled
 * table's segment waits for the lake before it is uploaded (needsRemoteCopy).
 */
import { parseDuration, tableOption } from '../../common/config.js';
import type { ClosedSegment } from './log/log-tablet.js';
import type { Replica } from './replica.js';

/** The first offset the lake does not hold, for lake-enabled tables (-1 before the lake holds any); undefined for others. */
function lakeEnd(r: Replica): bigint | undefined {
  return r.table.properties['table.datalake.enabled'] === 'true' ? (r.lakeEndOffset ?? -1n) : undefined;
}

function ttlMs(r: Replica): number {
  return parseDuration(tableOption(r.table.properties, 'table.log.ttl')!)!;
}

/** The local segments a retention pass may delete, oldest first (LogTablet.deleteOldestSegments). */
export function localSegmentDeletable(r: Replica, remoteLog: boolean, nowMs: number): (segment: ClosedSegment, segmentsLeft: number) => boolean {
  const snapshotOffset = r.snapshots?.registered?.logOffset;
  const lake = lakeEnd(r);
  const ttl = ttlMs(r);
  const keepLocal = Number(tableOption(r.table.properties, 'table.log.tiered.local-segments'));
  const remoteEnd = r.remoteLog?.remoteLogEndOffset ?? -1n;
  return (s, segmentsLeft) => {
    if (r.snapshots && (snapshotOffset === undefined || s.endOffset > snapshotOffset)) return false;
    if (!remoteLog) return ttl > 0 && s.maxTimestamp < nowMs - ttl && (lake === undefined || s.endOffset <= lake);
    return segmentsLeft >= keepLocal && (s.endOffset <= remoteEnd || (lake !== undefined && s.endOffset <= lake));
  };
}

/**
 * Whether a closed segment needs a remote copy now: not when the lake holds it, nor while the lake
 * is still to take it, that is while its newest record is younger than twice
 * table.datalake.freshness (a tiering round starts within one freshness of the last and commits
 * within another). A lake that keeps up so gets the segment from the local log and no remote copy
 * is ever made; of a lake that lags, the remote log holds what it has not taken.
 */
export function needsRemoteCopy(r: Replica, s: Pick<ClosedSegment, 'endOffset' | 'maxTimestamp'>, nowMs: number): boolean {
  const lake = lakeEnd(r);
  if (lake === undefined) return true;
  return s.endOffset > lake && s.maxTimestamp < nowMs - 2 * parseDuration(tableOption(r.table.properties, 'table.datalake.freshness')!)!;
}

/** Whether a remote segment may leave the remote log (from its start): the lake holds it, or table.log.ttl expired it. */
export function remoteSegmentExpired(r: Replica, s: { endOffset: bigint; maxTimestamp: number }, nowMs: number): boolean {
  const lake = lakeEnd(r);
  if (lake !== undefined) return s.endOffset <= lake;
  const ttl = ttlMs(r);
  return ttl > 0 && s.maxTimestamp < nowMs - ttl;
}
