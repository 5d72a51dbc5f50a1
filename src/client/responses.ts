/** How the client reads the shared parts of responses: per-entry errors and partition infos. */
import { errorFromCode } from '../common/errors.js';
import type { PartitionInfo } from '../common/schema.js';
import type { PbPartitionInfo } from '../rpc/gen/tributary_pb.js';

/** Whether a response entry carries an error (absent or 0 means success). */
export function hasError(entry: { errorCode?: number }): boolean {
  return entry.errorCode !== undefined && entry.errorCode !== 0;
}

/** Throws the named error a response entry carries, if any. */
export function throwIfError(entry: { errorCode?: number; errorMessage?: string }, what: string): void {
  if (hasError(entry)) throw errorFromCode(entry.errorCode!, entry.errorMessage ?? `${what} failed`);
}

export function toPartitionInfo(p: PbPartitionInfo): PartitionInfo {
  return { partitionId: Number(p.partitionId), partitionName: p.partitionName, spec: Object.fromEntries(p.spec.map((kv) => [kv.key, kv.value])) };
}
