import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { isDeepStrictEqual } from 'node:util';
import { errorNameOf, TributaryError } from '../../common/errors.js';
import { testTableInfo } from '../../common/fixtures/table-info.js';
import { readKvValue } from '../../common/row-encoder.js';
import { encodeArrowPayload } from '../../record/arrow-payload.js';
import { ColumnBatchBuilder } from '../../record/column-batch-builder.js';
import { initArrowCompression } from '../../record/compression.js';
import { buildKvBatch } from '../../record/kv-batch.js';
import { buildLogBatch, logBatchesOf, logBatchPayload, readLogBatchHeader } from '../../record/log-batch.js';
import { ApiKeys } from '../../rpc/api-keys.js';
import type { RpcConnection } from '../../rpc/connection.js';
import { ReplicaCluster } from './fixtures/replica-cluster.js';
import { decoder, keys, rows, table as kvTable } from './kv/fixtures/kv-table.js';

const table = testTableInfo([{ name: 'id', type: 'INT' }, { name: 'name', type: 'STRING' }], { tableId: 7, bucketCount: 1 });

/** A log batch of `n` rows whose names carry `tag`, as a producer sends it. */
function logBatch(tag: string, n = 3, writer?: { writerId: bigint; sequence: number }): Buffer {
  const builder = new ColumnBatchBuilder(table.schema);
  for (let i = 0; i < n; i++) builder.appendRow({ id: i, name: `${tag}-${i}` });
  return buildLogBatch({
    schemaId: 0,
    appendOnly: true,
    recordCount: n,
    payload: encodeArrowPayload(builder.build(), 'NONE'),
    ...(writer ? { writerId: writer.writerId, batchSequence: writer.sequence } : {}),
  });
}

async function produce(conn: RpcConnection, batch: Buffer, acks: number, timeoutMs = 20_000, bucketId = 0) {
  const response = await conn.request(ApiKeys.ProduceLog, { acks, tableId: BigInt(table.tableId), timeoutMs, bucketsReq: [{ bucketId, records: batch }] });
  return response.bucketsResp[0];
}

async function clientFetch(conn: RpcConnection, fetchOffset: bigint) {
  const response = await conn.request(ApiKeys.FetchLog, {
    followerServerId: -1,
    maxBytes: 1 << 20,
    minBytes: 1,
    maxWaitMs: 0,
    tablesReq: [{ tableId: BigInt(table.tableId), bucketsReq: [{ bucketId: 0, fetchOffset, maxFetchBytes: 1 << 20 }] }],
  });
  return response.tablesResp[0].bucketsResp[0];
}

const errorName = (code: number | undefined): string | undefined => (code === undefined ? undefined : errorNameOf(code));

async function waitUntil(what: string, condition: () => boolean | Promise<boolean>): Promise<void> {
  for (let i = 0; i < 1000; i++) {
    if (await condition()) return;
    await sleep(20);
  }
  assert.fail(`timed out waiting until ${what}`);
}

/** The tags of the batches of a replica's whole log (up to its durable end), with their leader epochs. */
async function logOf(cluster: ReplicaCluster, id: number): Promise<{ tag: string; leaderEpoch: number; baseOffset: bigint }[]> {
  const log = cluster.server(id).tablets.hosted({ tableId: cluster.table.tableId, bucket: 0 })!.log;
  const out = [];
  let offset = log.logStartOffset;
  while (offset < log.durableEndOffset) {
    const { records } = await log.read(offset, 1 << 20, 'durable-end');
    for (const batch of logBatchesOf(records)) {
      const h = readLogBatchHeader(batch);
      out.push({ tag: tagOf(batch), leaderEpoch: h.leaderEpoch, baseOffset: h.baseOffset });
      offset = h.baseOffset + BigInt(h.lastOffsetDelta) + 1n;
    }
  }
  return out;
}

/** The tag of a log batch: its first name without the row number, read from the raw payload. */
function tagOf(batch: Buffer): string {
  const text = logBatchPayload(batch).toString('latin1');
  return /([a-z]+)-0/.exec(text)?.[1] ?? '?';
}

function hostedLog(cluster: ReplicaCluster, id: number) {
  const metrics = cluster.server(id).tablets.bucketMetrics();
  assert.equal(metrics.length, 1, `server ${id} hosts the bucket`);
  return metrics[0];
}

before(() => initArrowCompression());

describe('replication of a log bucket', () => {
  let cluster: ReplicaCluster;
  after(() => cluster?.close());

  test('followers copy the leader log as written; the high watermark is the lowest log end of the ISR', async () => {
    cluster = new ReplicaCluster(table);
    for (const id of [1, 2, 3]) await cluster.start(id);
    assert.deepEqual(errorName((await cluster.elect(0, 1, [1, 2, 3]))[0].errorCode), undefined);
    const leader = await cluster.connection(1);
    for (const tag of ['a', 'b', 'c']) assert.equal((await produce(leader, logBatch(tag), 1)).errorCode, undefined);
    const end = hostedLog(cluster, 1).logEndOffset;
    await waitUntil('every replica holds the log and the high watermark covers it', () =>
      [1, 2, 3].every((id) => hostedLog(cluster, id).logEndOffset === end && hostedLog(cluster, id).highWatermark === end),
    );
    const written = await logOf(cluster, 1);
    assert.deepEqual(written.map((b) => b.tag), ['a', 'b', 'c']);
    for (const id of [2, 3]) assert.deepEqual(await logOf(cluster, id), written);

    // Server 3 stops fetching: the leader's high watermark stays at its log end while server 2 goes on.
    await cluster.stopReplica(3, 0);
    for (const tag of ['d', 'e']) await produce(leader, logBatch(tag), 1);
    const newEnd = hostedLog(cluster, 1).logEndOffset;
    await waitUntil('server 2 holds the new batches', () => hostedLog(cluster, 2).logEndOffset === newEnd);
    assert.equal(hostedLog(cluster, 1).highWatermark, end);
    assert.equal((await clientFetch(leader, end)).records.length, 0, 'clients see nothing past the high watermark');

    // Clients are served by the leader only.
    const follower = await cluster.connection(2);
    assert.equal(errorName((await produce(follower, logBatch('x'), 1)).errorCode), 'NOT_LEADER_OR_FOLLOWER');
    assert.equal(errorName((await clientFetch(follower, 0n)).errorCode), 'NOT_LEADER_OR_FOLLOWER');
    assert.equal(errorName((await produce(await cluster.connection(3), logBatch('x'), 1)).errorCode), 'UNKNOWN_TABLE_OR_BUCKET_EXCEPTION');
    const listed = await leader.request(ApiKeys.ListOffsets, { followerServerId: -1, offsetType: 3, tableId: BigInt(table.tableId), bucketId: [0] });
    assert.equal(listed.bucketsResp[0].offset, newEnd, 'offset type 3 is the log end offset');
  });
});

describe('acks=all', () => {
  let cluster: ReplicaCluster;
  after(() => cluster?.close());

  test('waits for every in-sync replica, times out without them and fails before appending when the ISR is too small', async () => {
    cluster = new ReplicaCluster(table, { 'log.replica.min-in-sync-replicas-number': '2' });
    for (const id of [1, 2]) await cluster.start(id);
    await cluster.elect(0, 1, [1, 2]);
    const leader = await cluster.connection(1);
    const acked = await produce(leader, logBatch('a'), -1);
    assert.equal(acked.errorCode, undefined);
    const ackedEnd = hostedLog(cluster, 1).logEndOffset;
    assert.ok(hostedLog(cluster, 2).logEndOffset >= ackedEnd, 'the follower held the batch when it was acknowledged');

    await cluster.stopReplica(2, 0);
    const timedOut = await produce(leader, logBatch('b'), -1, 300);
    assert.equal(errorName(timedOut.errorCode), 'REQUEST_TIME_OUT');
    assert.equal(hostedLog(cluster, 1).highWatermark, ackedEnd);

    // The coordinator shrinks the ISR to the leader alone: below the minimum, nothing is appended.
    const state = cluster.buckets.get(0)!;
    state.isr = [1];
    state.bucketEpoch++;
    await cluster.notify(0, [1]);
    const end = hostedLog(cluster, 1).logEndOffset;
    assert.equal(errorName((await produce(leader, logBatch('c'), -1)).errorCode), 'NOT_ENOUGH_REPLICAS_EXCEPTION');
    assert.equal(hostedLog(cluster, 1).logEndOffset, end);
    assert.equal((await produce(leader, logBatch('d'), 1)).errorCode, undefined, 'acks=1 does not need the ISR');
  });

  test('a write waiting for the ISR is answered NOT_LEADER_OR_FOLLOWER when its leader is deposed', async () => {
    const state = cluster.buckets.get(0)!;
    state.isr = [1, 2];
    state.bucketEpoch++;
    await cluster.notify(0, [1]);
    const leader = await cluster.connection(1);
    const waiting = produce(leader, logBatch('e'), -1, 60_000);
    await waitUntil('the write is appended', () => hostedLog(cluster, 1).logEndOffset > hostedLog(cluster, 1).highWatermark);
    await cluster.elect(0, 2, [2], [1, 2], [1]);
    assert.equal(errorName((await waiting).errorCode), 'NOT_LEADER_OR_FOLLOWER');
  });
});

describe('the ISR', () => {
  let cluster: ReplicaCluster;
  after(() => cluster?.close());

  test('a follower that stops leaves it after the max lag and rejoins once restarted and caught up', async () => {
    cluster = new ReplicaCluster(table, { 'log.replica.max-lag-time': '2s' });
    for (const id of [1, 2, 3]) await cluster.start(id);
    await cluster.elect(0, 1, [1, 2, 3]);
    const leader = await cluster.connection(1);
    await produce(leader, logBatch('a'), -1);
    const held = hostedLog(cluster, 3).logEndOffset;
    await cluster.stop(3);
    await waitUntil('the coordinator shrank the ISR', () => cluster.buckets.get(0)!.isr.length === 2);
    assert.deepEqual(cluster.buckets.get(0)!.isr, [1, 2]);
    await waitUntil('the leader took the new ISR', () => hostedLog(cluster, 1).inSyncReplicas === 2);
    assert.equal(hostedLog(cluster, 1).underReplicated, true);
    for (const tag of ['b', 'c']) assert.equal((await produce(leader, logBatch(tag), -1)).errorCode, undefined);

    // Server 3 restarts on its data dir; told of the bucket, it reopens its log, catches up and rejoins.
    await cluster.start(3);
    await cluster.notify(0, [3]);
    assert.ok(hostedLog(cluster, 3).logEndOffset >= held, 'the restarted replica kept its log');
    await waitUntil('the ISR has server 3 again', () => hostedLog(cluster, 1).inSyncReplicas === 3);
    assert.deepEqual(cluster.buckets.get(0)!.isr, [1, 2, 3]);
    assert.equal(hostedLog(cluster, 3).logEndOffset, hostedLog(cluster, 1).logEndOffset);
    assert.equal(hostedLog(cluster, 1).underReplicated, false);
    const replication = cluster.server(1).tablets.replication!;
    assert.equal(replication.isrShrinks, 1);
    assert.equal(replication.isrExpands, 1);
  });
});

describe('leader changes', () => {
  let cluster: ReplicaCluster;
  after(() => cluster?.close());

  test('a deposed leader truncates the tail nobody fetched; readers never saw it', async () => {
    cluster = new ReplicaCluster(table);
    for (const id of [1, 2]) await cluster.start(id);
    await cluster.elect(0, 1, [1, 2]);
    const first = await cluster.connection(1);
    await produce(first, logBatch('a'), -1);
    const committed = hostedLog(cluster, 1).highWatermark;
    await cluster.stopReplica(2, 0);
    assert.equal((await produce(first, logBatch('b'), 1)).errorCode, undefined);
    assert.equal(hostedLog(cluster, 1).highWatermark, committed);
    assert.equal((await clientFetch(first, committed)).records.length, 0);

    // Server 2 is elected (its log ends with batch a) and takes a write; server 1 follows it.
    await cluster.elect(0, 2, [2], [1, 2], [2]);
    const second = await cluster.connection(2);
    assert.equal((await produce(second, logBatch('c'), 1)).errorCode, undefined);
    await cluster.notify(0, [1]);
    // Both logs end at the same offset before the truncation too (equal batches): wait for equal contents.
    await waitUntil('server 1 holds the new leader log', async () => isDeepStrictEqual(await logOf(cluster, 1), await logOf(cluster, 2)));
    const log = await logOf(cluster, 1);
    assert.deepEqual(log.map((b) => [b.tag, b.leaderEpoch]), [['a', 0], ['c', 1]]);
    assert.equal(errorName((await produce(first, logBatch('x'), 1)).errorCode), 'NOT_LEADER_OR_FOLLOWER');
  });

  test('an idempotent producer retrying after a failover is deduplicated by the new leader', async () => {
    await cluster.close();
    cluster = new ReplicaCluster(table);
    for (const id of [1, 2]) await cluster.start(id);
    await cluster.elect(0, 1, [1, 2]);
    const first = await cluster.connection(1);
    const writer = { writerId: 9n, sequence: 0 };
    await produce(first, logBatch('a', 3, writer), -1);
    const retried = await produce(first, logBatch('b', 3, { ...writer, sequence: 1 }), -1);
    assert.equal(retried.errorCode, undefined);

    await cluster.elect(0, 2, [1, 2]);
    const second = await cluster.connection(2);
    const end = hostedLog(cluster, 2).logEndOffset;
    const again = await produce(second, logBatch('b', 3, { ...writer, sequence: 1 }), -1);
    assert.equal(again.errorCode, undefined);
    assert.equal(again.baseOffset, retried.baseOffset, 'the retry gets the offsets of its first append');
    assert.equal(hostedLog(cluster, 2).logEndOffset, end);
    const next = await produce(second, logBatch('c', 3, { ...writer, sequence: 2 }), -1);
    assert.equal(next.baseOffset, end);
  });
});

describe('fencing', () => {
  let cluster: ReplicaCluster;
  after(() => cluster?.close());

  test('requests of an older coordinator or an older leader epoch change nothing', async () => {
    cluster = new ReplicaCluster(table);
    cluster.coordinatorEpoch = 3;
    for (const id of [1, 2]) await cluster.start(id);
    await cluster.elect(0, 1, [1, 2]);
    await cluster.elect(0, 1, [1, 2]);
    await assert.rejects(cluster.notify(0, [1], 2), (err: unknown) => err instanceof TributaryError && err.errorName === 'INVALID_COORDINATOR_EXCEPTION');

    const state = cluster.buckets.get(0)!;
    state.leaderEpoch = 0;
    const [stale] = await cluster.notify(0, [1]);
    assert.equal(errorName(stale.errorCode), 'FENCED_LEADER_EPOCH_EXCEPTION');
    const [staleStop] = await cluster.stopReplica(1, 0);
    assert.equal(errorName(staleStop.errorCode), 'FENCED_LEADER_EPOCH_EXCEPTION');
    state.leaderEpoch = 1;
    assert.equal(hostedLog(cluster, 1).leader, true, 'server 1 still leads');

    const fetchAs = async (currentLeaderEpoch: number) =>
      (
        await (await cluster.connection(1)).request(ApiKeys.FetchLog, {
          followerServerId: 2,
          maxBytes: 1 << 20,
          minBytes: 1,
          maxWaitMs: 0,
          tablesReq: [{ tableId: BigInt(table.tableId), bucketsReq: [{ bucketId: 0, fetchOffset: 0n, maxFetchBytes: 1 << 20, currentLeaderEpoch }] }],
        })
      ).tablesResp[0].bucketsResp[0];
    assert.equal(errorName((await fetchAs(0)).errorCode), 'FENCED_LEADER_EPOCH_EXCEPTION');
    assert.equal(errorName((await fetchAs(2)).errorCode), 'NOT_LEADER_OR_FOLLOWER');
    assert.equal((await fetchAs(1)).errorCode, undefined);
  });

  test('the same leader epoch again only updates the ISR and the table info (ALTER TABLE)', async () => {
    const state = cluster.buckets.get(0)!;
    const altered = { ...table, properties: { 'table.log.ttl': '2h' }, modifiedTime: table.modifiedTime + 1 };
    state.isr = [1];
    state.bucketEpoch++;
    cluster.table = altered;
    const results = await cluster.notify(0, [1, 2]);
    assert.deepEqual(results.map((r) => r.errorCode), [undefined, undefined]);
    for (const id of [1, 2]) {
      const replica = cluster.server(id).tablets.hosted({ tableId: table.tableId, bucket: 0 })!;
      assert.equal(replica.leaderEpoch, 1);
      assert.deepEqual(replica.isr, [1]);
      assert.equal(replica.table.properties['table.log.ttl'], '2h');
    }
    assert.equal(hostedLog(cluster, 1).leader, true);
    assert.equal(hostedLog(cluster, 2).leader, false);
  });
});

describe('a primary-key bucket', () => {
  let cluster: ReplicaCluster;
  after(() => cluster?.close());

  const put = async (conn: RpcConnection, seq: number, k: bigint, v: string) => {
    const records = buildKvBatch({ schemaId: 0, writerId: 5n, batchSequence: seq, records: [{ key: keys.encode([k, null]), row: rows.encode([k, v]) }] });
    return (await conn.request(ApiKeys.PutKv, { acks: -1, tableId: BigInt(kvTable.tableId), timeoutMs: 20_000, targetColumns: [], bucketsReq: [{ bucketId: 0, records }] })).bucketsResp[0];
  };
  const lookup = async (conn: RpcConnection, k: bigint) => {
    const bucket = (await conn.request(ApiKeys.Lookup, { tableId: BigInt(kvTable.tableId), bucketsReq: [{ bucketId: 0, keys: [keys.encode([k, null])] }] })).bucketsResp[0];
    if (bucket.errorCode !== undefined) return errorName(bucket.errorCode);
    const value = bucket.values[0].values;
    return value === undefined ? undefined : (decoder.decode(readKvValue(value).row)[1] as string);
  };

  test('has its state on the leader only, and a new leader has every acknowledged write', async () => {
    cluster = new ReplicaCluster(kvTable);
    for (const id of [1, 2]) await cluster.start(id);
    await cluster.elect(0, 1, [1, 2]);
    const first = await cluster.connection(1);
    const second = await cluster.connection(2);
    assert.equal((await put(first, 0, 1n, 'a')).errorCode, undefined);
    assert.equal((await put(first, 1, 2n, 'b')).errorCode, undefined);
    assert.equal(await lookup(first, 1n), 'a');
    assert.equal(await lookup(second, 1n), 'NOT_LEADER_OR_FOLLOWER');

    await cluster.elect(0, 2, [1, 2]);
    assert.equal(await lookup(second, 1n), 'a');
    assert.equal(await lookup(second, 2n), 'b');
    assert.equal((await put(second, 2, 1n, 'c')).errorCode, undefined);
    assert.equal(await lookup(second, 1n), 'c');
    assert.equal(await lookup(first, 1n), 'NOT_LEADER_OR_FOLLOWER');
    await waitUntil('server 1 holds the changelog of the new leader', () => hostedLog(cluster, 1).logEndOffset === hostedLog(cluster, 2).logEndOffset);
    const epochs = (await logOf(cluster, 1)).map((b) => b.leaderEpoch);
    assert.deepEqual(epochs, [0, 0, 1], 'each changelog batch carries the epoch of the leader that wrote it');
  });
});

describe('a follower behind the leader log start', () => {
  let cluster: ReplicaCluster;
  after(() => cluster?.close());

  test('starts its log again where the leader log starts and catches up', async () => {
    const shortLived = { ...table, properties: { 'table.log.ttl': '1h' } };
    cluster = new ReplicaCluster(shortLived, { 'log.segment.file-size': '4kb' });
    for (const id of [1, 2]) await cluster.start(id);
    // Server 2 is a replica outside the ISR that has not heard of the bucket yet.
    await cluster.elect(0, 1, [1], [1, 2], [1]);
    const leader = await cluster.connection(1);
    for (let i = 0; i < 30; i++) assert.equal((await produce(leader, logBatch(`b${i}`), -1)).errorCode, undefined);
    const deleted = await cluster.server(1).tablets.deleteExpiredSegments(Date.now() + 2 * 3600_000);
    assert.ok(deleted > 0, 'retention deleted the first segments');
    const start = hostedLog(cluster, 1).logStartOffset;
    assert.ok(start > 0n);

    await cluster.notify(0, [2]);
    await waitUntil('server 2 holds the leader log from its start', () => hostedLog(cluster, 2).logEndOffset === hostedLog(cluster, 1).logEndOffset);
    assert.equal(hostedLog(cluster, 2).logStartOffset, start);
    await waitUntil('server 2 joined the ISR', () => hostedLog(cluster, 1).inSyncReplicas === 2);
    assert.deepEqual(cluster.buckets.get(0)!.isr, [1, 2]);
  });
});

describe('a new leader and the long polls of its followers', () => {
  let cluster: ReplicaCluster;
  after(() => cluster?.close());

  test('its first acks=all write waits for no follower fetch that long-polls for other buckets, whichever server is told first', async () => {
    // Polls and back-offs far longer than the writes may take: only the wake-ups can make them pass.
    cluster = new ReplicaCluster({ ...table, bucketCount: 4 }, { 'log.replica.fetch.wait-max-time': '60s', 'log.replica.fetch.backoff-interval': '60s' });
    for (const id of [1, 2, 3]) await cluster.start(id);
    await cluster.elect(0, 1, [1, 2]);
    const leader = await cluster.connection(1);
    assert.equal((await produce(leader, logBatch('a'), -1)).errorCode, undefined);
    // Server 2 now long-polls server 1 for bucket 0, which gets no more writes.
    await sleep(300);
    const write = async (bucket: number): Promise<void> => {
      const answer = await produce(leader, logBatch(`b${bucket}`), -1, 20_000, bucket);
      assert.equal(errorName(answer.errorCode), undefined, `bucket ${bucket}: ${answer.errorMessage}`);
    };
    // The follower is told first: the leader answers its waiting fetch once it leads.
    await cluster.elect(1, 1, [1, 2], [1, 2], [2, 1]);
    await write(1);
    await sleep(300);
    // The leader is told first: the follower's next fetch, without the bucket, waits briefly only.
    await cluster.elect(2, 1, [1, 2], [1, 2], [1, 2]);
    await write(2);
    // Server 3 has no fetcher yet and asks before the leader leads: it retries within milliseconds.
    await cluster.elect(3, 1, [1, 2, 3], [1, 2, 3], [3, 2, 1]);
    await write(3);
  });
});

describe('a lake-enabled bucket', () => {
  let cluster: ReplicaCluster;
  after(() => cluster?.close());

  test('deletes on every replica only the segments below the lake end offset the coordinator sent; an older coordinator is refused', async () => {
    const tiered = { ...table, properties: { 'table.log.ttl': '1h', 'table.datalake.enabled': 'true' } };
    cluster = new ReplicaCluster(tiered, { 'log.segment.file-size': '4kb' });
    for (const id of [1, 2]) await cluster.start(id);
    await cluster.elect(0, 1, [1, 2]);
    const leader = await cluster.connection(1);
    for (let i = 0; i < 30; i++) assert.equal((await produce(leader, logBatch(`b${i}`), -1)).errorCode, undefined);
    const end = hostedLog(cluster, 1).logEndOffset;
    await waitUntil('the follower holds the log', () => hostedLog(cluster, 2).logEndOffset === end);
    const expire = (id: number) => cluster.server(id).tablets.deleteExpiredSegments(Date.now() + 2 * 3600_000);
    for (const id of [1, 2]) assert.equal(await expire(id), 0, `server ${id}: nothing is deleted before the lake holds it`);

    const lakeEnd = end / 2n;
    const notify = async (id: number, coordinatorEpoch: number, endOffset: bigint) =>
      (await cluster.connection(id)).request(ApiKeys.NotifyLakeTableOffset, { coordinatorEpoch, tables: [{ tableId: BigInt(table.tableId), bucketOffsets: [{ bucketId: 0, logEndOffset: endOffset }] }] });
    for (const id of [1, 2]) {
      await assert.rejects(notify(id, cluster.coordinatorEpoch - 1, end), (err: unknown) => err instanceof TributaryError && err.errorName === 'INVALID_COORDINATOR_EXCEPTION');
      assert.equal(await expire(id), 0, `server ${id}: a deposed coordinator's offsets change nothing`);
      await notify(id, cluster.coordinatorEpoch, lakeEnd);
      assert.ok((await expire(id)) > 0, `server ${id} deleted the segments the lake holds`);
      const { logStartOffset } = hostedLog(cluster, id);
      assert.ok(logStartOffset > 0n && logStartOffset <= lakeEnd, `server ${id}: log start ${logStartOffset} is at most the lake end ${lakeEnd}`);
      assert.equal(await expire(id), 0, `server ${id} keeps every segment the lake does not hold`);
    }
  });
});

describe('the full set of replicas from the coordinator', () => {
  let cluster: ReplicaCluster;
  after(() => cluster?.close());

  test('deletes the replicas it does not name, hosted or left on disk, and nothing else under the data dir', async () => {
    cluster = new ReplicaCluster(table);
    const { dataDir } = await cluster.start(1);
    await cluster.elect(0, 1, [1]);
    const conn = await cluster.connection(1);
    assert.equal((await produce(conn, logBatch('kept'), -1)).errorCode, undefined);
    const logDir = path.join(dataDir, 'log', table.path.database);
    const dropped = [path.join(logDir, 'gone-9', 'log-0'), path.join(logDir, 'gone-9', 'kv-0'), path.join(logDir, 'parted-11', 'day1-p12', 'log-1'), path.join(logDir, `${table.path.table}-${table.tableId}`, 'log-5')];
    for (const dir of dropped) {
      fs.mkdirSync(dir, { recursive: true });
      fs.writeFileSync(path.join(dir, '00000000000000000000.log'), 'x');
    }
    const unrelated = [path.join(logDir, 'notes'), path.join(logDir, 'parted-11', 'readme')];
    for (const dir of unrelated) fs.mkdirSync(dir, { recursive: true });
    const hostedDir = cluster.server(1).tablets.hosted({ tableId: table.tableId, bucket: 0 })!.log.dir;

    assert.deepEqual((await cluster.fullSet(1, [0])).map((b) => [b.bucketId, b.errorCode]), [[0, undefined]]);
    for (const dir of dropped) assert.equal(fs.existsSync(dir), false, `${dir} is deleted`);
    assert.equal(fs.existsSync(path.join(logDir, 'gone-9')), false, 'the emptied table directory goes too');
    assert.equal(fs.existsSync(path.join(logDir, 'parted-11', 'day1-p12')), false, 'and the emptied partition directory');
    for (const dir of unrelated) assert.ok(fs.existsSync(dir), `${dir} is not a replica: it stays`);
    assert.ok(fs.existsSync(hostedDir), 'the named replica keeps its data');
    assert.equal((await clientFetch(conn, 0n)).errorCode, undefined, 'and still leads');

    await cluster.fullSet(1, []);
    assert.equal(cluster.server(1).tablets.hosted({ tableId: table.tableId, bucket: 0 }), undefined, 'an empty full set: the hosted replica stops');
    assert.equal(fs.existsSync(hostedDir), false, 'and its data is deleted');
    for (const dir of unrelated) assert.ok(fs.existsSync(dir));
  });
});
