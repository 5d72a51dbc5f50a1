/**
 * End to end on a real server process: DDL, writes from the client, reads with projection,
 * partitions (manual, dynamic, automatic), ListOffsets by timestamp, LimitScan.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { Connection, Timestamp, TributaryError } from '../src/client/index.js';
import type { ScanRecord } from '../src/client/index.js';
import type { LogScanner } from '../src/client/log-scanner.js';
import { ApiKeys } from '../src/rpc/api-keys.js';
import { useCluster } from './support/cluster.js';

const cluster = useCluster({ client: { 'client.writer.batch-timeout': '5ms' } });

/** Reads everything until `expected` records arrived (or fails after a bounded number of polls). */
async function drain(scanner: LogScanner, expected: number): Promise<ScanRecord[]> {
  const out: ScanRecord[] = [];
  for (let i = 0; i < 200 && out.length < expected; i++) out.push(...(await scanner.poll(200)));
  return out;
}

describe('log tables end to end', () => {
  test('the HTTP endpoint answers health checks', async () => {
    const res = await fetch(`http://${cluster.server.http}/health`);
    assert.equal(res.status, 200);
    assert.deepEqual(await res.json(), { status: 'ok' });
    assert.equal((await fetch(`http://${cluster.server.http}/nope`)).status, 404);
  });

  test('DDL: databases and tables', async () => {
    const admin = cluster.conn.getAdmin();
    assert.ok((await admin.listDatabases()).includes('tributary'), 'the default database exists');
    await admin.createDatabase('shop', { comment: 'orders and more' });
    assert.equal(await admin.databaseExists('shop'), true);
    await assert.rejects(admin.createDatabase('shop'), (e: TributaryError) => e.errorName === 'DATABASE_ALREADY_EXIST');
    await admin.createDatabase('shop', { ignoreIfExists: true });

    await admin.createTable({ database: 'shop', table: 'orders' }, {
      columns: [
        { name: 'id', type: 'BIGINT', nullable: false },
        { name: 'customer', type: 'STRING' },
        { name: 'amount', type: 'DECIMAL(12, 2)' },
        { name: 'ts', type: 'TIMESTAMP(6)' },
        { name: 'at', type: 'TIMESTAMP_LTZ(6)' },
        { name: 'day', type: 'DATE' },
        { name: 'flag', type: 'BOOLEAN' },
        { name: 'score', type: 'DOUBLE' },
        { name: 'qty', type: 'INT' },
        { name: 'blob', type: 'BYTES' },
      ],
      properties: { 'bucket.num': '3', 'bucket.key': 'id' },
    });
    assert.deepEqual(await admin.listTables('shop'), ['orders']);
    assert.equal(await admin.tableExists({ database: 'shop', table: 'orders' }), true);
    assert.equal(await admin.tableExists({ database: 'shop', table: 'other' }), false);
    const { schemaId, schema } = await admin.getTableSchema({ database: 'shop', table: 'orders' });
    assert.equal(schemaId, 0);
    assert.deepEqual(schema.columns.map((c) => c.name).slice(0, 3), ['id', 'customer', 'amount']);
    await assert.rejects(admin.getTableSchema({ database: 'shop', table: 'orders' }, 3), (e: TributaryError) => e.errorName === 'SCHEMA_NOT_EXIST');
    const info = await admin.getTableInfo({ database: 'shop', table: 'orders' });
    assert.equal(info.bucketCount, 3);
    assert.deepEqual(info.bucketKeys, ['id']);
    assert.equal(info.properties['bucket.num'], undefined, 'bucket options live in the table info, not the options');
    assert.equal(info.schema.columns[0].fieldId, 0);
    await assert.rejects(
      admin.createTable({ database: 'shop', table: 'bad' }, { columns: [{ name: 'a', type: 'INT' }, { name: 'a', type: 'INT' }] }),
      (e: TributaryError) => e.errorName === 'DUPLICATE_COLUMN',
    );
    await assert.rejects(
      admin.createTable({ database: 'shop', table: 'bad' }, { columns: [{ name: 'a', type: 'WAT' }] }),
      (e: TributaryError) => e.errorName === 'INVALID_TYPE',
    );
    await assert.rejects(
      admin.createTable({ database: 'shop', table: 'bad' }, { columns: [{ name: 'a', type: 'INT' }], partitionKeys: ['b'] }),
      (e: TributaryError) => e.errorName === 'INVALID_PARTITION_KEY',
    );
    await assert.rejects(
      admin.createTable({ database: 'shop', table: 'bad' }, { columns: [{ name: 'a', type: 'INT' }], properties: { 'table.log.ttl': 'forever' } }),
      (e: TributaryError) => e.errorName === 'INVALID_CONFIG_EXCEPTION',
    );
    await assert.rejects(admin.getTableInfo({ database: 'shop', table: 'nope' }), (e: TributaryError) => e.errorName === 'TABLE_NOT_EXIST');
    await assert.rejects(admin.listTables('nope'), (e: TributaryError) => e.errorName === 'DATABASE_NOT_EXIST');
    await assert.rejects(admin.dropDatabase('shop'), (e: TributaryError) => e.errorName === 'DATABASE_NOT_EMPTY');

    await admin.alterTable({ database: 'shop', table: 'orders' }, { set: { 'table.log.ttl': '2d' } });
    assert.equal((await admin.getTableInfo({ database: 'shop', table: 'orders' })).properties['table.log.ttl'], '2d');
    await assert.rejects(
      admin.alterTable({ database: 'shop', table: 'orders' }, { set: { 'table.log.arrow.compression.type': 'NONE' } }),
      (e: TributaryError) => e.errorName === 'INVALID_ALTER_TABLE_EXCEPTION',
    );
    await admin.alterTable({ database: 'shop', table: 'orders' }, { reset: ['table.log.ttl'] });
    assert.equal((await admin.getTableInfo({ database: 'shop', table: 'orders' })).properties['table.log.ttl'], undefined);
  });

  test('rows written with the row API read back exactly, in offset order per bucket, with projection', async () => {
    const table = await cluster.conn.getTable({ database: 'shop', table: 'orders' });
    const writer = await table.newAppend().createWriter();
    const n = 3000;
    for (let i = 0; i < n; i++) {
      await writer.append({
        id: BigInt(i) + 9_007_199_254_740_000n,
        customer: `customer-${i % 17} ü`,
        amount: `${i}.${String(i % 100).padStart(2, '0')}`,
        ts: new Timestamp(1_700_000_000_123_456n + BigInt(i)),
        at: '2024-03-01T10:00:00.000001Z',
        day: '2024-02-29',
        flag: i % 2 === 0,
        score: i / 3,
        qty: i % 1000,
        blob: i % 5 === 0 ? null : new Uint8Array([i & 0xff, 0x80]),
      });
    }
    await writer.flush();
    await writer.close();

    const scanner = table.newScan().createLogScanner();
    for (let b = 0; b < 3; b++) await scanner.subscribe(b, 'earliest');
    const records = await drain(scanner, n);
    scanner.close();
    assert.equal(records.length, n);
    const byId = new Map(records.map((r) => [r.row.id as bigint, r]));
    assert.equal(byId.size, n, 'no duplicates');
    const r7 = byId.get(9_007_199_254_740_007n)!;
    assert.equal(r7.changeType, '+A');
    assert.equal(r7.row.amount, '7.07');
    assert.equal((r7.row.ts as Timestamp).epochMicros, 1_700_000_000_123_463n);
    assert.equal((r7.row.at as Timestamp).toISOString(), '2024-03-01T10:00:00.000001Z');
    assert.equal(r7.row.day, '2024-02-29');
    assert.equal(r7.row.customer, 'customer-7 ü');
    assert.deepEqual(r7.row.blob, new Uint8Array([7, 0x80]));
    assert.equal(byId.get(9_007_199_254_740_005n)!.row.blob, null);
    for (let b = 0; b < 3; b++) {
      const offsets = records.filter((r) => r.bucket === b).map((r) => r.offset);
      assert.deepEqual(offsets, offsets.map((_, i) => BigInt(i)), `bucket ${b} offsets are 0..n-1 in order`);
    }

    const projected = table.newScan().project(['qty', 'id']).createLogScanner();
    for (let b = 0; b < 3; b++) await projected.subscribe(b, 'earliest');
    const slim = await drain(projected, n);
    projected.close();
    assert.equal(slim.length, n);
    assert.deepEqual(Object.keys(slim[0].row), ['qty', 'id']);
    assert.equal(slim.find((r) => r.row.id === 9_007_199_254_740_042n)!.row.qty, 42);
  });

  test('columnar appends and subscriptions from latest and by timestamp', async () => {
    const admin = cluster.conn.getAdmin();
    const path = { database: 'tributary', table: 'events' };
    await admin.createTable(path, { columns: [{ name: 'seq', type: 'INT' }, { name: 'name', type: 'STRING' }] });
    const table = await cluster.conn.getTable(path);
    const writer = await table.newAppend().createWriter();
    await writer.appendColumns({ seq: Int32Array.from([1, 2, 3]), name: ['a', 'b', 'c'] });
    await writer.flush();
    await new Promise((r) => setTimeout(r, 30));
    const between = Date.now();
    await new Promise((r) => setTimeout(r, 30));
    await writer.appendColumns({ seq: Int32Array.from([4, 5]), name: ['d', null] });
    await writer.flush();

    const offsets = await admin.listOffsets(path, [0], { timestamp: between });
    assert.equal(offsets.get(0), 3n, 'the first record committed after the timestamp');
    assert.equal((await admin.listOffsets(path, [0], 'latest')).get(0), 5n);
    assert.equal((await admin.listOffsets(path, [0], 'earliest')).get(0), 0n);

    const scanner = table.newScan().createLogScanner();
    await scanner.subscribe(0, { timestamp: between });
    const later = await drain(scanner, 2);
    assert.deepEqual(later.map((r) => r.row), [{ seq: 4, name: 'd' }, { seq: 5, name: null }]);
    await scanner.subscribe(0, 'latest');
    assert.deepEqual(await scanner.poll(50), []);
    await writer.append({ seq: 6, name: 'f' });
    await writer.flush();
    assert.deepEqual((await drain(scanner, 1)).map((r) => [r.offset, r.row.seq]), [[5n, 6]]);
    scanner.close();
    await writer.close();

    const rpc = await cluster.conn.tabletServer(0);
    const tail = await rpc.request(ApiKeys.LimitScan, { tableId: BigInt(table.info.tableId), bucketId: 0, limit: 2 });
    assert.equal(tail.errorCode, undefined);
    assert.ok(tail.records.length > 0, 'LimitScan returns the tail batches');
  });

  test('acks=1 and acks=0 writers deliver every row', async () => {
    const path = { database: 'tributary', table: 'acks' };
    await cluster.conn.getAdmin().createTable(path, { columns: [{ name: 'n', type: 'INT' }], properties: { 'table.log.arrow.compression.type': 'lz4_frame' } });
    for (const acks of ['1', '0']) {
      const c = await Connection.create({ 'bootstrap.servers': cluster.bootstrap, 'client.writer.acks': acks, 'client.writer.batch-timeout': '1ms' });
      const writer = await (await c.getTable(path)).newAppend().createWriter();
      for (let n = 0; n < 500; n++) await writer.append({ n });
      await writer.close();
      await c.close();
    }
    const scanner = (await cluster.conn.getTable(path)).newScan().createLogScanner();
    await scanner.subscribe(0, 'earliest');
    const rows = await drain(scanner, 1000);
    scanner.close();
    assert.equal(rows.length, 1000);

    // positions() is where the next poll continues, even when a fetch brought more than one poll returns.
    const small = await Connection.create({ 'bootstrap.servers': cluster.bootstrap, 'client.scanner.log.max-poll-records': '300' });
    const partial = (await small.getTable(path)).newScan().createLogScanner();
    await partial.subscribe(0, 'earliest');
    assert.equal(partial.highWatermarks().size, 0, 'no fetch yet');
    const first = await partial.poll(2000);
    assert.equal(first.length, 300);
    assert.equal(partial.positions().get('0'), 300n);
    // The high watermark the fetch reported: every row acknowledged.
    assert.deepEqual(partial.highWatermarks(), new Map([['0', 1000n]]));
    partial.close();
    await small.close();
  });

  test('partitions: manual, dynamic on first write, and automatic by time', async () => {
    const admin = cluster.conn.getAdmin();
    const path = { database: 'tributary', table: 'clicks' };
    await admin.createTable(path, {
      columns: [{ name: 'region', type: 'STRING' }, { name: 'n', type: 'BIGINT' }],
      partitionKeys: ['region'],
      properties: { 'bucket.num': '2' },
    });
    await admin.createPartition(path, { region: 'eu' });
    await assert.rejects(admin.createPartition(path, { region: 'eu' }), (e: TributaryError) => e.errorName === 'PARTITION_ALREADY_EXISTS');
    await assert.rejects(admin.createPartition(path, { region: 'bad/name' }), (e: TributaryError) => e.errorName === 'PARTITION_SPEC_INVALID_EXCEPTION');
    const table = await cluster.conn.getTable(path);
    const writer = await table.newAppend().createWriter();
    for (let i = 0; i < 100; i++) await writer.append({ region: i % 2 ? 'eu' : 'us', n: BigInt(i) });
    await writer.flush();
    await writer.close();
    assert.deepEqual((await admin.listPartitionInfos(path)).map((p) => p.partitionName).sort(), ['eu', 'us'], 'us was created by the write');

    const scanner = table.newScan().createLogScanner();
    for (const partition of ['eu', 'us']) for (const bucket of [0, 1]) await scanner.subscribe({ partition, bucket }, 'earliest');
    const rows = await drain(scanner, 100);
    scanner.close();
    assert.equal(rows.length, 100);
    assert.ok(rows.every((r) => r.partition === r.row.region));
    await assert.rejects(scanner.subscribe(0), (e: TributaryError) => e.errorName === 'PARTITION_NOT_EXISTS');

    await admin.dropPartition(path, { region: 'us' });
    assert.deepEqual((await admin.listPartitionInfos(path)).map((p) => p.partitionName), ['eu']);

    const auto = { database: 'tributary', table: 'daily' };
    await admin.createTable(auto, {
      columns: [{ name: 'dt', type: 'STRING' }, { name: 'v', type: 'INT' }],
      partitionKeys: ['dt'],
      properties: { 'table.auto-partition.enabled': 'true', 'table.auto-partition.time-unit': 'DAY', 'table.auto-partition.time-zone': 'UTC' },
    });
    const day = (offset: number): string => new Date(Date.now() + offset * 86_400_000).toISOString().slice(0, 10).replaceAll('-', '');
    const names = (await admin.listPartitionInfos(auto)).map((p) => p.partitionName);
    assert.ok(names.includes(day(0)) || names.includes(day(1)), `today's partition is precreated: ${names}`);
    assert.equal(names.length, 2, 'num-precreate = 2');
  });

  test('a fetch of several buckets keeps to the request\'s byte limit, and reads every bucket while it has room', async () => {
    const path = { database: 'tributary', table: 'fetch_limits' };
    await cluster.conn.getAdmin().createTable(path, { columns: [{ name: 'id', type: 'BIGINT', nullable: false }, { name: 'pad', type: 'STRING' }], properties: { 'bucket.num': '4', 'bucket.key': 'id', 'table.log.arrow.compression.type': 'NONE' } });
    const table = await cluster.conn.getTable(path);
    const writer = await table.newAppend().createWriter();
    for (let round = 0; round < 4; round++) {
      for (let i = 0; i < 400; i++) await writer.append({ id: BigInt(round * 400 + i), pad: 'x'.repeat(100) });
      await writer.flush(); // a batch per bucket each round
    }
    await writer.close();
    const rpc = await cluster.conn.tabletServer(0);
    const fetch = async (maxBytes: number, maxFetchBytes: number) => {
      const resp = await rpc.request(ApiKeys.FetchLog, {
        followerServerId: -1, maxBytes, minBytes: 1, maxWaitMs: 0,
        tablesReq: [{ tableId: BigInt(table.info.tableId), bucketsReq: [0, 1, 2, 3].map((bucketId) => ({ bucketId, fetchOffset: 0n, maxFetchBytes })) }],
      });
      return resp.tablesResp[0].bucketsResp.map((b) => {
        assert.equal(b.errorCode, undefined, b.errorMessage);
        assert.equal(b.highWatermark > 0n, true, 'every bucket tells its high watermark');
        return b.records.length;
      });
    };
    const whole = await fetch(64 << 20, 64 << 20);
    assert.ok(whole.every((n) => n > 0), 'each bucket holds batches');
    const total = whole.reduce((a, b) => a + b, 0);
    // Room for about two and a half buckets: the first buckets fill it, the rest send what fits.
    const limit = whole[0] + whole[1] + Math.floor(whole[2] / 2);
    const limited = await fetch(limit, 64 << 20);
    assert.ok(limited.reduce((a, b) => a + b, 0) <= limit, `${limited} within ${limit}`);
    assert.deepEqual([limited[0], limited[1]], [whole[0], whole[1]]);
    assert.ok(limited[2] > 0 && limited[2] < whole[2], `bucket 2 sends part of its batches: ${limited}`);
    // A small per-bucket limit: every bucket sends its first batch, no more.
    const perBucket = await fetch(64 << 20, 1);
    assert.ok(perBucket.every((n, i) => n > 0 && n < whole[i]), String(perBucket));
    // A request limit smaller than one batch still gets the first bucket's first batch.
    const tiny = await fetch(1, 64 << 20);
    assert.ok(tiny[0] > 0 && tiny.slice(1).every((n) => n === 0), String(tiny));
    assert.ok(total > limit);
  });
});
