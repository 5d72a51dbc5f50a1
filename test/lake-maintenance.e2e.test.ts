/**
 * Lake maintenance end to end: a tiering worker process that compacts and expires snapshots after
 * its rounds (table.datalake.auto-compaction, table.datalake.auto-expire-snapshot) keeps the lake
 * equal to the table with delete files bounded and old snapshots and their files gone; and the
 * `tributary lake` maintenance commands on a lake built with the Iceberg modules.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import * as arrow from 'apache-arrow';
import type { TablePath } from '../src/client/index.js';
import { FileSystemCatalog } from '../src/lake/iceberg/catalog.js';
import { type DataFile, FileContent } from '../src/lake/iceberg/data-file.js';
import { computeMetrics } from '../src/lake/iceberg/metrics.js';
import { writeParquet } from '../src/lake/iceberg/parquet.js';
import { isLive, readManifest, readManifestList } from '../src/lake/iceberg/scan.js';
import { commitAppend, commitRowDelta } from '../src/lake/iceberg/snapshot-producer.js';
import { newTableMetadata, type TableMetadata } from '../src/lake/iceberg/table-metadata.js';
import type { IcebergSchema } from '../src/lake/iceberg/types.js';
import { lakeArrowSchema } from '../src/lake/iceberg/lake-batch.js';
import { SUMMARY_TABLE_ID } from '../src/lake/tiered-offsets.js';
import { startCluster } from './support/cluster.js';
import { readLakeTable } from './support/lake-content.js';
import { WAREHOUSES } from './support/warehouses.js';
import { joinLocation } from '../src/storage/object-store.js';
import { objectStoreFor } from '../src/storage/stores.js';
import { CLI_ARGS, tempDir } from './support/server-process.js';

const PK: TablePath = { database: 'tributary', table: 'balances' };
const BUCKETS = 2;
const KEPT_SNAPSHOTS = 3;

/** Every file a snapshot of `metadata` references: manifest lists, manifests and their live files. */
async function referencedFiles(metadata: TableMetadata): Promise<Set<string>> {
  const files = new Set<string>();
  for (const s of metadata.snapshots) {
    files.add(s.manifestList);
    for (const m of await readManifestList(s.manifestList)) {
      files.add(m.manifestPath);
      for (const e of (await readManifest(m)).entries) if (isLive(e)) files.add(e.dataFile.filePath);
    }
  }
  return files;
}

/** The files under `dir` (a directory or s3://) whose names end in `suffix`, by the locations the lake's metadata gives them. */
async function filesUnder(dir: string, suffix: string): Promise<string[]> {
  return (await objectStoreFor(dir).list(dir)).map((o) => o.location).filter((f) => f.endsWith(suffix));
}

for (const { name, cluster: onWarehouse } of WAREHOUSES) test(`auto-compaction and auto-expiry over many small rounds: the lake equals the table, delete files stay bounded, old snapshots and their files go (${name} warehouse)`, async (t) => {
  const cluster = await startCluster(t, { args: ['--no-tiering'], ...onWarehouse });
  const { conn } = cluster;
  const worker = await cluster.startTiering();
  let workerStopped = false;
  try {
    const admin = conn.getAdmin();
    await admin.createTable(PK, {
      columns: [
        { name: 'k', type: 'INT' },
        { name: 'owner', type: 'STRING' },
        { name: 'amount', type: 'BIGINT' },
      ],
      primaryKey: ['k'],
      properties: {
        'bucket.num': String(BUCKETS),
        'table.datalake.enabled': 'true',
        'table.datalake.freshness': '200ms',
        'table.datalake.auto-compaction': 'true',
        'table.datalake.auto-expire-snapshot': 'true',
        // Lake table properties: every snapshot but the newest three is old enough to expire.
        'iceberg.history.expire.max-snapshot-age-ms': '0',
        'iceberg.history.expire.min-snapshots-to-keep': String(KEPT_SNAPSHOTS),
      },
    });
    const writer = await (await conn.getTable(PK)).newUpsert().createWriter();
    const state = new Map<number, { owner: string; amount: bigint }>();
    for (let wave = 0, step = 0; wave < 40; wave++) {
      const applied: (() => void)[] = [];
      for (let i = 0; i < 20; i++, step++) {
        const k = (step * 37) % 60;
        if (step % 4 === 3) {
          await writer.delete({ k });
          applied.push(() => state.delete(k));
        } else {
          const row = { owner: `o${step}`, amount: BigInt(step) };
          await writer.upsert({ k, ...row });
          applied.push(() => state.set(k, row));
        }
      }
      await writer.flush();
      for (const a of applied) a();
      await new Promise((r) => setTimeout(r, 200));
    }
    const deadline = Date.now() + 60_000;
    while ((await admin.getLakeTieringStatus(PK)).buckets.some((b) => b.recordsBehind > 0n)) {
      assert.ok(Date.now() < deadline, 'the lake catches up');
      await new Promise((r) => setTimeout(r, 100));
    }
    // Stopping waits for the round in flight, its compaction and expiry included.
    assert.equal(await worker.stop(), 0, worker.stderr);
    workerStopped = true;

    const { warehouse } = cluster;
    const lake = await readLakeTable(warehouse, PK.database, PK.table);
    const lakeState = new Map(lake.rows.map((r) => [r.k as number, { owner: r.owner as string, amount: r.amount as bigint }]));
    assert.equal(lakeState.size, lake.rows.length, 'each key once in the lake');
    assert.deepEqual(new Map([...lakeState].sort((a, b) => a[0] - b[0])), new Map([...state].sort((a, b) => a[0] - b[0])));

    // Compacted after every round: one data file per bucket and no delete file now, and no kept
    // snapshot ever held more than the one delete file per bucket that a round adds.
    assert.ok(lake.dataFiles <= BUCKETS, `${lake.dataFiles} data files`);
    assert.equal(lake.deleteFiles, 0);
    const { metadata } = lake;
    const current = metadata.snapshots.find((s) => s.snapshotId === metadata.currentSnapshotId)!;
    assert.equal(current.summary.operation, 'replace');
    assert.equal(current.summary[SUMMARY_TABLE_ID], String((await admin.getTableInfo(PK)).tableId), 'the compacted snapshot says which offsets the lake holds');
    for (const s of metadata.snapshots) assert.ok(Number(s.summary['total-delete-files']) <= BUCKETS, `snapshot ${s.snapshotId}: ${s.summary['total-delete-files']} delete files`);
    // The coordinator registered the compacted snapshot.
    assert.equal((await admin.getLakeSnapshot(PK)).snapshotId, metadata.currentSnapshotId);

    // Expired: only the newest snapshots remain, and only the files they reference are on disk.
    assert.ok(metadata.lastSequenceNumber >= 2n * BigInt(KEPT_SNAPSHOTS), `${metadata.lastSequenceNumber} commits`);
    assert.equal(metadata.snapshots.length, KEPT_SNAPSHOTS);
    const referenced = await referencedFiles(metadata);
    const location = joinLocation(warehouse, PK.database, PK.table);
    const stored = [...(await filesUnder(joinLocation(location, 'data'), '.parquet')), ...(await filesUnder(joinLocation(location, 'metadata'), '.avro'))];
    assert.deepEqual(stored.filter((f) => !referenced.has(f)), [], 'files of expired snapshots are deleted');
    const missing = [];
    for (const f of referenced) if (!(await objectStoreFor(f).head(f))) missing.push(f);
    assert.deepEqual(missing, [], 'files of kept snapshots are kept');
  } finally {
    if (!workerStopped) await worker.kill();
  }
});

/** Runs `tributary lake …`; resolves with its exit code and output. */
function runLakeCli(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, [...CLI_ARGS, 'lake', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  return new Promise((resolve) => child.once('close', (code) => resolve({ code, stdout, stderr })));
}

test('tributary lake compact, expire-snapshots and remove-orphans on a lake table', async () => {
  const dataDir = tempDir('lake-cli');
  const warehouse = path.join(dataDir, 'lake');
  try {
    const catalog = new FileSystemCatalog(warehouse);
    const location = catalog.tableLocation('db', 't');
    const schema: IcebergSchema = {
      type: 'struct',
      'schema-id': 0,
      fields: [
        { id: 1, name: 'k', required: true, type: 'long' },
        { id: 2, name: '__bucket', required: true, type: 'int' },
        { id: 3, name: '__offset', required: true, type: 'long' },
      ],
    };
    const keys: IcebergSchema = { ...schema, fields: [schema.fields[0]] };
    const spec = { 'spec-id': 0, fields: [{ 'source-id': 2, 'field-id': 1000, name: '__bucket', transform: 'identity' }] };
    const sortOrder = { 'order-id': 1, fields: [{ transform: 'identity', 'source-id': 3, direction: 'asc' as const, 'null-order': 'nulls-first' as const }] };
    await catalog.createTable('db', 't', newTableMetadata({ location, schema, spec, sortOrder }));
    let n = 0;
    const write = (content: FileContent, fileSchema: IcebergSchema, columns: unknown[][]): DataFile => {
      const arrowSchema = lakeArrowSchema(fileSchema);
      const children = arrowSchema.fields.map((f, i) => arrow.vectorFromArray(columns[i], f.type).data[0]);
      const batch = new arrow.RecordBatch(arrowSchema, arrow.makeData({ type: new arrow.Struct(arrowSchema.fields), length: children[0].length, nullCount: 0, children }));
      const file = path.join(location, 'data', '__bucket=0', `f${n++}.parquet`);
      fs.mkdirSync(path.dirname(file), { recursive: true });
      fs.writeFileSync(file, writeParquet([batch]));
      const m = computeMetrics([batch], fileSchema);
      return { content, filePath: file, fileFormat: 'PARQUET', partition: [0], recordCount: m.recordCount, fileSizeInBytes: fs.statSync(file).size, ...(content === FileContent.DATA ? {} : { equalityIds: [1] }) };
    };
    const first = write(FileContent.DATA, schema, [[1n, 2n, 3n], [0, 0, 0], [0n, 1n, 2n]]);
    await commitAppend(catalog, 'db', 't', { dataFiles: [first] });
    const deletes = write(FileContent.EQUALITY_DELETES, keys, [[2n]]);
    await commitRowDelta(catalog, 'db', 't', { dataFiles: [write(FileContent.DATA, schema, [[2n, 4n], [0, 0], [3n, 4n]])], deleteFiles: [deletes] });
    // Files no metadata references: one from long ago, one just written (maybe a commit in flight).
    const oldOrphan = path.join(location, 'data', '__bucket=0', 'old-orphan.parquet');
    const newOrphan = path.join(location, 'data', '__bucket=0', 'new-orphan.parquet');
    fs.writeFileSync(oldOrphan, 'x');
    fs.writeFileSync(newOrphan, 'x');
    const twoDaysAgo = new Date(Date.now() - 2 * 86_400_000);
    fs.utimesSync(oldOrphan, twoDaysAgo, twoDaysAgo);
    const common = ['--warehouse', warehouse, '--table', 'db.t'];

    const compact = await runLakeCli(['compact', ...common, '--format', 'json']);
    assert.equal(compact.code, 0, compact.stderr);
    assert.equal(compact.stderr, '', 'no progress line when stderr is not a terminal');
    const compacted = JSON.parse(compact.stdout) as { snapshot_id: string; partitions: { partition: string; removed_data_files: number; removed_delete_files: number; records: number }[] };
    assert.deepEqual(
      compacted.partitions.map(({ partition, removed_data_files, removed_delete_files, records }) => ({ partition, removed_data_files, removed_delete_files, records })),
      [{ partition: '__bucket=0', removed_data_files: 2, removed_delete_files: 1, records: 4 }],
    );
    // Without --warehouse: the lake directory of the data directory, as the node has it.
    const again = await runLakeCli(['compact', '--data-dir', dataDir, '--table', 'db.t']);
    assert.equal(again.stdout, 'nothing to compact\n');

    const before = (await catalog.loadTable('db', 't')).metadata;
    assert.equal(before.snapshots.length, 3);
    assert.equal(String(before.currentSnapshotId), compacted.snapshot_id);

    const expire = await runLakeCli(['expire-snapshots', ...common, '--older-than', '0ms', '--retain-last', '1']);
    assert.equal(expire.code, 0, expire.stderr);
    const lines = expire.stdout.trim().split('\n');
    const expiredIds = before.snapshots.filter((s) => s.snapshotId !== before.currentSnapshotId).map((s) => `expired snapshot ${s.snapshotId}`);
    assert.deepEqual(lines.filter((l) => l.startsWith('expired snapshot')).sort(), expiredIds.sort());
    const deleted = lines.filter((l) => l.startsWith('deleted ')).map((l) => l.slice('deleted '.length));
    // The rewritten data and delete files went with the snapshots that still listed them.
    for (const f of [first.filePath, deletes.filePath]) assert.ok(deleted.includes(f), `${f} deleted`);
    for (const f of deleted) assert.equal(fs.existsSync(f), false);
    assert.match(lines.at(-1)!, new RegExp(`^expired 2 snapshots, deleted ${deleted.length} files$`));
    const after = (await catalog.loadTable('db', 't')).metadata;
    assert.deepEqual(after.snapshots.map((s) => s.snapshotId), [before.currentSnapshotId]);

    const orphans = await runLakeCli(['remove-orphans', ...common, '--older-than', '1d', '--format', 'json']);
    assert.equal(orphans.code, 0, orphans.stderr);
    assert.deepEqual(JSON.parse(orphans.stdout), { deleted_files: [oldOrphan] });
    assert.equal(fs.existsSync(newOrphan), true);
    assert.deepEqual([...(await referencedFiles(after))].filter((f) => !fs.existsSync(f)), [], 'referenced files are all kept');

    const bad = await runLakeCli(['expire-snapshots', ...common, '--older-than', 'soon']);
    assert.equal(bad.code, 1);
    assert.match(bad.stderr, /ERROR INVALID_ARGUMENT: --older-than/);
  } finally {
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
});
