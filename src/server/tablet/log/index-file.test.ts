import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import { OffsetIndex } from './offset-index.js';
import { TimeIndex } from './time-index.js';
import { testTempDir } from '../../../common/fixtures/temp-dirs.js';

function tempFile(name: string): string {
  return path.join(testTempDir('index'), name);
}

describe('OffsetIndex', () => {
  // Entries (5 → 4100) and (9 → 8200), little-endian i32 pairs.
  const FIXTURE = Buffer.from('05000000041000000900000008200000', 'hex');

  it('writes and reads its grammar byte for byte', async () => {
    const file = tempFile('00000000000000000000.index');
    const index = new OffsetIndex(file);
    index.append(5, 4100);
    index.append(9, 8200);
    await index.flush();
    assert.deepEqual(fs.readFileSync(file), FIXTURE);
    const loaded = new OffsetIndex(file);
    assert.equal(await loaded.load(), true);
    assert.deepEqual(
      [loaded.lookup(4), loaded.lookup(5), loaded.lookup(8), loaded.lookup(100)],
      [
        { relativeOffset: 0, position: 0 },
        { relativeOffset: 5, position: 4100 },
        { relativeOffset: 5, position: 4100 },
        { relativeOffset: 9, position: 8200 },
      ],
    );
  });

  it('keeps the ordered prefix of a damaged file and rewrites it on flush', async () => {
    const file = tempFile('x.index');
    // A zeroed entry (what a crash can leave after an extended file) and half an entry.
    fs.writeFileSync(file, Buffer.concat([FIXTURE, Buffer.alloc(8), Buffer.from([1, 2, 3])]));
    const index = new OffsetIndex(file);
    assert.equal(await index.load(), false);
    assert.equal(index.length, 2);
    index.truncate(1);
    index.append(7, 6000);
    await index.flush();
    assert.deepEqual(fs.readFileSync(file), Buffer.from('05000000041000000700000070170000', 'hex'));
  });

  it('reports a missing file and creates it on flush', async () => {
    const file = tempFile('missing.index');
    const index = new OffsetIndex(file);
    assert.equal(await index.load(), false);
    await index.flush();
    assert.equal(fs.readFileSync(file).length, 0);
  });
});

describe('TimeIndex', () => {
  // Entries (1700000000000 ms → 0) and (1700000000500 ms → 12): i64 timestamp then i32 offset.
  const FIXTURE = Buffer.from('0068e5cf8b010000' + '00000000' + 'f469e5cf8b010000' + '0c000000', 'hex');

  it('writes and reads its grammar byte for byte', async () => {
    const file = tempFile('00000000000000000000.timeindex');
    const index = new TimeIndex(file);
    index.append(1_700_000_000_000, 0);
    index.append(1_700_000_000_500, 12);
    await index.flush();
    assert.deepEqual(fs.readFileSync(file), FIXTURE);
    const loaded = new TimeIndex(file);
    assert.equal(await loaded.load(), true);
    assert.equal(loaded.lookup(1_600_000_000_000), 0);
    assert.equal(loaded.lookup(1_700_000_000_499), 0);
    assert.equal(loaded.lookup(1_700_000_000_500), 12);
    assert.equal(loaded.lastKey, 1_700_000_000_500);
  });
});
