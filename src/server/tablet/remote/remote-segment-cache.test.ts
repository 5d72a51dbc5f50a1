import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { LocalObjectStore } from '../../../storage/local-store.js';
import { LogTablet } from '../log/log-tablet.js';
import { batch, idOf, split, tempDir, TEST_LOG_CONFIG } from '../log/fixtures/logs.js';
import { type RemoteSegment, segmentObject } from './remote-log-manifest.js';
import { RemoteSegmentCache } from './remote-segment-cache.js';

/** A log of three sealed segments (and an active one), uploaded to a directory store as the remote log lays them out. */
async function remoteLog(t: { after(fn: () => Promise<void> | void): void }): Promise<{ store: LocalObjectStore; bucketDir: string; segments: RemoteSegment[] }> {
  const dir = tempDir();
  const bucketDir = path.join(tempDir(), 'bucket');
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const log = await LogTablet.open(dir, { ...TEST_LOG_CONFIG, segmentBytes: 1000 });
  for (let id = 0; id < 30; id++) await log.append([batch(id, { payloadBytes: 200 })], 0);
  const store = new LocalObjectStore();
  const segments: RemoteSegment[] = [];
  for (const s of log.closedSegments().slice(0, 3)) {
    const remote = { id: `seg-${s.baseOffset}`, baseOffset: s.baseOffset, startOffset: s.baseOffset, endOffset: s.endOffset, size: s.sizeBytes, maxTimestamp: s.maxTimestamp };
    await store.putFile(segmentObject(bucketDir, remote, '.log'), s.files.log);
    await store.putFile(segmentObject(bucketDir, remote, '.index'), s.files.index);
    await store.putFile(segmentObject(bucketDir, remote, '.timeindex'), s.files.timeindex);
    segments.push(remote);
  }
  await log.close();
  return { store, bucketDir, segments };
}

test('a remote segment is downloaded once and read as a local one; past the size bound the least recently used goes', async (t) => {
  const { store, bucketDir, segments } = await remoteLog(t);
  const cacheDir = tempDir();
  t.after(() => fs.rmSync(cacheDir, { recursive: true, force: true }));
  // Room for two segments, not three.
  const cache = new RemoteSegmentCache(cacheDir, segments[0].size + segments[1].size, 1, { indexIntervalBytes: 4096, recentBytes: 0 });
  t.after(() => cache.close());
  const first = async (s: RemoteSegment, offset = s.startOffset): Promise<number> =>
    cache.read(store, bucketDir, s, async (segment) => idOf(split(await segment.read(offset, 1, segment.size))[0]));

  assert.equal(await first(segments[0]), Number(segments[0].baseOffset));
  assert.equal(await first(segments[0], segments[0].baseOffset + 1n), Number(segments[0].baseOffset) + 1);
  assert.deepEqual(cache.counters, { downloads: 1, downloadedBytes: segments[0].size, hits: 1 });
  await first(segments[1]);
  await first(segments[2]);
  assert.equal(cache.counters.downloads, 3);
  assert.deepEqual(fs.readdirSync(cacheDir).sort(), ['seg-' + segments[1].baseOffset, 'seg-' + segments[2].baseOffset].sort(), 'the oldest download left');
  await first(segments[0]);
  assert.equal(cache.counters.downloads, 4, 'an evicted segment is downloaded again');
});

test('a segment whose objects are missing fails the read and leaves nothing behind', async (t) => {
  const { store, bucketDir, segments } = await remoteLog(t);
  const cacheDir = tempDir();
  t.after(() => fs.rmSync(cacheDir, { recursive: true, force: true }));
  const cache = new RemoteSegmentCache(cacheDir, 1 << 20, 2, { indexIntervalBytes: 4096, recentBytes: 0 });
  t.after(() => cache.close());
  await store.delete(segmentObject(bucketDir, segments[1], '.index'));
  await assert.rejects(cache.read(store, bucketDir, segments[1], async () => 0), /has no \.index object/);
  assert.deepEqual(fs.readdirSync(cacheDir), []);
});
