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
 *   POST /databases/{db}/tables/{table}/rows  rows as JSON or Arrow IPC (encoding.ts): appended to a
 *                                             log table, upserted into a primary-key table; answers
 *                                             { "rows": n } once the server acknowledged them all
 *   POST /sql                                 one statement of Tributary SQL (docs/sql.md), as JSON
 *                                             { "sql": "...", "database"?: "..." } or as text/plain
 *                                             with ?database=; a statement with rows answers the
 *                                             result as JSON or Arrow IPC by Accept (encoding.ts),
 *                                             any other { "message": "..." }
 *
 * Errors: { "error": { "name", "code", "message" } } with the status errors.ts gives the name.
 * A write is not atomic: rows are all checked first, but a failure while sending may leave some
 * of them written (as with INSERT).
 */
import type { FastifyInstance, FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import type { Connection } from '../../client/connection.js';
import { TributaryError } from '../../common/errors.js';
import { DEFAULT_DATABASE, type TableInfo, tableInfoToJson } from '../../common/schema.js';
import type { FileSystemCatalog } from '../../lake/iceberg/catalog.js';
import { currentSchema } from '../../lake/iceberg/table-metadata.js';
import { isLakeEnabled } from '../coordinator/lake-tiering-manager.js';
import { DuckSession } from '../../query/duckdb/session.js';
import { SqlExecutor } from '../../query/executor.js';
import { recordBatchRows } from '../../record/arrow-payload.js';
import type { Logger } from '../logger.js';
import { restError } from './errors.js';
import { ARROW_STREAM, jsonValue, resultArrowStream, resultJson, rowsBatch } from './encoding.js';

type DatabaseParams = { Params: { database: string } };
type TableParams = { Params: { database: string; table: string } };
type SqlRequest = { Body: unknown; Querystring: { database?: string } };

/** Runs `write` on a new writer, flushes it, and closes it whatever happens. */
async function withWriter<W extends { flush(): Promise<void>; close(): Promise<void> }>(writer: W, write: (w: W) => Promise<void>): Promise<void> {
  try {
    await write(writer);
    await writer.flush();
  } finally {
    await writer.close().catch(() => undefined);
  }
}

function sqlRequest(req: FastifyRequest<SqlRequest>): { sql: string; database: string } {
  const body = req.body;
  if (typeof body === 'string') return { sql: body, database: req.query.database ?? DEFAULT_DATABASE };
  const j = body as { sql?: unknown; database?: unknown } | null | undefined;
  if (j === null || typeof j !== 'object' || typeof j.sql !== 'string') {
    throw new TributaryError('INVALID_ARGUMENT', 'the body must be { "sql": "...", "database"?: "..." } (application/json) or the statement (text/plain)');
  }
  if (j.database !== undefined && typeof j.database !== 'string') throw new TributaryError('INVALID_ARGUMENT', '"database" must be a string');
  return { sql: j.sql, database: (j.database as string | undefined) ?? req.query.database ?? DEFAULT_DATABASE };
}

type ColumnJson = { name: string; field_id: number; lake_field_id?: number };

/** The table info JSON, with the lake's field id of each column of a lake-enabled table. */
async function tableInfoJson(info: TableInfo, catalog: FileSystemCatalog): Promise<unknown> {
  const json = tableInfoToJson(info) as { schema: { columns: ColumnJson[] } };
  if (!isLakeEnabled(info)) return json;
  const lake = new Map(currentSchema((await catalog.loadTable(info.path.database, info.path.table)).metadata).fields.map((f) => [f.name, f.id]));
  for (const c of json.schema.columns) {
    const id = lake.get(c.name);
    // A column added since the lake schema last evolved has no lake field yet.
    if (id !== undefined) c.lake_field_id = id;
  }
  return json;
}

export function restApiRoutes(conn: Connection, catalog: FileSystemCatalog, log: Logger): FastifyPluginAsync {
  const admin = conn.getAdmin();

  return async (app: FastifyInstance) => {
    app.setReplySerializer((payload) => JSON.stringify(payload, jsonValue));
    app.setErrorHandler((err, req, reply) => {
      const { status, body } = restError(err);
      if (status >= 500) log.error({ err, method: req.method, url: req.url }, 'REST API request failed');
      return reply.code(status).send(body);
    });
    app.setNotFoundHandler((req, reply) => {
      const { body } = restError(new TributaryError('INVALID_ARGUMENT', `no endpoint ${req.method} ${req.url}`));
      return reply.code(404).send(body);
    });

    app.get('/databases', async () => ({ databases: await admin.listDatabases() }));

    app.get('/databases/:database/tables', async (req: FastifyRequest<DatabaseParams>) => ({ tables: await admin.listTables(req.params.database) }));

    app.get('/databases/:database/tables/:table', async (req: FastifyRequest<TableParams>) => tableInfoJson(await admin.getTableInfo(req.params), catalog));

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
      const { sql, database } = sqlRequest(req);
      // A session per request: queries load the tables they read into it, and requests run concurrently.
      const duck = await DuckSession.create();
      try {
        const out = await new SqlExecutor(conn, duck, database).execute(sql);
        if (!out.result) return { message: out.message ?? '' };
        if (req.headers.accept?.includes(ARROW_STREAM)) {
          const stream = resultArrowStream(out.result);
          return reply.type(ARROW_STREAM).send(Buffer.from(stream.buffer, stream.byteOffset, stream.byteLength));
        }
        return reply.type('application/json').send(resultJson(out.result));
      } finally {
        duck.close();
      }
    });
  };
}
