import assert from 'node:assert/strict';
import { test } from 'node:test';
import { FetchBudget } from './fetch-budget.js';
import { decodeBatch } from '../../test/support/kafka-records.js';
import { BATCH_HEADER_SIZE, splitBatches } from './records/record-batch.js';

/** `n` records of `size`-byte values; each record frames to size + 7 bytes (size < 64). */
const records = (n: number, size: number) => Array.from({ length: n }, (_, i) => ({ timestamp: 1000n, key: null, value: Buffer.alloc(size, 97 + (i % 26)) }));
const RECORD = 50 + 7;

/** The offsets and values a partition's batches carry. */
function sent(bytes: Buffer): string[] {
  if (bytes.length === 0) return [];
  return splitBatches(bytes).flatMap((b) => {
    const batch = decodeBatch(b, 1 << 20);
    return batch.records.map((r) => `${batch.baseOffset + BigInt(r.offsetDelta)}:${r.value!.toString('latin1', 0, 1)}`);
  });
}

test('a batch larger than the partition limit is cut to the records that fit; the next partition gets what the response has left', () => {
  const budget = new FetchBudget(2 * BATCH_HEADER_SIZE + 4 * RECORD + 10);
  const first = budget.partition(BATCH_HEADER_SIZE + 3 * RECORD + 10);
  assert.equal(first.add({ baseOffset: 100n, records: records(10, 50) }), 3);
  assert.ok(first.full);
  assert.equal(first.add({ baseOffset: 103n, records: records(7, 50) }), 0, 'a cut partition takes nothing more');
  assert.deepEqual(sent(first.records()), ['100:a', '101:b', '102:c']);
  const second = budget.partition(0);
  assert.equal(second.add({ baseOffset: 0n, records: records(10, 50) }), 1, 'what the response has left holds one record');
  assert.ok(second.full);
  const third = budget.partition(1 << 20);
  assert.equal(third.add({ baseOffset: 0n, records: records(1, 1) }), 0, 'the response is full');
  assert.deepEqual(third.records(), Buffer.alloc(0));
});

test('batches of a partition count together; a batch that no longer fits at all is left whole for the next fetch', () => {
  const budget = new FetchBudget(1 << 20);
  const p = budget.partition(2 * (BATCH_HEADER_SIZE + 2 * RECORD) + 20);
  assert.equal(p.add({ baseOffset: 0n, records: records(2, 50) }), 2);
  assert.equal(p.add({ baseOffset: 2n, records: records(2, 50) }), 2);
  assert.ok(!p.full);
  assert.equal(p.add({ baseOffset: 4n, records: records(2, 50) }), 0);
  assert.ok(p.full);
  assert.deepEqual(sent(p.records()), ['0:a', '1:b', '2:a', '3:b']);
});

test('the first record of the response goes whatever its size, so a consumer never stalls; later ones keep to the limits', () => {
  const budget = new FetchBudget(100);
  const empty = budget.partition(100);
  assert.equal(empty.add({ baseOffset: 0n, records: [] }), 0);
  const p = budget.partition(100);
  assert.equal(p.add({ baseOffset: 7n, records: records(3, 500) }), 1);
  assert.deepEqual(sent(p.records()), ['7:a']);
  assert.equal(budget.partition(100).add({ baseOffset: 0n, records: records(1, 10) }), 0);
});
