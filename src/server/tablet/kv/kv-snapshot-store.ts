/**
 * The KV snapshots of one bucket under `remote.data.dir`: consistent copies of its lmdb state with
 * the changelog offset they contain, and the newest one the coordinator has registered.
 *
 * Layout: `<bucket snapshot dir>/snap-<id>/data.mdb` (an lmdb copy) and `snap-<id>/_METADATA`:
 *   {"snapshot_id": 3, "log_offset": "1200", "row_count": 987, "created_time": 1700000000000}
 * `log_offset` is the first changelog offset NOT contained: recovery replays from it. `_METADATA`
 * is written last, atomically, and only then is the snapshot committed to the coordinator
 * (CommitKvSnapshot). Which snapshots exist is what the coordinator registered, never what a
 * listing finds: a directory no registered handle names (an interrupted or refused snapshot) is
 * never restored, and the coordinator removes it with the next commit of the bucket.
 *
 * A new snapshot's id is one above every directory there, claimed by creating its directory
 * (which fails if it exists), so two servers snapshotting the bucket during a leader change never
 * write into the same one.
 */
import fs from 'node:fs';
import path from 'node:path';
import type { RootDatabase } from 'lmdb';
import { writeFileAtomic } from '../../../common/files.js';
import type { KvSnapshotHandle } from '../../../common/kv-snapshot.js';

const METADATA = '_METADATA';

export class KvSnapshotStore {
  /** The newest snapshot the coordinator registered, as this server last heard; a new leader restores it. */
  private newest: KvSnapshotHandle | undefined;

  constructor(readonly dir: string) {}

  get registered(): KvSnapshotHandle | undefined {
    return this.newest;
  }

  /** Takes a handle the coordinator registered (committed here, or named in NotifyLeaderAndIsr), unless a newer one is known. */
  learn(handle: KvSnapshotHandle | undefined): void {
    if (handle && (!this.newest || handle.snapshotId > this.newest.snapshotId)) this.newest = handle;
  }

  /** Copies `env` (whose state corresponds to `logOffset`) into a new snapshot directory; returns its handle, not registered yet. */
  async take(env: RootDatabase<Uint8Array, Uint8Array>, state: { logOffset: bigint; rowCount: number }): Promise<KvSnapshotHandle> {
    await fs.promises.mkdir(this.dir, { recursive: true });
    let snapshotId = (await this.highestId()) + 1;
    for (;;) {
      try {
        await fs.promises.mkdir(path.join(this.dir, `snap-${snapshotId}`));
        break;
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
        snapshotId++;
      }
    }
    const target = path.join(this.dir, `snap-${snapshotId}`);
    await env.backup(target, false);
    const meta = { snapshot_id: snapshotId, log_offset: state.logOffset.toString(), row_count: state.rowCount, created_time: Date.now() };
    await writeFileAtomic(target, METADATA, JSON.stringify(meta));
    return { snapshotId, logOffset: state.logOffset, rowCount: state.rowCount, metadataPath: path.join(target, METADATA) };
  }

  /** Removes the files of a snapshot that was not registered. */
  async remove(handle: KvSnapshotHandle): Promise<void> {
    await fs.promises.rm(path.dirname(handle.metadataPath), { recursive: true, force: true });
  }

  /** Copies the registered snapshot's state into `targetDir`; undefined when none is registered. */
  async restoreRegistered(targetDir: string): Promise<KvSnapshotHandle | undefined> {
    await fs.promises.mkdir(targetDir, { recursive: true });
    const handle = this.newest;
    if (!handle) return undefined;
    await fs.promises.copyFile(path.join(path.dirname(handle.metadataPath), 'data.mdb'), path.join(targetDir, 'data.mdb'));
    return handle;
  }

  /** The highest id of a snapshot directory, complete or not; 0 when there is none. */
  private async highestId(): Promise<number> {
    const names = await fs.promises.readdir(this.dir);
    let highest = this.newest?.snapshotId ?? 0;
    for (const n of names) if (/^snap-\d+$/.test(n)) highest = Math.max(highest, Number(n.slice(5)));
    return highest;
  }
}
