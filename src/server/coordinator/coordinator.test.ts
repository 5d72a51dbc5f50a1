import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import pino from 'pino';
import { Options } from '../../common/config.js';
import { TributaryError } from '../../common/errors.js';
import type { TableInfo } from '../../common/schema.js';
import { formatDataType } from '../../common/types.js';
import { currentSchema } from '../../lake/iceberg/table-metadata.js';
import { IcebergLakeCatalog } from '../../lake/iceberg/iceberg-catalog.js';
import type { LakeCatalog } from '../../lake/lake-format.js';
import { ServerActivity } from '../../common/activity.js';
import { LocalMetadataStore } from '../metadata/local-metadata-store.js';
import { type BucketLifecycle, Coordinator } from './coordinator.js';

const dirs: string[] = [];
after(() => dirs.forEach((d) => fs.rmSync(d, { recursive: true, force: true })));

/** The tablet side as the coordinator sees it: what it was told about altered tables. */
class RecordingTablets implements BucketLifecycle {
  readonly altered: TableInfo[] = [];
  /** Runs while buckets are being created, before they exist. */
  whileCreatingBuckets?: () => void;
  async createBuckets(): Promise<void> {
    await new Promise((r) => setImmediate(r));
    this.whileCreatingBuckets?.();
  }
  async dropBuckets(): Promise<void> {}
  tableAltered(table: TableInfo): void {
    this.altered.push(table);
  }
  lakeOffsetsChanged(): void {}
}

async function start(dir: string, lake?: LakeCatalog, settings: Record<string, string> = {}): Promise<{ coordinator: Coordinator; tablets: RecordingTablets; store: LocalMetadataStore }> {
  const store = await LocalMetadataStore.open(path.join(dir, 'metadata'));
  const log = pino({ level: 'silent' });
  const activity = new ServerActivity(log);
  const coordinator = new Coordinator(store, new Options('server', settings), log, activity, lake);
  const tablets = new RecordingTablets();
  await coordinator.start(tablets);
  after(async () => {
    await coordinator.stop();
    activity.close();
  });
  return { coordinator, tablets, store };
}

const rejects = (name: string, fragment: string) => (e: unknown) => e instanceof TributaryError && e.errorName === name && e.message.includes(fragment);
const columnsOf = (info: { schema: TableInfo['schema'] }) => info.schema.columns.map((c) => [c.name, formatDataType(c.type), c.nullable, c.fieldId]);

describe('Coordinator.alterTable: ADD COLUMN', () => {
  it('commits the next schema id with the next field ids, keeps the old schema, tells the tablets, and survives a restart', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'coordinator-'));
    dirs.push(dir);
    const first = await start(dir);
    const p = { database: 'tributary', table: 'orders' };
    await first.coordinator.createTable(p, { columns: [{ name: 'id', type: 'BIGINT' }, { name: 'name', type: 'STRING' }], primaryKey: ['id'] }, false);
    const before = first.coordinator.getTableInfo(p);
    await new Promise((r) => setTimeout(r, 5));
    await first.coordinator.alterTable(p, { addColumns: [{ name: 'price', type: 'DECIMAL(10, 2)', comment: 'euro' }, { name: 'note', type: 'STRING' }] }, false);
    const after1 = first.coordinator.getTableInfo(p);
    assert.equal(after1.schemaId, 1);
    assert.deepEqual(columnsOf(after1), [['id', 'BIGINT', false, 0], ['name', 'STRING', true, 1], ['price', 'DECIMAL(10, 2)', true, 2], ['note', 'STRING', true, 3]]);
    assert.equal(after1.schema.columns[2].comment, 'euro');
    assert.ok(after1.modifiedTime > before.modifiedTime);
    assert.deepEqual(columnsOf(first.coordinator.getSchema(p, 0)), columnsOf(before));
    assert.deepEqual(columnsOf({ schema: first.coordinator.schemaById(after1.tableId, 1)! }), columnsOf(after1));
    assert.deepEqual(first.tablets.altered.map((t) => [t.schemaId, t.schema.columns.length]), [[1, 4]]);

    // Refused changes change nothing, options included.
    const refusals: [Parameters<Coordinator['alterTable']>[1], string, string][] = [
      [{ addColumns: [{ name: 'qty', type: 'INT', nullable: false }] }, 'INVALID_ALTER_TABLE_EXCEPTION', 'must be nullable'],
      [{ addColumns: [{ name: 'Price', type: 'INT' }] }, 'DUPLICATE_COLUMN', 'already exists'],
      [{ addColumns: [{ name: '__offset', type: 'BIGINT' }] }, 'INVALID_ALTER_TABLE_EXCEPTION', 'reserved'],
      [{ options: [{ key: 'table.log.ttl', value: '1d' }], addColumns: [{ name: 'x', type: 'NOPE' }] }, 'INVALID_TYPE', 'NOPE'],
    ];
    for (const [changes, name, fragment] of refusals) {
      await assert.rejects(first.coordinator.alterTable(p, changes, false), rejects(name, fragment));
    }
    assert.deepEqual(first.coordinator.getTableInfo(p), after1);
    assert.throws(() => first.coordinator.getSchema(p, 2), rejects('SCHEMA_NOT_EXIST', 'schema 2'));
    await first.coordinator.stop();

    const second = await start(dir);
    assert.deepEqual(second.coordinator.getTableInfo(p), after1);
    assert.deepEqual(columnsOf(second.coordinator.getSchema(p, 0)), columnsOf(before));
  });

  it('adds the column to the lake table before the system columns, and commits nothing when the lake refuses', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'coordinator-'));
    dirs.push(dir);
    const warehouse = path.join(dir, 'lake');
    let refuse = false;
    const lake = new (class extends IcebergLakeCatalog {
      override syncTable(info: TableInfo): Promise<void> {
        return refuse ? Promise.reject(new TributaryError('COMMIT_FAILED', 'lake unavailable')) : super.syncTable(info);
      }
    })(warehouse);
    const { coordinator } = await start(dir, lake);
    const p = { database: 'tributary', table: 'events' };
    await coordinator.createTable(p, { columns: [{ name: 'id', type: 'BIGINT' }], properties: { 'table.datalake.enabled': 'true' } }, false);
    await coordinator.alterTable(p, { addColumns: [{ name: 'tag', type: 'STRING' }] }, false);
    const fields = async () => currentSchema((await lake.catalog.loadTable('tributary', 'events')).metadata).fields.map((f) => [f.name, f.type, f.required]);
    assert.deepEqual(await fields(), [
      ['id', 'long', false],
      ['tag', 'string', false],
      ['__bucket', 'int', true],
      ['__offset', 'long', true],
      ['__timestamp', 'timestamptz', true],
    ]);
    refuse = true;
    await assert.rejects(coordinator.alterTable(p, { addColumns: [{ name: 'more', type: 'INT' }] }, false), rejects('COMMIT_FAILED', 'lake unavailable'));
    assert.equal(coordinator.getTableInfo(p).schemaId, 1);
    assert.throws(() => coordinator.getSchema(p, 2), rejects('SCHEMA_NOT_EXIST', 'schema 2'));
  });

  it('refuses a lake option the lake table cannot take, at CREATE and at ALTER, committing nothing', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'coordinator-'));
    dirs.push(dir);
    const lake = new IcebergLakeCatalog(path.join(dir, 'lake'));
    const { coordinator } = await start(dir, lake);
    const p = { database: 'tributary', table: 'events' };
    const columns = [{ name: 'id', type: 'BIGINT' }];
    const bad = { 'table.datalake.enabled': 'true', 'iceberg.commit.manifest.min-count-to-merge': 'many' };
    await assert.rejects(coordinator.createTable(p, { columns, properties: bad }, false), rejects('INVALID_CONFIG_EXCEPTION', 'commit.manifest.min-count-to-merge'));
    assert.equal(coordinator.tableExists(p), false);
    await coordinator.createTable(p, { columns, properties: { 'table.datalake.enabled': 'true' } }, false);
    await assert.rejects(coordinator.alterTable(p, { options: [{ key: 'iceberg.commit.manifest-merge.enabled', value: 'maybe' }] }, false), rejects('INVALID_CONFIG_EXCEPTION', 'commit.manifest-merge.enabled'));
    assert.equal(coordinator.getTableInfo(p).properties['iceberg.commit.manifest-merge.enabled'], undefined);
  });
});

describe('Coordinator: tables and partitions are seen only once their buckets exist', () => {
  it('hides a table and a partition while their buckets are being created', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'coordinator-'));
    dirs.push(dir);
    const { coordinator, tablets } = await start(dir);
    const plain = { database: 'tributary', table: 'plain' };
    const parted = { database: 'tributary', table: 'parted' };
    const seen: unknown[] = [];
    const plainInfo = (): string => {
      try {
        return String(coordinator.getTableInfo(plain).tableId);
      } catch (err) {
        return err instanceof TributaryError ? err.errorName : String(err);
      }
    };
    tablets.whileCreatingBuckets = () =>
      seen.push({
        tables: coordinator.listTables('tributary'),
        plain: [coordinator.tableExists(plain), plainInfo()],
        partitions: coordinator.tableExists(parted) ? coordinator.listPartitions(parted).map((p) => p.partitionName) : null,
      });
    const plainId = await coordinator.createTable(plain, { columns: [{ name: 'id', type: 'BIGINT' }] }, false);
    await coordinator.createTable(parted, { columns: [{ name: 'id', type: 'BIGINT' }, { name: 'day', type: 'STRING' }], partitionKeys: ['day'] }, false);
    const partitionId = await coordinator.createPartition(parted, { day: '2026-11-29' }, false);
    assert.deepEqual(seen, [
      { tables: [], plain: [false, 'TABLE_NOT_EXIST'], partitions: null },
      { tables: ['parted', 'plain'], plain: [true, String(plainId)], partitions: [] },
    ]);
    assert.deepEqual(coordinator.listPartitions(parted).map((p) => p.partitionName), ['2026-11-29']);
    assert.equal(coordinator.partitionById(partitionId)?.partitionName, '2026-11-29');
  });
});

describe('Coordinator: names become store paths', () => {
  it('refuses a database or table name that would reach another node of the metadata tree', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'coordinator-'));
    dirs.push(dir);
    const { coordinator } = await start(dir);
    const p = { database: 'tributary', table: 'orders' };
    await coordinator.createTable(p, { columns: [{ name: 'id', type: 'BIGINT' }] }, false);
    // '/databases/tributary/tables/orders' is the table's registration, not a database.
    await assert.rejects(coordinator.dropDatabase('tributary/tables/orders', false, true), rejects('INVALID_DATABASE_EXCEPTION', "invalid database name 'tributary/tables/orders'"));
    await assert.rejects(coordinator.dropTable({ database: 'tributary', table: 'orders/schemas/0' }, true), rejects('INVALID_TABLE_EXCEPTION', 'invalid table name'));
    assert.throws(() => coordinator.getTableInfo({ database: 'tributary', table: 'orders/schemas/0' }), rejects('INVALID_TABLE_EXCEPTION', 'invalid table name'));
    assert.throws(() => coordinator.databaseExists('tributary/tables/orders'), rejects('INVALID_DATABASE_EXCEPTION', 'invalid database name'));
    assert.ok(coordinator.tableExists(p));
    assert.deepEqual(coordinator.listTables('tributary'), ['orders']);
  });
});

describe('Coordinator.createTable: replication factor on one node', () => {
  it('takes a factor of 1 and refuses more with INVALID_REPLICATION_FACTOR, also as the server default', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'coordinator-'));
    dirs.push(dir);
    const { coordinator } = await start(dir);
    const table = (properties: Record<string, string>) => ({ columns: [{ name: 'id', type: 'INT' }], properties });
    await coordinator.createTable({ database: 'tributary', table: 'one' }, table({ 'table.replication.factor': '1' }), false);
    await assert.rejects(
      coordinator.createTable({ database: 'tributary', table: 'three' }, table({ 'table.replication.factor': '3' }), false),
      rejects('INVALID_REPLICATION_FACTOR', "'table.replication.factor' = '3' asks for 3 replicas, but there is one tablet server: the factor can only be 1"),
    );
    assert.equal(coordinator.tableExists({ database: 'tributary', table: 'three' }), false);

    const other = fs.mkdtempSync(path.join(os.tmpdir(), 'coordinator-'));
    dirs.push(other);
    const defaulted = (await start(other, undefined, { 'default.replication.factor': '2' })).coordinator;
    await assert.rejects(defaulted.createTable({ database: 'tributary', table: 't' }, table({}), false), rejects('INVALID_REPLICATION_FACTOR', 'asks for 2 replicas'));
  });
});

describe('Coordinator: a creation sent again with its creation token', () => {
  it('gets the table and partition it created; another creation of the same name still fails, also after a restart', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'coordinator-'));
    dirs.push(dir);
    const first = await start(dir);
    const p = { database: 'tributary', table: 'events' };
    const descriptor = { columns: [{ name: 'day', type: 'STRING' }, { name: 'id', type: 'BIGINT' }], partitionKeys: ['day'] };
    const tableId = await first.coordinator.createTable(p, descriptor, false, 'token-a');
    const partitionId = await first.coordinator.createPartition(p, { day: '2026-01-01' }, false, 'token-b');
    await first.coordinator.stop();
    // A coordinator that takes over answers the retry from what the first committed.
    const second = await start(dir);
    assert.equal(await second.coordinator.createTable(p, descriptor, false, 'token-a'), tableId);
    assert.equal(await second.coordinator.createPartition(p, { day: '2026-01-01' }, false, 'token-b'), partitionId);
    await assert.rejects(second.coordinator.createTable(p, descriptor, false, 'token-c'), rejects('TABLE_ALREADY_EXIST', 'events'));
    await assert.rejects(second.coordinator.createTable(p, descriptor, false), rejects('TABLE_ALREADY_EXIST', 'events'));
    await assert.rejects(second.coordinator.createPartition(p, { day: '2026-01-01' }, false, 'token-a'), rejects('PARTITION_ALREADY_EXISTS', '2026-01-01'));
    assert.deepEqual(Object.keys(second.coordinator.getTableInfo(p).properties), [], 'the token is no table option');
  });
});
