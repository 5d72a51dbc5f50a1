import assert from 'node:assert/strict';
import { test } from 'node:test';
import { TributaryError } from '../common/errors.js';
import { checkScanOption, extractTableHints, scanOptionsOf, type TableHint } from './scan-options.js';

const rejects = (f: () => unknown, name: string, message: RegExp): void => {
  assert.throws(f, (e: unknown) => {
    assert.ok(e instanceof TributaryError, String(e));
    assert.equal(e.errorName, name, e.message);
    assert.match(e.message, message);
    return true;
  });
};

test('a query without hints is left as it is', () => {
  const sql = "SELECT '/*+ OPTIONS' FROM t -- FOR SYSTEM_TIME AS OF\nWHERE a = 1";
  assert.deepEqual(extractTableHints(sql), { sql, hints: [] });
});

test('hints and time travel clauses are blanked out, line breaks and positions kept', () => {
  const sql = "SELECT * FROM db.t /*+ OPTIONS('scan.startup.mode'='earliest',\n 'scan.startup.timestamp' = '5') */ AS x\nJOIN \"u$lake\" FOR SYSTEM_TIME AS OF TIMESTAMP '2024-01-01 10:00:00' ON x.a = 1";
  const { sql: out, hints } = extractTableHints(sql);
  assert.equal(out.length, sql.length);
  assert.equal(out.split('\n').length, 3);
  assert.equal(out.replace(/\s+/g, ' '), 'SELECT * FROM db.t AS x JOIN "u$lake" ON x.a = 1');
  assert.deepEqual(hints, [
    { database: 'db', table: 't', options: { 'scan.startup.mode': 'earliest', 'scan.startup.timestamp': '5' }, at: 'line 1, column 18' },
    { table: 'u$lake', options: {}, asOf: "CAST('2024-01-01 10:00:00' AS TIMESTAMP)", at: 'line 3, column 6' },
  ]);
});

test('a hint and a time travel clause of one table make one hint; other timestamp forms', () => {
  const { sql, hints } = extractTableHints("select 1 from t$lake /*+ options('scan.snapshot-id'='7') */ for system_time as of (now() - INTERVAL 1 HOUR)");
  assert.equal(sql.trimEnd(), 'select 1 from t$lake');
  assert.deepEqual(hints, [{ table: 't$lake', options: { 'scan.snapshot-id': '7' }, asOf: '(now() - INTERVAL 1 HOUR)', at: 'line 1, column 15' }]);
  assert.equal(extractTableHints("FROM t FOR SYSTEM_TIME AS OF '2024-01-01 00:00:00+02'").hints[0].asOf, "CAST('2024-01-01 00:00:00+02' AS TIMESTAMPTZ)");
  assert.equal(extractTableHints("FROM t FOR SYSTEM_TIME AS OF TIMESTAMP_LTZ 'x'").hints[0].asOf, "CAST('x' AS TIMESTAMPTZ)");
});

test('malformed hints are parse errors with their position', () => {
  rejects(() => extractTableHints("SELECT * FROM t /*+ OPTIONS('a' 'b') */"), 'SQL_PARSE_ERROR', /^line 1, column 33: expected '=', found 'b'/);
  rejects(() => extractTableHints("SELECT * FROM t /*+ OPTIONS('a'='b'\n */"), 'SQL_PARSE_ERROR', /^line 2, column 2: expected '\)' or ',', found the end of the hint/);
  rejects(() => extractTableHints("SELECT * FROM t /*+ OPTIONS('a'='b', 'a'='c') */"), 'SQL_PARSE_ERROR', /column 38: .*'a'/);
  rejects(() => extractTableHints('SELECT /*+ BROADCAST(t) */ * FROM t'), 'SQL_UNSUPPORTED', /line 1, column 12: only OPTIONS/);
  rejects(() => extractTableHints("SELECT * FROM (SELECT 1) /*+ OPTIONS('a'='b') */"), 'SQL_PARSE_ERROR', /must follow a table name/);
  rejects(() => extractTableHints('SELECT * FROM t FOR SYSTEM_TIME AS OF 5'), 'SQL_PARSE_ERROR', /line 1, column 39: expected a timestamp/);
  rejects(() => extractTableHints("FROM t FOR SYSTEM_TIME AS OF '1' FOR SYSTEM_TIME AS OF '2'"), 'SQL_PARSE_ERROR', /column 34: FOR SYSTEM_TIME AS OF must follow a table name/);
});

const hint = (options: Record<string, string>, asOf?: string): TableHint => ({ table: 't', options, ...(asOf ? { asOf } : {}), at: 'line 1, column 15' });

test('options: a hint wins over the session, and each read takes only its own', () => {
  const session = new Map([
    ['scan.startup.mode', 'EARLIEST'],
    ['scan.snapshot-id', '42'],
  ]);
  assert.deepEqual(scanOptionsOf(session, undefined, 'table', 'db.t'), { mode: 'earliest' });
  assert.deepEqual(scanOptionsOf(session, undefined, 'lake', 'db.t$lake'), { mode: 'full', snapshotId: 42n });
  assert.deepEqual(scanOptionsOf(session, undefined, 'none', 'db.t$lake$snapshots'), { mode: 'full' });
  assert.deepEqual(scanOptionsOf(session, hint({ 'scan.startup.mode': 'latest' }), 'table', 'db.t'), { mode: 'latest' });
  assert.deepEqual(scanOptionsOf(new Map(), hint({ 'scan.startup.mode': 'timestamp', 'scan.startup.timestamp': '2024-01-02 03:04:05.6' }), 'table', 'db.t'), {
    mode: 'timestamp',
    timestampMs: Date.UTC(2024, 0, 2, 3, 4, 5, 600),
  });
  assert.deepEqual(scanOptionsOf(new Map(), hint({}, 'X'), 'lake', 'db.t$lake'), { mode: 'full', asOf: 'X' });
});

test('options that do not apply, unknown keys and bad values are refused', () => {
  rejects(() => scanOptionsOf(new Map(), hint({ 'scan.snapshot-id': '1' }), 'table', 'db.t'), 'SQL_UNSUPPORTED', /line 1, column 15: option 'scan.snapshot-id' does not apply to 'db.t'/);
  rejects(() => scanOptionsOf(new Map(), hint({ 'scan.startup.mode': 'full' }), 'none', 'db.t$lake$snapshots'), 'SQL_UNSUPPORTED', /does not apply/);
  rejects(() => scanOptionsOf(new Map(), hint({}, 'X'), 'table', 'db.t'), 'SQL_UNSUPPORTED', /query 'db.t\$lake'/);
  rejects(() => scanOptionsOf(new Map(), hint({ 'scan.snapshot-id': '1' }, 'X'), 'lake', 'db.t$lake'), 'SQL_UNSUPPORTED', /not both/);
  rejects(() => scanOptionsOf(new Map(), hint({ 'scan.mode': 'x' }), 'table', 'db.t'), 'INVALID_CONFIG_EXCEPTION', /unknown option 'scan.mode'/);
  rejects(() => scanOptionsOf(new Map([['scan.startup.mode', 'timestamp']]), undefined, 'table', 'db.t'), 'INVALID_CONFIG_EXCEPTION', /needs 'scan.startup.timestamp'/);
  rejects(() => checkScanOption('scan.startup.mode', 'group-offsets'), 'INVALID_CONFIG_EXCEPTION', /one of full, earliest, latest, timestamp/);
  rejects(() => checkScanOption('scan.startup.timestamp', 'yesterday'), 'INVALID_CONFIG_EXCEPTION', /milliseconds since the epoch/);
  rejects(() => checkScanOption('scan.snapshot-id', '-1'), 'INVALID_CONFIG_EXCEPTION', /snapshot id/);
  rejects(() => checkScanOption('table.log.ttl', '1d'), 'INVALID_CONFIG_EXCEPTION', /unknown option/);
  checkScanOption('scan.startup.timestamp', '1700000000000');
});
