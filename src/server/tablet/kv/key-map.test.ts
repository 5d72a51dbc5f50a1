import assert from 'node:assert/strict';
import { test } from 'node:test';
import { KeyMap } from './key-map.js';
import { random } from '../../../../test/support/random.js';


test('sets, gets and deletes agree with a Map keyed by the bytes, through growth and wrapped runs', () => {
  const next = random(7);
  const map = new KeyMap<number>(4);
  const model = new Map<string, number>();
  // Few distinct keys of a few lengths, so that sets overwrite, deletes hit, and runs collide.
  const keyOf = (): Uint8Array => Uint8Array.from({ length: 1 + Math.floor(next() * 3) }, () => Math.floor(next() * 12));
  for (let op = 0; op < 50_000; op++) {
    const key = keyOf();
    const name = Buffer.from(key).toString('hex');
    const r = next();
    if (r < 0.5) {
      map.set(key, op);
      model.set(name, op);
    } else if (r < 0.8) {
      assert.equal(map.delete(key), model.delete(name));
    } else {
      assert.equal(map.get(Uint8Array.from(key)), model.get(name));
    }
    assert.equal(map.size, model.size);
  }
  assert.deepEqual([...map.values()].sort((a, b) => a - b), [...model.values()].sort((a, b) => a - b));
  for (const [name, value] of model) assert.equal(map.get(Buffer.from(name, 'hex')), value);
  // Emptied, it shrinks back and works as before.
  for (const name of model.keys()) assert.equal(map.delete(Buffer.from(name, 'hex')), true);
  assert.equal(map.size, 0);
  assert.deepEqual([...map.values()], []);
  for (let i = 0; i < 100; i++) map.set(Uint8Array.of(i, 1), i);
  for (let i = 0; i < 100; i++) assert.equal(map.get(Uint8Array.of(i, 1)), i);
  assert.equal(map.size, 100);
});

test('keys are compared by content: equal bytes in other arrays find the entry, a prefix does not', () => {
  const map = new KeyMap<string>();
  map.set(Uint8Array.of(1, 2, 3), 'a');
  assert.equal(map.get(Buffer.from([1, 2, 3])), 'a');
  assert.equal(map.get(Uint8Array.of(1, 2)), undefined);
  assert.equal(map.get(Uint8Array.of(1, 2, 3, 0)), undefined);
  map.set(Buffer.from([1, 2, 3]), 'b');
  assert.equal(map.size, 1);
  assert.equal(map.get(Uint8Array.of(1, 2, 3)), 'b');
});

test('deleteIfValue deletes a key only while it maps to that very value', () => {
  const map = new KeyMap<{ n: number }>(2);
  const first = { n: 1 };
  const second = { n: 1 };
  // Enough keys for growth and collisions around the ones deleted.
  for (let i = 0; i < 40; i++) map.set(Uint8Array.of(i), { n: i });
  map.set(Uint8Array.of(7, 7), first);
  assert.equal(map.deleteIfValue(Uint8Array.of(7, 7), second), false, 'an equal value is not the value');
  map.set(Uint8Array.of(7, 7), second);
  assert.equal(map.deleteIfValue(Uint8Array.of(7, 7), first), false);
  assert.equal(map.deleteIfValue(Uint8Array.of(7), second), false);
  assert.equal(map.deleteIfValue(Uint8Array.of(7, 7), second), true);
  assert.equal(map.get(Uint8Array.of(7, 7)), undefined);
  assert.equal(map.size, 40);
  for (let i = 0; i < 40; i++) assert.equal(map.get(Uint8Array.of(i))!.n, i);
  for (let i = 0; i < 40; i++) assert.equal(map.deleteIfValue(Uint8Array.of(i), map.get(Uint8Array.of(i))!), true);
  assert.equal(map.size, 0);
  // Emptied and refilled, it keeps working.
  for (let round = 0; round < 3; round++) {
    for (let i = 0; i < 100 * (3 - round); i++) map.set(Uint8Array.of(i & 0xff, i >> 8, round), { n: i });
    for (let i = 0; i < 100 * (3 - round); i++) assert.equal(map.get(Uint8Array.of(i & 0xff, i >> 8, round))!.n, i);
    for (let i = 0; i < 100 * (3 - round); i++) assert.equal(map.delete(Uint8Array.of(i & 0xff, i >> 8, round)), true);
    assert.equal(map.size, 0);
  }
});
