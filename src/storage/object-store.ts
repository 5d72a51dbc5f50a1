/**
 * What Tributary keeps in remote storage, behind one small interface (DESIGN.md §11). A location
 * names one object and says which store holds it:
 *
 *   /abs/path, file:///abs/path      a local or shared directory (local-store.ts)
 *   s3://bucket/key, s3a://bucket/key  the S3 API (s3-store.ts)
 *
 * Objects are written whole: a reader sees an object's old bytes or its new ones, never a part.
 * "Directories" are key prefixes ending in '/'. `publish` is the one compare-and-set: it creates
 * an object only if there is none, or replaces it only while its etag is the one the caller read.
 * Each store says in its header how it keeps that promise.
 */

/** An object as a listing or a head request sees it. */
export interface ObjectInfo {
  location: string;
  size: number;
  /** Last change, ms since the epoch, by the store's clock. */
  lastModifiedMs: number;
}

export interface ObjectHead extends ObjectInfo {
  /** Changes whenever the object is written: what `publish` compares. */
  etag: string;
}

/** What `publish` expects to find: no object, or the object with this etag. */
export type PublishExpectation = { absent: true } | { etag: string };

/** A byte range of an object: `length` bytes from `offset` (to the end when `length` is absent). */
export interface ByteRange {
  offset: number;
  length?: number;
}

export interface ObjectStore {
  /** `local` or `s3`: what a log line may say of a store (never its credentials). */
  readonly kind: 'local' | 's3';
  /** The local path of `location` when this store keeps it in a directory readers can open in place; else undefined. */
  localPath(location: string): string | undefined;
  /** Writes the whole object, replacing any; durable once resolved. */
  put(location: string, body: Uint8Array | string): Promise<void>;
  /** Writes the object from a stream of chunks (large objects go up in parts); durable once resolved. */
  putStream(location: string, body: AsyncIterable<Uint8Array>): Promise<void>;
  /** Uploads a local file as the object. */
  putFile(location: string, file: string): Promise<void>;
  /** The object's bytes (those of `range` only, when given); undefined when there is no such object. */
  get(location: string, range?: ByteRange): Promise<Uint8Array | undefined>;
  /** Downloads the object into a new local file `file` (written whole, then renamed into place); false when there is no such object. */
  getToFile(location: string, file: string): Promise<boolean>;
  /** The object's size, change time and etag; undefined when there is none. */
  head(location: string): Promise<ObjectHead | undefined>;
  /** Every object under the prefix `dir` (a directory: '/' is added when missing), at any depth. */
  list(dir: string): Promise<ObjectInfo[]>;
  /** The names of the directories directly under `dir` that hold objects (a local store: every subdirectory). */
  listDirectories(dir: string): Promise<string[]>;
  /** Deletes the object; nothing happens when there is none. */
  delete(location: string): Promise<void>;
  /** Deletes each of the objects, those missing too. */
  deleteMany(locations: readonly string[]): Promise<void>;
  /** Deletes everything under the directory `dir`. */
  deleteDirectory(dir: string): Promise<void>;
  /**
   * Compare-and-set: writes `body` as the object only if `expected` still holds (no object, or
   * the object with that etag). Returns the new object's head, or undefined when another writer
   * got there first and nothing was written.
   */
  publish(location: string, body: Uint8Array | string, expected: PublishExpectation): Promise<ObjectHead | undefined>;
}

const S3_LOCATION = /^s3a?:\/\//;

/** Whether `location` is on S3 (`s3://` or `s3a://`). */
export function isS3Location(location: string): boolean {
  return S3_LOCATION.test(location);
}

/** `base` with `parts` appended, '/'-separated (locations are URIs or absolute paths, never Windows paths). */
export function joinLocation(base: string, ...parts: string[]): string {
  let out = base.replace(/\/+$/, '');
  for (const p of parts) out += `/${p.replace(/^\/+|\/+$/g, '')}`;
  return out;
}

/** The last component of a location. */
export function baseName(location: string): string {
  return location.replace(/\/+$/, '').slice(location.replace(/\/+$/, '').lastIndexOf('/') + 1);
}

/** The filesystem path of a local location, which other writers may give as a `file:` URI. */
export function filePathOf(location: string): string {
  return location.startsWith('file:') ? decodeURIComponent(location.replace(/^file:(\/\/(?=\/))?/, '')) : location;
}
