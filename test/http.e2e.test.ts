/**
 * The HTTP endpoint of a real server process: the REST API (tables, rows as JSON and Arrow IPC,
 * SQL answered as JSON and Arrow IPC, named errors, bad requests that leave the server up) and the
 * Iceberg REST catalog as a client we did not write (iceberg-js) sees it after a tiering round,
 * down to the Parquet files DuckDB reads.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import { test } from 'node:test';
import { DuckDBInstance } from '@duckdb/node-api';
import * as arrow from 'apache-arrow';
import { IcebergError, IcebergRestCatalog } from 'iceberg-js';
import { ManifestContent } from '../src/lake/iceberg/data-file.js';
import { isLive, readManifest, readManifestList } from '../src/lake/iceberg/scan.js';
import { useCluster } from './support/cluster.js';
import { waitTiered } from './support/tiering-rounds.js';

const ARROW_STREAM = 'application/vnd.apache.arrow.stream';

const cluster = useCluster();

interface Answer {
  status: number;
  type: string;
  /** The parsed body when it is JSON. */
  json: any;
  bytes: Uint8Array;
}

async function call(method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<Answer> {
  const init: RequestInit = { method, headers: { ...headers } };
  if (body instanceof Uint8Array) {
    init.body = body;
    (init.headers as Record<string, string>)['content-type'] ??= ARROW_STREAM;
  } else if (typeof body === 'string') {
    init.body = body;
    (init.headers as Record<string, string>)['content-type'] ??= 'application/json';
  } else if (body !== undefined) {
    init.body = JSON.stringify(body);
    (init.headers as Record<string, string>)['content-type'] = 'application/json';
  }
  const res = await fetch(`http://${cluster.server.http}${path}`, init);
  const bytes = new Uint8Array(await res.arrayBuffer());
  const type = res.headers.get('content-type') ?? '';
  const json = type.startsWith('application/json') && bytes.length > 0 ? JSON.parse(Buffer.from(bytes).toString('utf8')) : undefined;
  return { status: res.status, type, json, bytes };
}

const sql = (statement: string, headers: Record<string, string> = {}) => call('POST', '/api/v1/sql', { sql: statement }, headers);

/** Asserts a REST API error: status, name and the numeric code beside it. */
function assertError(a: Answer, status: number, name: string, message?: string): void {
  assert.equal(a.status, status, JSON.stringify(a.json));
  assert.equal(a.json.error.name, name);
  if (message !== undefined) assert.equal(a.json.error.message, message);
  assert.equal(typeof a.json.error.code, 'number');
  assert.ok(a.json.error.message.length > 0);
}

const rowCount = async (table: string): Promise<string> => (await sql(`SELECT count(*) AS n FROM ${table}`)).json.rows[0][0];

/** An Arrow IPC stream of the given columns. */
function arrowStream(columns: Record<string, arrow.Vector>): Uint8Array {
  return arrow.tableToIPC(new arrow.Table(columns), 'stream');
}

test('the REST API lists and describes tables, takes rows as JSON and Arrow, and answers SQL as JSON and Arrow', async () => {
  let a = await sql("CREATE TABLE events (id BIGINT NOT NULL, name STRING, amount DECIMAL(10, 2), ts TIMESTAMP_LTZ(6), data BYTES) WITH ('bucket.num' = '2', 'bucket.key' = 'id')");
  assert.equal(a.status, 200, JSON.stringify(a.json));
  assert.match(a.json.message, /created/);
  a = await sql('CREATE TABLE accounts (k INT NOT NULL, v STRING, PRIMARY KEY (k) NOT ENFORCED)');
  assert.equal(a.status, 200, JSON.stringify(a.json));

  assert.deepEqual((await call('GET', '/api/v1/databases')).json, { databases: ['tributary'] });
  assert.deepEqual((await call('GET', '/api/v1/databases/tributary/tables')).json.tables.sort(), ['accounts', 'events']);
  const info = (await call('GET', '/api/v1/databases/tributary/tables/events')).json;
  assert.equal(info.database, 'tributary');
  assert.equal(info.table, 'events');
  assert.equal(info.bucket_count, 2);
  assert.deepEqual(info.bucket_keys, ['id']);
  assert.deepEqual(
    info.schema.columns.map((c: { name: string; type: string }) => `${c.name} ${c.type}`),
    ['id BIGINT', 'name STRING', 'amount DECIMAL(10, 2)', 'ts TIMESTAMP_LTZ(6)', 'data BYTES'],
  );

  // JSON rows: a BIGINT beyond 2^53 as a string, bytes as base64, a column left out.
  a = await call('POST', '/api/v1/databases/tributary/tables/events/rows', [
    { id: 1, name: 'ann', amount: '12.50', ts: '2024-01-02T03:04:05.123456Z', data: Buffer.from([0, 1, 255]).toString('base64') },
    { id: '9007199254740993', name: 'bob', amount: 7.25 },
    { id: 3, name: null },
  ]);
  assert.deepEqual([a.status, a.json], [200, { rows: 3 }]);
  // Arrow rows: columns by name, the others null.
  a = await call('POST', '/api/v1/databases/tributary/tables/events/rows', arrowStream({
    name: arrow.vectorFromArray(['cy', 'dee'], new arrow.Utf8()),
    id: arrow.vectorFromArray([10n, 11n], new arrow.Int64()),
  }));
  assert.deepEqual([a.status, a.json], [200, { rows: 2 }]);

  a = await sql('SELECT id, name, amount, ts, data FROM events ORDER BY id');
  assert.equal(a.status, 200, JSON.stringify(a.json));
  assert.deepEqual(a.json.columns.map((c: { name: string; type: string }) => `${c.name} ${c.type}`), ['id BIGINT', 'name VARCHAR', 'amount DECIMAL(10,2)', 'ts TIMESTAMP WITH TIME ZONE', 'data BLOB']);
  assert.deepEqual(a.json.rows, [
    ['1', 'ann', '12.50', '2024-01-02T03:04:05.123456Z', 'AAH/'],
    ['3', null, null, null, null],
    ['10', 'cy', null, null, null],
    ['11', 'dee', null, null, null],
    ['9007199254740993', 'bob', '7.25', null, null],
  ]);

  a = await sql(
    "SELECT id, name, amount, ts, data, id % 2 = 1 AS odd, sum(id) OVER () AS total, DATE '2024-01-02' AS day, TIME '01:02:03.5' AS tod, [id, 2] AS pair FROM events ORDER BY id",
    { accept: ARROW_STREAM },
  );
  assert.equal(a.status, 200);
  assert.equal(a.type, ARROW_STREAM);
  const table = arrow.tableFromIPC(a.bytes);
  const typeName = (t: arrow.DataType): string => (arrow.DataType.isDecimal(t) ? `Decimal(${t.precision}, ${t.scale})` : String(t));
  assert.deepEqual(table.schema.fields.map((f) => `${f.name} ${typeName(f.type)}`), [
    'id Int64',
    'name Utf8',
    'amount Decimal(10, 2)',
    'ts Timestamp<MICROSECOND, UTC>',
    'data Binary',
    'odd Bool',
    'total Decimal(38, 0)', // HUGEINT
    'day Date32<DAY>',
    'tod Time64<MICROSECOND>',
    'pair Utf8', // a list, as its JSON
  ]);
  assert.equal(table.numRows, 5);
  assert.deepEqual(table.getChild('id')!.toArray(), BigInt64Array.from([1n, 3n, 10n, 11n, 9007199254740993n]));
  assert.deepEqual([...table.getChild('name')!], ['ann', null, 'cy', 'dee', 'bob']);
  assert.deepEqual([...table.getChild('odd')!], [true, true, false, true, true]);
  assert.equal((table.getChild('ts')!.data[0].values as BigInt64Array)[0], BigInt(Date.UTC(2024, 0, 2, 3, 4, 5)) * 1000n + 123_456n);
  assert.deepEqual([...table.getChild('data')!.get(0)!], [0, 1, 255]);
  assert.equal(String(table.getChild('total')!.get(0)), '9007199254741018'); // exact beyond 2^53
  assert.equal(String(table.getChild('amount')!.get(0)), '1250'); // unscaled
  assert.equal(table.getChild('day')!.get(0), Date.UTC(2024, 0, 2));
  assert.equal((table.getChild('tod')!.data[0].values as BigInt64Array)[0], 3_723_500_000n);
  assert.deepEqual([...table.getChild('pair')!], ['["1","2"]', '["3","2"]', '["10","2"]', '["11","2"]', '["9007199254740993","2"]']);
  assert.equal(table.getChild('data')!.get(1), null);

  // A primary-key table takes upserts; the later write of a key wins.
  a = await call('POST', '/api/v1/databases/tributary/tables/accounts/rows', [{ k: 1, v: 'a' }, { k: 2, v: 'b' }]);
  assert.deepEqual([a.status, a.json], [200, { rows: 2 }]);
  a = await call('POST', '/api/v1/databases/tributary/tables/accounts/rows', arrowStream({
    k: arrow.vectorFromArray([1], new arrow.Int32()),
    v: arrow.vectorFromArray(['c'], new arrow.Utf8()),
  }));
  assert.deepEqual([a.status, a.json], [200, { rows: 1 }]);
  a = await call('POST', '/api/v1/sql?database=tributary', 'SELECT k, v FROM accounts ORDER BY k', { 'content-type': 'text/plain' });
  assert.deepEqual(a.json, { columns: [{ name: 'k', type: 'INTEGER' }, { name: 'v', type: 'VARCHAR' }], rows: [[1, 'c'], [2, 'b']] });
  a = await call('POST', '/api/v1/databases/tributary/tables/accounts/rows', []);
  assert.deepEqual([a.status, a.json], [200, { rows: 0 }]);
});

/**
 * Announces a body of `size` bytes and waits for the answer before sending any of it: the server
 * must refuse a body over its limit from the Content-Length alone.
 */
function postHuge(path: string, size: number): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const url = new URL(path, `http://${cluster.server.http}`);
    const req = http.request({ host: url.hostname, port: url.port, path: url.pathname, method: 'POST', headers: { 'content-type': 'application/json', 'content-length': size } });
    req.on('response', (res) => {
      let body = '';
      res.on('data', (d: Buffer) => (body += d.toString()));
      res.on('end', () => {
        req.destroy();
        resolve({ status: res.statusCode!, body });
      });
    });
    req.on('error', reject);
    req.flushHeaders();
  });
}

test('the REST API answers bad requests with named errors and HTTP statuses, and stays up', async () => {
  await sql("CREATE TABLE IF NOT EXISTS checked (id BIGINT NOT NULL, name STRING) WITH ('bucket.num' = '1')");
  assertError(await call('GET', '/api/v1/databases/tributary/tables/nope'), 404, 'TABLE_NOT_EXIST');
  assertError(await call('GET', '/api/v1/databases/nodb/tables'), 404, 'DATABASE_NOT_EXIST');
  assertError(await call('POST', '/api/v1/databases/tributary/tables/nope/rows', [{ id: 1 }]), 404, 'TABLE_NOT_EXIST');
  assertError(await sql('SELECT * FROM nope'), 404, 'TABLE_NOT_EXIST');
  assertError(await sql('SELEC 1'), 400, 'SQL_PARSE_ERROR');
  assertError(await sql('CREATE TABLE checked (id BIGINT)'), 409, 'TABLE_ALREADY_EXIST');
  assertError(await call('POST', '/api/v1/sql', { query: 'SELECT 1' }), 400, 'INVALID_ARGUMENT');
  assertError(await call('GET', '/api/v1/nothing'), 404, 'INVALID_ARGUMENT');

  // Rows are all checked before any is written.
  const path = '/api/v1/databases/tributary/tables/checked/rows';
  // Each error names the row (from 1), the column, the value and the type.
  assertError(await call('POST', path, [{ id: 1 }, { id: 2, colour: 'red' }]), 400, 'INVALID_ROW', 'row 2, unknown column colour (the columns are id, name)');
  assertError(await call('POST', path, [{ id: 1 }, { id: 'two' }]), 400, 'INVALID_ROW', "row 2, column id: 'two' is not a BIGINT");
  assertError(await call('POST', path, [{ id: 1 }, { id: 2 ** 60 }]), 400, 'INVALID_ROW', 'row 2, column id: 1152921504606847000 is not a BIGINT exactly: a number beyond 2^53 has lost digits, give it as a string or a bigint');
  assertError(await call('POST', path, [{ id: 1 }, { name: 'no id' }]), 400, 'INVALID_ROW', 'row 2, column id: missing, but the column is NOT NULL');
  assertError(await call('POST', path, [{ id: 1 }, { id: null }]), 400, 'INVALID_ROW', 'row 2, column id: null, but the column is NOT NULL');
  assertError(await call('POST', path, [{ id: 1 }, 7]), 400, 'INVALID_ROW', 'row 2, 7 is not a row: a row is an object of column names to values (the columns are id, name)');
  // Rows are objects: an array, of the right width or not, is refused, not read by position.
  assertError(await call('POST', path, [[1, 'a']]), 400, 'INVALID_ROW', 'row 1, an array is not a row: a row is an object of column names to values (the columns are id, name)');
  assertError(await call('POST', path, [{ id: 1 }, [2, 'b', 'extra']]), 400, 'INVALID_ROW', 'row 2, an array is not a row: a row is an object of column names to values (the columns are id, name)');
  assertError(await call('POST', path, { id: 1 }), 400, 'INVALID_ARGUMENT');
  assertError(await call('POST', path, arrowStream({ id: arrow.vectorFromArray([1, 2], new arrow.Int32()) })), 400, 'INVALID_ROW');
  assertError(await call('POST', path, arrowStream({ id: arrow.vectorFromArray([1n], new arrow.Int64()), colour: arrow.vectorFromArray(['red']) })), 400, 'INVALID_ROW', 'unknown column colour (the columns are id, name)');
  assertError(await call('POST', path, new Uint8Array([1, 2, 3, 4, 5, 6, 7, 8, 9])), 400, 'CORRUPT_MESSAGE');
  assertError(await call('POST', path, '[{"id": 1},'), 400, 'CORRUPT_MESSAGE');
  assertError(await call('POST', path, 'id=1', { 'content-type': 'application/x-www-form-urlencoded' }), 415, 'UNSUPPORTED_MEDIA_TYPE');
  assert.equal(await rowCount('checked'), '0');

  const huge = await postHuge(path, 65 * 1024 * 1024);
  assert.equal(huge.status, 413);
  assert.equal(JSON.parse(huge.body).error.name, 'RECORD_TOO_LARGE_EXCEPTION');

  // Still up and serving.
  const health = await call('GET', '/health');
  assert.deepEqual([health.status, health.type, health.json], [200, 'application/json', { status: 'ok' }]);
  assert.deepEqual((await call('POST', path, [{ id: 1, name: 'after' }])).json, { rows: 1 });
  assert.equal(await rowCount('checked'), '1');
  const missing = await call('GET', '/nothing');
  assert.deepEqual([missing.status, missing.json], [404, { error: 'not found' }]);
});

test('iceberg-js lists and loads lake tables from the Iceberg REST catalog, and DuckDB reads the files its metadata names', async () => {
  const created = await sql(
    "CREATE TABLE lake_events (id BIGINT NOT NULL, note STRING) WITH ('bucket.num' = '2', 'bucket.key' = 'id', 'table.datalake.enabled' = 'true', 'table.datalake.freshness' = '1s')",
  );
  assert.equal(created.status, 200, JSON.stringify(created.json));
  await sql('CREATE TABLE IF NOT EXISTS not_in_lake (id BIGINT)');
  const rows = Array.from({ length: 500 }, (_, i) => ({ id: i, note: `n${i}` }));
  assert.deepEqual((await call('POST', '/api/v1/databases/tributary/tables/lake_events/rows', rows)).json, { rows: 500 });
  await waitTiered(cluster.conn, { database: 'tributary', table: 'lake_events' });

  const catalog = new IcebergRestCatalog({ baseUrl: `http://${cluster.server.http}/iceberg`, auth: { type: 'none' } });
  const config = await catalog.loadConfig();
  assert.ok(config.overrides.warehouse!.startsWith(cluster.server.dataDir), 'the warehouse is the server\'s');

  const { namespaces } = await catalog.listNamespaces();
  assert.deepEqual(namespaces, [{ namespace: ['tributary'] }]);
  assert.equal(await catalog.namespaceExists({ namespace: ['tributary'] }), true);
  assert.equal(await catalog.namespaceExists({ namespace: ['nodb'] }), false);
  const { identifiers } = await catalog.listTables({ namespace: ['tributary'] });
  assert.deepEqual(identifiers, [{ namespace: ['tributary'], name: 'lake_events' }], 'only lake tables');
  const id = { namespace: ['tributary'], name: 'lake_events' };
  assert.equal(await catalog.tableExists(id), true);
  assert.equal(await catalog.tableExists({ namespace: ['tributary'], name: 'not_in_lake' }), false);

  const loaded = (await catalog.loadTableResult(id))!;
  const location = loaded['metadata-location']!;
  assert.match(location, /\/lake\/tributary\/lake_events\/metadata\/v\d+\.metadata\.json$/);
  // The metadata is the file, byte for byte (63-bit snapshot ids included).
  const raw = await call('GET', '/iceberg/v1/namespaces/tributary/tables/lake_events');
  assert.ok(Buffer.from(raw.bytes).toString('utf8').includes(`"metadata":${fs.readFileSync(location, 'utf8').trim()}`));
  assert.equal(await catalog.loadTable(id, { ifNoneMatch: loaded.etag! }), null, 'unchanged metadata: 304');

  const metadata = loaded.metadata;
  assert.equal(metadata['format-version'], 2);
  const schema = metadata.schemas.find((s) => s['schema-id'] === metadata['current-schema-id'])!;
  assert.deepEqual(schema.fields.map((f) => f.name), ['id', 'note', '__bucket', '__offset', '__timestamp']);
  // The REST API's field_id is Tributary's column id; lake_field_id is the id the catalog serves.
  const restColumns = (await call('GET', '/api/v1/databases/tributary/tables/lake_events')).json.schema.columns as { name: string; field_id: number; lake_field_id: number }[];
  assert.deepEqual(
    restColumns.map((c) => [c.name, c.field_id, c.lake_field_id]),
    schema.fields.filter((f) => !f.name.startsWith('__')).map((f, i) => [f.name, i, f.id]),
  );
  assert.equal((await call('GET', '/api/v1/databases/tributary/tables/not_in_lake')).json.schema.columns[0].lake_field_id, undefined);
  const snapshot = metadata.snapshots!.find((s) => s['snapshot-id'] === metadata['current-snapshot-id'])!;
  assert.ok(snapshot, 'the current snapshot is listed');

  // metadata → manifest list → manifests → data files, as any Iceberg reader walks them.
  const files: string[] = [];
  for (const manifest of await readManifestList(snapshot['manifest-list'])) {
    assert.equal(manifest.content, ManifestContent.DATA, 'a log table has no delete files');
    for (const entry of (await readManifest(manifest)).entries) if (isLive(entry)) files.push(entry.dataFile.filePath);
  }
  assert.ok(files.length > 0);
  const duck = await DuckDBInstance.create(':memory:', { autoinstall_known_extensions: 'false' });
  const duckConn = await duck.connect();
  try {
    const list = files.map((f) => `'${f.replaceAll("'", "''")}'`).join(', ');
    const reader = await duckConn.runAndReadAll(`SELECT count(*), count(DISTINCT id), min(id), max(id), count(*) FILTER (WHERE note = 'n' || id) FROM read_parquet([${list}])`);
    assert.deepEqual(reader.getRows()[0], [500n, 500n, 0n, 499n, 500n]);
  } finally {
    duckConn.closeSync();
    duck.closeSync();
  }

  // Errors in the spec's model, as the client maps them.
  const failure = async (p: Promise<unknown>): Promise<IcebergError> => {
    const err = await p.then(() => undefined, (e: unknown) => e);
    assert.ok(err instanceof IcebergError, `expected an IcebergError, got ${String(err)}`);
    return err;
  };
  let e = await failure(catalog.loadTable({ namespace: ['tributary'], name: 'nope' }));
  assert.deepEqual([e.status, e.icebergType], [404, 'NoSuchTableException']);
  e = await failure(catalog.loadTable({ namespace: ['tributary'], name: 'not_in_lake' }));
  assert.deepEqual([e.status, e.icebergType], [404, 'NoSuchTableException']);
  e = await failure(catalog.listTables({ namespace: ['nodb'] }));
  assert.deepEqual([e.status, e.icebergType], [404, 'NoSuchNamespaceException']);
  e = await failure(catalog.loadNamespaceMetadata({ namespace: ['tributary', 'deeper'] }));
  assert.deepEqual([e.status, e.icebergType], [404, 'NoSuchNamespaceException']);
  e = await failure(catalog.createTable({ namespace: ['tributary'] }, { name: 't', schema: { type: 'struct', fields: [{ id: 1, name: 'x', type: 'long', required: false }], 'schema-id': 0 } }));
  assert.deepEqual([e.status, e.icebergType, e.icebergCode], [403, 'ForbiddenException', 403]);
  e = await failure(catalog.dropTable(id));
  assert.deepEqual([e.status, e.icebergType], [403, 'ForbiddenException']);
  e = await failure(catalog.updateTable(id, { requirements: [], updates: [{ action: 'set-properties', updates: { a: 'b' } }] }));
  assert.deepEqual([e.status, e.icebergType], [403, 'ForbiddenException']);
  e = await failure(catalog.createNamespace({ namespace: ['other'] }));
  assert.deepEqual([e.status, e.icebergType], [403, 'ForbiddenException']);
  assert.equal(await catalog.tableExists(id), true, 'refused writes changed nothing');
  const bad = await call('POST', '/iceberg/v1/namespaces/tributary/tables/lake_events', '{"updates": [');
  assert.deepEqual([bad.status, bad.json.error.type, bad.json.error.code], [400, 'BadRequestException', 400]);
});
