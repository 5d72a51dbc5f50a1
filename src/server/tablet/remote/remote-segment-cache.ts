/**
 * Remote segments opened for reading below a bucket's local log start: each is downloaded whole
 * (its `.log` and both indexes) into `<dir>/<segment id>/`, opened as a LogSegment and kept, so
 * that a consumer reading the remote part goes through one download per segment and the same read
 * and column projection code as local segments. Bounded: at most `maxBytes` of downloaded segments
 * (least recently used first out, never one a read is using) and `maxDownloads` downloads at once.
 * The directory is the cache's own: it is emptied when the cache opens.
 */
import fs from 'node:fs';
import path from 'node:path';
import type { ObjectStore } from '../../../storage/object-store.js';
import { LogSegment, type SegmentConfig, segmentFileName } from '../log/log-segment.js';
import { type RemoteSegment, segmentObject } from './remote-log-manifest.js';

interface Entry {
  segment: Promise<LogSegment>;
  size: number;
  readers: number;
}

/** Reads of remote segments, as the metrics count them. */
export interface RemoteReadCounters {
  downloads: number;
  downloadedBytes: number;
  hits: number;
}

export class RemoteSegmentCache {
  /** By segment id, least recently used first. */
  private readonly entries = new Map<string, Entry>();
  private bytes = 0;
  private downloading = 0;
  private readonly waiting: (() => void)[] = [];
  private cleared: Promise<void> | undefined;
  readonly counters: RemoteReadCounters = { downloads: 0, downloadedBytes: 0, hits: 0 };

  constructor(
    private readonly dir: string,
    private readonly maxBytes: number,
    private readonly maxDownloads: number,
    private readonly config: SegmentConfig,
  ) {}

  /** Runs `reader` on the remote segment (of the bucket whose remote directory is `bucketDir`), downloaded if it is not here. */
  async read<T>(store: ObjectStore, bucketDir: string, remote: RemoteSegment, reader: (segment: LogSegment) => Promise<T>): Promise<T> {
    await (this.cleared ??= fs.promises.rm(this.dir, { recursive: true, force: true }).then(() => fs.promises.mkdir(this.dir, { recursive: true })).then(() => undefined));
    let entry = this.entries.get(remote.id);
    if (entry) {
      this.counters.hits++;
      this.entries.delete(remote.id);
    } else {
      entry = { segment: this.download(store, bucketDir, remote), size: remote.size, readers: 0 };
      this.bytes += entry.size;
      entry.segment.catch(() => this.drop(remote.id, entry!));
    }
    this.entries.set(remote.id, entry);
    entry.readers++;
    try {
      return await reader(await entry.segment);
    } finally {
      entry.readers--;
      await this.evict();
    }
  }

  /** Closes every open segment and deletes the downloads. */
  async close(): Promise<void> {
    for (const [id, entry] of [...this.entries]) await this.drop(id, entry);
  }

  private async download(store: ObjectStore, bucketDir: string, remote: RemoteSegment): Promise<LogSegment> {
    while (this.downloading >= this.maxDownloads) await new Promise<void>((resolve) => this.waiting.push(resolve));
    this.downloading++;
    const dir = path.join(this.dir, remote.id);
    try {
      await fs.promises.mkdir(dir, { recursive: true });
      for (const suffix of ['.log', '.index', '.timeindex'] as const) {
        const found = await store.getToFile(segmentObject(bucketDir, remote, suffix), path.join(dir, segmentFileName(remote.baseOffset, suffix)));
        if (!found) throw new Error(`remote segment ${remote.id} has no ${suffix} object`);
      }
      this.counters.downloads++;
      this.counters.downloadedBytes += remote.size;
      // The indexes were complete when uploaded: opened as they are, the segment serves reads at once.
      const { segment } = await LogSegment.open(dir, remote.baseOffset, remote.endOffset, this.config);
      return segment;
    } catch (err) {
      await fs.promises.rm(dir, { recursive: true, force: true });
      throw err;
    } finally {
      this.downloading--;
      this.waiting.shift()?.();
    }
  }

  private async evict(): Promise<void> {
    for (const [id, entry] of this.entries) {
      if (this.bytes <= this.maxBytes) return;
      if (entry.readers === 0) await this.drop(id, entry);
    }
  }

  private async drop(id: string, entry: Entry): Promise<void> {
    if (this.entries.get(id) !== entry) return;
    this.entries.delete(id);
    this.bytes -= entry.size;
    const segment = await entry.segment.catch(() => undefined);
    await segment?.close().catch(() => undefined);
    await fs.promises.rm(path.join(this.dir, id), { recursive: true, force: true });
  }
}
