/**
 * KV snapshot handles and warm standbys on real tablet servers (real TCP between them, a shared
 * remote.data.dir) whose coordinator part registers snapshots in ZooKeeper through the
 * coordinator's KvSnapshotRegistry.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { pino } from 'pino';
import { useZooKeeper } from '../../test/support/zookeeper.js';
import { Options } from '../common/config.js';
import { errorNameOf } from '../common/errors.js';
import { readKvValue } from '../common/row-encoder.js';
import { initArrowCompression } from '../record/compression.js';
import { buildKvBatch } from '../record/kv-batch.js';
import { ApiKeys } from '../rpc/api-keys.js';
import type { RpcConnection } from '../rpc/connection.js';
import { KvSnapshotRegistry } from './coordinator/kv-snapshot-registry.js';
import { ZooKeeperMetadataStore } from './metadata/zookeeper-metadata-store.js';
import { ZooKeeperSession, zooKeeperSettings } from './metadata/zookeeper-session.js';
import { ReplicaCluster } from './tablet/fixtures/replica-cluster.js';
import { decoder, keys, rows, table } from './tablet/kv/fixtures/kv-table.js';

const zooKeeper = useZooKeeper();
const silent = pino({ level: 'silent' });
const bucket = { tableId: table.tableId, bucket: 0 };
const KEYS = 20;

before(() => initArrowCompression());

/** The registry on a new ZooKeeper session: what a coordinator that takes over reads. */
async function registryOn(root: string): Promise<KvSnapshotRegistry> {
  const options = new Options('server', { 'zookeeper.address': zooKeeper.server.address, 'zookeeper.client.session-timeout': '20s' });
  const session = zooKeeper.track(await ZooKeeperSession.connect(zooKeeperSettings(options)));
  return new KvSnapshotRegistry(await ZooKeeperMetadataStore.open(session, root), 2, silent);
}

let sequence = 0;
async function putAll(conn: RpcConnection, round: string): Promise<void> {
  const records = buildKvBatch({
    schemaId: 0,
    writerId: 5n,
    batchSequence: sequence++,
    records: Array.from({ length: KEYS }, (_, k) => ({ key: keys.encode([BigInt(k), null]), row: rows.encode([BigInt(k), `${round}-${k}`]) })),
  });
  const answer = (await conn.request(ApiKeys.PutKv, { acks: -1, tableId: BigInt(table.tableId), timeoutMs: 20_000, targetColumns: [], bucketsReq: [{ bucketId: 0, records }] })).bucketsResp[0];
  assert.equal(answer.errorCode, undefined, answer.errorMessage);
}

async function lookupAll(conn: RpcConnection): Promise<(string | undefined)[]> {
  const answer = (await conn.request(ApiKeys.Lookup, { tableId: BigInt(table.tableId), bucketsReq: [{ bucketId: 0, keys: Array.from({ length: KEYS }, (_, k) => keys.encode([BigInt(k), null])) }] })).bucketsResp[0];
  assert.equal(answer.errorCode, undefined, answer.errorMessage);
  return answer.values.map((v) => (v.values === undefined ? undefined : (decoder.decode(readKvValue(v.values).row)[1] as string)));
}

const expected = (round: string): string[] => Array.from({ length: KEYS }, (_, k) => `${round}-${k}`);

async function waitUntil(what: string, condition: () => boolean): Promise<void> {
  for (let i = 0; i < 1000; i++) {
    if (condition()) return;
    await sleep(20);
  }
  assert.fail(`timed out waiting until ${what}`);
}

describe('KV snapshot handles and standbys of a primary-key bucket', () => {
  let cluster: ReplicaCluster;
  after(() => cluster?.close());

  test('snapshots are registered in ZooKeeper and retained; a new leader restores the registered one, never a newer unregistered directory; a deposed leader is fenced; a promoted standby restores nothing', async () => {
    const root = zooKeeper.newRoot('kv-snapshots');
    const registry = await registryOn(root);
    cluster = new ReplicaCluster(table, {}, registry);
    for (const id of [1, 2, 3]) await cluster.start(id);
    const hosted = (id: number) => cluster.server(id).tablets.hosted(bucket)!;
    await cluster.elect(0, 1, [1, 2, 3]);
    const first = await cluster.connection(1);

    // Three snapshots between writes: the newest two are kept, the first one's files are removed.
    for (const round of ['r1', 'r2', 'r3']) {
      await putAll(first, round);
      const [taken] = await cluster.server(1).tablets.snapshotAll(table.tableId);
      assert.equal(taken.snapshot.logOffset, hosted(1).log.highWatermark);
    }
    await putAll(first, 'r4'); // the tail after the last snapshot
    assert.deepEqual(registry.handles(bucket).map((h) => h.snapshotId), [2, 3]);
    const snapshotsDir = path.dirname(path.dirname(registry.latest(bucket)!.metadataPath));
    assert.deepEqual(fs.readdirSync(snapshotsDir).sort(), ['shared', 'snap-2', 'snap-3']);
    // A coordinator that takes over reads the same handles from ZooKeeper.
    assert.deepEqual((await registryOn(root)).handles(bucket), registry.handles(bucket));

    // A complete-looking snapshot no handle names, newer than the registered ones: never restored.
    const unregistered = path.join(snapshotsDir, 'snap-9');
    fs.mkdirSync(unregistered);
    fs.writeFileSync(path.join(unregistered, '_METADATA'), JSON.stringify({ snapshot_id: 9, log_offset: '0', row_count: 0, created_time: 0, size: 10, chunk_size: 10, chunks: ['0'.repeat(64)] }));

    // Server 2 leads (server 1 is not told: it still thinks it leads); server 3 becomes the standby.
    await cluster.elect(0, 2, [1, 2, 3], [1, 2, 3], [2, 3], [3]);
    const second = await cluster.connection(2);
    assert.deepEqual(cluster.server(2).tablets.kvRestores, { snapshot: 1, local: 0, none: 0 });
    assert.deepEqual(await lookupAll(second), expected('r4'));
    assert.deepEqual(cluster.server(3).tablets.kvRestores, { snapshot: 1, local: 0, none: 0 }, 'the standby starts from the registered snapshot');

    // The deposed leader's snapshot is refused and its files go.
    await assert.rejects(cluster.server(1).tablets.snapshotAll(table.tableId), { errorName: 'FENCED_LEADER_EPOCH_EXCEPTION' });
    assert.deepEqual(registry.handles(bucket).map((h) => h.snapshotId), [2, 3]);
    assert.deepEqual(fs.readdirSync(snapshotsDir).sort(), ['shared', 'snap-2', 'snap-3', 'snap-9']);
    await cluster.notify(0, [1]);

    // The next registered snapshot takes an id above every directory, and the unregistered one is removed with its commit.
    await putAll(second, 'r5');
    const [taken] = await cluster.server(2).tablets.snapshotAll(table.tableId);
    assert.equal(taken.snapshot.snapshotId, 10);
    assert.deepEqual(fs.readdirSync(snapshotsDir).sort(), ['shared', 'snap-10', 'snap-3']);
    // The chunks kept are exactly those the retained snapshots hold.
    const held = new Set(['snap-3', 'snap-10'].flatMap((d) => (JSON.parse(fs.readFileSync(path.join(snapshotsDir, d, '_METADATA'), 'utf8')) as { chunks: string[] }).chunks));
    assert.deepEqual(fs.readdirSync(path.join(snapshotsDir, 'shared')).sort(), [...held].sort());
    await putAll(second, 'r6');

    // The standby keeps up with the high watermark; its state serves no lookups.
    const hw = hosted(2).log.highWatermark;
    await waitUntil('the standby applied the changelog up to the high watermark', () => hosted(3).kv?.stateOffset === hw);
    const third = await cluster.connection(3);
    const refused = (await third.request(ApiKeys.Lookup, { tableId: BigInt(table.tableId), bucketsReq: [{ bucketId: 0, keys: [keys.encode([0n, null])] }] })).bucketsResp[0];
    assert.equal(errorNameOf(refused.errorCode!), 'NOT_LEADER_OR_FOLLOWER');

    // The leader dies: the standby leads on its own state, with every acknowledged value.
    await cluster.stop(2);
    await cluster.elect(0, 3, [1, 3], [1, 2, 3], [1, 3], [1]);
    assert.deepEqual(cluster.server(3).tablets.kvRestores, { snapshot: 1, local: 1, none: 0 }, 'promoted without restoring a snapshot');
    assert.deepEqual(await lookupAll(third), expected('r6'));
    await putAll(third, 'r7');
    assert.deepEqual(await lookupAll(third), expected('r7'));
  });
});
