import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { LocalMetadataStore } from '../metadata/local-metadata-store.js';
import { ONE_NODE_FENCE } from './kv-snapshot-registry.js';
import { RemoteLogRegistry } from './remote-log-registry.js';

const bucket = { tableId: 7, bucket: 1 };
const handle = (end: bigint, start = 0n) => ({ manifestPath: `/remote/log/m-${end}.manifest`, remoteLogStartOffset: start, remoteLogEndOffset: end });

async function registry(t: { after(fn: () => void): void }): Promise<{ registry: RemoteLogRegistry; reopen(): Promise<RemoteLogRegistry> }> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'remote-log-registry-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  return { registry: new RemoteLogRegistry(await LocalMetadataStore.open(dir)), reopen: async () => new RemoteLogRegistry(await LocalMetadataStore.open(dir)) };
}

test('a committed remote log is kept in the metadata store and read back after a restart', async (t) => {
  const { registry: r, reopen } = await registry(t);
  assert.equal(r.latest(bucket), undefined);
  await r.commit({ bucket, manifest: handle(100n), leaderEpoch: 0, coordinatorEpoch: 0 }, ONE_NODE_FENCE);
  await r.commit({ bucket, manifest: handle(250n, 40n), leaderEpoch: 0, coordinatorEpoch: 0 }, ONE_NODE_FENCE);
  assert.deepEqual((await reopen()).latest(bucket), handle(250n, 40n));
  assert.equal(r.latest({ ...bucket, partitionId: 3 }), undefined, 'a partition of the table is another bucket');
});

test('a commit is fenced by the coordinator epoch and the leader epoch, and the remote end never moves back', async (t) => {
  const { registry: r } = await registry(t);
  await r.commit({ bucket, manifest: handle(100n), leaderEpoch: 0, coordinatorEpoch: 0 }, ONE_NODE_FENCE);
  await assert.rejects(r.commit({ bucket, manifest: handle(200n), leaderEpoch: 0, coordinatorEpoch: 1 }, ONE_NODE_FENCE), { errorName: 'INVALID_COORDINATOR_EXCEPTION' });
  await assert.rejects(r.commit({ bucket, manifest: handle(200n), leaderEpoch: 1, coordinatorEpoch: 0 }, ONE_NODE_FENCE), { errorName: 'FENCED_LEADER_EPOCH_EXCEPTION' });
  await assert.rejects(r.commit({ bucket, manifest: handle(90n), leaderEpoch: 0, coordinatorEpoch: 0 }, ONE_NODE_FENCE), { errorName: 'INVALID_ARGUMENT' });
  await assert.rejects(r.commit({ bucket, manifest: handle(100n, 150n), leaderEpoch: 0, coordinatorEpoch: 0 }, ONE_NODE_FENCE), { errorName: 'INVALID_ARGUMENT' });
  assert.deepEqual(r.latest(bucket), handle(100n), 'refused commits change nothing');
});
