import { test } from 'node:test';
import assert from 'node:assert/strict';
import { type BudgetedConnection, type ConnectionMemory, type ListenerMemory, RequestMemoryBudget, SHARE_FLOOR } from './request-memory.js';

/** A connection as a listener drives it: frames arrive whole or in part, requests start, answers release their bytes. */
class Peer implements BudgetedConnection {
  readonly memory: ConnectionMemory;
  /** Sizes of the complete requests waiting to start, in arrival order. */
  readonly waiting: number[] = [];
  readonly started: number[] = [];
  /** Bytes of a frame still being received. */
  partial = 0;
  reading = true;
  /** Called as each request starts, before the next may (a request answered at once releases here). */
  onStart: ((bytes: number) => void) | undefined;

  constructor(listener: ListenerMemory) {
    this.memory = listener.open(this);
  }

  waitingBytes(): number {
    return this.waiting[0] ?? 0;
  }

  startWaiting(): void {
    const bytes = this.waiting.shift()!;
    this.started.push(bytes);
    this.onStart?.(bytes);
  }

  receiving(): boolean {
    return this.partial > 0;
  }

  refresh(): void {
    this.reading = this.waiting.length === 0 && this.memory.mayRead;
  }

  /** Complete requests of these sizes arrive in one read. */
  receive(...sizes: number[]): void {
    this.memory.hold(sizes.reduce((a, b) => a + b, 0));
    this.waiting.push(...sizes);
    this.memory.startWaiting();
    this.memory.changed();
  }

  /** Part of a frame arrives. */
  receivePart(bytes: number): void {
    this.memory.hold(bytes);
    this.partial += bytes;
    this.memory.changed();
  }

  /** The frame under way completes with `bytes` more and waits to start. */
  completePart(bytes: number): void {
    const size = this.partial + bytes;
    this.partial = 0;
    this.memory.hold(bytes);
    this.waiting.push(size);
    this.memory.startWaiting();
    this.memory.changed();
  }

  /** The response of the started request of `bytes` is written. */
  answer(bytes: number): void {
    const i = this.started.indexOf(bytes);
    assert.ok(i >= 0, `no running request of ${bytes} bytes`);
    this.started.splice(i, 1);
    this.memory.release(bytes);
  }
}

async function until(condition: () => boolean, what: string): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

test('requests start while the running bytes stay within the budget; the rest wait and start as answers release bytes', () => {
  const budget = new RequestMemoryBudget(1000);
  const listener = budget.listener();
  const peer = new Peer(listener);
  peer.receive(400, 400, 400);
  assert.deepEqual(peer.started, [400, 400]);
  assert.deepEqual([listener.heldBytes, listener.runningBytes], [1200, 800]);
  assert.equal(budget.requestsWaiting(), true);
  peer.answer(400);
  assert.deepEqual(peer.started, [400, 400]);
  assert.deepEqual([listener.heldBytes, listener.runningBytes], [800, 800]);
  assert.equal(budget.requestsWaiting(), false);
  peer.answer(400);
  peer.answer(400);
  assert.deepEqual([listener.heldBytes, listener.runningBytes], [0, 0]);
});

test('a request bigger than the budget runs alone, and only when nothing else runs', () => {
  const budget = new RequestMemoryBudget(1000);
  const listener = budget.listener();
  const [small, big] = [new Peer(listener), new Peer(listener)];
  small.receive(100);
  big.receive(5000);
  assert.deepEqual(big.started, [], 'waits for the running request');
  small.answer(100);
  assert.deepEqual(big.started, [5000]);
  small.receive(100);
  assert.deepEqual(small.started, [], 'nothing starts beside it');
  big.answer(5000);
  assert.deepEqual(small.started, [100]);
});

test('after a release each connection starts one waiting request in turn, so none starves', () => {
  const budget = new RequestMemoryBudget(300);
  const listener = budget.listener();
  const hog = new Peer(listener);
  const [a, b] = [new Peer(listener), new Peer(listener)];
  hog.receive(300);
  a.receive(100, 100, 100);
  b.receive(100, 100, 100);
  hog.answer(300);
  assert.deepEqual([a.started.length, b.started.length], [2, 1], 'a, b, a: turns alternate');
});

test('once the budget is full, connections holding their share are not read and the others are; releases resume them', () => {
  const budget = new RequestMemoryBudget(4 * SHARE_FLOOR);
  const listener = budget.listener();
  const peers = [new Peer(listener), new Peer(listener), new Peer(listener), new Peer(listener)];
  const [big, other] = peers;
  big.receive(3 * SHARE_FLOOR); // runs alone, holding more than its share
  big.receivePart(SHARE_FLOOR); // the budget is full
  assert.equal(listener.heldBytes, 4 * SHARE_FLOOR);
  assert.equal(big.reading, false, 'over its share of a full budget');
  assert.equal(other.reading, true, 'below its share');
  other.receivePart(SHARE_FLOOR - 1);
  assert.equal(other.reading, true);
  other.receivePart(1);
  assert.equal(other.reading, false, 'at its share');
  big.answer(3 * SHARE_FLOOR);
  assert.ok(peers.every((p) => p.reading), 'the budget has room again');
});

test('the share is the budget divided by the open connections, at least SHARE_FLOOR, and grows as connections close', () => {
  const budget = new RequestMemoryBudget(8 * SHARE_FLOOR);
  const listener = budget.listener();
  const peers = Array.from({ length: 16 }, () => new Peer(listener));
  const [runner, peer] = peers;
  runner.receive(8 * SHARE_FLOOR); // runs alone and fills the budget
  peer.receivePart(SHARE_FLOOR - 1);
  assert.equal(peer.reading, true, 'of 16 connections the share is SHARE_FLOOR, not a sixteenth');
  peer.receivePart(1);
  assert.equal(peer.reading, false, 'at its share');
  for (const gone of peers.slice(4)) gone.memory.close();
  assert.equal(peer.reading, true, 'of 4 connections the share is a quarter of the budget');
  peer.receivePart(SHARE_FLOOR);
  assert.equal(peer.reading, false);
  peer.memory.close();
  assert.equal(listener.heldBytes, 8 * SHARE_FLOOR, 'a closed connection releases its partial frame');
  runner.answer(8 * SHARE_FLOOR);
  assert.equal(listener.heldBytes, 0);
});

test('a budget smaller than the floor is the share of every connection', () => {
  const budget = new RequestMemoryBudget(100);
  const listener = budget.listener();
  const [a, b] = [new Peer(listener), new Peer(listener)];
  a.receive(50);
  b.receivePart(50);
  assert.equal(b.reading, true, 'the budget is full, and 50 bytes are below a share of all 100');
  b.receivePart(50);
  assert.equal(b.reading, false);
});

test('when partial frames fill the budget and nothing runs, one connection reads alone until its frame completes', () => {
  const budget = new RequestMemoryBudget(2 * SHARE_FLOOR);
  const listener = budget.listener();
  const [a, b] = [new Peer(listener), new Peer(listener)];
  a.receivePart(SHARE_FLOOR);
  b.receivePart(SHARE_FLOOR);
  assert.deepEqual([a.reading, b.reading], [true, false], 'the first receiving connection reads alone');
  a.receivePart(3 * SHARE_FLOOR);
  assert.equal(a.reading, true, 'alone, past its share');
  a.completePart(100);
  assert.deepEqual(a.started, [4 * SHARE_FLOOR + 100]);
  assert.deepEqual([a.reading, b.reading], [false, false], 'something runs: nobody reads alone');
  a.answer(4 * SHARE_FLOOR + 100);
  assert.deepEqual([a.reading, b.reading], [true, true]);
});

test('a connection reading alone that sends nothing loses its turn to the next receiving one', async () => {
  const budget = new RequestMemoryBudget(2 * SHARE_FLOOR, 10);
  const listener = budget.listener();
  const [silent, next] = [new Peer(listener), new Peer(listener)];
  silent.receivePart(SHARE_FLOOR);
  next.receivePart(SHARE_FLOOR);
  assert.deepEqual([silent.reading, next.reading], [true, false]);
  await until(() => next.reading, 'the turn passes on');
  assert.equal(silent.reading, false);
  silent.memory.close();
  next.memory.close();
});

test('listeners sharing a budget: each counts its own bytes, the shares and turns are of all, and one\'s answers start the other\'s requests', () => {
  const budget = new RequestMemoryBudget(1000);
  const [rpc, kafka] = [budget.listener(), budget.listener()];
  const a = new Peer(rpc);
  const b = new Peer(kafka);
  a.receive(800);
  b.receive(300);
  assert.deepEqual([rpc.heldBytes, rpc.runningBytes, kafka.heldBytes, kafka.runningBytes], [800, 800, 300, 0]);
  assert.deepEqual(b.started, [], 'the memory is shared: 800 + 300 do not fit in 1000');
  assert.equal(budget.requestsWaiting(), true);
  a.answer(800);
  assert.deepEqual(b.started, [300]);
  assert.deepEqual([rpc.heldBytes, kafka.heldBytes, kafka.runningBytes], [0, 300, 300]);
});

test('requests answered as they start release without starting more recursively', () => {
  const budget = new RequestMemoryBudget(100);
  const listener = budget.listener();
  const peer = new Peer(listener);
  peer.onStart = (bytes) => peer.answer(bytes);
  const count = 20_000;
  peer.receive(...Array.from({ length: count }, () => 50));
  assert.equal(peer.waiting.length, 0);
  assert.deepEqual([listener.heldBytes, listener.runningBytes], [0, 0]);
});

test('a connection that closes with requests running releases their bytes as they answer', () => {
  const budget = new RequestMemoryBudget(1000);
  const listener = budget.listener();
  const [gone, other] = [new Peer(listener), new Peer(listener)];
  gone.receive(600);
  gone.receivePart(100);
  other.receive(600);
  gone.memory.close();
  assert.deepEqual([listener.heldBytes, listener.runningBytes], [1200, 600], 'the partial frame is released, the running request is not');
  assert.deepEqual(other.started, []);
  gone.answer(600);
  assert.deepEqual(other.started, [600]);
  assert.deepEqual([listener.heldBytes, listener.runningBytes], [600, 600]);
});
