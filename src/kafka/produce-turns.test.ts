import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ProduceTurns } from './produce-turns.js';

/** Resolves after every pending promise callback has run. */
const settle = () => new Promise<void>((resolve) => setImmediate(resolve));

test('turns of a partition go in the order taken, each once the one before ends, not before', async () => {
  const turns = new ProduceTurns();
  const went: string[] = [];
  const a = turns.take(['t/0']);
  const b = turns.take(['t/0']);
  const c = turns.take(['t/0']);
  void a.ready.then(() => went.push('a'));
  void c.ready.then(() => went.push('c'));
  void b.ready.then(() => went.push('b'));
  await settle();
  assert.deepEqual(went, ['a']);
  a.end();
  await settle();
  assert.deepEqual(went, ['a', 'b'], 'c waits for b although a ended');
  b.end();
  await settle();
  assert.deepEqual(went, ['a', 'b', 'c']);
  c.end();
  assert.equal(turns.size, 0, 'no partition is held once every turn ended');
});

test('a turn over several partitions waits for each of them; other partitions do not wait', async () => {
  const turns = new ProduceTurns();
  const p0 = turns.take(['t/0']);
  const p1 = turns.take(['t/1']);
  const both = turns.take(['t/0', 't/1']);
  const other = turns.take(['t/2']);
  let bothReady = false;
  let otherReady = false;
  void both.ready.then(() => (bothReady = true));
  void other.ready.then(() => (otherReady = true));
  await settle();
  assert.ok(otherReady);
  p0.end();
  await settle();
  assert.ok(!bothReady, 't/1 is still taken');
  p1.end();
  await settle();
  assert.ok(bothReady);
  both.end();
  other.end();
  assert.equal(turns.size, 0);
});

test('a turn ended twice (a failure after the hand-over) ends once and leaves later turns in place', async () => {
  const turns = new ProduceTurns();
  const a = turns.take(['t/0']);
  a.end();
  const b = turns.take(['t/0']);
  a.end();
  assert.equal(turns.size, 1, "b's turn stays taken");
  let cReady = false;
  const c = turns.take(['t/0']);
  void c.ready.then(() => (cReady = true));
  await settle();
  assert.ok(!cReady, 'c waits for b');
  b.end();
  c.end();
  await settle();
  assert.ok(cReady);
  assert.equal(turns.size, 0);
});
