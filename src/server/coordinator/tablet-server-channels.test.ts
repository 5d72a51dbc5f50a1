import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import pino from 'pino';
import { TributaryError } from '../../common/errors.js';
import { ApiKeys } from '../../rpc/api-keys.js';
import { RpcServer } from '../../rpc/server.js';
import type { TabletServerNode } from '../metadata/tablet-server-registry.js';
import { TabletServerChannels } from './tablet-server-channels.js';

const log = pino({ level: 'silent' });
const servers: RpcServer[] = [];
after(() => Promise.all(servers.map((s) => s.close())));

/** A tablet server's endpoint that records the UpdateMetadata requests it answers. */
async function endpoint(port = 0, answer?: () => never): Promise<{ port: number; got: { epoch: number; servers: number }[]; rpc: RpcServer }> {
  const rpc = new RpcServer({ host: '127.0.0.1', port, maxFrameBytes: 1 << 20, maxInflightBytes: 1 << 20, frameTimeoutMs: 30_000, idleTimeoutMs: 600_000, closeTimeoutMs: 1000 });
  const got: { epoch: number; servers: number }[] = [];
  rpc.register(ApiKeys.UpdateMetadata, async (req) => {
    got.push({ epoch: req.coordinatorEpoch, servers: req.tabletServers.length });
    answer?.();
    return {};
  });
  servers.push(rpc);
  return { port: (await rpc.listen()).port, got, rpc };
}

const node = (port: number, session = 'aa'): TabletServerNode => ({ id: 1, host: '127.0.0.1', port, registerTimestamp: 0, session });
const update = (count: number) => ({ tabletServers: Array.from({ length: count }, (_, i) => ({ nodeId: i, host: 'h', port: 1 })) });

test('requests to a server arrive in the order they were sent, each with the coordinator epoch', async () => {
  const server = await endpoint();
  const channels = new TabletServerChannels(7, () => node(server.port), log);
  await Promise.all(Array.from({ length: 20 }, (_, i) => channels.send(1, ApiKeys.UpdateMetadata, update(i))));
  assert.deepEqual(server.got, Array.from({ length: 20 }, (_, i) => ({ epoch: 7, servers: i })));
  await channels.close();
});

test('a request is sent again until the registered server answers, and dropped once it has left or restarted', async () => {
  // A port nothing listens on any more.
  const gone = await endpoint();
  await gone.rpc.close();
  const { port } = gone;
  let registered: TabletServerNode | undefined = node(port);
  const channels = new TabletServerChannels(1, () => registered, log);
  const answered = channels.send(1, ApiKeys.UpdateMetadata, update(1));
  // Nothing listens yet: the request fails on the way and waits; once the server listens, it arrives.
  const server = await endpoint(port);
  assert.ok(await answered);
  assert.deepEqual(server.got, [{ epoch: 1, servers: 1 }]);

  const forOldSelf = channels.send(1, ApiKeys.UpdateMetadata, update(2));
  registered = node(port, 'bb');
  assert.equal(await forOldSelf, undefined, 'the server restarted: the request for its old self is dropped');
  const afterLeaving = channels.send(1, ApiKeys.UpdateMetadata, update(3));
  registered = undefined;
  assert.equal(await afterLeaving, undefined);
  assert.equal(await channels.send(1, ApiKeys.UpdateMetadata, update(4)), undefined, 'nothing is sent to a server that is not registered');
  assert.deepEqual(server.got, [{ epoch: 1, servers: 1 }]);
  await channels.close();
});

test("a server's error answer ends the request: it is not sent again", async () => {
  const server = await endpoint(0, () => {
    throw new TributaryError('INVALID_COORDINATOR_EXCEPTION', 'epoch 1 is older than 2');
  });
  const channels = new TabletServerChannels(1, () => node(server.port), log);
  assert.equal(await channels.send(1, ApiKeys.UpdateMetadata, update(1)), undefined);
  assert.equal(server.got.length, 1);
  await channels.close();
});
