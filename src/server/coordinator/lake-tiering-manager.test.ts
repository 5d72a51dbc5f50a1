import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import pino from 'pino';
import type { LakeBucketOffset } from '../../common/lake.js';
import { buildSchema, type TableInfo, type TablePath } from '../../common/schema.js';
import { LocalMetadataStore } from '../metadata/local-metadata-store.js';
import { LakeTieringManager } from './lake-tiering-manager.js';

const dirs: string[] = [];
after(() => dirs.forEach((d) => fs.rmSync(d, { recursive: true, force: true })));

function table(tableId: number, name: string, props: Record<string, string>): TableInfo {
  return {
    path: { database: 'db', table: name },
    tableId,
    schemaId: 0,
    schema: buildSchema([{ name: 'id', type: 'BIGINT' }]),
    partitionKeys: [],
    bucketCount: 2,
    bucketKeys: [],
    properties: props,
    createdTime: 0,
    modifiedTime: 0,
  };
}

async function setup(tables: TableInfo[], leaseMs = 1000) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tiering-manager-'));
  dirs.push(dir);
  const store = await LocalMetadataStore.open(dir);
  let now = 1_000_000;
  const byId = new Map(tables.map((t) => [t.tableId, t]));
  const notified: LakeBucketOffset[][] = [];
  const logs: { level: number; msg: string }[] = [];
  const log = pino({ level: 'debug' }, { write: (line: string) => logs.push(JSON.parse(line)) });
  const make = () =>
    new LakeTieringManager(
      {
        store,
        tablePathById: (id) => byId.get(id)?.path,
        tableInfo: (p: TablePath) => [...byId.values()].find((t) => t.path.table === p.table)!,
        lakeOffsetsChanged: (_t, offsets) => notified.push([...offsets]),
        log,
      },
      leaseMs,
      () => now,
    );
  const manager = make();
  manager.start(tables, 1_000_000);
  after(() => manager.stop());
  return { manager, make, store, notified, logs, advance: (ms: number) => (now += ms), byId };
}

const lake = { 'table.datalake.enabled': 'true', 'table.datalake.freshness': '10s' };

describe('LakeTieringManager', () => {
  it('hands out never-tiered tables in order, each once, with increasing epochs', async () => {
    const { manager } = await setup([table(1, 'a', lake), table(2, 'b', {}), table(3, 'c', lake)]);
    const first = await manager.assignTable();
    const second = await manager.assignTable();
    assert.equal(first?.tableId, 1);
    assert.equal(second?.tableId, 3);
    assert.ok(second!.epoch > first!.epoch);
    assert.equal(await manager.assignTable(), undefined);
  });

  it('schedules a finished table again a freshness after its round started', async () => {
    const { manager, advance } = await setup([table(1, 'a', lake)]);
    const a = (await manager.assignTable())!;
    advance(3_000); // the round's own time counts towards the next round's wait
    manager.finished(1, a.epoch, false);
    assert.equal(manager.status(table(1, 'a', lake)).state, 'SCHEDULED');
    advance(6_999);
    assert.equal(await manager.assignTable(), undefined);
    advance(1);
    const b = (await manager.assignTable())!;
    assert.equal(b.tableId, 1);
    advance(12_000); // a round longer than the freshness: the next one is due at once
    manager.finished(1, b.epoch, false);
    assert.equal((await manager.assignTable())?.tableId, 1);
  });

  it('queues a force-finished table at once', async () => {
    const { manager } = await setup([table(1, 'a', lake)]);
    const a = (await manager.assignTable())!;
    manager.finished(1, a.epoch, true);
    assert.equal((await manager.assignTable())?.tableId, 1);
  });

  it('fences the epoch of a worker whose lease expired', async () => {
    const { manager, advance } = await setup([table(1, 'a', lake)]);
    const a = (await manager.assignTable())!;
    advance(500);
    manager.renew(1, a.epoch);
    advance(999);
    manager.renew(1, a.epoch); // still within the renewed lease
    advance(1000);
    const b = (await manager.assignTable())!; // the lease ran out: queued again, new epoch
    assert.ok(b.epoch > a.epoch);
    assert.throws(() => manager.renew(1, a.epoch), { errorName: 'FENCED_TIERING_EPOCH_EXCEPTION' });
    await assert.rejects(manager.commitSnapshot(1, a.epoch, { snapshotId: 5n, bucketOffsets: [] }), { errorName: 'FENCED_TIERING_EPOCH_EXCEPTION' });
    assert.throws(() => manager.finished(1, a.epoch, false), { errorName: 'FENCED_TIERING_EPOCH_EXCEPTION' });
    manager.finished(1, b.epoch, false);
  });

  it('registers snapshots durably, merges bucket offsets and never moves them back', async () => {
    const { manager, make, notified } = await setup([table(1, 'a', lake)]);
    const a = (await manager.assignTable())!;
    await manager.commitSnapshot(1, a.epoch, { snapshotId: 2n ** 62n + 1n, bucketOffsets: [{ bucket: 0, endOffset: 10n, maxTimestamp: 5 }] });
    await manager.commitSnapshot(1, a.epoch, { snapshotId: 7n, bucketOffsets: [{ bucket: 1, endOffset: 4n }] });
    await manager.commitSnapshot(1, a.epoch, { snapshotId: 8n, bucketOffsets: [{ bucket: 0, endOffset: 3n }] }); // behind: ignored
    const snap = manager.lakeSnapshot({ database: 'db', table: 'a' })!;
    assert.equal(snap.snapshotId, 7n);
    assert.deepEqual(
      snap.bucketOffsets.map((o) => [o.bucket, o.endOffset]),
      [
        [0, 10n],
        [1, 4n],
      ],
    );
    assert.equal(notified.length, 2);
    // A new manager over the same store (a coordinator restart) sees it and tells the tablets.
    const restarted = make();
    restarted.start([table(1, 'a', lake)], 1_000_000);
    after(() => restarted.stop());
    assert.equal(restarted.lakeSnapshot({ database: 'db', table: 'a' })!.snapshotId, 7n);
    assert.equal(notified.length, 3);
    assert.equal(restarted.status(table(1, 'a', lake)).state, 'SCHEDULED');
  });

  it('logs at info only the rounds that register a snapshot, not those of an idle table', async () => {
    const { manager, logs, advance } = await setup([table(1, 'a', lake)]);
    const info = (): string[] => logs.filter((l) => l.level >= 30).map((l) => l.msg);
    const idle = (await manager.assignTable())!;
    manager.finished(1, idle.epoch, false);
    advance(10_000);
    const idleAgain = (await manager.assignTable())!;
    manager.finished(1, idleAgain.epoch, false);
    assert.deepEqual(info(), []);
    assert.equal(logs.filter((l) => l.msg === 'tiering round assigned').length, 2); // at debug
    advance(10_000);
    const moving = (await manager.assignTable())!;
    await manager.commitSnapshot(1, moving.epoch, { snapshotId: 3n, bucketOffsets: [{ bucket: 0, endOffset: 10n }] });
    manager.finished(1, moving.epoch, false);
    assert.deepEqual(info(), ['lake snapshot registered']);
  });

  it('stops tracking tables whose lake is switched off or that are dropped', async () => {
    const { manager } = await setup([table(1, 'a', lake), table(2, 'b', lake)]);
    manager.tableChanged(table(1, 'a', {}));
    manager.tableDropped(2);
    assert.equal(await manager.assignTable(), undefined);
    assert.throws(() => manager.status(table(1, 'a', {})), { errorName: 'INVALID_TABLE_EXCEPTION' });
  });
});
