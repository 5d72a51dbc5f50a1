/**
 * Scan options of the tables a query reads, and the two Flink SQL clauses that carry them, which
 * DuckDB does not parse:
 *
 *   hint         = table '/*+' OPTIONS '(' text '=' text {',' text '=' text} ')' '*' '/'
 *   time travel  = table [hint] FOR SYSTEM_TIME AS OF timestamp
 *   timestamp    = [TIMESTAMP | TIMESTAMPTZ | TIMESTAMP_LTZ] text | '(' expression ')'
 *   table        = name ['.' name]     the table's name right before, as in Flink (before an alias)
 *
 * `extractTableHints` cuts both out of a query, replacing them with blanks (line breaks kept), so
 * DuckDB parses the rest and its error positions still point into the query as written.
 *
 * The options (a hint's, else the session's `SET 'key' = 'value'`):
 *
 *   scan.startup.mode       full (default) | earliest | latest | timestamp: where a read of a table
 *                           or of `t$changelog` starts (docs/sql.md says what each reads)
 *   scan.startup.timestamp  for `timestamp`: milliseconds since the epoch, or
 *                           'yyyy-MM-dd HH:mm:ss[.SSS]' in UTC
 *   scan.snapshot-id        `t$lake`, `t$lake$files`: the lake snapshot to read
 */
import { TributaryError } from '../common/errors.js';
import { Lexer, type SourcePosition, type Token } from './sql/lexer.js';

export type StartupMode = 'full' | 'earliest' | 'latest' | 'timestamp';
const STARTUP_MODES: readonly StartupMode[] = ['full', 'earliest', 'latest', 'timestamp'];

/** What a read of a table takes from the options. */
export type ScanTarget = 'table' | 'lake' | 'none';

/** The options by key, with the reads each applies to and a check of its value. */
const OPTIONS: Record<string, { target: ScanTarget; check: (value: string) => void }> = {
  'scan.startup.mode': {
    target: 'table',
    check: (v) => {
      if (!STARTUP_MODES.includes(v.toLowerCase() as StartupMode)) throw invalid(`'scan.startup.mode' must be one of ${STARTUP_MODES.join(', ')}, not '${v}'`);
    },
  },
  'scan.startup.timestamp': { target: 'table', check: (v) => void timestampMsOf(v) },
  'scan.snapshot-id': {
    target: 'lake',
    check: (v) => {
      if (!/^\d+$/.test(v)) throw invalid(`'scan.snapshot-id' must be a lake snapshot id, not '${v}'`);
    },
  },
};

/** A table's hint and time travel clause, as written after its name. */
export interface TableHint {
  database?: string;
  table: string;
  options: Record<string, string>;
  /** The SQL expression of FOR SYSTEM_TIME AS OF. */
  asOf?: string;
  /** `line L, column C` of the clause, for errors. */
  at: string;
}

/** What one read takes from the options. */
export interface ScanOptions {
  mode: StartupMode;
  /** For mode `timestamp`. */
  timestampMs?: number;
  snapshotId?: bigint;
  asOf?: string;
}

function invalid(message: string): TributaryError {
  return new TributaryError('INVALID_CONFIG_EXCEPTION', message);
}

/** Checks a session option as `SET` sets it; unknown keys are refused. */
export function checkScanOption(key: string, value: string): void {
  const option = OPTIONS[key];
  if (!option) throw invalid(`unknown option '${key}': the options are ${Object.keys(OPTIONS).join(', ')}`);
  option.check(value);
}

/** Milliseconds since the epoch of `scan.startup.timestamp`. */
function timestampMsOf(value: string): number {
  if (/^\d+$/.test(value)) return Number(value);
  const m = /^(\d{4})-(\d{2})-(\d{2})[ T](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,3}))?$/.exec(value.trim());
  const ms = m ? Date.UTC(Number(m[1]), Number(m[2]) - 1, Number(m[3]), Number(m[4]), Number(m[5]), Number(m[6]), Number((m[7] ?? '0').padEnd(3, '0'))) : Number.NaN;
  if (Number.isNaN(ms)) throw invalid(`'scan.startup.timestamp' must be milliseconds since the epoch or 'yyyy-MM-dd HH:mm:ss[.SSS]' (UTC), not '${value}'`);
  return ms;
}

/**
 * The options of one read of a `target` kind: the hint's, else the session's. A hint or time
 * travel clause the read has no use for is refused; session options it has no use for are not.
 */
export function scanOptionsOf(session: ReadonlyMap<string, string>, hint: TableHint | undefined, target: ScanTarget, name: string): ScanOptions {
  const chosen = new Map<string, string>();
  for (const [key, value] of session) if (OPTIONS[key]?.target === target) chosen.set(key, value);
  for (const [key, value] of Object.entries(hint?.options ?? {})) {
    const option = OPTIONS[key];
    if (!option) throw invalid(`${hint!.at}: unknown option '${key}': the options are ${Object.keys(OPTIONS).join(', ')}`);
    if (option.target !== target) throw new TributaryError('SQL_UNSUPPORTED', `${hint!.at}: option '${key}' does not apply to '${name}'`);
    option.check(value);
    chosen.set(key, value);
  }
  if (hint?.asOf !== undefined && target !== 'lake') {
    throw new TributaryError('SQL_UNSUPPORTED', `${hint.at}: FOR SYSTEM_TIME AS OF reads a lake snapshot: query '${name}$lake' instead of '${name}'`);
  }
  const mode = (chosen.get('scan.startup.mode')?.toLowerCase() ?? 'full') as StartupMode;
  const out: ScanOptions = { mode };
  if (mode === 'timestamp') {
    const timestamp = chosen.get('scan.startup.timestamp');
    if (timestamp === undefined) throw invalid("'scan.startup.mode' = 'timestamp' needs 'scan.startup.timestamp'");
    out.timestampMs = timestampMsOf(timestamp);
  }
  const snapshotId = chosen.get('scan.snapshot-id');
  if (snapshotId !== undefined) out.snapshotId = BigInt(snapshotId);
  if (hint?.asOf !== undefined) {
    if (snapshotId !== undefined) throw new TributaryError('SQL_UNSUPPORTED', `${hint.at}: give a lake snapshot either by 'scan.snapshot-id' or by FOR SYSTEM_TIME AS OF, not both`);
    out.asOf = hint.asOf;
  }
  return out;
}

/** Cuts the hints and time travel clauses out of a query (see the header). */
export function extractTableHints(sql: string, origin?: SourcePosition): { sql: string; hints: TableHint[] } {
  if (!/\/\*\+|system_time/i.test(sql)) return { sql, hints: [] };
  const lexer = new Lexer(sql, origin);
  const tokens: Token[] = [];
  try {
    for (let t = lexer.next(); t.kind !== 'eof'; t = lexer.next()) tokens.push(t);
  } catch {
    return { sql, hints: [] }; // DuckDB reports what does not lex
  }
  const cuts: [number, number][] = [];
  const hints: TableHint[] = [];
  const error = (offset: number, message: string): TributaryError => new TributaryError('SQL_PARSE_ERROR', `${lexer.where(offset)}: ${message}`);
  /** The hint of the table whose name ends at token `last`, created on first use. */
  const hintOf = (last: number, offset: number, clause: string): TableHint => {
    const table = tokens[last];
    if (!table || (table.kind !== 'word' && table.kind !== 'quoted')) throw error(offset, `${clause} must follow a table name`);
    const qualified = tokens[last - 1]?.kind === 'symbol' && tokens[last - 1].text === '.' && ['word', 'quoted'].includes(tokens[last - 2]?.kind);
    const database = qualified ? tokens[last - 2].text : undefined;
    const found = hints.find((h) => h.table === table.text && h.database === database && h.at === lexer.where(table.start));
    if (found) return found;
    const hint: TableHint = { ...(database !== undefined ? { database } : {}), table: table.text, options: {}, at: lexer.where(table.start) };
    hints.push(hint);
    return hint;
  };
  for (let i = 0; i <= tokens.length; i++) {
    // Comments sit in the gaps between tokens.
    const gapEnd = i < tokens.length ? tokens[i].start : sql.length;
    for (let at = i === 0 ? 0 : tokens[i - 1].end; at < gapEnd; ) {
      if (sql.startsWith('--', at)) {
        const nl = sql.indexOf('\n', at);
        at = nl < 0 ? gapEnd : nl + 1;
      } else if (sql.startsWith('/*', at)) {
        const close = sql.indexOf('*/', at + 2);
        const end = close < 0 ? gapEnd : close + 2;
        if (sql[at + 2] === '+') {
          parseOptions(sql, at, end, lexer, hintOf(i - 1, at, 'a /*+ OPTIONS(...) */ hint').options);
          cuts.push([at, end]);
        }
        at = end;
      } else at++;
    }
    const t = tokens[i];
    if (t?.upper === 'FOR' && tokens[i + 1]?.upper === 'SYSTEM_TIME' && tokens[i + 2]?.upper === 'AS' && tokens[i + 3]?.upper === 'OF') {
      const hint = hintOf(i - 1, t.start, 'FOR SYSTEM_TIME AS OF');
      const { sql: asOf, next } = timestampExpression(sql, tokens, i + 4, (offset, message) => error(offset, message));
      hint.asOf = asOf;
      cuts.push([t.start, tokens[next - 1].end]);
      i = next - 1;
    }
  }
  let out = '';
  let copied = 0;
  for (const [start, end] of cuts.sort((a, b) => a[0] - b[0])) {
    out += sql.slice(copied, start) + sql.slice(start, end).replace(/[^\r\n]/g, ' ');
    copied = end;
  }
  return { sql: out + sql.slice(copied), hints };
}

/** Reads `/*+ OPTIONS('k' = 'v', ...) *\/` at [start, end) into `into`. */
function parseOptions(sql: string, start: number, end: number, outer: Lexer, into: Record<string, string>): void {
  // Blanks around the hint's body keep its tokens at their offsets in the query.
  const lexer = new Lexer(' '.repeat(start + 3) + sql.slice(start + 3, end - 2));
  const error = (t: Token, what: string): TributaryError => {
    const found = t.kind === 'eof' ? 'the end of the hint' : `'${t.text}'`;
    return new TributaryError('SQL_PARSE_ERROR', `${outer.where(t.kind === 'eof' ? end - 2 : t.start)}: expected ${what}, found ${found}`);
  };
  const expect = (test: (t: Token) => boolean, what: string): Token => {
    const t = lexer.next();
    if (!test(t)) throw error(t, what);
    return t;
  };
  const symbol = (c: string) => (t: Token) => t.kind === 'symbol' && t.text === c;
  const name = lexer.next();
  if (name.upper !== 'OPTIONS') {
    throw new TributaryError('SQL_UNSUPPORTED', `${outer.where(name.kind === 'eof' ? start : name.start)}: only OPTIONS('key' = 'value', ...) hints are supported`);
  }
  expect(symbol('('), "'('");
  for (;;) {
    const key = expect((t) => t.kind === 'string', "an option key (options are written 'key' = 'value')");
    expect(symbol('='), "'='");
    const value = expect((t) => t.kind === 'string', "an option value (options are written 'key' = 'value')");
    if (Object.hasOwn(into, key.text)) throw error(key, `an option not given before ('${key.text}' is)`);
    into[key.text] = value.text;
    if (!symbol(',')(lexer.peek())) break;
    lexer.next();
  }
  expect(symbol(')'), "')' or ','");
  expect((t) => t.kind === 'eof', 'the end of the hint');
}

/** The timestamp after FOR SYSTEM_TIME AS OF, starting at token `i`, as SQL; `next` is the token after it. */
function timestampExpression(sql: string, tokens: Token[], i: number, error: (offset: number, message: string) => TributaryError): { sql: string; next: number } {
  const t = tokens[i];
  const quote = (s: string): string => `'${s.replaceAll("'", "''")}'`;
  if (t?.kind === 'string') return { sql: `CAST(${quote(t.text)} AS TIMESTAMPTZ)`, next: i + 1 };
  if (t && ['TIMESTAMP', 'TIMESTAMPTZ', 'TIMESTAMP_LTZ'].includes(t.upper) && tokens[i + 1]?.kind === 'string') {
    return { sql: `CAST(${quote(tokens[i + 1].text)} AS ${t.upper === 'TIMESTAMP' ? 'TIMESTAMP' : 'TIMESTAMPTZ'})`, next: i + 2 };
  }
  if (t?.kind === 'symbol' && t.text === '(') {
    let depth = 0;
    for (let j = i; j < tokens.length; j++) {
      if (tokens[j].kind !== 'symbol') continue;
      if (tokens[j].text === '(') depth++;
      else if (tokens[j].text === ')' && --depth === 0) return { sql: sql.slice(t.start, tokens[j].end), next: j + 1 };
    }
  }
  throw error(t ? t.start : sql.length, "expected a timestamp after FOR SYSTEM_TIME AS OF: TIMESTAMP '...' or '(' expression ')'");
}
