/**
 * The local files a planned read (read-plan.ts) hands DuckDB: a local warehouse's files where
 * they are; remote ones copied into the lake file cache (storage/file-cache.ts) when a read's SQL
 * is made, and pinned there until the plan is released.
 *
 * A remote data file is copied as a smaller Parquet file (lake/parquet/projection.ts), fetched by
 * byte ranges, of
 *   - the columns a read names and the equality delete keys of its delete files, by field id;
 *   - with the query's filters, the row groups whose statistics (lake/parquet/statistics.ts) may
 *     hold a row passing them, unless a position delete file applies to the data file (its
 *     positions count over every row group of it). Only files of several row groups are judged:
 *     the file's own metrics already pruned it as a whole (and a tiered file mostly has one).
 * The whole file is fetched instead when the read keeps every column and row group; when the
 * columns are more than datalake.cache.partial-file.max-ratio of the file by its column sizes
 * (metrics Tributary's writers record, so that no footer is read for nothing) and there are no
 * filters; when the copy would be more than that share of the file; and when the footer leaves
 * any doubt. Delete files are always fetched whole. The footers read are kept in memory with the
 * lake's manifests (datalake.cache.metadata-max-size), so a read whose copies are cached sends
 * no request. The cache names a copy by its field ids and row groups, and gives the whole file's
 * copy, or the copy of a part that covers the part a read needs, whenever it holds one.
 */
import type { PartBuilder, PinnedFiles } from '../../storage/file-cache.js';
import { keptImmutable, objectStoreFor, partialFileMaxRatio, remoteFileCache } from '../../storage/stores.js';
import type { LakePartFilter } from '../lake-format.js';
import { isProjectable, type ParquetFooter, planProjection, type RangeReader, readParquetFooter, writeProjection } from '../parquet/projection.js';
import { type DataFile, FileContent } from './data-file.js';
import type { ScanTask } from './scan.js';
import { rowGroupSpans } from './row-group-spans.js';
import type { IcebergField } from './types.js';

/** The part of a data file a read needs: the leaves of `fields` (all when absent), the row groups `groups` (all when absent), sorted. */
interface FilePart {
  fields?: readonly number[];
  groups?: readonly number[];
}

export class PlanFiles {
  /** Pins held, by location, or location and the name of its part. */
  private readonly pinned = new Map<string, Promise<PinnedFiles>>();

  /** `fields`: the read schema's fields by id, whose types decode row group statistics. */
  constructor(private readonly fields: ReadonlyMap<number, IcebergField>) {}

  /**
   * The path DuckDB opens for each file of `tasks`, read for the fields `fieldIds` (all when
   * undefined), with `filter` keeping some row groups of the data files; the copies stay pinned
   * until `release`.
   */
  async paths(tasks: readonly ScanTask[], fieldIds: readonly number[] | undefined, filter?: LakePartFilter): Promise<(location: string) => string> {
    const paths = new Map<string, string>();
    const copies: Promise<void>[] = [];
    const copy = (file: DataFile, ids: readonly number[] | undefined, keep: LakePartFilter | undefined): void => {
      const location = file.filePath;
      if (paths.has(location)) return;
      const local = objectStoreFor(location).localPath(location);
      if (local !== undefined) {
        paths.set(location, local);
        return;
      }
      paths.set(location, location);
      copies.push(this.pin(file, ids, keep).then((p) => void paths.set(location, p.path(location)!)));
    };
    for (const task of tasks) {
      const deletes = task.deletes.flatMap((d) => (d.content === FileContent.EQUALITY_DELETES ? (d.equalityIds ?? []) : []));
      const positional = task.deletes.some((d) => d.content === FileContent.POSITION_DELETES);
      copy(task.file, fieldIds && [...new Set([...fieldIds, ...deletes])].sort((a, b) => a - b), positional ? undefined : filter);
      for (const d of task.deletes) copy(d, undefined, undefined);
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

  private async pin(file: DataFile, ids: readonly number[] | undefined, filter: LakePartFilter | undefined): Promise<PinnedFiles> {
    const location = file.filePath;
    const store = objectStoreFor(location);
    const cache = remoteFileCache();
    const whole = (): Promise<PinnedFiles> => this.pinOnce(location, () => cache.pin(store, [location]));
    const parquet = file.content === FileContent.DATA && file.fileFormat.toUpperCase() === 'PARQUET' && partialFileMaxRatio() > 0 && isProjectable(file.fileSizeInBytes);
    if (!parquet || cache.holds(location) || (!filter && (!ids || !mayProject(file, ids)))) return whole();
    const footer = await footerOf(file);
    if (!footer) return whole();
    const groups = filter && (await keptRowGroups(footer, this.fields, filter));
    if (!groups && (!ids || !mayProject(file, ids))) return whole();
    const part: FilePart = { ...(ids ? { fields: ids } : {}), ...(groups ? { groups } : {}) };
    const name = partName(part);
    return this.pinOnce(`${location}#${name}`, () => cache.pinPart(store, location, name, (held) => covers(held, part), async () => projector(file, footer, part)));
  }

  private pinOnce(key: string, pin: () => Promise<PinnedFiles>): Promise<PinnedFiles> {
    let pinned = this.pinned.get(key);
    if (pinned) return pinned;
    pinned = pin();
    this.pinned.set(key, pinned);
    pinned.catch(() => this.pinned.get(key) === pinned && this.pinned.delete(key));
    return pinned;
  }
}

/** False when the file's metrics say the fields are more of it than a partial copy may be. */
function mayProject(file: DataFile, ids: readonly number[]): boolean {
  const max = partialFileMaxRatio() * file.fileSizeInBytes;
  if (!file.columnSizes || file.columnSizes.size === 0) return true;
  return ids.reduce((n, id) => n + (file.columnSizes!.get(id) ?? 0), 0) <= max;
}

/** `fields=1,2` (`*` for all), then `;row-groups=0,3` when some are left out. */
function partName(part: FilePart): string {
  return `fields=${part.fields?.join(',') ?? '*'}${part.groups ? `;row-groups=${part.groups.join(',')}` : ''}`;
}

/** Whether the copy of the part named `held` has every field and row group of `part`. */
function covers(held: string, part: FilePart): boolean {
  const m = /^fields=([\d,]+|\*)(?:;row-groups=([\d,]*))?$/.exec(held);
  if (!m) return false;
  const has = (list: string | undefined, wanted: readonly number[] | undefined): boolean => {
    if (list === undefined || list === '*') return true;
    const kept = new Set(list.split(',').filter((x) => x !== '').map(Number));
    return wanted !== undefined && wanted.every((x) => kept.has(x));
  };
  return has(m[1], part.fields) && has(m[2], part.groups);
}

function rangeReader(file: DataFile): RangeReader {
  const store = objectStoreFor(file.filePath);
  return async (offset, length) => (await store.get(file.filePath, { offset, length })) ?? new Uint8Array(0);
}

/** The footer of remote Parquet file `file`, kept in memory once read; undefined when it is not Parquet. */
async function footerOf(file: DataFile): Promise<ParquetFooter | undefined> {
  let read: ParquetFooter | undefined;
  const metadata = await keptImmutable(`${file.filePath}#footer`, async () => {
    read = await readParquetFooter(rangeReader(file), file.fileSizeInBytes);
    // A copy: the bytes read with it (up to 64 KiB) are not kept.
    return read && { bytes: read.metadata.slice(), fetched: read.bytesRead };
  });
  if (read) return read; // with the end of the file read with it, which the copy may use
  return metadata && { metadata, metadataStart: file.fileSizeInBytes - 8 - metadata.length, bytesRead: 0 };
}

/** Plans the copy of `part` of `file`; undefined (fetch it whole) when there is none, or it is too large. */
function projector(file: DataFile, footer: ParquetFooter, part: FilePart): PartBuilder | undefined {
  const projection = planProjection(footer, { ...(part.fields ? { fieldIds: new Set(part.fields) } : {}), ...(part.groups ? { rowGroups: new Set(part.groups) } : {}) });
  if (!projection || projection.size > partialFileMaxRatio() * file.fileSizeInBytes) return undefined;
  return (path) => writeProjection(rangeReader(file), projection, path);
}

/** The row groups of the file of `footer` that `filter` keeps, by index; undefined when it keeps all (or the file has one). */
async function keptRowGroups(footer: ParquetFooter, fields: ReadonlyMap<number, IcebergField>, filter: LakePartFilter): Promise<number[] | undefined> {
  const groups = rowGroupSpans(footer.metadata, fields);
  if (!groups || groups.length < 2) return undefined;
  const kept = await filter(groups);
  return kept.length === groups.length ? undefined : kept.map((g) => g.index);
}
