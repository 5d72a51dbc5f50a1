/**
 * What this process asked of remote storage, counted since it started: S3 requests by operation
 * (every HTTP attempt, retries included, as the store bills them), failed attempts, and the bytes
 * sent and received; and how the lake file cache served reads (hits, misses, bytes fetched). A
 * server exports them as metrics; a benchmark reads them to say what a run cost.
 */

export interface StorageStats {
  /** S3 requests by operation (`PutObject`, `GetObject`, `UploadPart`, `ListObjectsV2`, …). */
  requests: Map<string, number>;
  /** S3 requests that failed (a retried one counts each failed attempt). */
  failedRequests: number;
  uploadedBytes: number;
  downloadedBytes: number;
  /** Pins of a remote file the cache held already. */
  cacheHits: number;
  /** Pins of a remote file the cache had to fetch. */
  cacheMisses: number;
  cacheFetchedBytes: number;
}

const stats: StorageStats = { requests: new Map(), failedRequests: 0, uploadedBytes: 0, downloadedBytes: 0, cacheHits: 0, cacheMisses: 0, cacheFetchedBytes: 0 };

/** The process's counters (live: read them, never write them outside src/storage). */
export function storageStats(): Readonly<StorageStats> {
  return stats;
}

export function countRequest(operation: string, failed: boolean): void {
  stats.requests.set(operation, (stats.requests.get(operation) ?? 0) + 1);
  if (failed) stats.failedRequests++;
}

export function countTransfer(direction: 'up' | 'down', bytes: number): void {
  if (direction === 'up') stats.uploadedBytes += bytes;
  else stats.downloadedBytes += bytes;
}

export function countCacheRead(hit: boolean, fetchedBytes = 0): void {
  if (hit) stats.cacheHits++;
  else {
    stats.cacheMisses++;
    stats.cacheFetchedBytes += fetchedBytes;
  }
}
