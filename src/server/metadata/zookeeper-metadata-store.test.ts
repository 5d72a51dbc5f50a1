import assert from 'node:assert/strict';
import net from 'node:net';
import { test } from 'node:test';
import { useZooKeeper } from '../../../test/support/zookeeper.js';
import { Options } from '../../common/config.js';
import { TributaryError } from '../../common/errors.js';
import { metadataStoreContract } from './fixtures/metadata-store-contract.js';
import { partitionable, until } from './fixtures/zookeeper-network.js';
import { ZooKeeperMetadataStore, ZOOKEEPER_MAX_REQUEST_BYTES } from './zookeeper-metadata-store.js';
import { ZooKeeperSession, zooKeeperSettings } from './zookeeper-session.js';

const zooKeeper = useZooKeeper();

/** A session from server options, as a server makes it: on the test's ZooKeeper unless `settings` say otherwise. */
async function connect(settings: Record<string, string> = {}): Promise<ZooKeeperSession> {
  const options = new Options('server', { 'zookeeper.address': zooKeeper.server.address, 'zookeeper.client.session-timeout': '20s', ...settings });
  return zooKeeper.track(await ZooKeeperSession.connect(zooKeeperSettings(options)));
}

const newRoot = (): string => zooKeeper.newRoot('test');

async function openStore(root: string, session?: ZooKeeperSession): Promise<ZooKeeperMetadataStore> {
  return ZooKeeperMetadataStore.open(session ?? (await connect()), root);
}

function rejectsWith(name: string): (err: unknown) => boolean {
  return (err) => {
    assert.ok(err instanceof TributaryError, `expected a TributaryError, got ${String(err)}`);
    assert.equal(err.errorName, name, err.message);
    return true;
  };
}

test('the ZooKeeper options: Fluss\'s defaults, a required address, an absolute root; no answer within the connection timeout is NETWORK_EXCEPTION', async () => {
  assert.deepEqual(zooKeeperSettings(new Options('server', { 'zookeeper.address': 'zk1:2181,zk2:2181' })), {
    address: 'zk1:2181,zk2:2181',
    root: '/tributary',
    sessionTimeoutMs: 60_000,
    connectionTimeoutMs: 15_000,
  });
  assert.throws(() => zooKeeperSettings(new Options('server', {})), rejectsWith('INVALID_CONFIG_EXCEPTION'));
  for (const root of ['tributary', '/tributary/', '/a//b']) {
    assert.throws(() => zooKeeperSettings(new Options('server', { 'zookeeper.address': zooKeeper.server.address, 'zookeeper.path.root': root })), rejectsWith('INVALID_CONFIG_EXCEPTION'));
  }
  const closed = net.createServer();
  await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
  const port = (closed.address() as net.AddressInfo).port;
  await new Promise<void>((resolve) => closed.close(() => resolve()));
  await assert.rejects(connect({ 'zookeeper.address': `127.0.0.1:${port}`, 'zookeeper.client.connection-timeout': '500ms' }), rejectsWith('NETWORK_EXCEPTION'));
});

metadataStoreContract(async () => {
  const root = newRoot();
  return { open: () => openStore(root) };
});

test('a commit that fails half-way applies none of its operations, in ZooKeeper or in the cache', async () => {
  const root = newRoot();
  const store = await openStore(root);
  await store.commit([{ op: 'put', path: '/databases/db', value: 1 }]);
  const other = await openStore(root);
  await other.commit([{ op: 'put', path: '/databases/db', value: 2 }]);
  // The create of the new table comes before the write of the database in the transaction.
  await assert.rejects(
    store.commit([
      { op: 'put', path: '/databases/db/tables/t', value: { table_id: 7 } },
      { op: 'put', path: '/databases/db', value: 3 },
    ]),
    rejectsWith('COMMIT_FAILED'),
  );
  assert.equal(store.get('/databases/db/tables/t'), undefined);
  assert.equal(store.get('/databases/db'), 1, 'the cache keeps what this store last committed');
  const raw = await connect();
  assert.equal(await raw.exists(`${root}/metadata/databases/db/tables`), false, 'not even the parent znode was created');
  const fresh = await openStore(root);
  assert.equal(fresh.get('/databases/db'), 2);
  assert.deepEqual(fresh.children('/databases/db/tables'), []);
});

test('two writers: the second to write a znode the first changed, created or deleted gets COMMIT_FAILED, nothing overwritten', async () => {
  const root = newRoot();
  const a = await openStore(root);
  await a.commit([
    { op: 'put', path: '/x', value: 'a0' },
    { op: 'put', path: '/gone', value: 'a0' },
  ]);
  const b = await openStore(root);
  await a.commit([{ op: 'put', path: '/x', value: 'a1' }]);
  await assert.rejects(b.commit([{ op: 'put', path: '/x', value: 'b1' }]), (err) => rejectsWith('COMMIT_FAILED')(err) && /\/x was changed by another writer/.test((err as Error).message));
  await a.commit([{ op: 'put', path: '/y', value: 'a' }]);
  await assert.rejects(b.commit([{ op: 'put', path: '/y', value: 'b' }]), rejectsWith('COMMIT_FAILED'));
  await a.commit([{ op: 'delete', path: '/gone' }]);
  await assert.rejects(b.commit([{ op: 'put', path: '/gone', value: 'b' }]), rejectsWith('COMMIT_FAILED'));
  const fresh = await openStore(root);
  assert.equal(fresh.get('/x'), 'a1');
  assert.equal(fresh.get('/y'), 'a');
  assert.equal(fresh.get('/gone'), undefined);
});

test('a store opened after another store closed and its session ended sees everything committed', async () => {
  const root = newRoot();
  const session = await connect();
  const store = await openStore(root, session);
  await store.commit([
    { op: 'put', path: '/databases/db', value: { comment: 'c' } },
    { op: 'put', path: '/databases/db/tables/t/schemas/0', value: { columns: ['a'] } },
  ]);
  const tableId = await store.nextId('table_id');
  await store.close();
  await session.close();
  const reopened = await openStore(root);
  assert.deepEqual(reopened.get('/databases/db'), { comment: 'c' });
  assert.deepEqual(reopened.get('/databases/db/tables/t/schemas/0'), { columns: ['a'] });
  assert.equal(await reopened.nextId('table_id'), tableId + 1);
  // The counter sits where Fluss keeps it, and is no store path.
  assert.equal(await (await connect()).exists(`${root}/metadata/table_seqid`), true);
  assert.deepEqual(reopened.children('/'), ['databases']);
  await assert.rejects(reopened.commit([{ op: 'put', path: '/table_seqid', value: 1 }]), rejectsWith('INVALID_ARGUMENT'));
});

test('two stores allocating from one counter at once never hand out a value twice', async () => {
  const root = newRoot();
  const [a, b] = await Promise.all([openStore(root), openStore(root)]);
  const ids = (await Promise.all([...Array.from({ length: 25 }, () => a.nextId('writer_id', 2)), ...Array.from({ length: 25 }, () => b.nextId('writer_id', 2))])).flatMap((id) => [id, id + 1]);
  assert.deepEqual([...ids].sort((x, y) => x - y), Array.from({ length: 100 }, (_, i) => i));
});

test('a commit over ZooKeeper\'s packet limit fails with INVALID_ARGUMENT before it is sent, and the store goes on', async () => {
  const root = newRoot();
  const store = await openStore(root);
  const big = 'x'.repeat(ZOOKEEPER_MAX_REQUEST_BYTES);
  await assert.rejects(store.commit([{ op: 'put', path: '/big', value: big }]), (err) => rejectsWith('INVALID_ARGUMENT')(err) && /jute\.maxbuffer.*\/big/.test((err as Error).message));
  // Values that fit one by one can still pass the limit together.
  const half = 'y'.repeat(ZOOKEEPER_MAX_REQUEST_BYTES / 2);
  await assert.rejects(store.commit([{ op: 'put', path: '/h1', value: half }, { op: 'put', path: '/h2', value: half }]), rejectsWith('INVALID_ARGUMENT'));
  await store.commit([{ op: 'put', path: '/h1', value: half }]);
  assert.equal((await openStore(root)).get('/h1'), half);
  assert.equal(store.get('/big'), undefined);
});

test('ZooKeeper killed with kill -9: commits fail as retriable, and after a restart on the same data dir everything committed is there', async () => {
  const root = newRoot();
  const session = await connect();
  const store = await openStore(root, session);
  await store.commit([{ op: 'put', path: '/databases/db', value: 'before' }]);
  const id = await store.nextId('partition_id');
  await zooKeeper.server.kill();
  await until('the session notices', () => !session.connected);
  const down = await store.commit([{ op: 'put', path: '/databases/db', value: 'lost' }]).catch((err: unknown) => err);
  rejectsWith('NETWORK_EXCEPTION')(down);
  assert.equal((down as TributaryError).retriable, true);
  await zooKeeper.server.restart();
  await until('the session reconnects', () => session.connected);
  assert.equal(store.get('/databases/db'), 'before');
  await store.commit([{ op: 'put', path: '/databases/db', value: 'after' }]);
  const fresh = await openStore(root);
  assert.equal(fresh.get('/databases/db'), 'after');
  assert.equal(await fresh.nextId('partition_id'), id + 1);
});

test('a ZooKeeper that accepts the connection and stays silent does not hold the session: it reconnects once the server answers again', async () => {
  const proxy = await partitionable(Number(zooKeeper.server.address.split(':')[1]));
  const session = await connect({ 'zookeeper.address': proxy.address, 'zookeeper.client.session-timeout': '30s' });
  proxy.silence();
  await until('the session notices', () => !session.connected);
  // Let the client open a connection into the silence before the server answers again.
  await new Promise((resolve) => setTimeout(resolve, 1_500));
  proxy.heal();
  await until('the session reconnects', () => session.connected);
  assert.equal(await session.exists('/'), true);
  await proxy.close();
});

test('a session expired while cut off is reported by the store, which then refuses changes', async () => {
  const root = newRoot();
  const proxy = await partitionable(Number(zooKeeper.server.address.split(':')[1]));
  const session = await connect({ 'zookeeper.address': proxy.address, 'zookeeper.client.session-timeout': '1s' });
  const store = await openStore(root, session);
  await store.commit([{ op: 'put', path: '/databases/db', value: 1 }]);
  let reported = 0;
  store.on('sessionExpired', () => reported++);
  // An ephemeral znode of the store's session shows another client when ZooKeeper expires it.
  await session.create(`${root}/marker-`, Buffer.alloc(0), 'ephemeral-sequential');
  const observer = await connect();
  const [marker] = (await observer.children(root)).filter((n) => n.startsWith('marker-'));
  const gone = new Promise<void>((resolve) => void observer.exists(`${root}/${marker}`, () => resolve()));

  proxy.cut();
  await until('the session notices', () => !session.connected);
  await assert.rejects(store.commit([{ op: 'put', path: '/databases/db', value: 2 }]), rejectsWith('NETWORK_EXCEPTION'));
  await gone;
  proxy.heal();
  await until('the store reports the expiry', () => reported === 1);
  const refused = await store.commit([{ op: 'put', path: '/databases/db', value: 3 }]).catch((err: unknown) => err);
  rejectsWith('STORAGE_EXCEPTION')(refused);
  assert.equal((refused as TributaryError).retriable, false, 'an expired session does not come back: the coordinator steps down');
  assert.equal((await openStore(root)).get('/databases/db'), 1);
  await proxy.close();
});
