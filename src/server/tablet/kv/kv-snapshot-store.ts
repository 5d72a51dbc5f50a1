/**
 * The KV snapshots of one bucket under `remote.data.dir` (a directory or `s3://bucket/prefix`,
 * through the storage layer): consistent copies of its lmdb state with the changelog offset they
 * contain, and the newest one the coordinator has registered.
 *
 * Layout under the bucket's location:
 *   shared/<sha-256 of the chunk, hex>   one chunk of an lmdb copy, named by its content
 *   snap-<id>/_METADATA                  {"snapshot_id": 3, "log_offset": "1200", "row_count": 987,
 *                                         "created_time": 1700000000000, "size": 9437184,
 *                                         "chunk_size": 4194304, "chunks": ["9f86d0…", …]}
 * lmdb's copy is one file (`data.mdb`); a snapshot cuts it into chunks of `kv.snapshot.chunk-size`
 * bytes, and `chunks` lists them in file order. lmdb writes copy-on-write into free pages, so
 * between two snapshots only the chunks holding pages written meanwhile change: the others have
 * the same content, hence the same name, and are uploaded once and shared by every snapshot that
 * holds them (incremental snapshots). A chunk is written whole or not at all (a directory's
 * rename, S3's single or completed multipart upload).
 *
 * `log_offset` is the first changelog offset NOT contained: recovery replays from it. `_METADATA`
 * is published last, create-only, after every chunk it names is stored; only then is the snapshot
 * committed to the coordinator (CommitKvSnapshot). Which snapshots exist is what the coordinator
 * registered, never what a listing finds: a snapshot no registered handle names (an interrupted
 * or refused one) is never restored, and the coordinator removes it, and the chunks no retained
 * snapshot names, with the next commit of the bucket.
 *
 * A new snapshot's id is one above every snapshot there, claimed by publishing its `_METADATA`
 * create-only (a lost race takes the next id), so two servers snapshotting the bucket during a
 * leader change never write the same one. The lmdb copy is made in a local staging directory
 * (lmdb copies only to a path) and removed once uploaded.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import type { RootDatabase } from 'lmdb';
import { TributaryError } from '../../../common/errors.js';
import { type KvSnapshotHandle, type KvSnapshotMetadata, parseKvSnapshotMetadata, sharedChunksLocation, snapshotBucketLocation } from '../../../common/kv-snapshot.js';
import { joinLocation, type ObjectStore } from '../../../storage/object-store.js';
import { objectStoreFor } from '../../../storage/stores.js';

const METADATA = '_METADATA';
/** Chunks uploaded or downloaded at once per snapshot. */
const CHUNK_CONCURRENCY = 4;

/** What a snapshot cost: the bytes of its copy, and those it uploaded (the chunks no earlier snapshot had). */
export interface KvSnapshotUpload {
  bytes: number;
  uploadedBytes: number;
  chunks: number;
  uploadedChunks: number;
}

export class KvSnapshotStore {
  /** The newest snapshot the coordinator registered, as this server last heard; a new leader restores it. */
  private newest: KvSnapshotHandle | undefined;
  private readonly store: ObjectStore;

  /**
   * @param location the bucket's snapshot location under remote.data.dir
   * @param stagingDir a local directory of this server for the lmdb copy before its upload
   * @param chunkSize bytes of one chunk (kv.snapshot.chunk-size)
   * @param onUpload told what each snapshot taken here uploaded (the server's metrics)
   */
  constructor(
    readonly location: string,
    private readonly stagingDir: string,
    private readonly chunkSize: number,
    private readonly onUpload: (upload: KvSnapshotUpload) => void = () => {},
  ) {
    this.store = objectStoreFor(location);
  }

  get registered(): KvSnapshotHandle | undefined {
    return this.newest;
  }

  /** Takes a handle the coordinator registered (committed here, or named in NotifyLeaderAndIsr), unless a newer one is known. */
  learn(handle: KvSnapshotHandle | undefined): void {
    if (handle && (!this.newest || handle.snapshotId > this.newest.snapshotId)) this.newest = handle;
  }

  /** Copies `env` (whose state corresponds to `logOffset`) into a new snapshot; returns its handle, not registered yet. */
  async take(env: RootDatabase<Uint8Array, Uint8Array>, state: { logOffset: bigint; rowCount: number }): Promise<KvSnapshotHandle> {
    const staging = path.join(this.stagingDir, `copy-${process.pid}-${crypto.randomUUID()}`);
    await fs.promises.mkdir(staging, { recursive: true });
    try {
      await env.backup(staging, false);
      const copy = path.join(staging, 'data.mdb');
      const { chunks, size, upload } = await this.uploadChunks(copy);
      const meta: Omit<KvSnapshotMetadata, 'snapshot_id'> = { log_offset: state.logOffset.toString(), row_count: state.rowCount, created_time: Date.now(), size, chunk_size: this.chunkSize, chunks };
      for (let snapshotId = (await this.highestId()) + 1; ; snapshotId++) {
        const metadataPath = joinLocation(this.location, `snap-${snapshotId}`, METADATA);
        const body = JSON.stringify({ snapshot_id: snapshotId, ...meta } satisfies KvSnapshotMetadata);
        if (await this.store.publish(metadataPath, body, { absent: true })) {
          this.onUpload(upload);
          return { snapshotId, logOffset: state.logOffset, rowCount: state.rowCount, metadataPath };
        }
      }
    } finally {
      await fs.promises.rm(staging, { recursive: true, force: true });
    }
  }

  /** Removes a snapshot that was not registered (its chunks no other snapshot holds go with the next commit's clean-up). */
  async remove(handle: KvSnapshotHandle): Promise<void> {
    await this.store.deleteDirectory(path.posix.dirname(handle.metadataPath));
  }

  /** Writes the registered snapshot's state into `targetDir` as lmdb's `data.mdb`; undefined when none is registered. */
  async restoreRegistered(targetDir: string): Promise<KvSnapshotHandle | undefined> {
    await fs.promises.mkdir(targetDir, { recursive: true });
    const handle = this.newest;
    if (!handle) return undefined;
    const store = objectStoreFor(handle.metadataPath);
    const meta = await readSnapshotMetadata(handle.metadataPath);
    const target = path.join(targetDir, 'data.mdb');
    // Snapshots from before chunks keep the whole copy beside their _METADATA.
    if (!meta.chunks) {
      await store.getToFile(joinLocation(path.posix.dirname(handle.metadataPath), 'data.mdb'), target);
      return handle;
    }
    const shared = sharedChunksLocation(snapshotBucketLocation(handle.metadataPath));
    const partial = `${target}.restoring`;
    const fh = await fs.promises.open(partial, 'w');
    try {
      await forEachLimited(meta.chunks, CHUNK_CONCURRENCY, async (hash, i) => {
        const bytes = await store.get(joinLocation(shared, hash));
        if (!bytes || sha256(bytes) !== hash) {
          throw new TributaryError('KV_STORAGE_EXCEPTION', `KV snapshot ${handle.snapshotId} at ${handle.metadataPath}: chunk ${hash} is ${bytes ? 'damaged' : 'missing'}`);
        }
        await fh.write(bytes, 0, bytes.length, i * meta.chunk_size);
      });
      await fh.truncate(meta.size);
      await fh.sync();
    } finally {
      await fh.close();
    }
    await fs.promises.rename(partial, target);
    return handle;
  }

  /** Cuts the file into chunks and stores those the bucket does not hold yet. */
  private async uploadChunks(file: string): Promise<{ chunks: string[]; size: number; upload: KvSnapshotUpload }> {
    const shared = sharedChunksLocation(this.location);
    const held = new Map((await this.store.list(shared)).map((o) => [o.location, o.size]));
    const size = (await fs.promises.stat(file)).size;
    const count = Math.max(1, Math.ceil(size / this.chunkSize));
    const chunks = new Array<string>(count);
    let uploadedBytes = 0;
    let uploadedChunks = 0;
    const fh = await fs.promises.open(file, 'r');
    try {
      await forEachLimited(Array.from({ length: count }, (_, i) => i), CHUNK_CONCURRENCY, async (i) => {
        const bytes = Buffer.alloc(Math.min(this.chunkSize, size - i * this.chunkSize));
        await fh.read(bytes, 0, bytes.length, i * this.chunkSize);
        const hash = sha256(bytes);
        chunks[i] = hash;
        const at = joinLocation(shared, hash);
        if (held.get(at) === bytes.length) return;
        held.set(at, bytes.length);
        await this.store.putStream(at, once(bytes));
        uploadedBytes += bytes.length;
        uploadedChunks++;
      });
    } finally {
      await fh.close();
    }
    return { chunks, size, upload: { bytes: size, uploadedBytes, chunks: count, uploadedChunks } };
  }

  /** The highest id of a snapshot there, complete or not; 0 when there is none. */
  private async highestId(): Promise<number> {
    let highest = this.newest?.snapshotId ?? 0;
    for (const n of await this.store.listDirectories(this.location)) if (/^snap-\d+$/.test(n)) highest = Math.max(highest, Number(n.slice(5)));
    return highest;
  }
}

/** The `_METADATA` of a snapshot. */
async function readSnapshotMetadata(metadataPath: string): Promise<KvSnapshotMetadata> {
  const bytes = await objectStoreFor(metadataPath).get(metadataPath);
  if (!bytes) throw new TributaryError('KV_STORAGE_EXCEPTION', `KV snapshot metadata ${metadataPath} is missing`);
  return parseKvSnapshotMetadata(bytes, metadataPath);
}

/** One chunk as a stream, which the S3 store sends as a multipart upload when it is larger than a part. */
async function* once(bytes: Uint8Array): AsyncIterable<Uint8Array> {
  yield bytes;
}

function sha256(bytes: Uint8Array): string {
  return crypto.createHash('sha256').update(bytes).digest('hex');
}

/** Runs `work` on each item, at most `limit` at once; the first failure is thrown once all have stopped. */
async function forEachLimited<T>(items: readonly T[], limit: number, work: (item: T, index: number) => Promise<void>): Promise<void> {
  let next = 0;
  let failure: unknown;
  const lane = async (): Promise<void> => {
    while (failure === undefined && next < items.length) {
      const i = next++;
      try {
        await work(items[i], i);
      } catch (err) {
        failure ??= err;
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, lane));
  if (failure !== undefined) throw failure;
}
