import assert from 'node:assert/strict';
import { test } from 'node:test';
import { decodeManifest, encodeManifest, handleOf, type RemoteLogManifest, segmentHolding } from './remote-log-manifest.js';

const manifest: RemoteLogManifest = {
  tableId: 3,
  partitionId: 9,
  bucket: 2,
  segments: [
    { id: 'a', baseOffset: 0n, startOffset: 0n, endOffset: 120n, size: 4000, maxTimestamp: 1000 },
    // A new leader's segment that began below the remote end it continued from.
    { id: 'b', baseOffset: 100n, startOffset: 120n, endOffset: 300n, size: 4090, maxTimestamp: 2000 },
  ],
};

test('a manifest encodes and decodes to the same segments, and its handle spans them', () => {
  const bytes = Buffer.from(encodeManifest(manifest, 0n));
  assert.deepEqual(decodeManifest(bytes, 'm'), manifest);
  assert.equal(JSON.parse(bytes.toString()).remote_log_end_offset, '300');
  assert.deepEqual(handleOf(manifest, 'm', 0n), { manifestPath: 'm', remoteLogStartOffset: 0n, remoteLogEndOffset: 300n });
  assert.deepEqual(handleOf({ ...manifest, segments: [] }, 'm', 300n), { manifestPath: 'm', remoteLogStartOffset: 300n, remoteLogEndOffset: 300n }, 'an empty remote log stays at its end');
});

test('each offset is served by the one segment whose range holds it', () => {
  assert.equal(segmentHolding(manifest, 0n)?.id, 'a');
  assert.equal(segmentHolding(manifest, 119n)?.id, 'a');
  assert.equal(segmentHolding(manifest, 120n)?.id, 'b', 'the overlap below 120 is served by the older segment');
  assert.equal(segmentHolding(manifest, 299n)?.id, 'b');
  assert.equal(segmentHolding(manifest, 300n), undefined);
});

test('a manifest with a gap between segments is refused', () => {
  const gap = { ...manifest, segments: [manifest.segments[0], { ...manifest.segments[1], startOffset: 130n }] };
  assert.throws(() => decodeManifest(Buffer.from(encodeManifest(gap, 0n)), 'm'), { errorName: 'LOG_STORAGE_EXCEPTION' });
});
