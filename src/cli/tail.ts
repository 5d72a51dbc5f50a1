/**
 * `tributary tail <table>`: follows a table, every bucket of every partition (partitions created
 * later are picked up and read from their start, dropped ones let go: TableFollower), and prints
 * one line per record until Ctrl-C. `--from` is where each bucket starts: `earliest`
 * (on a lake-enabled table the earliest row in lake or log: the LogScanner reads the lake first),
 * `latest` (default), an offset, or a timestamp (ISO-8601). Lines:
 *
 *   json   {"op":"+A","partition":"eu","bucket":0,"offset":12,"timestamp":"…Z","row":{…}}
 *          (no "partition" for tables without partitions; row values as `tributary sql
 *          --format json` shows them: integers beyond ±(2^53 - 1) and decimals as strings,
 *          timestamps as ISO-8601 (TIMESTAMP_LTZ with a Z), bytes in base64)
 *   table  a header line, then `op | bucket | offset | timestamp | <column> | …`, the bucket as
 *          `<partition>/<bucket>` for partitioned tables, NULL for nulls
 *
 * A tail that meets rows written after an ALTER TABLE … ADD COLUMN goes on in the new schema (the
 * LogScanner takes it on): json rows gain the new keys (a note goes to stderr), a table prints
 * `-- schema changed (schema id N): added <column>, …` and a new header line before those rows.
 */
import type { OffsetSpec } from '../client/admin.js';
import { Connection } from '../client/connection.js';
import type { ScanRecord } from '../client/log-scanner.js';
import { TableFollower } from '../client/table-follower.js';
import { TributaryError } from '../common/errors.js';
import { DEFAULT_DATABASE, type Schema, type TableInfo, type TablePath } from '../common/schema.js';
import { Timestamp } from '../common/values.js';

export interface TailFlags {
  from: string;
  bootstrap: string;
  format: 'json' | 'table';
  database?: string;
}

const POLL_TIMEOUT_MS = 500;

/** `--from`: earliest, latest, an offset (digits) or a timestamp. */
export function parseFrom(text: string): bigint | OffsetSpec {
  const t = text.trim();
  if (t === 'earliest' || t === 'latest') return t;
  if (/^\d+$/.test(t)) return BigInt(t);
  try {
    return { timestamp: Timestamp.parse(t).toDate() };
  } catch {
    throw new TributaryError('INVALID_ARGUMENT', `--from must be earliest, latest, an offset or a timestamp (e.g. 2024-05-01T12:00:00Z), got '${text}'`);
  }
}

export async function tail(tableName: string, flags: TailFlags): Promise<void> {
  if (flags.format !== 'json' && flags.format !== 'table') throw new TributaryError('INVALID_ARGUMENT', `--format must be json or table, got '${flags.format}'`);
  const from = parseFrom(flags.from);
  const dot = tableName.indexOf('.');
  const path: TablePath = dot < 0 ? { database: flags.database ?? DEFAULT_DATABASE, table: tableName } : { database: tableName.slice(0, dot), table: tableName.slice(dot + 1) };
  const conn = await Connection.create({ 'bootstrap.servers': flags.bootstrap });
  let follower: TableFollower | undefined;
  let stopped = false;
  const stop = (): void => {
    stopped = true;
    follower?.close();
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  // A reader that went away (e.g. `| head`) ends the tail.
  process.stdout.on('error', (err: NodeJS.ErrnoException) => {
    if (err.code === 'EPIPE') stop();
  });
  try {
    const table = await conn.getTable(path);
    const scanner = table.newScan().createLogScanner();
    follower = new TableFollower(conn, table.info, scanner, from);
    await follower.start();
    let schema = scanner.schema;
    let line = lineFormat(table.info, schema, flags.format);
    if (flags.format === 'table') process.stdout.write(`${line.header}\n`);
    while (!stopped) {
      const records = await follower.poll(POLL_TIMEOUT_MS);
      if (scanner.schema !== schema) {
        const note = schemaChange(schema, scanner.schema, scanner.schemaId);
        schema = scanner.schema;
        line = lineFormat(table.info, schema, flags.format);
        if (flags.format === 'table') process.stdout.write(`-- ${note}\n${line.header}\n`);
        else process.stderr.write(`${note}\n`);
      }
      if (records.length > 0) process.stdout.write(`${records.map(line.of).join('\n')}\n`);
    }
  } finally {
    process.off('SIGINT', stop);
    process.off('SIGTERM', stop);
    await conn.close();
  }
}

/** What a tail says when its rows change schema: `schema changed (schema id 2): added tag, note`. */
export function schemaChange(before: Schema, after: Schema, schemaId: number): string {
  const known = new Set(before.columns.map((c) => c.fieldId));
  const added = after.columns.filter((c) => !known.has(c.fieldId)).map((c) => c.name);
  return `schema changed (schema id ${schemaId}): added ${added.join(', ')}`;
}

/** The header and the line of a record of `schema` (the table's, or a later one of it), in `format` (see the header comment). */
export function lineFormat(info: TableInfo, schema: Schema, format: 'json' | 'table'): { header: string; of: (r: ScanRecord) => string } {
  const columns = schema.columns.map((c) => c.name);
  // TIMESTAMP is a wall-clock time: ISO-8601 without a zone, as SQL results show it.
  const wallClock = new Set(schema.columns.filter((c) => c.type.kind === 'TIMESTAMP').map((c) => c.name));
  const value = (r: ScanRecord, c: string): unknown => {
    const v = r.row[c];
    return v instanceof Timestamp && wallClock.has(c) ? v.toISOString().slice(0, -1) : v;
  };
  const partitioned = info.partitionKeys.length > 0;
  if (format === 'json') {
    return {
      header: '',
      of: (r) =>
        JSON.stringify({
          op: r.changeType,
          ...(r.partition !== undefined ? { partition: r.partition } : {}),
          bucket: r.bucket,
          offset: jsonValue(r.offset),
          timestamp: new Date(r.timestamp).toISOString(),
          row: Object.fromEntries(columns.map((c) => [c, jsonValue(value(r, c))])),
        }),
    };
  }
  return {
    header: ['op', 'bucket', 'offset', 'timestamp', ...columns].join(' | '),
    of: (r) =>
      [r.changeType, partitioned ? `${r.partition}/${r.bucket}` : String(r.bucket), String(r.offset), new Date(r.timestamp).toISOString(), ...columns.map((c) => textValue(value(r, c)))].join(' | '),
  };
}

function jsonValue(v: unknown): unknown {
  if (typeof v === 'bigint') return v >= BigInt(Number.MIN_SAFE_INTEGER) && v <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(v) : v.toString();
  if (typeof v === 'number' && !Number.isFinite(v)) return String(v);
  if (v instanceof Timestamp) return v.toISOString();
  if (v instanceof Uint8Array) return Buffer.from(v.buffer, v.byteOffset, v.byteLength).toString('base64');
  return v ?? null;
}

function textValue(v: unknown): string {
  if (v === null || v === undefined) return 'NULL';
  if (v instanceof Timestamp) return v.toISOString();
  if (v instanceof Uint8Array) return Buffer.from(v.buffer, v.byteOffset, v.byteLength).toString('hex');
  return String(v).replace(/[\n\r\t]/g, (c) => (c === '\n' ? '\\n' : c === '\r' ? '\\r' : '\\t'));
}
