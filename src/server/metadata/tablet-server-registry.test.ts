import assert from 'node:assert/strict';
import { test } from 'node:test';
import pino from 'pino';
import { useZooKeeper } from '../../../test/support/zookeeper.js';
import { TributaryError } from '../../common/errors.js';
import { publishActiveCoordinator, readActiveCoordinator } from './active-coordinator.js';
import { partitionable, until } from './fixtures/zookeeper-network.js';
import { LiveTabletServers, TabletServerRegistration } from './tablet-server-registry.js';
import { ZooKeeperSession, type ZooKeeperSettings } from './zookeeper-session.js';

const zooKeeper = useZooKeeper();
const log = pino({ level: 'silent' });

function settings(root: string, overrides: Partial<ZooKeeperSettings> = {}): ZooKeeperSettings {
  return { address: zooKeeper.server.address, root, sessionTimeoutMs: 20_000, connectionTimeoutMs: 15_000, ...overrides };
}

async function connect(): Promise<ZooKeeperSession> {
  return zooKeeper.track(await ZooKeeperSession.connect(settings('/')));
}

async function register(root: string, id: number, rack?: string, overrides?: Partial<ZooKeeperSettings>): Promise<TabletServerRegistration> {
  return zooKeeper.track(await TabletServerRegistration.register(settings(root, overrides), { id, host: '127.0.0.1', port: 9000 + id, ...(rack ? { rack } : {}) }, log));
}

/** The coordinator's view of `root`, with every event it told. */
async function watch(root: string): Promise<{ live: LiveTabletServers; events: string[] }> {
  const live = await LiveTabletServers.watch(await connect(), root);
  const events: string[] = [];
  live.on('joined', (s) => events.push(`joined ${s.id}`));
  live.on('left', (id) => events.push(`left ${id}`));
  return { live, events };
}

test('a tablet server registers itself; the coordinator sees servers join and leave; a second live server with the same id is refused by name', async () => {
  const root = zooKeeper.newRoot('servers');
  const first = await register(root, 1, 'rack-a');
  const { live, events } = await watch(root);
  assert.deepEqual(
    live.list().map((s) => [s.id, s.host, s.port, s.rack]),
    [[1, '127.0.0.1', 9001, 'rack-a']],
    'the servers registered before the coordinator looked are listed, without events',
  );
  assert.equal(live.get(1)!.session, first.session.id);
  const znode = JSON.parse((await first.session.get(`${root}/tabletservers/ids/1`))!.data.toString('utf8')) as Record<string, unknown>;
  assert.deepEqual(Object.keys(znode).sort(), ['host', 'port', 'rack', 'register_timestamp', 'version']);
  assert.equal(znode.version, 1);

  // After the wait for a crashed process's registration to time out (a short one here).
  await assert.rejects(
    register(root, 1, undefined, { sessionTimeoutMs: 1_000 }),
    (err: unknown) => err instanceof TributaryError && err.errorName === 'INVALID_CONFIG_EXCEPTION' && err.message.includes('tablet server id 1 is already registered'),
  );
  const second = await register(root, 2);
  await until('server 2 joins', () => events.includes('joined 2'));
  assert.deepEqual(live.list().map((s) => [s.id, s.rack]), [[1, 'rack-a'], [2, undefined]]);

  await first.close();
  await until('server 1 leaves', () => events.includes('left 1'));
  assert.equal(live.isLive(1), false);

  // A restart: the same id under a new session, which the coordinator tells from the old one.
  await second.close();
  const again = await register(root, 2);
  await until('server 2 is back under its new session', () => live.get(2)?.session === again.session.id);
  assert.deepEqual(events, ['joined 2', 'left 1', 'left 2', 'joined 2']);
});

test('a server restarted right after a crash waits for the registration of its previous process to time out, then registers', async () => {
  const root = zooKeeper.newRoot('servers');
  const proxy = await partitionable(Number(zooKeeper.server.address.split(':')[1]));
  const crashed = await register(root, 4, undefined, { address: proxy.address, sessionTimeoutMs: 1_000 });
  const { live } = await watch(root);
  const old = crashed.session.id;
  // The process is gone without closing its session: nothing more reaches ZooKeeper from it.
  proxy.cut();
  const restarted = await register(root, 4, undefined, { sessionTimeoutMs: 1_000 });
  assert.notEqual(restarted.session.id, old);
  await until('the restarted server is the live one', () => live.get(4)?.session === restarted.session.id);
  await proxy.close();
});

test('a registration whose session expires registers again with a new session', async () => {
  const root = zooKeeper.newRoot('servers');
  const proxy = await partitionable(Number(zooKeeper.server.address.split(':')[1]));
  const registration = await register(root, 3, undefined, { address: proxy.address, sessionTimeoutMs: 1_000 });
  const { live, events } = await watch(root);
  const before = registration.session.id;
  const registered = new Promise<ZooKeeperSession>((resolve) => registration.once('registered', resolve));

  proxy.cut();
  await until('ZooKeeper expires the cut-off session', () => events.includes('left 3'));
  proxy.heal();
  const session = await registered;
  assert.notEqual(session.id, before);
  assert.equal(registration.session, session);
  await until('the server is live again', () => live.get(3)?.session === session.id);
  assert.deepEqual(events, ['left 3', 'joined 3']);
  await registration.close();
  await proxy.close();
});

test('the active coordinator publishes its address; readers find it, are told when it changes, and see it go with its session', async () => {
  const root = zooKeeper.newRoot('active');
  const reader = await connect();
  let changes = 0;
  assert.equal(await readActiveCoordinator(reader, root, () => changes++), undefined);

  const first = await connect();
  await publishActiveCoordinator(first, root, { id: 0, host: '127.0.0.1', port: 9100, epoch: 1 });
  await until('the reader is told', () => changes === 1);
  assert.deepEqual(await readActiveCoordinator(reader, root), { id: 0, host: '127.0.0.1', port: 9100, epoch: 1 });

  // A leader that resigned but kept its session left its znode: the next one replaces it.
  const second = await ZooKeeperSession.connect(settings('/'));
  await publishActiveCoordinator(second, root, { id: 1, host: '127.0.0.1', port: 9101, epoch: 2 });
  assert.deepEqual(await readActiveCoordinator(reader, root, () => changes++), { id: 1, host: '127.0.0.1', port: 9101, epoch: 2 });
  await second.close();
  await until('the reader is told it went', () => changes === 2);
  assert.equal(await readActiveCoordinator(reader, root), undefined);
});
