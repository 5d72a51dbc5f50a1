/**
 * The store of a location: S3 for `s3://` and `s3a://`, else the local store. A process sets its
 * S3 settings and its file cache once: a server from its options (`configureObjectStorage`), any
 * other process from the object storage options among its settings (`configureObjectStorageFrom`:
 * `tributary tiering`, `tributary lake` and the SQL shell from `--set` and `--config`, a client
 * from its connection options). A process that sets none reads the settings from the AWS
 * environment variables (s3-settings.ts) and caches files in a directory of its own under the
 * system temp directory. Locations are what Iceberg metadata
 * holds, so every reader finds the store of a file from the file's own name, as Hadoop's
 * FileSystem.get does.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Options } from '../common/config.js';
import { FileCache, type PinnedFiles } from './file-cache.js';
import { LocalObjectStore } from './local-store.js';
import { isS3Location, type ObjectStore } from './object-store.js';
import { type S3Settings, s3SettingsOf } from './s3-settings.js';
import { S3ObjectStore } from './s3-store.js';
import { countCacheRead } from './storage-stats.js';

/** The cache's size when no option sets it (datalake.cache.max-size's default). */
const DEFAULT_CACHE_BYTES = 2 * 1024 ** 3;
/** datalake.cache.partial-file.max-ratio's default. */
const DEFAULT_PARTIAL_FILE_MAX_RATIO = 0.5;
/** datalake.cache.metadata-max-size's default. */
const DEFAULT_METADATA_CACHE_BYTES = 64 << 20;

const local = new LocalObjectStore();
let settings: S3Settings | undefined;
let s3: S3ObjectStore | undefined;
let cache: FileCache | undefined;
let vendCredentials = false;
let partialMaxRatio = DEFAULT_PARTIAL_FILE_MAX_RATIO;
/** Immutable remote objects kept in memory, least recently used first (Map order). */
const immutable = new Map<string, Uint8Array>();
let immutableBytes = 0;
let immutableMaxBytes = DEFAULT_METADATA_CACHE_BYTES;

/**
 * Uses the `s3.*` options (else the environment) for this process's S3 locations from now on,
 * and `cacheDir` for its cache of remote files (sized by datalake.cache.max-size).
 */
export function configureObjectStorage(options: Options | undefined, cacheDir: string): void {
  settings = s3SettingsOf(options);
  s3 = undefined;
  vendCredentials = options?.bool('datalake.iceberg.rest.vend-credentials') ?? false;
  cache = new FileCache(path.resolve(cacheDir), options ? options.bytes('datalake.cache.max-size') : DEFAULT_CACHE_BYTES);
  immutableMaxBytes = options ? options.bytes('datalake.cache.metadata-max-size') : DEFAULT_METADATA_CACHE_BYTES;
  partialMaxRatio = options ? options.double('datalake.cache.partial-file.max-ratio') : DEFAULT_PARTIAL_FILE_MAX_RATIO;
  immutable.clear();
  immutableBytes = 0;
}

/**
 * The bytes of an object that never changes once written (a lake manifest or manifest list),
 * undefined when there is none. A remote one is kept in memory (datalake.cache.metadata-max-size),
 * so planning the same snapshot again costs no request; a local one is read each time (the page
 * cache keeps it).
 */
export async function getImmutable(location: string): Promise<Uint8Array | undefined> {
  const store = objectStoreFor(location);
  if (store.localPath(location) !== undefined) return store.get(location);
  return keptImmutable(location, async () => {
    const bytes = await store.get(location);
    return bytes && { bytes, fetched: bytes.length };
  });
}

/**
 * Bytes read from a remote object that never changes (all of it, or a part such as a Parquet
 * footer, named by `key`), kept in memory with getImmutable's (datalake.cache.metadata-max-size):
 * `load` reads them the first time and says how many bytes it fetched; undefined when there are none.
 */
export async function keptImmutable(key: string, load: () => Promise<{ bytes: Uint8Array; fetched: number } | undefined>): Promise<Uint8Array | undefined> {
  const held = immutable.get(key);
  if (held) {
    immutable.delete(key);
    immutable.set(key, held);
    countCacheRead(true);
    return held;
  }
  const loaded = await load();
  if (!loaded) return undefined;
  const { bytes } = loaded;
  countCacheRead(false, loaded.fetched);
  if (bytes.length <= immutableMaxBytes && !immutable.has(key)) {
    immutable.set(key, bytes);
    immutableBytes += bytes.length;
    for (const [l, b] of immutable) {
      if (immutableBytes <= immutableMaxBytes) break;
      immutable.delete(l);
      immutableBytes -= b.length;
    }
  }
  return bytes;
}

/** The options of a process's object storage, which every process takes: `s3.*` and the lake file cache's. */
export function isObjectStorageOption(key: string): boolean {
  return key.startsWith('s3.') || key.startsWith('datalake.cache.');
}

/**
 * Configures this process's object storage from the object storage options among `settings`
 * (the others are left to the caller), its cache in datalake.cache.dir or else `defaultCacheDir`.
 * Unknown or malformed options are INVALID_CONFIG_EXCEPTION, which never quotes a secret's value.
 */
export function configureObjectStorageFrom(settings: Record<string, string>, defaultCacheDir: string): void {
  const options = new Options('server', Object.fromEntries(Object.entries(settings).filter(([k]) => isObjectStorageOption(k))));
  configureObjectStorage(options, options.string('datalake.cache.dir') ?? defaultCacheDir);
}

/** The S3 settings in force in this process. */
export function objectStorageSettings(): S3Settings {
  return (settings ??= s3SettingsOf(undefined));
}

/** The store holding `location`. */
export function objectStoreFor(location: string): ObjectStore {
  if (!isS3Location(location)) return local;
  return (s3 ??= new S3ObjectStore(objectStorageSettings()));
}

let cacheDirRemovedAtExit = false;

/**
 * The cache directory of a process that names none: its own, under the system temp directory,
 * removed when the process exits (no other process ever reads it).
 */
export function processCacheDir(): string {
  const dir = path.join(os.tmpdir(), `tributary-lake-cache-${process.pid}`);
  if (!cacheDirRemovedAtExit) {
    cacheDirRemovedAtExit = true;
    process.once('exit', () => fs.rmSync(dir, { recursive: true, force: true }));
  }
  return dir;
}

/** The largest share of a remote file a read of part of it may fetch as that part (datalake.cache.partial-file.max-ratio); past it the file is fetched whole. */
export function partialFileMaxRatio(): number {
  return partialMaxRatio;
}

/** This process's cache of remote files. */
export function remoteFileCache(): FileCache {
  return (cache ??= new FileCache(processCacheDir(), DEFAULT_CACHE_BYTES));
}

/**
 * Local paths of the files at `locations` until `release`: a local store's files where they are,
 * remote ones fetched into the cache and pinned there.
 */
export async function localCopies(locations: Iterable<string>): Promise<PinnedFiles> {
  const remote: string[] = [];
  const paths = new Map<string, string>();
  for (const l of locations) {
    const at = objectStoreFor(l).localPath(l);
    if (at === undefined) remote.push(l);
    else paths.set(l, at);
  }
  if (remote.length === 0) return { path: (l) => paths.get(l), release: () => {} };
  const pinned = await remoteFileCache().pin(objectStoreFor(remote[0]), remote);
  return { path: (l) => paths.get(l) ?? pinned.path(l), release: pinned.release };
}

/**
 * Where a writer writes the file of `location` before it is durable: in place for a local store,
 * else a staging file of the cache, which `publishStaged` uploads.
 */
export async function writePathFor(location: string): Promise<string> {
  return objectStoreFor(location).localPath(location) ?? (await remoteFileCache().stagingPath());
}

/** Uploads a file written at `writePathFor(location)` when it was staged, keeping it as the cached copy. */
export async function publishStaged(location: string, written: string): Promise<void> {
  const store = objectStoreFor(location);
  if (store.localPath(location) !== undefined) return;
  try {
    await store.putFile(location, written);
    await remoteFileCache().adopt(location, written);
  } catch (err) {
    await fs.promises.rm(written, { force: true }).catch(() => {});
    throw err;
  }
}

/**
 * The FileIO properties an Iceberg client needs to read the files under `location` itself (the
 * REST catalog's load-table `config`): none for a directory; for S3 the endpoint, path-style
 * addressing and region, and the credentials only when datalake.iceberg.rest.vend-credentials is on.
 */
export function fileIoProperties(location: string): Record<string, string> {
  if (!isS3Location(location)) return {};
  const s = objectStorageSettings();
  return {
    ...(s.endpoint ? { 's3.endpoint': s.endpoint } : {}),
    's3.path-style-access': String(s.pathStyle),
    'client.region': s.region,
    ...(vendCredentials && s.accessKeyId && s.secretAccessKey ? { 's3.access-key-id': s.accessKeyId, 's3.secret-access-key': s.secretAccessKey } : {}),
  };
}
