/**
 * The local files a planned read (read-plan.ts) hands DuckDB: a local warehouse's files where
 * they are; remote ones copied into the lake file cache (storage/file-cache.ts) when a read's SQL
 * is made, and pinned there until the plan is released.
 *
 * A remote data file read for some of its columns is copied as a smaller Parquet file of just
 * those columns' chunks (lake/parquet/projection.ts), fetched by byte ranges: the columns named
 * and the equality delete keys of its delete files, by field id. The whole file is fetched
 * instead when the read takes every column; when those columns are more than
 * datalake.cache.partial-file.max-ratio of the file by its column sizes (metrics Tributary's
 * writers record, so that no footer is read for nothing; else by the projection itself); and
 * when the footer leaves any doubt. Delete files are always fetched whole. The cache gives the
 * whole file's copy whenever it holds one.
 */
import type { PinnedFiles } from '../../storage/file-cache.js';
import { objectStoreFor, partialFileMaxRatio, remoteFileCache } from '../../storage/stores.js';
import { planProjection, type RangeReader, writeProjection } from '../parquet/projection.js';
import { type DataFile, FileContent } from './data-file.js';
import type { ScanTask } from './scan.js';

export class PlanFiles {
  /** Pins held, by location, or location and the field ids of its part. */
  private readonly pinned = new Map<string, Promise<PinnedFiles>>();

  /**
   * The path DuckDB opens for each file of `tasks`, read for the fields `fieldIds` (all when
   * undefined); the copies stay pinned until `release`.
   */
  async paths(tasks: readonly ScanTask[], fieldIds: readonly number[] | undefined): Promise<(location: string) => string> {
    const paths = new Map<string, string>();
    const copies: Promise<void>[] = [];
    const copy = (file: DataFile, ids: readonly number[] | undefined): void => {
      const location = file.filePath;
      if (paths.has(location)) return;
      const local = objectStoreFor(location).localPath(location);
      if (local !== undefined) {
        paths.set(location, local);
        return;
      }
      paths.set(location, location);
      copies.push(this.pin(file, ids).then((p) => void paths.set(location, p.path(location)!)));
    };
    for (const task of tasks) {
      const deletes = task.deletes.flatMap((d) => (d.content === FileContent.EQUALITY_DELETES ? (d.equalityIds ?? []) : []));
      copy(task.file, fieldIds && [...new Set([...fieldIds, ...deletes])].sort((a, b) => a - b));
      for (const d of task.deletes) copy(d, undefined);
    }
    await Promise.all(copies);
    return (location) => paths.get(location) ?? location;
  }

  /** Lets the cache evict the copies again. */
  release(): void {
    const pins = [...this.pinned.values()];
    this.pinned.clear();
    for (const p of pins) p.then((pinned) => pinned.release(), () => {});
  }

  private pin(file: DataFile, ids: readonly number[] | undefined): Promise<PinnedFiles> {
    const location = file.filePath;
    const partial = ids && file.content === FileContent.DATA && file.fileFormat.toUpperCase() === 'PARQUET' && mayProject(file, ids);
    const key = partial ? `${location}#${ids.join(',')}` : location;
    let pinned = this.pinned.get(key);
    if (pinned) return pinned;
    const store = objectStoreFor(location);
    const cache = remoteFileCache();
    pinned = partial ? cache.pinPart(store, location, `fields=${ids.join(',')}`, () => projector(file, ids)) : cache.pin(store, [location]);
    this.pinned.set(key, pinned);
    pinned.catch(() => this.pinned.get(key) === pinned && this.pinned.delete(key));
    return pinned;
  }
}

/** False when the file's metrics say the fields are more of it than a partial copy may be. */
function mayProject(file: DataFile, ids: readonly number[]): boolean {
  const max = partialFileMaxRatio() * file.fileSizeInBytes;
  if (max <= 0) return false;
  if (!file.columnSizes || file.columnSizes.size === 0) return true;
  return ids.reduce((n, id) => n + (file.columnSizes!.get(id) ?? 0), 0) <= max;
}

/** Plans the projection of `file` to `ids`; undefined (fetch it whole) when there is none, or it is too large. */
async function projector(file: DataFile, ids: readonly number[]): Promise<((path: string) => Promise<number>) | undefined> {
  const store = objectStoreFor(file.filePath);
  const read: RangeReader = async (offset, length) => (await store.get(file.filePath, { offset, length })) ?? new Uint8Array(0);
  const projection = await planProjection(read, file.fileSizeInBytes, new Set(ids));
  if (!projection || projection.size > partialFileMaxRatio() * file.fileSizeInBytes) return undefined;
  return async (path) => projection.footerBytesRead + (await writeProjection(read, projection, path));
}
