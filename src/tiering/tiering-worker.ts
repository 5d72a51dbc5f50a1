/**
 * A tiering worker: the stateless process side of lake tiering (DESIGN.md §5). It asks the
 * coordinator for a table (LakeTieringHeartbeat), runs one tiering round for it while renewing the
 * table's lease, reports the outcome, and asks again. It keeps nothing on disk: everything a round
 * needs is in the log and in the lake, so a worker may be killed at any moment and any number of
 * workers may run; the coordinator's tiering epochs and the lake commit's check of the offsets it
 * started from keep two workers from tiering the same rows.
 */
import { Connection } from '../client/connection.js';
import { asTributaryError, TributaryError } from '../common/errors.js';
import { tablePathString } from '../common/schema.js';
import { ApiKeys } from '../rpc/api-keys.js';
import type { Logger } from '../common/logger.js';
import { lakeFormat } from '../lake/formats/index.js';
import type { LakeFormat } from '../lake/lake-format.js';
import { runTieringRound } from './tiering-round.js';

export interface TieringWorkerOptions {
  /** How long an idle worker waits before asking for work again. */
  pollIntervalMs?: number;
  /** How often a busy worker renews its lease. */
  heartbeatIntervalMs?: number;
  /** Worker threads converting Arrow to Parquet. */
  writerThreads?: number;
  log: Logger;
}

/** The longest a worker waits between heartbeats that keep failing. */
export const MAX_RETRY_MS = 10_000;

/**
 * How long a worker waits after `failures` heartbeats in a row failed (the coordinator is down or
 * restarting): the poll interval, doubled for each further failure, at most MAX_RETRY_MS, so a
 * worker whose server is gone neither spins nor fills its log.
 */
export function retryDelayMs(failures: number, pollIntervalMs: number): number {
  return Math.min(Math.max(MAX_RETRY_MS, pollIntervalMs), pollIntervalMs * 2 ** Math.max(0, failures - 1));
}

interface Outcome {
  tableId: bigint;
  epoch: bigint;
  kind: 'finished' | 'force-finished' | 'failed';
  error?: string;
}

export class TieringWorker {
  private running = true;
  /** Aborted by `stop`: the current round gives up at its next read instead of retrying on. */
  private readonly stopping = new AbortController();
  private readonly loop: Promise<void>;
  private wake?: () => void;
  /** The lake formats rounds were assigned in (the server's datalake.format), by name. */
  private readonly formats = new Map<string, LakeFormat>();

  private constructor(
    private readonly conn: Connection,
    private readonly options: Required<Omit<TieringWorkerOptions, 'log'>> & { log: Logger },
  ) {
    this.loop = this.run();
  }

  /** Connects to the cluster at `bootstrap` (host:port) and starts asking for tables. */
  static async start(bootstrap: string, options: TieringWorkerOptions): Promise<TieringWorker> {
    const conn = await Connection.create({ 'bootstrap.servers': bootstrap });
    return new TieringWorker(conn, { pollIntervalMs: 1000, heartbeatIntervalMs: 5000, writerThreads: 1, ...options });
  }

  /** Stops, abandoning the current round at its next read (it is not reported: its lease simply runs out). */
  async stop(): Promise<void> {
    this.running = false;
    this.stopping.abort(new TributaryError('CONNECTION_CLOSED', 'the tiering worker is stopping'));
    this.wake?.();
    await this.loop;
    await Promise.all([...this.formats.values()].map((f) => f.close()));
    this.conn.close();
  }

  private formatOf(name: string): LakeFormat {
    let format = this.formats.get(name);
    if (!format) this.formats.set(name, (format = lakeFormat(name, { writerThreads: this.options.writerThreads })));
    return format;
  }

  private async run(): Promise<void> {
    const log = this.options.log;
    let reports: Outcome[] = [];
    let failures = 0;
    while (this.running) {
      let assigned;
      try {
        const resp = await this.heartbeat({ report: reports, requestTable: true });
        if (failures > 0) log.info({ failures }, 'tiering heartbeat answered again');
        failures = 0;
        reports = [];
        assigned = resp.tieringTable;
      } catch (err) {
        if (!this.running) break;
        const retryInMs = retryDelayMs(++failures, this.options.pollIntervalMs);
        log.warn({ err: asTributaryError(err).toString(), failures, retryInMs }, 'tiering heartbeat failed; retrying');
        await this.sleep(retryInMs);
        continue;
      }
      if (!assigned) {
        await this.sleep(this.options.pollIntervalMs);
        continue;
      }
      const path = { database: assigned.tablePath!.databaseName, table: assigned.tablePath!.tableName };
      const lease = { tableId: assigned.tableId, tieringEpoch: assigned.tieringEpoch };
      const fenced = new AbortController();
      const renew = setInterval(() => {
        this.heartbeat({ report: [], renew: [lease] })
          .then((r) => {
            const e = r.errors.find((x) => x.tableId === lease.tableId);
            if (e) fenced.abort(new TributaryError('FENCED_TIERING_EPOCH_EXCEPTION', e.errorMessage));
          })
          .catch((err) => log.warn({ err: asTributaryError(err).toString() }, 'tiering lease renewal failed'));
      }, this.options.heartbeatIntervalMs);
      try {
        const result = await runTieringRound({
          conn: this.conn,
          tableId: Number(assigned.tableId),
          path,
          epoch: assigned.tieringEpoch,
          lake: this.formatOf(assigned.lakeFormat).open(assigned.warehouse),
          signal: AbortSignal.any([fenced.signal, this.stopping.signal]),
          log: log.child({ table: tablePathString(path), epoch: assigned.tieringEpoch.toString() }),
        });
        reports.push({ tableId: lease.tableId, epoch: lease.tieringEpoch, kind: result.forceFinished ? 'force-finished' : 'finished' });
      } catch (err) {
        const e = asTributaryError(err);
        if (!this.running) break; // stopped mid-round: the lease runs out and another worker takes the table
        if (e.errorName === 'FENCED_TIERING_EPOCH_EXCEPTION') log.warn({ table: tablePathString(path), reason: e.message }, 'tiering round fenced; dropped');
        else {
          log.error({ table: tablePathString(path), err: e.toString() }, 'tiering round failed');
          reports.push({ tableId: lease.tableId, epoch: lease.tieringEpoch, kind: 'failed', error: e.toString() });
          await this.sleep(this.options.pollIntervalMs); // do not spin on a table that keeps failing
        }
      } finally {
        clearInterval(renew);
      }
    }
  }

  private async heartbeat(req: { report: Outcome[]; requestTable?: boolean; renew?: { tableId: bigint; tieringEpoch: bigint }[] }) {
    const rpc = await this.conn.coordinator();
    const of = (kind: Outcome['kind']) => req.report.filter((o) => o.kind === kind).map((o) => ({ tableId: o.tableId, tieringEpoch: o.epoch }));
    return rpc.request(ApiKeys.LakeTieringHeartbeat, {
      tieringTables: req.renew ?? [],
      finishedTables: of('finished'),
      forceFinishedTables: of('force-finished'),
      failedTables: req.report.filter((o) => o.kind === 'failed').map((o) => ({ tableId: o.tableId, tieringEpoch: o.epoch, errorMessage: o.error ?? '' })),
      requestTable: req.requestTable ?? false,
    });
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(resolve, ms);
      this.wake = () => {
        clearTimeout(timer);
        resolve();
      };
    });
  }
}
