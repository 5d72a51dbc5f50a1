/**
 * Filesystem ("hadoop") catalog of Iceberg tables (spec: "File System Tables"). Layout:
 *
 *   <warehouse>/<db>/<table>/                          the table location
 *     metadata/v<N>.metadata.json                      table metadata version N = 1, 2, …; immutable
 *     metadata/version-hint.text                       "<N>", the latest version when last written
 *     metadata/<uuid>-m<K>.avro                        manifests
 *     metadata/snap-<snapshot id>-<attempt>-<uuid>.avro  manifest lists
 *     data/…                                           data and delete files
 *
 * Commit of version N+1 on base N: the new metadata goes to a unique temp file, is fsynced, then
 * hard-linked to v<N+1>.metadata.json. link() fails with EEXIST when another writer created that
 * version first, so exactly one writer wins each version and no metadata file is ever overwritten
 * (rename would silently replace). The loser gets the retriable COMMIT_FAILED and re-applies its
 * change on the new version. The hint is replaced afterwards (temp + rename); a writer may die
 * between the two, so readers probe v<hint+1>, v<hint+2>, … and use the highest version present.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { TributaryError } from '../../common/errors.js';
import { intProperty, parseTableMetadata, serializeTableMetadata, type TableMetadata } from './table-metadata.js';

const METADATA_DIR = 'metadata';
const VERSION_HINT = 'version-hint.text';
const VERSION_FILE = /^v(\d+)\.metadata\.json$/;
/** Table property bounding the metadata log, with Iceberg's default. */
const PREVIOUS_VERSIONS_MAX = 'write.metadata.previous-versions-max';
const DEFAULT_PREVIOUS_VERSIONS_MAX = 100;
/** Table properties for commit retries, with Iceberg's names and defaults. */
const RETRY_DEFAULTS = { 'commit.retry.num-retries': 4, 'commit.retry.min-wait-ms': 100, 'commit.retry.max-wait-ms': 60_000 };

export interface LoadedTable {
  metadata: TableMetadata;
  version: number;
  metadataLocation: string;
}

export class FileSystemCatalog {
  /** Absolute, because locations written into metadata are opened by other processes. */
  readonly warehouse: string;

  constructor(warehouse: string) {
    this.warehouse = path.resolve(warehouse);
  }

  tableLocation(db: string, table: string): string {
    return path.join(this.warehouse, checkName(db, 'INVALID_DATABASE_EXCEPTION'), checkName(table, 'INVALID_TABLE_EXCEPTION'));
  }

  async listNamespaces(): Promise<string[]> {
    return (await subdirectories(this.warehouse)) ?? [];
  }

  async listTables(db: string): Promise<string[]> {
    const dbDir = path.join(this.warehouse, checkName(db, 'INVALID_DATABASE_EXCEPTION'));
    const names = await subdirectories(dbDir);
    if (!names) throw new TributaryError('DATABASE_NOT_EXIST', `lake database ${db} does not exist`);
    const versions = await Promise.all(names.map((t) => currentVersion(path.join(dbDir, t, METADATA_DIR))));
    return names.filter((_, i) => versions[i] > 0);
  }

  async tableExists(db: string, table: string): Promise<boolean> {
    return (await currentVersion(this.metadataDir(db, table))) > 0;
  }

  /** Writes `metadata` as version 1; TABLE_ALREADY_EXIST if the table has any version. */
  async createTable(db: string, table: string, metadata: TableMetadata): Promise<LoadedTable> {
    const location = this.tableLocation(db, table);
    if (metadata.location !== location) {
      throw new TributaryError('INVALID_ARGUMENT', `table location ${metadata.location} is not the catalog's ${location}`);
    }
    const dir = this.metadataDir(db, table);
    const exists = () => new TributaryError('TABLE_ALREADY_EXIST', `lake table ${db}.${table} already exists`);
    if ((await currentVersion(dir)) > 0) throw exists();
    await storage(`create ${dir}`, () => fs.promises.mkdir(dir, { recursive: true }));
    if (!(await writeVersion(dir, 1, serializeTableMetadata(metadata)))) throw exists();
    return { metadata, version: 1, metadataLocation: path.join(dir, versionFileName(1)) };
  }

  /**
   * The table's current metadata. `known`, a version loaded before, is returned as it is while it
   * is still the current one: a version's file never changes once written, and versions are
   * committed one after the other, so it is current while the next one does not exist.
   */
  async loadTable(db: string, table: string, known?: LoadedTable): Promise<LoadedTable> {
    const dir = this.metadataDir(db, table);
    if (known && known.metadataLocation === path.join(dir, versionFileName(known.version)) && !(await fileExists(path.join(dir, versionFileName(known.version + 1))))) return known;
    const version = await currentVersion(dir);
    if (version === 0) throw new TributaryError('TABLE_NOT_EXIST', `lake table ${db}.${table} does not exist`);
    const metadataLocation = path.join(dir, versionFileName(version));
    const text = await storage(`read ${metadataLocation}`, () => fs.promises.readFile(metadataLocation, 'utf8'));
    return { metadata: parseTableMetadata(text), version, metadataLocation };
  }

  /**
   * Commits `newMetadata` as version `baseVersion + 1`. `newMetadata` must be derived from the
   * base version's metadata with `lastUpdatedMs` and `metadataLog` untouched: the commit appends
   * the base file to the metadata log (with the base's timestamp) and stamps the new timestamp.
   * Throws COMMIT_FAILED (retriable) when another writer committed that version first.
   */
  async commit(db: string, table: string, baseVersion: number, newMetadata: TableMetadata): Promise<LoadedTable> {
    const dir = this.metadataDir(db, table);
    const baseLocation = path.join(dir, versionFileName(baseVersion));
    if (!(await fileExists(baseLocation))) {
      throw new TributaryError('TABLE_NOT_EXIST', `lake table ${db}.${table} has no version ${baseVersion}`);
    }
    const maxLog = Math.max(1, intProperty(newMetadata, PREVIOUS_VERSIONS_MAX, DEFAULT_PREVIOUS_VERSIONS_MAX));
    const metadata: TableMetadata = {
      ...newMetadata,
      lastUpdatedMs: Math.max(Date.now(), newMetadata.lastUpdatedMs),
      metadataLog: [...newMetadata.metadataLog, { timestampMs: newMetadata.lastUpdatedMs, metadataFile: baseLocation }].slice(-maxLog),
    };
    const version = baseVersion + 1;
    if (!(await writeVersion(dir, version, serializeTableMetadata(metadata)))) {
      throw new TributaryError('COMMIT_FAILED', `lake table ${db}.${table}: version ${version} was committed by another writer`);
    }
    return { metadata, version, metadataLocation: path.join(dir, versionFileName(version)) };
  }

  /** Drops the table's metadata; `purge` also deletes everything else under its location. */
  async dropTable(db: string, table: string, options: { purge?: boolean } = {}): Promise<void> {
    if (!(await this.tableExists(db, table))) throw new TributaryError('TABLE_NOT_EXIST', `lake table ${db}.${table} does not exist`);
    const target = options.purge ? this.tableLocation(db, table) : this.metadataDir(db, table);
    await storage(`delete ${target}`, () => fs.promises.rm(target, { recursive: true, force: true }));
  }

  private metadataDir(db: string, table: string): string {
    return path.join(this.tableLocation(db, table), METADATA_DIR);
  }
}

/**
 * Called after commit attempt `attempt` (1, 2, …) lost to another writer: waits the exponential
 * back-off and returns true, or returns false once the table's `commit.retry.num-retries` are spent.
 */
export async function backOffBeforeRetry(metadata: TableMetadata, attempt: number): Promise<boolean> {
  const get = (key: keyof typeof RETRY_DEFAULTS) => intProperty(metadata, key, RETRY_DEFAULTS[key]);
  if (attempt > get('commit.retry.num-retries')) return false;
  await sleep(Math.min(get('commit.retry.min-wait-ms') * 2 ** (attempt - 1), get('commit.retry.max-wait-ms')));
  return true;
}

export function versionFileName(version: number): string {
  return `v${version}.metadata.json`;
}

/** Writes a new file (never replacing one) and fsyncs its content. */
export async function writeNewFile(file: string, content: string | Uint8Array): Promise<void> {
  await storage(`write ${file}`, async () => {
    const fh = await fs.promises.open(file, 'wx');
    try {
      await fh.writeFile(content);
      await fh.datasync();
    } finally {
      await fh.close();
    }
  });
}

/**
 * Creates v<version> exclusively; false when it already exists. The directory is fsynced before
 * the link, so manifests written into it earlier are durable once the version is visible, and
 * after it, so the version itself is.
 */
async function writeVersion(dir: string, version: number, text: string): Promise<boolean> {
  const temp = path.join(dir, `${crypto.randomUUID()}.metadata.json.tmp`);
  await writeNewFile(temp, text);
  try {
    await syncDirectory(dir);
    await fs.promises.link(temp, path.join(dir, versionFileName(version)));
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') return false;
    if (err instanceof TributaryError) throw err;
    throw new TributaryError('STORAGE_EXCEPTION', `cannot commit ${versionFileName(version)} in ${dir}: ${(err as Error).message}`, { cause: err });
  } finally {
    await fs.promises.unlink(temp).catch(() => {});
  }
  await syncDirectory(dir);
  await writeHint(dir, version);
  return true;
}

/**
 * Replaces the version hint. Best effort, and not fsynced: the version file is already committed
 * and durable, and readers probe past a stale hint and list the directory when the hint is
 * missing or not a number (as a crash may leave it), so a failure here must not turn a successful
 * commit into a failed one, nor is the hint worth two more fsyncs per commit.
 */
async function writeHint(dir: string, version: number): Promise<void> {
  const temp = path.join(dir, `${crypto.randomUUID()}.${VERSION_HINT}.tmp`);
  try {
    await fs.promises.writeFile(temp, String(version), { flag: 'wx' });
    await fs.promises.rename(temp, path.join(dir, VERSION_HINT));
  } catch {
    await fs.promises.unlink(temp).catch(() => {});
  }
}

/** The highest committed version in a metadata dir, 0 when there is none. */
async function currentVersion(dir: string): Promise<number> {
  let version = 0;
  try {
    const hint = (await fs.promises.readFile(path.join(dir, VERSION_HINT), 'utf8')).trim();
    if (/^\d+$/.test(hint)) version = Number(hint);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw storageError(`read the version hint in ${dir}`, err);
  }
  if (version === 0 || !(await fileExists(path.join(dir, versionFileName(version))))) {
    // No usable hint: list the directory (rare: a crash before the first hint, or a damaged hint).
    const names = await storage(`list ${dir}`, () => fs.promises.readdir(dir).catch(orEmptyWhenMissing));
    version = names.reduce((max, name) => Math.max(max, Number(VERSION_FILE.exec(name)?.[1] ?? 0)), 0);
    if (version === 0) return 0;
  }
  while (await fileExists(path.join(dir, versionFileName(version + 1)))) version++;
  return version;
}

async function fileExists(file: string): Promise<boolean> {
  try {
    await fs.promises.access(file);
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return false;
    throw storageError(`access ${file}`, err);
  }
}

async function subdirectories(dir: string): Promise<string[] | undefined> {
  try {
    const entries = await fs.promises.readdir(dir, { withFileTypes: true });
    return entries.filter((e) => e.isDirectory()).map((e) => e.name).sort();
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw storageError(`list ${dir}`, err);
  }
}

async function syncDirectory(dir: string): Promise<void> {
  await storage(`fsync ${dir}`, async () => {
    const dh = await fs.promises.open(dir, 'r');
    try {
      await dh.sync();
    } finally {
      await dh.close();
    }
  });
}

function orEmptyWhenMissing(err: NodeJS.ErrnoException): string[] {
  if (err.code === 'ENOENT') return [];
  throw err;
}

async function storage<T>(action: string, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    if (err instanceof TributaryError) throw err;
    throw storageError(action, err);
  }
}

function storageError(action: string, err: unknown): TributaryError {
  return new TributaryError('STORAGE_EXCEPTION', `cannot ${action}: ${(err as Error).message}`, { cause: err });
}

function checkName(name: string, error: 'INVALID_DATABASE_EXCEPTION' | 'INVALID_TABLE_EXCEPTION'): string {
  if (name === '' || name === '.' || name === '..' || /[/\\\0]/.test(name)) {
    throw new TributaryError(error, `invalid lake ${error === 'INVALID_TABLE_EXCEPTION' ? 'table' : 'database'} name "${name}"`);
  }
  return name;
}
