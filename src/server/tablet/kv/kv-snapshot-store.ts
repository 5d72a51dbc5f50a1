/**
 * KV snapshots of one bucket under `remote.data.dir`: consistent copies of its lmdb state with the
 * changelog offset they contain, of which the newest `kv.snapshot.num-retained` are kept.
 *
 * Layout: `<bucket snapshot dir>/snap-<id>/data.mdb` (an lmdb copy) and `snap-<id>/_METADATA`:
 *   {"snapshot_id": 3, "log_offset": "1200", "row_count": 987, "created_time": 1700000000000}
 * `log_offset` is the first changelog offset NOT contained: recovery replays from it. A snapshot is
 * complete once `_METADATA` exists (it is written last, atomically); directories without it are
 * leftovers of an interrupted snapshot and are ignored and removed.
 */
import fs from 'node:fs';
import path from 'node:path';
import type { RootDatabase } from 'lmdb';
import { writeFileAtomic } from '../../../common/files.js';

export interface KvSnapshotInfo {
  snapshotId: number;
  logOffset: bigint;
  rowCount: number;
  createdTime: number;
}

const METADATA = '_METADATA';

export class KvSnapshotStore {
  /** The newest completed snapshot once read (null: none), kept as snapshots are taken. */
  private newest: KvSnapshotInfo | null | undefined;

  constructor(
    readonly dir: string,
    private readonly numRetained: number,
  ) {}

  /** Completed snapshots, oldest first. */
  list(): KvSnapshotInfo[] {
    if (!fs.existsSync(this.dir)) return [];
    const out: KvSnapshotInfo[] = [];
    for (const name of fs.readdirSync(this.dir)) {
      if (!name.startsWith('snap-')) continue;
      const file = path.join(this.dir, name, METADATA);
      if (!fs.existsSync(file)) continue;
      const m = JSON.parse(fs.readFileSync(file, 'utf8')) as { snapshot_id: number; log_offset: string; row_count: number; created_time: number };
      out.push({ snapshotId: m.snapshot_id, logOffset: BigInt(m.log_offset), rowCount: m.row_count, createdTime: m.created_time });
    }
    return out.sort((a, b) => a.snapshotId - b.snapshotId);
  }

  /**
   * The newest completed snapshot. The directory is read once, when the bucket opens; retention
   * checks and GetLatestKvSnapshots then ask without file system calls on the event loop.
   */
  latest(): KvSnapshotInfo | undefined {
    if (this.newest === undefined) this.newest = this.list().at(-1) ?? null;
    return this.newest ?? undefined;
  }

  /** Copies `env` (whose state corresponds to `logOffset`) into a new snapshot, then drops old ones. */
  async take(env: RootDatabase<Uint8Array, Uint8Array>, state: { logOffset: bigint; rowCount: number }): Promise<KvSnapshotInfo> {
    const existing = await this.allIds();
    const snapshotId = (existing.at(-1) ?? 0) + 1;
    const target = path.join(this.dir, `snap-${snapshotId}`);
    await fs.promises.mkdir(target, { recursive: true });
    await env.backup(target, false);
    const info: KvSnapshotInfo = { snapshotId, logOffset: state.logOffset, rowCount: state.rowCount, createdTime: Date.now() };
    const meta = { snapshot_id: snapshotId, log_offset: info.logOffset.toString(), row_count: info.rowCount, created_time: info.createdTime };
    await writeFileAtomic(target, METADATA, JSON.stringify(meta));
    this.newest = info;
    await this.removeOld();
    return info;
  }

  /** Copies the latest snapshot's state into `targetDir`; undefined when there is none. */
  async restoreLatest(targetDir: string): Promise<KvSnapshotInfo | undefined> {
    await fs.promises.mkdir(targetDir, { recursive: true });
    const latest = this.latest();
    if (!latest) return undefined;
    await fs.promises.copyFile(path.join(this.dir, `snap-${latest.snapshotId}`, 'data.mdb'), path.join(targetDir, 'data.mdb'));
    return latest;
  }

  async removeAll(): Promise<void> {
    await fs.promises.rm(this.dir, { recursive: true, force: true });
    this.newest = null;
  }

  /** Ids of the snapshot directories, complete or not, ascending. */
  private async allIds(): Promise<number[]> {
    const names = await fs.promises.readdir(this.dir).catch((err: NodeJS.ErrnoException) => {
      if (err.code === 'ENOENT') return [] as string[];
      throw err;
    });
    return names
      .filter((n) => /^snap-\d+$/.test(n))
      .map((n) => Number(n.slice(5)))
      .sort((a, b) => a - b);
  }

  /** Keeps the newest `numRetained` complete snapshots; removes older ones and unfinished leftovers. */
  private async removeOld(): Promise<void> {
    const ids = await this.allIds();
    const isComplete = await Promise.all(ids.map((id) => fs.promises.access(path.join(this.dir, `snap-${id}`, METADATA)).then(() => true, () => false)));
    const complete = ids.filter((_, i) => isComplete[i]);
    const keep = new Set(complete.slice(-Math.max(1, this.numRetained)));
    for (const id of ids) {
      if (!keep.has(id)) await fs.promises.rm(path.join(this.dir, `snap-${id}`), { recursive: true, force: true });
    }
  }
}
