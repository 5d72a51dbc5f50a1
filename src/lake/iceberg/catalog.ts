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
 * The catalog works on any ObjectStore (storage/): a local directory or `s3://bucket/prefix`, and
 * its tables' locations name that store. Commit of version N+1 on base N publishes
 * v<N+1>.metadata.json with the store's create-only compare-and-set (`publish` expecting no
 * object): on a directory a hard link, which fails when another writer created that version
 * first; on S3 a claim plus `If-None-Match: *` (storage/s3-store.ts), never a rename. So exactly
 * one writer wins each version and no metadata file is ever overwritten. The loser gets the
 * retriable COMMIT_FAILED and re-applies its change on the new version, as Iceberg's optimistic
 * concurrency does. The hint is replaced afterwards; a writer may die between the two, so readers
 * probe v<hint+1>, v<hint+2>, … and use the highest version present.
 */
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { TributaryError } from '../../common/errors.js';
import { isS3Location, joinLocation, type ObjectStore } from '../../storage/object-store.js';
import { objectStoreFor } from '../../storage/stores.js';
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
  /** Absolute (or an s3:// location), because locations written into metadata are opened by other processes. */
  readonly warehouse: string;
  readonly store: ObjectStore;

  constructor(warehouse: string) {
    this.warehouse = isS3Location(warehouse) ? warehouse.replace(/\/+$/, '') : path.resolve(warehouse.replace(/^file:\/\/(?=\/)/, ''));
    this.store = objectStoreFor(this.warehouse);
  }

  tableLocation(db: string, table: string): string {
    return joinLocation(this.warehouse, checkName(db, 'INVALID_DATABASE_EXCEPTION'), checkName(table, 'INVALID_TABLE_EXCEPTION'));
  }

  async listNamespaces(): Promise<string[]> {
    return this.store.listDirectories(this.warehouse);
  }

  async listTables(db: string): Promise<string[]> {
    const dbDir = joinLocation(this.warehouse, checkName(db, 'INVALID_DATABASE_EXCEPTION'));
    const names = await this.store.listDirectories(dbDir);
    if (names.length === 0 && !(await this.listNamespaces()).includes(db)) throw new TributaryError('DATABASE_NOT_EXIST', `lake database ${db} does not exist`);
    const versions = await Promise.all(names.map((t) => this.currentVersion(joinLocation(dbDir, t, METADATA_DIR))));
    return names.filter((_, i) => versions[i] > 0);
  }

  async tableExists(db: string, table: string): Promise<boolean> {
    return (await this.currentVersion(this.metadataDir(db, table))) > 0;
  }

  /** Writes `metadata` as version 1; TABLE_ALREADY_EXIST if the table has any version. */
  async createTable(db: string, table: string, metadata: TableMetadata): Promise<LoadedTable> {
    const location = this.tableLocation(db, table);
    if (metadata.location !== location) {
      throw new TributaryError('INVALID_ARGUMENT', `table location ${metadata.location} is not the catalog's ${location}`);
    }
    const dir = this.metadataDir(db, table);
    const exists = () => new TributaryError('TABLE_ALREADY_EXIST', `lake table ${db}.${table} already exists`);
    if ((await this.currentVersion(dir)) > 0) throw exists();
    if (!(await this.writeVersion(dir, 1, serializeTableMetadata(metadata)))) throw exists();
    return { metadata, version: 1, metadataLocation: joinLocation(dir, versionFileName(1)) };
  }

  /**
   * The table's current metadata. `known`, a version loaded before, is returned as it is while it
   * is still the current one: a version's file never changes once written, and versions are
   * committed one after the other, so it is current while the next one does not exist.
   */
  async loadTable(db: string, table: string, known?: LoadedTable): Promise<LoadedTable> {
    const dir = this.metadataDir(db, table);
    if (known && known.metadataLocation === joinLocation(dir, versionFileName(known.version)) && !(await this.exists(joinLocation(dir, versionFileName(known.version + 1))))) return known;
    const version = await this.currentVersion(dir);
    if (version === 0) throw new TributaryError('TABLE_NOT_EXIST', `lake table ${db}.${table} does not exist`);
    const metadataLocation = joinLocation(dir, versionFileName(version));
    const bytes = await this.store.get(metadataLocation);
    if (!bytes) throw new TributaryError('STORAGE_EXCEPTION', `cannot read ${metadataLocation}: it is gone`);
    return { metadata: parseTableMetadata(Buffer.from(bytes).toString('utf8')), version, metadataLocation };
  }

  /**
   * Commits `newMetadata` as version `baseVersion + 1`. `newMetadata` must be derived from the
   * base version's metadata with `lastUpdatedMs` and `metadataLog` untouched: the commit appends
   * the base file to the metadata log (with the base's timestamp) and stamps the new timestamp.
   * Throws COMMIT_FAILED (retriable) when another writer committed that version first.
   */
  async commit(db: string, table: string, baseVersion: number, newMetadata: TableMetadata): Promise<LoadedTable> {
    const dir = this.metadataDir(db, table);
    const baseLocation = joinLocation(dir, versionFileName(baseVersion));
    if (!(await this.exists(baseLocation))) {
      throw new TributaryError('TABLE_NOT_EXIST', `lake table ${db}.${table} has no version ${baseVersion}`);
    }
    const maxLog = Math.max(1, intProperty(newMetadata, PREVIOUS_VERSIONS_MAX, DEFAULT_PREVIOUS_VERSIONS_MAX));
    const metadata: TableMetadata = {
      ...newMetadata,
      lastUpdatedMs: Math.max(Date.now(), newMetadata.lastUpdatedMs),
      metadataLog: [...newMetadata.metadataLog, { timestampMs: newMetadata.lastUpdatedMs, metadataFile: baseLocation }].slice(-maxLog),
    };
    const version = baseVersion + 1;
    if (!(await this.writeVersion(dir, version, serializeTableMetadata(metadata)))) {
      throw new TributaryError('COMMIT_FAILED', `lake table ${db}.${table}: version ${version} was committed by another writer`);
    }
    return { metadata, version, metadataLocation: joinLocation(dir, versionFileName(version)) };
  }

  /** Drops the table's metadata; `purge` also deletes everything else under its location. */
  async dropTable(db: string, table: string, options: { purge?: boolean } = {}): Promise<void> {
    if (!(await this.tableExists(db, table))) throw new TributaryError('TABLE_NOT_EXIST', `lake table ${db}.${table} does not exist`);
    await this.store.deleteDirectory(options.purge ? this.tableLocation(db, table) : this.metadataDir(db, table));
  }

  private metadataDir(db: string, table: string): string {
    return joinLocation(this.tableLocation(db, table), METADATA_DIR);
  }

  private async exists(location: string): Promise<boolean> {
    return (await this.store.head(location)) !== undefined;
  }

  /**
   * Creates v<version> with the store's create-only compare-and-set; false when it already
   * exists. Files written before it (manifests, data files) are durable by then: every put is.
   */
  private async writeVersion(dir: string, version: number, text: string): Promise<boolean> {
    if (!(await this.store.publish(joinLocation(dir, versionFileName(version)), text, { absent: true }))) return false;
    await this.writeHint(dir, version);
    return true;
  }

  /**
   * Replaces the version hint. Best effort: the version file is already committed and durable,
   * and readers probe past a stale hint and list the directory when the hint is missing or not a
   * number (as a crash may leave it), so a failure here must not turn a successful commit into a
   * failed one.
   */
  private async writeHint(dir: string, version: number): Promise<void> {
    await this.store.put(joinLocation(dir, VERSION_HINT), String(version)).catch(() => {});
  }

  /** The highest committed version in a metadata dir, 0 when there is none. */
  private async currentVersion(dir: string): Promise<number> {
    let version = 0;
    const hint = await this.store.get(joinLocation(dir, VERSION_HINT));
    const text = hint ? Buffer.from(hint).toString('utf8').trim() : '';
    if (/^\d+$/.test(text)) version = Number(text);
    if (version === 0 || !(await this.exists(joinLocation(dir, versionFileName(version))))) {
      // No usable hint: list the directory (rare: a crash before the first hint, or a damaged hint).
      const names = (await this.store.list(dir)).map((o) => o.location.slice(o.location.lastIndexOf('/') + 1));
      version = names.reduce((max, name) => Math.max(max, Number(VERSION_FILE.exec(name)?.[1] ?? 0)), 0);
      if (version === 0) return 0;
    }
    while (await this.exists(joinLocation(dir, versionFileName(version + 1)))) version++;
    return version;
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

function checkName(name: string, error: 'INVALID_DATABASE_EXCEPTION' | 'INVALID_TABLE_EXCEPTION'): string {
  if (name === '' || name === '.' || name === '..' || /[/\\\0]/.test(name)) {
    throw new TributaryError(error, `invalid lake ${error === 'INVALID_TABLE_EXCEPTION' ? 'table' : 'database'} name "${name}"`);
  }
  return name;
}
