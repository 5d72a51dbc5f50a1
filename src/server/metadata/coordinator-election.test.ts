import assert from 'node:assert/strict';
import { test } from 'node:test';
import { useZooKeeper } from '../../../test/support/zookeeper.js';
import { TributaryError } from '../../common/errors.js';
import { CoordinatorElection } from './coordinator-election.js';
import { ZooKeeperMetadataStore } from './zookeeper-metadata-store.js';
import { ZooKeeperSession } from './zookeeper-session.js';

const zooKeeper = useZooKeeper();

async function connect(): Promise<ZooKeeperSession> {
  return zooKeeper.track(await ZooKeeperSession.connect({ address: zooKeeper.server.address, sessionTimeoutMs: 20_000, connectionTimeoutMs: 15_000 }));
}

/** Whether the promise has settled by now: after join() or a watch set, a candidate that leads has already been told. */
async function settled(p: Promise<unknown>): Promise<boolean> {
  const pending = Symbol('pending');
  return (await Promise.race([p.then(() => true, () => true), new Promise((resolve) => setImmediate(() => resolve(pending)))])) !== pending;
}

/** The sessions watching a znode, from ZooKeeper's `wchp` (a path, then a tab-indented session id per line). */
async function watchers(znode: string): Promise<bigint[]> {
  const sessionIds: bigint[] = [];
  let path = '';
  for (const line of (await zooKeeper.server.command('wchp')).split('\n')) {
    if (line.startsWith('\t')) {
      if (path === znode) sessionIds.push(BigInt(line.trim()));
    } else path = line.trim();
  }
  return sessionIds;
}

async function storedEpoch(session: ZooKeeperSession, root: string): Promise<number> {
  return JSON.parse((await session.get(`${root}/coordinators/epoch`))!.data.toString('utf8')) as number;
}

test('the first candidate leads; when its session closes the other leads with a higher epoch', async () => {
  const root = zooKeeper.newRoot('election');
  const [a, b] = [await connect(), await connect()];
  const first = await CoordinatorElection.join(a, root, 'coordinator-a');
  const second = await CoordinatorElection.join(b, root, 'coordinator-b');
  const { epoch: epochA } = await first.elected;
  assert.equal(epochA, 1);
  assert.equal(await settled(second.elected), false, 'the second candidate waits while the first leads');

  await a.close();
  const { epoch: epochB } = await second.elected;
  assert.ok(epochB > epochA, `epoch ${epochB} after ${epochA}`);
  assert.equal(await storedEpoch(b, root), epochB);
});

test('only the candidate whose turn came leads: a middle candidate leaving changes nothing, a leader resigning hands on', async () => {
  const root = zooKeeper.newRoot('election');
  const [a, b, c] = [await connect(), await connect(), await connect()];
  const first = await CoordinatorElection.join(a, root, 'a');
  const second = await CoordinatorElection.join(b, root, 'b');
  const third = await CoordinatorElection.join(c, root, 'c');
  const { epoch: epochA } = await first.elected;

  // The third watches the second: its going makes the third look again, find the first still
  // leading and watch it instead (ZooKeeper lists the watch), without becoming leader.
  await b.close();
  assert.equal(await settled(second.elected), false);
  const leaderZnode = `${root}/coordinators/election/${first.name}`;
  const deadline = Date.now() + 30_000;
  while (!(await watchers(leaderZnode)).includes(BigInt(`0x${c.id}`))) {
    assert.ok(Date.now() < deadline, `the third candidate never watched ${leaderZnode}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  assert.equal(await settled(third.elected), false);
  assert.equal(await storedEpoch(c, root), epochA);
  assert.equal((await c.children(`${root}/coordinators/election`)).length, 2);

  await first.resign();
  const { epoch: epochC } = await third.elected;
  assert.ok(epochC > epochA);
  assert.equal(await storedEpoch(c, root), epochC);

  // A new candidate after a resignation continues the epochs and waits behind the leader.
  const again = await CoordinatorElection.join(a, root, 'a');
  assert.equal(await settled(again.elected), false);
  await third.resign();
  assert.equal((await again.elected).epoch, epochC + 1);
});

test('a deposed leader that still holds its session can no longer write metadata, even where the new leader has not', async () => {
  const root = zooKeeper.newRoot('election');
  const [a, b] = [await connect(), await connect()];
  const first = await CoordinatorElection.join(a, root, 'a');
  const second = await CoordinatorElection.join(b, root, 'b');
  const old = await ZooKeeperMetadataStore.open(a, root, (await first.elected).fence);
  await old.commit([{ op: 'put', path: '/databases/db', value: 'a' }]);
  assert.equal(await old.nextId('table_id'), 0);

  // Stepping down without closing the session stands for a leader paused past its session timeout.
  await first.resign();
  const current = await ZooKeeperMetadataStore.open(b, root, (await second.elected).fence);
  const fenced = (err: unknown): boolean => err instanceof TributaryError && err.errorName === 'COMMIT_FAILED' && /a newer leader has been elected/.test(err.message);
  await assert.rejects(old.commit([{ op: 'put', path: '/databases/other', value: 'a' }]), fenced);
  await assert.rejects(old.nextId('table_id'), fenced);
  await current.commit([{ op: 'put', path: '/databases/db', value: 'b' }]);
  assert.equal(await current.nextId('table_id'), 1);
  const fresh = await ZooKeeperMetadataStore.open(b, root);
  assert.equal(fresh.get('/databases/db'), 'b');
  assert.deepEqual(fresh.children('/databases'), ['db']);
});
