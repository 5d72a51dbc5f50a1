/**
 * Bad input against a real server: malformed and oversized frames, wrong API versions, batches that
 * do not match the schema, unknown tables, partitions and buckets. Each gets its named error and the
 * server keeps serving.
 */
import assert from 'node:assert/strict';
import net from 'node:net';
import { test } from 'node:test';
import { TributaryError } from '../src/client/index.js';
import { buildLogBatch } from '../src/record/log-batch.js';
import { create, toBinary } from '@bufbuild/protobuf';
import { ApiKeys } from '../src/rpc/api-keys.js';
import { LookupRequestSchema } from '../src/rpc/gen/tributary_pb.js';
import { decodeLookupResponse, encodeLookupRequest, KeyFields } from '../src/rpc/lookup-messages.js';
import { useCluster } from './support/cluster.js';
import { ServerProcess } from './support/server-process.js';

const cluster = useCluster({ settings: { 'rpc.max-frame-size': '1mb' } }, async ({ conn }) => {
  await conn.getAdmin().createTable({ database: 'tributary', table: 't' }, { columns: [{ name: 'a', type: 'INT', nullable: false }, { name: 'b', type: 'STRING' }] });
});

/** Sends raw bytes and returns what the server answered before closing the connection. */
function raw(bytes: Buffer): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(cluster.server.port, '127.0.0.1', () => socket.write(bytes));
    const chunks: Buffer[] = [];
    socket.on('data', (d) => chunks.push(d));
    socket.on('close', () => resolve(Buffer.concat(chunks)));
    socket.on('error', reject);
    setTimeout(() => socket.destroy(), 3000).unref();
  });
}

function errorOf(response: Buffer): { type: number; code: number } {
  // int32 length | int8 type | int32 request id | ErrorResponse{1: error_code varint, ...}
  const type = response.readInt8(4);
  const body = response.subarray(9);
  assert.equal(body[0], 0x08, 'error_code field');
  return { type, code: body[1] };
}

async function stillServes(): Promise<void> {
  assert.ok((await cluster.conn.getAdmin().listDatabases()).includes('tributary'));
}

test('a second server on the same data dir is refused while the first runs', async () => {
  await assert.rejects(ServerProcess.start({ dataDir: cluster.server.dataDir }), /in use by the server with pid/);
  await stillServes();
});

test('a garbage body gets CORRUPT_MESSAGE and only that connection closes', async () => {
  const frame = Buffer.alloc(4 + 8 + 6);
  frame.writeInt32BE(14, 0);
  frame.writeInt16BE(ApiKeys.ListTables.key, 4);
  frame.writeInt16BE(0, 6);
  frame.writeInt32BE(1, 8);
  frame.set([0xff, 0xff, 0xff, 0xff, 0xff, 0xff], 12);
  assert.deepEqual(errorOf(await raw(frame)), { type: 1, code: 3 });
  await stillServes();
});

test('an oversized frame gets RECORD_TOO_LARGE_EXCEPTION without the server reading it', async () => {
  const header = Buffer.alloc(12);
  header.writeInt32BE(50 * 1024 * 1024, 0);
  header.writeInt16BE(ApiKeys.ProduceLog.key, 4);
  header.writeInt32BE(7, 8);
  assert.equal(errorOf(await raw(header)).code, 13);
  await stillServes();
});

test('an unsupported API version gets UNSUPPORTED_VERSION', async () => {
  const frame = Buffer.alloc(12);
  frame.writeInt32BE(8, 0);
  frame.writeInt16BE(ApiKeys.ListDatabases.key, 4);
  frame.writeInt16BE(9, 6);
  frame.writeInt32BE(3, 8);
  const socket = net.connect(cluster.server.port, '127.0.0.1');
  const answer = await new Promise<Buffer>((resolve) => {
    socket.once('data', resolve);
    socket.write(frame);
  });
  assert.equal(errorOf(answer).code, 2);
  socket.destroy();
  await stillServes();
});

test('rows that do not match the schema are rejected by name, client and server side', async () => {
  const table = await cluster.conn.getTable({ database: 'tributary', table: 't' });
  const writer = await table.newAppend().createWriter();
  // Messages in the user's terms: the column, the value as written, the column's type.
  const invalid = (message: string) => (e: TributaryError) => e.errorName === 'INVALID_ROW' && e.message === message;
  await assert.rejects(writer.append({ a: 'x' }), invalid("column a: 'x' is not an INT"));
  await assert.rejects(writer.append({ a: null }), invalid('column a: null, but the column is NOT NULL'));
  await assert.rejects(writer.append({ b: 'no a' }), invalid('column a: missing, but the column is NOT NULL'));
  await assert.rejects(writer.append({ a: 1, b: 7 }), invalid('column b: 7 is not a STRING'));
  await assert.rejects(writer.append({ a: 1, zz: 2 }), invalid('unknown column zz (the columns are a, b)'));
  await writer.close();

  // A hand-made batch whose payload is not an Arrow record batch of this schema.
  const rpc = await cluster.conn.tabletServer(0);
  const bogus = buildLogBatch({ schemaId: 0, appendOnly: true, recordCount: 1, payload: Buffer.from('not arrow at all') });
  const resp = await rpc.request(ApiKeys.ProduceLog, { acks: -1, tableId: BigInt(table.info.tableId), timeoutMs: 1000, bucketsReq: [{ bucketId: 0, records: bogus }] });
  assert.equal(resp.bucketsResp[0].errorCode, 3, resp.bucketsResp[0].errorMessage);
  const unknownSchema = buildLogBatch({ schemaId: 5, appendOnly: true, recordCount: 0, payload: Buffer.alloc(0) });
  const resp2 = await rpc.request(ApiKeys.ProduceLog, { acks: -1, tableId: BigInt(table.info.tableId), timeoutMs: 1000, bucketsReq: [{ bucketId: 0, records: unknownSchema }] });
  assert.equal(resp2.bucketsResp[0].errorCode, 9, 'SCHEMA_NOT_EXIST');
  const flipped = Buffer.from(bogus);
  flipped[flipped.length - 1] ^= 1;
  const resp3 = await rpc.request(ApiKeys.ProduceLog, { acks: -1, tableId: BigInt(table.info.tableId), timeoutMs: 1000, bucketsReq: [{ bucketId: 0, records: flipped }] });
  assert.equal(resp3.bucketsResp[0].errorCode, 14, 'CORRUPT_RECORD_EXCEPTION');
  const stored = await cluster.conn.getAdmin().listOffsets({ database: 'tributary', table: 't' }, [0], 'latest');
  assert.equal(stored.get(0), 0n, 'nothing was stored');
});

test('unknown tables, buckets and partitions get their named errors', async () => {
  const rpc = await cluster.conn.tabletServer(0);
  const resp = await rpc.request(ApiKeys.ProduceLog, { acks: -1, tableId: 999_999n, timeoutMs: 1000, bucketsReq: [{ bucketId: 0, records: Buffer.alloc(0) }] });
  assert.equal(resp.bucketsResp[0].errorCode, 21, 'UNKNOWN_TABLE_OR_BUCKET_EXCEPTION');
  const table = await cluster.conn.getTable({ database: 'tributary', table: 't' });
  const fetch = await rpc.request(ApiKeys.FetchLog, {
    followerServerId: -1, maxBytes: 1024, minBytes: 1, maxWaitMs: 0,
    tablesReq: [{ tableId: BigInt(table.info.tableId), bucketsReq: [{ bucketId: 7, fetchOffset: 0n, maxFetchBytes: 1024 }, { bucketId: 0, fetchOffset: 99n, maxFetchBytes: 1024 }] }],
  });
  assert.equal(fetch.tablesResp[0].bucketsResp[0].errorCode, 21);
  assert.equal(fetch.tablesResp[0].bucketsResp[1].errorCode, 19, 'LOG_OFFSET_OUT_OF_RANGE_EXCEPTION');
  await assert.rejects(cluster.conn.getTable({ database: 'tributary', table: 'missing' }), (e: TributaryError) => e.errorName === 'TABLE_NOT_EXIST');
  await assert.rejects(cluster.conn.getAdmin().createPartition({ database: 'tributary', table: 't' }, { a: '1' }), (e: TributaryError) => e.errorName === 'TABLE_NOT_PARTITIONED_EXCEPTION');
  await stillServes();
});

test('request fields that are missing or out of range get named errors that say the API and the field', async () => {
  const rpc = await cluster.conn.coordinator();
  const named = (name: string, fragment: string) => (e: TributaryError) => e.errorName === name && e.message.includes(fragment);
  const tablePath = { databaseName: 'tributary', tableName: 'nameless' };
  // A column without a name was a TypeError (UNKNOWN_SERVER_ERROR), and must not leave a table behind.
  const tableJson = JSON.stringify({ columns: [{ name: 'a', type: 'INT' }, { type: 'STRING' }] });
  await assert.rejects(rpc.request(ApiKeys.CreateTable, { tablePath, tableJson }), named('INVALID_TABLE_EXCEPTION', 'CreateTable: table_json.columns[1].name is required'));
  assert.equal((await rpc.request(ApiKeys.TableExists, { tablePath })).exists, false);
  await assert.rejects(rpc.request(ApiKeys.CreateTable, { tablePath: { databaseName: 'tributary' }, tableJson }), named('INVALID_TABLE_EXCEPTION', 'CreateTable: table_path.table_name is required'));
  await assert.rejects(rpc.request(ApiKeys.DropTable, {}), named('INVALID_TABLE_EXCEPTION', 'DropTable: table_path is required'));
  await assert.rejects(rpc.request(ApiKeys.CreateDatabase, { databaseName: 'd', databaseJson: 'null' }), named('INVALID_DATABASE_EXCEPTION', 'CreateDatabase: database_json must be a JSON object'));
  await assert.rejects(rpc.request(ApiKeys.AlterTable, { tablePath: { databaseName: 'tributary', tableName: 't' }, configChanges: [{ opType: 0, configValue: 'x' }] }), named('INVALID_ALTER_TABLE_EXCEPTION', 'AlterTable: config_changes[0].config_key is required'));
  await assert.rejects(rpc.request(ApiKeys.ProduceLog, { acks: 1, tableId: -2n, bucketsReq: [] }), named('INVALID_ARGUMENT', 'ProduceLog: table_id -2 is out of range'));
  // A name with '/' reached into the metadata tree: this one is the table's own registration.
  await assert.rejects(rpc.request(ApiKeys.DropDatabase, { databaseName: 'tributary/tables/t', cascade: true }), named('INVALID_DATABASE_EXCEPTION', 'DropDatabase: database_name'));
  assert.equal((await rpc.request(ApiKeys.TableExists, { tablePath: { databaseName: 'tributary', tableName: 't' } })).exists, true);
  await stillServes();
});

test('a Lookup of a negative bucket is refused by name instead of answered with a corrupt response', async () => {
  const rpc = await cluster.conn.tabletServer(0);
  const table = await cluster.conn.getTable({ database: 'tributary', table: 't' });
  const keys = new KeyFields();
  keys.add(Buffer.from([1, 2, 3]));
  // As protobuf encodes an int32 of -1 (the client's own encoder writes bucket ids unsigned).
  const body = toBinary(LookupRequestSchema, create(LookupRequestSchema, { tableId: BigInt(table.info.tableId), bucketsReq: [{ bucketId: -1, keys: [Buffer.from([1, 2, 3])] }] }));
  const lookup = rpc.requestRaw(ApiKeys.Lookup, () => body);
  await assert.rejects(lookup, (e: TributaryError) => e.errorName === 'UNKNOWN_TABLE_OR_BUCKET_EXCEPTION' && e.message.includes('Lookup: buckets_req[0].bucket_id'));
  const answer = decodeLookupResponse(await rpc.requestRaw(ApiKeys.Lookup, () => encodeLookupRequest(table.info.tableId, [{ bucket: 0, keys }])));
  assert.equal(answer[0].errorCode, 20, 'NON_PRIMARY_KEY_TABLE_EXCEPTION');
  await stillServes();
});
