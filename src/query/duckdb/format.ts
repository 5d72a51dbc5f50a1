/**
 * Query results as text for the SQL shell. None of the forms ends with a newline.
 *
 *   table  an aligned ASCII box (numbers right-aligned), then `N rows`; NULL shows as NULL. A
 *          value with line breaks takes as many lines of the box, each line but its last marked
 *          `+` at the cell's right edge (as psql does), so SHOW CREATE TABLE and EXPLAIN read as
 *          written; other control characters show as \r and \t
 *   json   one JSON object per row and line: integers within ±(2^53 - 1) as numbers, larger
 *          ones and decimals as strings, timestamps as ISO-8601 strings, BLOBs in base64,
 *          NaN and ±Infinity as strings
 *   csv    RFC 4180: a header row, CRLF line ends, fields quoted when they hold a comma, quote,
 *          CR or LF (quotes doubled); NULL is an empty field
 *
 * In table and csv form a BLOB shows as DuckDB prints it (printable ASCII as is, backslash and
 * other bytes as \xHH) and a nested value (list, struct, map) as its JSON.
 *
 * formatRows writes a result as its rows come (a RowStream): json and csv rows as they are, the
 * table form in boxes of up to TABLE_PAGE_ROWS rows, each aligned on its own, then the row count.
 */
import type { QueryResult, RowStream } from './result.js';

export type ResultFormat = 'table' | 'json' | 'csv';

const NUMERIC_TYPE = /^(TINYINT|SMALLINT|INTEGER|BIGINT|HUGEINT|UTINYINT|USMALLINT|UINTEGER|UBIGINT|UHUGEINT|FLOAT|DOUBLE|DECIMAL)\b/;

/** A value as JSON allows it (see the header). */
function jsonValue(v: unknown): unknown {
  switch (typeof v) {
    case 'bigint':
      return v >= BigInt(Number.MIN_SAFE_INTEGER) && v <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(v) : v.toString();
    case 'number':
      return Number.isFinite(v) ? v : String(v);
    case 'object':
      if (v === null) return null;
      if (v instanceof Uint8Array) return Buffer.from(v.buffer, v.byteOffset, v.byteLength).toString('base64');
      if (Array.isArray(v)) return v.map(jsonValue);
      return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, jsonValue(x)]));
    default:
      return v;
  }
}

function blobText(bytes: Uint8Array): string {
  let s = '';
  for (const b of bytes) s += b >= 0x20 && b < 0x7f && b !== 0x5c ? String.fromCharCode(b) : `\\x${b.toString(16).toUpperCase().padStart(2, '0')}`;
  return s;
}

/** A non-null value as one line of text, for table and csv. */
function text(v: unknown): string {
  if (typeof v === 'string') return v;
  if (v instanceof Uint8Array) return blobText(v);
  if (typeof v === 'object' && v !== null) return JSON.stringify(jsonValue(v));
  return String(v);
}

function displayWidth(s: string): number {
  let n = 0;
  for (const _ of s) n++;
  return n;
}

/** Rows of one box of the table form, for a result printed as its rows come. */
export const TABLE_PAGE_ROWS = 1000;

const rowCount = (count: number): string => `${count} ${count === 1 ? 'row' : 'rows'}`;

function formatTable(result: QueryResult): string {
  return [...tableBox(result), rowCount(result.rows.length)].join('\n');
}

/** The lines of the aligned box of a result's rows; none without columns. */
function tableBox(result: QueryResult): string[] {
  const count = result.rows.length;
  if (result.columns.length === 0) return [];
  const escape = (s: string): string => s.replace(/\r\n/g, '\n').replace(/[\r\t]/g, (c) => (c === '\r' ? '\\r' : '\\t'));
  const lines = (s: string): string[] => escape(s).split('\n');
  const header = result.columns.map((c) => lines(c.name));
  const cells = result.rows.map((row) => row.map((v) => (v === null || v === undefined ? ['NULL'] : lines(text(v)))));
  const widest = (cell: string[]): number => Math.max(...cell.map(displayWidth));
  const widths = header.map((h, c) => cells.reduce((w, row) => Math.max(w, widest(row[c])), widest(h)));
  const right = result.columns.map((c) => NUMERIC_TYPE.test(c.type));
  const pad = (s: string, c: number, alignRight: boolean): string => {
    const fill = ' '.repeat(widths[c] - displayWidth(s));
    return alignRight ? fill + s : s + fill;
  };
  const border = `+${widths.map((w) => '-'.repeat(w + 2)).join('+')}+`;
  // A row of cells as its lines of text: a cell's lines but its last end in '+'.
  const row = (values: string[][], alignRight: (c: number) => boolean): string[] => {
    const height = Math.max(...values.map((v) => v.length));
    return Array.from({ length: height }, (_, l) => `|${values.map((v, c) => ` ${pad(v[l] ?? '', c, alignRight(c) && v.length === 1)}${l < v.length - 1 ? '+' : ' '}`).join('|')}|`);
  };
  const out = [border, ...row(header, () => false), border];
  for (const values of cells) out.push(...row(values, (c) => right[c]));
  if (count > 0) out.push(border);
  return out;
}

function formatJson(result: QueryResult): string {
  const names = result.columns.map((c) => c.name);
  return result.rows.map((row) => JSON.stringify(Object.fromEntries(row.map((v, c) => [names[c], jsonValue(v)])))).join('\n');
}

function csvField(s: string): string {
  return /[",\r\n]/.test(s) ? `"${s.replaceAll('"', '""')}"` : s;
}

function formatCsv(result: QueryResult): string {
  return [csvHeader(result), ...csvRows(result)].join('\r\n');
}

const csvHeader = (result: Pick<QueryResult, 'columns'>): string => result.columns.map((c) => csvField(c.name)).join(',');

const csvRows = (result: QueryResult): string[] => result.rows.map((row) => row.map((v) => (v === null || v === undefined ? '' : csvField(text(v)))).join(','));

export function formatResult(result: QueryResult, format: ResultFormat): string {
  switch (format) {
    case 'table':
      return formatTable(result);
    case 'json':
      return formatJson(result);
    case 'csv':
      return formatCsv(result);
  }
}

/**
 * A result as its rows come, in pieces to write one after the other: the same text as
 * formatResult gives the whole result, and a newline, except that a table of more than
 * TABLE_PAGE_ROWS rows is several boxes.
 */
export async function* formatRows(stream: RowStream, format: ResultFormat): AsyncGenerator<string> {
  const { columns } = stream;
  let count = 0;
  if (format === 'csv') yield csvHeader(stream);
  let page: unknown[][] = [];
  for await (const rows of stream.chunks) {
    count += rows.length;
    if (format === 'json') yield `${formatJson({ columns, rows })}\n`;
    else if (format === 'csv') yield `\r\n${csvRows({ columns, rows }).join('\r\n')}`;
    else {
      page.push(...rows);
      while (page.length >= TABLE_PAGE_ROWS) {
        yield `${tableBox({ columns, rows: page.slice(0, TABLE_PAGE_ROWS) }).join('\n')}\n`;
        page = page.slice(TABLE_PAGE_ROWS);
      }
    }
  }
  if (format === 'csv') yield '\n';
  if (format === 'table') {
    const box = page.length > 0 || count === 0 ? tableBox({ columns, rows: page }) : [];
    yield `${[...box, rowCount(count)].join('\n')}\n`;
  }
}
