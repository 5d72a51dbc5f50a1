/**
 * One tiering round of a chosen table, run in the test's process as a worker runs it (and reported
 * finished, as a worker does): the test decides when the lake moves. Other tables the coordinator
 * hands out meanwhile are handed back (reported failed, which queues them again).
 */
import pino from 'pino';
import type { Connection } from '../../src/client/index.js';
import type { TablePath } from '../../src/common/schema.js';
import type { LakeFormat } from '../../src/lake/lake-format.js';
import { type RoundResult, runTieringRound } from '../../src/tiering/tiering-round.js';
import { ApiKeys } from '../../src/rpc/api-keys.js';

const silent = pino({ level: 'silent' });

export async function tierOnce(conn: Connection, path: TablePath, format: LakeFormat, timeoutMs = 60_000): Promise<RoundResult> {
  const { tableId } = await conn.getAdmin().getTableInfo(path);
  const rpc = await conn.coordinator();
  const deadline = Date.now() + timeoutMs;
  let handBack: { tableId: bigint; tieringEpoch: bigint } | undefined;
  while (Date.now() < deadline) {
    const resp = await rpc.request(ApiKeys.LakeTieringHeartbeat, { requestTable: true, failedTables: handBack ? [{ ...handBack, errorMessage: 'handed back' }] : [] });
    handBack = undefined;
    const a = resp.tieringTable;
    if (!a) {
      await new Promise((r) => setTimeout(r, 100));
      continue;
    }
    if (a.tableId !== BigInt(tableId)) {
      handBack = { tableId: a.tableId, tieringEpoch: a.tieringEpoch };
      continue;
    }
    // The worker learns the format with the table, as tiering-worker.ts opens it.
    if (a.lakeFormat !== format.name) throw new Error(`table handed out in lake format '${a.lakeFormat}', the test tiers in '${format.name}'`);
    const result = await runTieringRound({ conn, tableId, path, epoch: a.tieringEpoch, lake: format.open(a.warehouse), signal: new AbortController().signal, log: silent });
    // The round is over: the table waits for its freshness again.
    const done = [{ tableId: a.tableId, tieringEpoch: a.tieringEpoch }];
    await rpc.request(ApiKeys.LakeTieringHeartbeat, { requestTable: false, ...(result.forceFinished ? { forceFinishedTables: done } : { finishedTables: done }) });
    return result;
  }
  throw new Error(`table ${path.database}.${path.table} was not handed out for tiering within ${timeoutMs} ms`);
}

/** Waits until the lake holds every record of the table, as the tiering its server runs puts them there. */
export async function waitTiered(conn: Connection, path: TablePath, timeoutMs = 60_000): Promise<void> {
  const admin = conn.getAdmin();
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const status = await admin.getLakeTieringStatus(path);
    if (status.snapshotId !== undefined && status.buckets.every((b) => b.recordsBehind === 0n)) return;
    if (Date.now() > deadline) throw new Error(`the lake did not catch up: ${JSON.stringify(status, (_, v) => (typeof v === 'bigint' ? String(v) : v))}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}
