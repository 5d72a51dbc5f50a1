/**
 * Structure-aware fuzzing of every RPC against a real server process (test/support/rpc-fuzz.ts
 * makes the requests). Every answer must be OK or a named error other than UNKNOWN_SERVER_ERROR,
 * inside responses too (per-bucket and per-table error codes); a refused metadata change must
 * leave the catalog as it was and a refused write the log offsets as they were; the server must
 * stay up, serve a normal client afterwards and still hold, unchanged, data written before.
 *
 * `npm run fuzz:rpc` runs it longer: TRIBUTARY_FUZZ_SEED (random there unless given; printed) and
 * TRIBUTARY_FUZZ_REQUESTS (20000 there; 300 in `npm test`, with a fixed seed).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { fromBinary, type DescMessage } from '@bufbuild/protobuf';
import type { TributaryError } from '../src/client/index.js';
import { ErrorCodes, errorNameOf } from '../src/common/errors.js';
import { tableInfoFromJson, type TableDescriptor, type TablePath } from '../src/common/schema.js';
import { ApiKeys, type Api } from '../src/rpc/api-keys.js';
import { RpcConnection } from '../src/rpc/connection.js';
import { RequestGenerator, type FuzzTarget, type FuzzWorld } from './support/rpc-fuzz.js';
import { random } from './support/random.js';
import { useCluster } from './support/cluster.js';

const SEED = Number(process.env.TRIBUTARY_FUZZ_SEED ?? 20260101);
/** Metadata changes fsync, so a few hundred requests keep the run well under a minute on a busy machine. */
const REQUESTS = Number(process.env.TRIBUTARY_FUZZ_REQUESTS ?? 300);

const MUTATIONS = new Set<Api>([
  ApiKeys.CreateDatabase,
  ApiKeys.DropDatabase,
  ApiKeys.CreateTable,
  ApiKeys.DropTable,
  ApiKeys.AlterTable,
  ApiKeys.CreatePartition,
  ApiKeys.DropPartition,
]);
const WRITES = new Set<Api>([ApiKeys.ProduceLog, ApiKeys.PutKv]);

const FUZZ_TABLES: { table: string; descriptor: TableDescriptor; partitions?: string[] }[] = [
  { table: 'log', descriptor: { columns: [{ name: 'id', type: 'INT', nullable: false }, { name: 's', type: 'STRING' }], bucketCount: 2 } },
  { table: 'pk', descriptor: { columns: [{ name: 'id', type: 'INT' }, { name: 'v', type: 'STRING' }], primaryKey: ['id'], bucketCount: 2 } },
  { table: 'part', descriptor: { columns: [{ name: 'd', type: 'STRING' }, { name: 'id', type: 'INT' }], partitionKeys: ['d'] }, partitions: ['a', 'b'] },
];
const EVENTS: TablePath = { database: 'sentinel', table: 'events' };
const USERS: TablePath = { database: 'sentinel', table: 'users' };
const SENTINEL_ROWS = 50;

const cluster = useCluster({ settings: { 'rpc.max-wait': '50ms' } });

/** Every error code found anywhere in a decoded response (per bucket, per table, per tiering table). */
function errorCodesIn(message: unknown, out: number[] = []): number[] {
  if (Array.isArray(message)) for (const m of message) errorCodesIn(m, out);
  else if (message && typeof message === 'object' && !(message instanceof Uint8Array)) {
    for (const [key, value] of Object.entries(message)) {
      if (key === 'errorCode' && typeof value === 'number') out.push(value);
      else if (key !== '$typeName') errorCodesIn(value, out);
    }
  }
  return out;
}

function describe(init: unknown): string {
  const text = JSON.stringify(init, (_k, v: unknown) => (typeof v === 'bigint' ? `${v}n` : v instanceof Uint8Array ? `<${v.length} bytes>` : v));
  return text.length > 600 ? `${text.slice(0, 600)}…` : text;
}

async function writeSentinel(): Promise<void> {
  const admin = cluster.conn.getAdmin();
  await admin.createDatabase(EVENTS.database);
  await admin.createTable(EVENTS, { columns: [{ name: 'id', type: 'INT', nullable: false }, { name: 's', type: 'STRING' }], bucketCount: 1 });
  await admin.createTable(USERS, { columns: [{ name: 'id', type: 'INT' }, { name: 'name', type: 'STRING' }], primaryKey: ['id'], bucketCount: 2 });
  const events = await (await cluster.conn.getTable(EVENTS)).newAppend().createWriter();
  const users = await (await cluster.conn.getTable(USERS)).newUpsert().createWriter();
  for (let i = 0; i < SENTINEL_ROWS; i++) {
    void events.append({ id: i, s: `event ${i}` });
    void users.upsert({ id: i, name: `user ${i}` });
  }
  await events.close();
  await users.close();
}

async function checkSentinel(): Promise<void> {
  const scanner = (await cluster.conn.getTable(EVENTS)).newScan().createLogScanner();
  await scanner.subscribe(0, 'earliest');
  const rows: unknown[] = [];
  for (let i = 0; i < 100 && rows.length < SENTINEL_ROWS; i++) for (const r of await scanner.poll(200)) rows.push(r.row);
  scanner.close();
  assert.deepEqual(rows, Array.from({ length: SENTINEL_ROWS }, (_, i) => ({ id: i, s: `event ${i}` })));
  const lookuper = (await cluster.conn.getTable(USERS)).newLookup().createLookuper();
  for (let i = 0; i < SENTINEL_ROWS; i++) assert.deepEqual(await lookuper.lookup({ id: i }), { id: i, name: `user ${i}` });
  const offsets = await cluster.conn.getAdmin().listOffsets(EVENTS, [0], 'latest');
  assert.equal(offsets.get(0), BigInt(SENTINEL_ROWS), 'nothing more was appended to the checked log');
}

/** Puts the fuzzed tables back (requests may have dropped them) and reads what the server says of them. */
async function refreshWorld(rpc: RpcConnection, world: FuzzWorld): Promise<void> {
  const admin = cluster.conn.getAdmin();
  await admin.createDatabase('fuzz', { ignoreIfExists: true });
  world.targets = [];
  for (const t of FUZZ_TABLES) {
    const path = { database: 'fuzz', table: t.table };
    await admin.createTable(path, t.descriptor, { ignoreIfExists: true });
    for (const d of t.partitions ?? []) {
      await rpc.request(ApiKeys.CreatePartition, { tablePath: { databaseName: 'fuzz', tableName: t.table }, partitionSpec: [{ key: 'd', value: d }], ignoreIfExists: true });
    }
    const info = await rpc.request(ApiKeys.GetTableInfo, { tablePath: { databaseName: 'fuzz', tableName: t.table } });
    const partitions = await rpc.request(ApiKeys.ListPartitionInfos, { tablePath: { databaseName: 'fuzz', tableName: t.table } });
    const target: FuzzTarget = {
      info: tableInfoFromJson(JSON.parse(info.tableJson)),
      partitionIds: partitions.partitionsInfo.map((p) => p.partitionId),
      partitionNames: partitions.partitionsInfo.map((p) => p.partitionName),
    };
    world.targets.push(target);
  }
}

/** What metadata requests can change: databases, tables as the server describes them, partitions. */
async function catalog(rpc: RpcConnection): Promise<string> {
  const out: string[] = [];
  for (const db of (await rpc.request(ApiKeys.ListDatabases, {})).databaseNames) {
    out.push(`database ${db}`);
    for (const table of (await rpc.request(ApiKeys.ListTables, { databaseName: db })).tableNames) {
      const tablePath = { databaseName: db, tableName: table };
      const info = await rpc.request(ApiKeys.GetTableInfo, { tablePath });
      const partitions = await rpc.request(ApiKeys.ListPartitionInfos, { tablePath });
      out.push(`table ${db}.${table} ${info.tableJson} partitions ${partitions.partitionsInfo.map((p) => `${p.partitionId}:${p.partitionName}`).join(',')}`);
    }
  }
  return out.join('\n');
}

/**
 * The log end of every bucket of the fuzzed tables: what is written (offset type 3), not the high
 * watermark, which an acks=0/1 write passes only at the next flush, after it was answered.
 */
async function logEnds(rpc: RpcConnection, world: FuzzWorld): Promise<string> {
  const out: string[] = [];
  for (const t of world.targets) {
    const buckets = Array.from({ length: t.info.bucketCount }, (_, b) => b);
    const scopes = t.info.partitionKeys.length > 0 ? t.partitionIds : [undefined];
    for (const partitionId of scopes) {
      const resp = await rpc.request(ApiKeys.ListOffsets, { tableId: BigInt(t.info.tableId), offsetType: 3, bucketId: buckets, ...(partitionId !== undefined ? { partitionId } : {}) });
      out.push(`${t.info.tableId}/${partitionId}: ${resp.bucketsResp.map((b) => `${b.offset}${b.errorCode !== undefined ? `!${b.errorCode}` : ''}`).join(',')}`);
    }
  }
  return out.join('\n');
}

test(`every RPC answers fuzzed requests by name (seed ${SEED}, ${REQUESTS} requests)`, { timeout: 120_000 + REQUESTS * 300 }, async () => {
  console.log(`rpc fuzz: seed ${SEED}, ${REQUESTS} requests`);
  await writeSentinel();
  const rand = random(SEED);
  const forbiddenIds = new Set<bigint>();
  for (const p of [EVENTS, USERS]) forbiddenIds.add(BigInt((await cluster.conn.getTable(p)).info.tableId));
  const world: FuzzWorld = { databases: ['fuzz', 'tributary', 'nope', ''], targets: [], forbiddenIds };
  const gen = new RequestGenerator(rand, world);
  const connect = (): Promise<RpcConnection> => RpcConnection.connect('127.0.0.1', cluster.server.port, { requestTimeoutMs: 30_000 });
  let rpc = await connect();
  await refreshWorld(rpc, world);
  const apis = Object.values(ApiKeys) as Api[];
  const failures: string[] = [];
  const answered = new Map<string, number>();
  const stored: { catalog?: string; logEnds?: string } = {};

  for (let i = 0; i < REQUESTS && failures.length < 20; i++) {
    if (i % 100 === 99) {
      await refreshWorld(rpc, world);
      stored.catalog = stored.logEnds = undefined;
    }
    const api = gen.pick(apis);
    const init = gen.request(api);
    const body = gen.encode(api, init);
    const where = `request ${i} (seed ${SEED}) ${api.name} ${describe(init)}`;
    // What a refused request must leave as it was; kept from the last check while nothing changed it.
    if (MUTATIONS.has(api)) stored.catalog ??= await catalog(rpc);
    if (WRITES.has(api)) stored.logEnds ??= await logEnds(rpc, world);
    const before = MUTATIONS.has(api) ? stored.catalog : WRITES.has(api) ? stored.logEnds : undefined;
    let refused = false;
    try {
      const raw = await rpc.requestRaw(api, () => body);
      const response = fromBinary(api.response as DescMessage, raw);
      const codes = errorCodesIn(response);
      for (const code of codes) {
        if (code === ErrorCodes.UNKNOWN_SERVER_ERROR || errorNameOf(code) === 'UNKNOWN_SERVER_ERROR') failures.push(`${where}: error code ${code} inside the response ${describe(response)}`);
      }
      refused = codes.length > 0 && WRITES.has(api) && codes.length === (response as { bucketsResp?: unknown[] }).bucketsResp?.length;
      answered.set('OK', (answered.get('OK') ?? 0) + 1);
    } catch (err) {
      const e = err as TributaryError;
      answered.set(e.errorName, (answered.get(e.errorName) ?? 0) + 1);
      if (e.errorName === 'UNKNOWN_SERVER_ERROR' || e.errorName === undefined) failures.push(`${where}: ${String(err)}`);
      else if (e.errorName === 'CONNECTION_CLOSED' || e.errorName === 'REQUEST_TIME_OUT') failures.push(`${where}: ${String(err)}`);
      refused = true;
      // CORRUPT_MESSAGE closes the connection, as the protocol says.
      if (rpc.isClosed || e.errorName === 'CORRUPT_MESSAGE') {
        await rpc.close();
        rpc = await connect();
      }
    }
    if (refused && before !== undefined) {
      const now = MUTATIONS.has(api) ? await catalog(rpc) : await logEnds(rpc, world);
      if (now !== before) failures.push(`${where}: refused, yet changed what is stored:\n--- before\n${before}\n--- after\n${now}`);
      if (MUTATIONS.has(api)) stored.catalog = now;
      else stored.logEnds = now;
    } else if (MUTATIONS.has(api) || WRITES.has(api)) {
      stored.catalog = stored.logEnds = undefined;
    }
    assert.equal(cluster.server.child.exitCode, null, `the server exited at ${where}: ${cluster.server.stderr}`);
  }
  console.log(`rpc fuzz answers: ${JSON.stringify(Object.fromEntries(answered))}`);
  await rpc.close();
  assert.deepEqual(failures, []);

  // A normal client still works, and the data written before is intact.
  const admin = cluster.conn.getAdmin();
  const path = { database: 'after_fuzz', table: 't' };
  await admin.createDatabase(path.database);
  await admin.createTable(path, { columns: [{ name: 'id', type: 'INT' }, { name: 's', type: 'STRING' }], bucketCount: 1 });
  const writer = await (await cluster.conn.getTable(path)).newAppend().createWriter();
  await writer.append({ id: 1, s: 'one' });
  await writer.close();
  const scanner = (await cluster.conn.getTable(path)).newScan().createLogScanner();
  await scanner.subscribe(0, 'earliest');
  const rows: unknown[] = [];
  for (let i = 0; i < 100 && rows.length < 1; i++) for (const r of await scanner.poll(200)) rows.push(r.row);
  scanner.close();
  assert.deepEqual(rows, [{ id: 1, s: 'one' }]);
  await checkSentinel();
});
