/**
 * The REST API for admin and rows, mounted under /api/v1. It is a client of this server like any
 * other program: every call goes through one shared client Connection (the in-process tablet
 * server is not a client API), so it gets the same checks, batching and named errors.
 *
 *   GET  /databases                           { "databases": [name …] }
 *   GET  /databases/{db}/tables               { "tables": [name …] }
 *   GET  /databases/{db}/tables/{table}       the table info JSON (common/schema.ts tableInfoToJson); each
 *                                             column's `field_id` is Tributary's column id (from 0, as
 *                                             Fluss's), and of a lake-enabled table also `lake_field_id`,
 *                                             the Iceberg field id the lake table (and the Iceberg REST
 *                                             catalog) gives it: the two differ, as the lake's ids count
 *                                             from 1 and its system columns take ids too
 *   GET  /databases/{db}/tables/{table}/buckets
 *                                             { "buckets": [{ partition, bucket, leader, replicas, isr,
 *                                             leader_epoch, high_watermark, log_end_offset } …] }: the
 *                                             rows of SELECT * FROM t$buckets (Admin.listBuckets);
 *                                             partition null for a non-partitioned table, leader -1
 *                                             while a bucket has none, offsets null when the leader
 *                                             cannot say
 *   GET  /cluster/tablet-servers              { "tablet_servers": [{ server_id, host, port, rack, alive,
 *                                             tags, leader_count, replica_count } …] }: the rows of SHOW
 *                                             TABLET SERVERS (Admin.listTabletServers)
 *   POST /databases/{db}/tables/{table}/rows  rows as JSON or Arrow IPC (encoding.ts): appended to a
 *                                             log table, upserted into a primary-key table; answers
 *                                             { "rows": n } once the server acknowledged them all
 *   POST /sql                                 one statement of Tributary SQL (docs/sql.md), as JSON
 *                                             { "sql": "...", "database"?: "...", "timeout"?: … }
 *                                             or as text/plain with ?database= and ?timeout=; a
 *                                             statement with rows answers the result as JSON or
 *                                             Arrow IPC by Accept (encoding.ts), any other
 *                                             { "message": "..." }
 *
 * A statement runs in a DuckDB session of its own, within the limits of SqlLimits: at most
 * `sql.max-concurrent-queries` at once (SERVER_BUSY past that), each stopped after its timeout
 * (`sql.query.timeout`, or a shorter one the request asks for) and when its client goes away, its
 * result held whole up to `sql.result.max-rows` and `sql.result.max-bytes` (RESULT_TOO_LARGE) and
 * answered only once complete, so that an answer is either the whole result or an error.
 *
 * Errors: { "error": { "name", "code", "message" } } with the status errors.ts gives the name.
 * A write is not atomic: rows are all checked first, but a failure while sending may leave some
 * of them written (as with INSERT).
 */
import type { FastifyInstance, FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import type { Connection } from '../../client/connection.js';
import { parseDuration } from '../../common/config.js';
import { TributaryError } from '../../common/errors.js';
import { DEFAULT_DATABASE, type TableInfo, tableInfoToJson } from '../../common/schema.js';
import type { LakeStorage } from '../../lake/lake-format.js';
import { isLakeEnabled } from '../coordinator/lake-tiering-manager.js';
import { DuckSession } from '../../query/duckdb/session.js';
import { SqlExecutor } from '../../query/executor.js';
import type { SqlLimits } from '../../query/sql-limits.js';
import { recordBatchRows } from '../../record/arrow-payload.js';
import type { Logger } from '../../common/logger.js';
import { logFailure, restError } from './errors.js';
import { ARROW_STREAM, jsonValue, resultArrowStream, resultJson, rowsBatch } from './encoding.js';

const CLIENT_GONE = 'its client went away';

type DatabaseParams = { Params: { database: string } };
type TableParams = { Params: { database: string; table: string } };
type SqlRequest = { Body: unknown; Querystring: { database?: string; timeout?: string } };

/** Runs `write` on a new writer, flushes it, and closes it whatever happens. */
async function withWriter<W extends { flush(): Promise<void>; close(): Promise<void> }>(writer: W, write: (w: W) => Promise<void>): Promise<void> {
  try {
    await write(writer);
    await writer.flush();
  } finally {
    await writer.close().catch(() => undefined);
  }
}

/** The statement of a SQL request, its database, and its timeout in ms: the request's when shorter than `serverTimeoutMs` (0: none). */
function sqlRequest(req: FastifyRequest<SqlRequest>, serverTimeoutMs: number): { sql: string; database: string; timeoutMs: number } {
  const body = req.body;
  let sql: string;
  let database: unknown = req.query.database;
  let timeout: unknown = req.query.timeout;
  if (typeof body === 'string') sql = body;
  else {
    const j = body as { sql?: unknown; database?: unknown; timeout?: unknown } | null | undefined;
    if (j === null || typeof j !== 'object' || typeof j.sql !== 'string') {
      throw new TributaryError('INVALID_ARGUMENT', 'the body must be { "sql": "...", "database"?: "...", "timeout"?: "30s" } (application/json) or the statement (text/plain)');
    }
    if (j.database !== undefined && typeof j.database !== 'string') throw new TributaryError('INVALID_ARGUMENT', '"database" must be a string');
    sql = j.sql;
    database = j.database ?? database;
    timeout = j.timeout ?? timeout;
  }
  let timeoutMs = serverTimeoutMs;
  if (timeout !== undefined) {
    const asked = typeof timeout === 'number' || typeof timeout === 'string' ? parseDuration(String(timeout)) : undefined;
    if (asked === undefined || asked <= 0) throw new TributaryError('INVALID_ARGUMENT', `"timeout" must be a positive duration such as "30s" or "500ms", or milliseconds, got ${JSON.stringify(timeout)}`);
    if (serverTimeoutMs === 0 || asked < serverTimeoutMs) timeoutMs = asked;
  }
  return { sql, database: (database as string | undefined) ?? DEFAULT_DATABASE, timeoutMs };
}

type ColumnJson = { name: string; field_id: number; lake_field_id?: number };

/** The table info JSON, with the lake's field id of each column of a lake-enabled table. */
async function tableInfoJson(info: TableInfo, lake: LakeStorage): Promise<unknown> {
  const json = tableInfoToJson(info) as { schema: { columns: ColumnJson[] } };
  if (!isLakeEnabled(info)) return json;
  const ids = new Map((await lake.loadTable(info.path)).columns.map((c) => [c.name, c.id]));
  for (const c of json.schema.columns) {
    const id = ids.get(c.name);
    // A column added since the lake schema last evolved has no lake field yet.
    if (id !== undefined) c.lake_field_id = id;
  }
  return json;
}

export function restApiRoutes(conn: Connection, lake: LakeStorage, limits: SqlLimits, log: Logger): FastifyPluginAsync {
  const admin = conn.getAdmin();
  /** SQL statements running now. */
  let running = 0;

  return async (app: FastifyInstance) => {
    app.setReplySerializer((payload) => JSON.stringify(payload, jsonValue));
    app.setErrorHandler((err, req, reply) => {
      const { status, body } = restError(err);
      logFailure(log, status, err, req, 'REST API request failed');
      return reply.code(status).send(body);
    });
    app.setNotFoundHandler((req, reply) => {
      const { body } = restError(new TributaryError('INVALID_ARGUMENT', `no endpoint ${req.method} ${req.url}`));
      return reply.code(404).send(body);
    });

    app.get('/databases', async () => ({ databases: await admin.listDatabases() }));

    app.get('/databases/:database/tables', async (req: FastifyRequest<DatabaseParams>) => ({ tables: await admin.listTables(req.params.database) }));

    app.get('/databases/:database/tables/:table', async (req: FastifyRequest<TableParams>) => tableInfoJson(await admin.getTableInfo(req.params), lake));

    app.get('/databases/:database/tables/:table/buckets', async (req: FastifyRequest<TableParams>) => ({
      buckets: (await admin.listBuckets(req.params)).map((b) => ({
        partition: b.partition ?? null,
        bucket: b.bucket,
        leader: b.leader,
        replicas: b.replicas,
        isr: b.isr,
        leader_epoch: b.leaderEpoch,
        high_watermark: b.highWatermark,
        log_end_offset: b.logEndOffset,
      })),
    }));

    app.get('/cluster/tablet-servers', async () => ({
      tablet_servers: (await admin.listTabletServers()).map((s) => ({
        server_id: s.nodeId,
        host: s.host,
        port: s.port,
        rack: s.rack,
        alive: s.alive,
        tags: s.tag,
        leader_count: s.leaderCount,
        replica_count: s.replicaCount,
      })),
    }));

    app.post('/databases/:database/tables/:table/rows', async (req: FastifyRequest<TableParams & { Body: unknown }>) => {
      const table = await conn.getTable(req.params);
      const { schema } = table.info;
      const batch = rowsBatch(schema, req.body);
      if (batch.numRows === 0) return { rows: 0 };
      if (schema.primaryKey) {
        await withWriter(await table.newUpsert().createWriter(), async (w) => {
          for (const row of recordBatchRows(batch, schema)) await w.upsert(row);
        });
      } else {
        await withWriter(await table.newAppend().createWriter(), (w) => w.appendColumns(batch));
      }
      return { rows: batch.numRows };
    });

    app.post('/sql', async (req: FastifyRequest<SqlRequest>, reply: FastifyReply) => {
      const { sql, database, timeoutMs } = sqlRequest(req, limits.timeoutMs);
      if (running >= limits.maxConcurrentQueries) {
        throw new TributaryError('SERVER_BUSY', `${running} SQL statements are running, the most sql.max-concurrent-queries allows: retry later`);
      }
      running++;
      let duck: DuckSession | undefined;
      let executor: SqlExecutor | undefined;
      let clientGone = false;
      // A client that goes away takes its statement with it.
      const gone = (): void => {
        if (reply.raw.writableEnded) return;
        clientGone = true;
        duck?.cancel(CLIENT_GONE);
      };
      reply.raw.once('close', gone);
      try {
        // A session per request: queries load the tables they read into it, and requests run concurrently.
        const session = (duck = await DuckSession.create(limits.session));
        if (clientGone) session.cancel(CLIENT_GONE);
        executor = new SqlExecutor(conn, session, database);
        const out = await session.bounded(timeoutMs, () => executor!.execute(sql));
        if (!out.result) return { message: out.message ?? '' };
        if (req.headers.accept?.includes(ARROW_STREAM)) {
          const stream = resultArrowStream(out.result);
          return reply.type(ARROW_STREAM).send(Buffer.from(stream.buffer, stream.byteOffset, stream.byteLength));
        }
        return reply.type('application/json').send(resultJson(out.result));
      } finally {
        reply.raw.off('close', gone);
        running--;
        duck?.close();
        await executor?.close();
      }
    });
  };
}
