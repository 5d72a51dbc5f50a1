import { test } from 'node:test';
import assert from 'node:assert/strict';
import { random } from '../../../../test/support/random.js';
import { RecentBytes } from './recent-bytes.js';

test('reads of the recent bytes equal reads of the file, through growth, wrap-around and eviction', () => {
  const next = random(5);
  for (const capacity of [1000, 100_000, 300_000]) {
    const recent = new RecentBytes(capacity);
    const parts: Buffer[] = [];
    let fileLength = 0;
    let served = 0;
    for (let step = 0; step < 300; step++) {
      // Mostly small appends, some larger than the whole ring.
      const length = Math.floor(next() ** 3 * capacity * 1.3) + 1;
      const bytes = Buffer.allocUnsafe(length);
      for (let i = 0; i < length; i++) bytes[i] = (step * 31 + i) & 0xff;
      const position = fileLength;
      recent.append(position, bytes);
      parts.push(Buffer.from(bytes));
      bytes.fill(0xee); // the appender may reuse its memory at once
      fileLength += length;
      const file = Buffer.concat(parts);

      const buf = Buffer.alloc(capacity * 2);
      const head = recent.read(buf, capacity * 2, position);
      if (length <= capacity) {
        assert.equal(head, length, 'the last append is always held whole');
        assert.ok(buf.subarray(0, head).equals(file.subarray(position)));
      } else {
        assert.equal(head, -1, 'an append larger than the ring is not held');
      }
      for (let r = 0; r < 5; r++) {
        const at = Math.max(0, fileLength + 10 - Math.floor(next() * capacity * 1.5));
        const want = Math.floor(next() * capacity) + 1;
        const n = recent.read(buf, want, at);
        if (n < 0) continue;
        assert.ok(at >= fileLength - capacity, `position ${at} is older than the ring's capacity`);
        assert.ok(buf.subarray(0, n).equals(file.subarray(at, Math.min(fileLength, at + want))), `read of ${want} at ${at}`);
        served++;
      }
    }
    assert.ok(served > 100, `reads served from memory: ${served}`);
  }
});

test('a gap in positions and clear() leave nothing held', () => {
  const recent = new RecentBytes(1000);
  const buf = Buffer.alloc(100);
  recent.append(0, Buffer.alloc(100, 1));
  assert.equal(recent.read(buf, 100, 0), 100);
  assert.equal(recent.read(buf, 100, 100), 0, 'at the end: nothing more, as a file read');
  recent.append(500, Buffer.alloc(50, 2));
  assert.equal(recent.read(buf, 100, 0), -1);
  assert.equal(recent.read(buf, 100, 500), 50);
  recent.clear();
  assert.equal(recent.read(buf, 100, 500), -1);
  const none = new RecentBytes(0);
  none.append(0, Buffer.alloc(10));
  assert.equal(none.read(buf, 10, 0), -1);
});
