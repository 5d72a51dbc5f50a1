import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterEach, beforeEach, describe, it } from 'node:test';
import { TributaryError } from '../../common/errors.js';
import { DuckSession } from '../../query/duckdb/session.js';
import { LAKE_SNAPSHOT_COLUMNS } from '../lake-format.js';
import { SUMMARY_BUCKET_OFFSETS, SUMMARY_TIERING_EPOCH } from '../tiered-offsets.js';
import { FileSystemCatalog } from './catalog.js';
import { type DataFile, FileContent } from './data-file.js';
import { duckTypeOfIceberg } from './duckdb-sql.js';
import { TEST_SCHEMA } from './fixtures/catalog-table.js';
import { batchOf, lakeRowsSql, POSITION_DELETE_SCHEMA, writeContentFile } from './fixtures/lake-files.js';
import { IcebergFormat } from './iceberg-format.js';
import { commitAppend, commitRowDelta } from './snapshot-producer.js';
import { newTableMetadata } from './table-metadata.js';
import type { IcebergSchema } from './types.js';

type LakeReadOptions = { snapshotId?: bigint; columns?: Iterable<string> };

/** Loads the snapshots of lake table `db.table` into DuckDB as table `name`, as `table$lake$snapshots` reads them. */
async function loadLakeSnapshots(duck: DuckSession, name: string, catalog: FileSystemCatalog, db: string, table: string): Promise<void> {
  const loaded = await new IcebergFormat().open(catalog.warehouse).loadTable({ database: db, table });
  await duck.createTableAs(name, `AS ${loaded.snapshotsSql()}`);
}

const DB = 'db';
const TABLE = 't';

const schema0 = TEST_SCHEMA;
const idOnly: IcebergSchema = { type: 'struct', 'schema-id': 0, fields: [schema0.fields[0]] };
const nameOnly: IcebergSchema = { type: 'struct', 'schema-id': 0, fields: [schema0.fields[1]] };
describe('lake reader', () => {
  let warehouse: string;
  let catalog: FileSystemCatalog;
  let location: string;
  let duck: DuckSession;

  beforeEach(async () => {
    // A quote and a space in every path: literals must be quoted right all the way through.
    warehouse = fs.mkdtempSync(path.join(os.tmpdir(), "lake reader's-"));
    catalog = new FileSystemCatalog(warehouse);
    location = catalog.tableLocation(DB, TABLE);
    const spec = { 'spec-id': 0, fields: [{ 'source-id': 3, 'field-id': 1000, name: '__bucket', transform: 'identity' }] };
    const sortOrder = { 'order-id': 0, fields: [] };
    await catalog.createTable(DB, TABLE, newTableMetadata({ location, schema: schema0, spec, sortOrder }));
    duck = await DuckSession.create();
  });

  afterEach(() => {
    duck.close();
    fs.rmSync(warehouse, { recursive: true, force: true });
  });

  /** Writes a Parquet content file of bucket partition `bucket`; `filePath` overrides the location the manifest records. */
  function write(name: string, content: FileContent, bucket: number, schema: IcebergSchema, columns: unknown[][], filePath?: (p: string) => string): DataFile {
    const file = writeContentFile(content, path.join(location, 'data', `__bucket=${bucket}`, `${name}.parquet`), [bucket], schema, batchOf(schema, columns));
    return filePath ? { ...file, filePath: filePath(file.filePath) } : file;
  }

  const data = (name: string, bucket: number, ids: bigint[], names: (string | null)[], filePath?: (p: string) => string) =>
    write(name, FileContent.DATA, bucket, schema0, [ids, names, ids.map(() => bucket)], filePath);

  /** Loads the current snapshot's rows into DuckDB as lake.t. */
  async function loadLake(options: LakeReadOptions = {}): Promise<void> {
    await duck.run(`CREATE SCHEMA IF NOT EXISTS lake; CREATE OR REPLACE TABLE lake.t AS ${await lakeRowsSql(catalog, DB, TABLE, options)}`);
  }

  /** The rows read, sorted, as [id, name, bucket] (or the chosen columns). */
  async function rows(options: LakeReadOptions = {}): Promise<unknown[][]> {
    await loadLake(options);
    return (await duck.run('SELECT * FROM lake.t ORDER BY ALL')).rows;
  }

  it('applies equality deletes to the older files of their partition only, with NULL equal to NULL', async () => {
    const first = await commitAppend(catalog, DB, TABLE, {
      dataFiles: [data('a0', 0, [1n, 2n, 3n], ['a', 'b', null]), data('a1', 1, [10n, 11n], ['x', null])],
    });
    await commitRowDelta(catalog, DB, TABLE, {
      dataFiles: [data('b0', 0, [2n, 4n], ['b2', null])],
      deleteFiles: [
        // Key 10 lives in bucket 1, where this file does not apply.
        write('e0', FileContent.EQUALITY_DELETES, 0, idOnly, [[2n, 10n]]),
        write('e0name', FileContent.EQUALITY_DELETES, 0, nameOnly, [[null]]),
      ],
    });
    assert.deepEqual(await rows(), [
      [1n, 'a', 0],
      [2n, 'b2', 0],
      [4n, null, 0],
      [10n, 'x', 1],
      [11n, null, 1],
    ]);
    assert.deepEqual(await rows({ snapshotId: first }), [
      [1n, 'a', 0],
      [2n, 'b', 0],
      [3n, null, 0],
      [10n, 'x', 1],
      [11n, null, 1],
    ]);
    // A later delete reaches every older file of its partition, both rounds' files.
    await commitRowDelta(catalog, DB, TABLE, { dataFiles: [], deleteFiles: [write('e1', FileContent.EQUALITY_DELETES, 0, idOnly, [[1n, 2n, 4n]])] });
    assert.deepEqual(await rows(), [
      [10n, 'x', 1],
      [11n, null, 1],
    ]);
  });

  it('applies position deletes to the rows of the named file, by the location the manifest holds', async () => {
    const asUri = (p: string) => pathToFileURL(p).href;
    const p0 = data('p0', 0, [1n, 2n, 3n, 4n], ['a', 'b', 'c', 'd'], asUri);
    const p1 = data('p1', 1, [5n, 6n], ['e', 'f']);
    assert.match(p0.filePath, /^file:\/\/\/.*%20/);
    await commitAppend(catalog, DB, TABLE, { dataFiles: [p0, p1] });
    // Row 0 of p1 is named too, but the delete file is of bucket 0: it does not apply to p1.
    const deletes = write('pos0', FileContent.POSITION_DELETES, 0, POSITION_DELETE_SCHEMA, [
      [p0.filePath, p0.filePath, p1.filePath],
      [1n, 3n, 0n],
    ]);
    await commitRowDelta(catalog, DB, TABLE, { dataFiles: [data('q0', 0, [7n], ['g'])], deleteFiles: [deletes] });
    assert.deepEqual(await rows(), [
      [1n, 'a', 0],
      [3n, 'c', 0],
      [5n, 'e', 1],
      [6n, 'f', 1],
      [7n, 'g', 0],
    ]);
  });

  it('reads columns by field id: a renamed column keeps its values, an added one is NULL in older files', async () => {
    const first = await commitAppend(catalog, DB, TABLE, { dataFiles: [data('old', 0, [1n], ['a'])] });
    const base = await catalog.loadTable(DB, TABLE);
    const schema1: IcebergSchema = {
      ...schema0,
      'schema-id': 1,
      fields: [schema0.fields[0], { ...schema0.fields[1], name: 'label' }, { id: 4, name: 'score', required: false, type: 'int' }, schema0.fields[2]],
    };
    await catalog.commit(DB, TABLE, base.version, { ...base.metadata, schemas: [...base.metadata.schemas, schema1], currentSchemaId: 1, lastColumnId: 4 });
    await commitAppend(catalog, DB, TABLE, { dataFiles: [write('new', FileContent.DATA, 0, schema1, [[2n], ['b'], [7], [0]])] });
    await loadLake();
    const result = await duck.run('SELECT * FROM lake.t ORDER BY id');
    assert.deepEqual(result.columns, [
      { name: 'id', type: 'BIGINT' },
      { name: 'label', type: 'VARCHAR' },
      { name: 'score', type: 'INTEGER' },
      { name: '__bucket', type: 'INTEGER' },
    ]);
    assert.deepEqual(result.rows, [
      [1n, 'a', null, 0],
      [2n, 'b', 7, 0],
    ]);
    // An older snapshot reads with its own schema.
    assert.deepEqual(await rows({ snapshotId: first }), [[1n, 'a', 0]]);
  });

  it('reads by name while no column was renamed: an added column is NULL in older files, one no file holds is NULL', async () => {
    await commitAppend(catalog, DB, TABLE, { dataFiles: [data('old', 0, [1n], ['a'])] });
    const base = await catalog.loadTable(DB, TABLE);
    const schema1: IcebergSchema = { ...schema0, 'schema-id': 1, fields: [...schema0.fields, { id: 4, name: 'score', required: false, type: 'int' }] };
    const schema2: IcebergSchema = { ...schema0, 'schema-id': 2, fields: [...schema1.fields, { id: 5, name: 'note', required: false, type: 'string' }] };
    await catalog.commit(DB, TABLE, base.version, { ...base.metadata, schemas: [...base.metadata.schemas, schema1, schema2], currentSchemaId: 2, lastColumnId: 5 });
    await commitAppend(catalog, DB, TABLE, { dataFiles: [write('new', FileContent.DATA, 0, schema1, [[2n], ['b'], [0], [7]])] });
    assert.match(await lakeRowsSql(catalog, DB, TABLE), /union_by_name = true/);
    await loadLake();
    const result = await duck.run('SELECT * FROM lake.t ORDER BY id');
    assert.deepEqual(result.columns, [
      { name: 'id', type: 'BIGINT' },
      { name: 'name', type: 'VARCHAR' },
      { name: '__bucket', type: 'INTEGER' },
      { name: 'score', type: 'INTEGER' },
      { name: 'note', type: 'VARCHAR' },
    ]);
    assert.deepEqual(result.rows, [
      [1n, 'a', 0, null, null],
      [2n, 'b', 0, 7, null],
    ]);
  });

  it('reads only the chosen columns, at least one', async () => {
    await commitAppend(catalog, DB, TABLE, { dataFiles: [data('a', 0, [1n, 2n], ['a', 'b'])] });
    assert.deepEqual(await rows({ columns: ['NAME', 'nope'] }), [['a'], ['b']]);
    await loadLake({ columns: [] });
    assert.deepEqual((await duck.run('SELECT count(*) AS n FROM lake.t')).rows, [[2n]]);
  });

  it('gives an empty table of the schema without data files', async () => {
    await loadLake();
    const result = await duck.run('SELECT * FROM lake.t');
    assert.deepEqual(result, {
      columns: [
        { name: 'id', type: 'BIGINT' },
        { name: 'name', type: 'VARCHAR' },
        { name: '__bucket', type: 'INTEGER' },
      ],
      rows: [],
    });
    // A snapshot without data files (the first commit of an empty round) reads the same.
    await commitAppend(catalog, DB, TABLE, { dataFiles: [] });
    assert.deepEqual(await rows(), []);
  });

  it('writes a SELECT without joins when no delete file applies', async () => {
    await commitAppend(catalog, DB, TABLE, { dataFiles: [data('a', 0, [1n], ['a'])] });
    const sql = await lakeRowsSql(catalog, DB, TABLE);
    assert.doesNotMatch(sql, /JOIN/);
    // No column was ever renamed and the file's metrics list its columns: read by name, in parallel.
    assert.match(sql, /CAST\("id" AS BIGINT\) AS f1/);
    assert.match(sql, /union_by_name = true/);
    assert.doesNotMatch(sql, /schema = map/);
    assert.ok(sql.includes("lake reader''s-"), 'the quote in the path is doubled');
  });

  it('refuses paths DuckDB would expand as globs', async () => {
    await commitAppend(catalog, DB, TABLE, { dataFiles: [data('a[1]', 0, [1n], ['a'])] });
    await assert.rejects(lakeRowsSql(catalog, DB, TABLE), (err: unknown) => err instanceof TributaryError && err.errorName === 'STORAGE_EXCEPTION' && /glob/.test(err.message));
  });

  it('lists the snapshots with their summaries', async () => {
    await loadLakeSnapshots(duck, 'lake.s', catalog, DB, TABLE);
    const empty = await duck.run('SELECT * FROM lake.s');
    assert.deepEqual(
      empty.columns.map((c) => c.name),
      LAKE_SNAPSHOT_COLUMNS.map(([name]) => name),
    );
    assert.equal(empty.rows.length, 0);

    const offsets = '[{"bucket":0,"end_offset":"3"}]';
    const first = await commitAppend(catalog, DB, TABLE, { dataFiles: [data('a', 0, [1n, 2n, 3n], ['a', 'b', 'c'])], summary: { [SUMMARY_TIERING_EPOCH]: '7', [SUMMARY_BUCKET_OFFSETS]: offsets } });
    const second = await commitRowDelta(catalog, DB, TABLE, { dataFiles: [], deleteFiles: [write('e', FileContent.EQUALITY_DELETES, 0, idOnly, [[1n]])] });
    await loadLakeSnapshots(duck, 'lake.s', catalog, DB, TABLE);
    const result = await duck.run('SELECT * EXCLUDE (committed_at), committed_at <= now() AS past FROM lake.s ORDER BY sequence_number');
    assert.deepEqual(result.rows, [
      [first, null, 1n, 'append', 3n, 3n, 1n, 0n, 7n, offsets, false, true],
      [second, first, 2n, 'delete', 0n, 3n, 0n, 1n, null, null, true, true],
    ]);
    assert.equal((await duck.run('SELECT typeof(committed_at) AS t FROM lake.s LIMIT 1')).rows[0][0], 'TIMESTAMP WITH TIME ZONE');
  });

  it('maps Iceberg types to DuckDB types', () => {
    const cases: [string, string][] = [
      ['boolean', 'BOOLEAN'],
      ['int', 'INTEGER'],
      ['long', 'BIGINT'],
      ['float', 'FLOAT'],
      ['double', 'DOUBLE'],
      ['decimal(38, 10)', 'DECIMAL(38,10)'],
      ['date', 'DATE'],
      ['time', 'TIME'],
      ['timestamp', 'TIMESTAMP'],
      ['timestamptz', 'TIMESTAMPTZ'],
      ['string', 'VARCHAR'],
      ['binary', 'BLOB'],
      ['fixed[16]', 'BLOB'],
      ['uuid', 'UUID'],
    ];
    for (const [iceberg, duckdb] of cases) assert.equal(duckTypeOfIceberg(iceberg), duckdb, iceberg);
    assert.throws(() => duckTypeOfIceberg('variant'), (err: unknown) => err instanceof TributaryError && err.errorName === 'INVALID_TYPE');
  });
});
