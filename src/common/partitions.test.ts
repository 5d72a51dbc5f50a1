import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { TributaryError, type ErrorName } from './errors.js';
import {
  PartitionGetter,
  autoPartitionPlan,
  autoPartitionStrategy,
  autoPartitionValue,
  parsePartitionSpec,
  partitionName,
  partitionSpecFromName,
  partitionValueOf,
  type AutoPartitionTimeUnit,
} from './partitions.js';
import { buildSchema } from './schema.js';
import { parseDataType } from './types.js';

const fails = (name: ErrorName, pattern?: RegExp) => (e: unknown): boolean =>
  e instanceof TributaryError && e.errorName === name && (pattern === undefined || pattern.test(e.message));
const at = (iso: string): number => Date.parse(iso);

describe('partitionName', () => {
  it('joins valid values with $', () => {
    assert.equal(partitionName(['20240101']), '20240101');
    assert.equal(partitionName(['2024-01-01', 'eu_west-1', 'A9']), '2024-01-01$eu_west-1$A9');
    assert.equal(partitionName(['x', '__y']), 'x$__y'); // only the name's start is reserved
  });

  it('rejects values outside [A-Za-z0-9_-], empty values and no values', () => {
    for (const bad of ['a.b', 'a b', 'é', 'a$b', 'a/b', '']) {
      assert.throws(() => partitionName(['ok', bad]), fails('PARTITION_SPEC_INVALID_EXCEPTION'), bad);
    }
    assert.throws(() => partitionName([]), fails('PARTITION_SPEC_INVALID_EXCEPTION'));
  });

  it('allows at most 200 characters in all', () => {
    assert.equal(partitionName(['a'.repeat(200)]).length, 200);
    assert.throws(() => partitionName(['a'.repeat(201)]), fails('PARTITION_SPEC_INVALID_EXCEPTION', /longer than 200/));
    assert.equal(partitionName(['a'.repeat(100), 'b'.repeat(99)]).length, 200);
    assert.throws(() => partitionName(['a'.repeat(100), 'b'.repeat(100)]), fails('PARTITION_SPEC_INVALID_EXCEPTION', /longer than 200/));
  });

  it("rejects names starting with '__'", () => {
    assert.throws(() => partitionName(['__tmp']), fails('PARTITION_SPEC_INVALID_EXCEPTION', /'__'/));
    assert.equal(partitionName(['_tmp']), '_tmp');
  });
});

describe('parsePartitionSpec and partitionSpecFromName', () => {
  const keys = ['dt', 'region'];

  it('orders values by partition key and names the partition', () => {
    assert.deepEqual(parsePartitionSpec(keys, { region: 'eu', dt: '20240101' }), { values: ['20240101', 'eu'], name: '20240101$eu' });
    assert.deepEqual(partitionSpecFromName(keys, '20240101$eu'), { dt: '20240101', region: 'eu' });
  });

  it('rejects missing keys, extra keys, bad values and unpartitioned tables', () => {
    assert.throws(() => parsePartitionSpec(keys, { dt: '20240101' }), fails('PARTITION_SPEC_INVALID_EXCEPTION', /'region'/));
    assert.throws(() => parsePartitionSpec(keys, { dt: '1', region: 'eu', extra: 'x' }), fails('PARTITION_SPEC_INVALID_EXCEPTION', /'extra'/));
    assert.throws(() => parsePartitionSpec(keys, { dt: '2024.01.01', region: 'eu' }), fails('PARTITION_SPEC_INVALID_EXCEPTION'));
    assert.throws(() => parsePartitionSpec([], { dt: '1' }), fails('TABLE_NOT_PARTITIONED_EXCEPTION'));
    assert.throws(() => partitionSpecFromName(keys, '20240101'), fails('PARTITION_SPEC_INVALID_EXCEPTION'));
    assert.throws(() => partitionSpecFromName(keys, '20240101$e u'), fails('PARTITION_SPEC_INVALID_EXCEPTION'));
  });
});

describe('partitionValueOf', () => {
  const v = (type: string, value: unknown): string => partitionValueOf(parseDataType(type), value);

  it('writes Fluss\'s string form of each partition-key type', () => {
    assert.equal(v('BOOLEAN', true), 'true');
    assert.equal(v('BOOLEAN', false), 'false');
    assert.equal(v('TINYINT', -5), '-5');
    assert.equal(v('INT', 2024), '2024');
    assert.equal(v('BIGINT', 9007199254740993n), '9007199254740993');
    assert.equal(v('STRING', 'eu-west_1'), 'eu-west_1');
    assert.equal(v('CHAR(2)', 'eu'), 'eu');
    assert.equal(v('BYTES', Uint8Array.from([0x00, 0xab, 0x0f])), '00ab0f');
    assert.equal(v('BINARY(1)', Uint8Array.from([0xff])), 'ff');
    assert.equal(v('DATE', 19655), '2023-10-25');
    assert.equal(v('DATE', -1), '1969-12-31');
  });

  it('writes TIME as HH-mm-ss_SSS, with six digits only when there are microseconds', () => {
    assert.equal(v('TIME(3)', 34_200_000_000), '09-30-00_000');
    assert.equal(v('TIME(3)', 34_200_123_000), '09-30-00_123');
    assert.equal(v('TIME(6)', 34_200_000_456), '09-30-00_000456');
    assert.equal(v('TIME(0)', 86_399_000_000), '23-59-59_000');
  });

  it('writes timestamps as yyyy-MM-dd-HH-mm-ss_ and the fraction without trailing zeros', () => {
    // The same strings as Fluss's formatter gives for these instants.
    assert.equal(v('TIMESTAMP(6)', 1698235273182000n), '2023-10-25-12-01-13_182');
    assert.equal(v('TIMESTAMP(6)', 1698235273000000n), '2023-10-25-12-01-13_');
    assert.equal(v('TIMESTAMP(6)', 1698235273100000n), '2023-10-25-12-01-13_1');
    assert.equal(v('TIMESTAMP(6)', 1698235273182456n), '2023-10-25-12-01-13_182456');
    assert.equal(v('TIMESTAMP(3)', -1000n), '1969-12-31-23-59-59_999');
    assert.equal(v('TIMESTAMP(6)', 0n), '1970-01-01-00-00-00_');
    assert.equal(partitionName([v('TIMESTAMP(6)', 1698235273182456n)]), '2023-10-25-12-01-13_182456');
  });

  it('rejects null values and types without a string form', () => {
    assert.throws(() => v('STRING', null), fails('PARTITION_SPEC_INVALID_EXCEPTION', /null/));
    assert.throws(() => v('DOUBLE', 1.5), fails('INVALID_PARTITION_KEY'));
  });
});

describe('PartitionGetter', () => {
  const schema = buildSchema([
    { name: 'id', type: 'INT' },
    { name: 'dt', type: 'STRING' },
    { name: 'region', type: 'STRING' },
    { name: 'day', type: 'DATE' },
    { name: 'score', type: 'DOUBLE' },
  ]);

  it('names the partition of rows, in partition-key order', () => {
    const g = new PartitionGetter(schema, ['region', 'dt']);
    assert.equal(g.nameOf([1, '20240101', 'eu', 0, 0]), 'eu$20240101');
    assert.equal(g.nameOf([2, '20240101', 'eu', 0, 0]), 'eu$20240101');
    assert.equal(g.nameOf([3, '20240102', 'eu', 0, 0]), 'eu$20240102');
    assert.equal(new PartitionGetter(schema, ['day']).nameOf([1, 'x', 'y', 19655, 0]), '2023-10-25');
  });

  it('reads byte values afresh even when the same array is passed again', () => {
    const bytesSchema = buildSchema([{ name: 'k', type: 'BYTES' }]);
    const g = new PartitionGetter(bytesSchema, ['k']);
    const reused = Uint8Array.from([0x01]);
    assert.equal(g.nameOf([reused]), '01');
    reused[0] = 0x02;
    assert.equal(g.nameOf([reused]), '02');
  });

  it('never answers from the last row after rejecting a row', () => {
    const g = new PartitionGetter(schema, ['dt', 'region']);
    assert.equal(g.nameOf([1, 'd1', 'eu', 0, 0]), 'd1$eu');
    assert.throws(() => g.nameOf([2, 'd2', null, 0, 0]), fails('PARTITION_SPEC_INVALID_EXCEPTION'));
    assert.equal(g.nameOf([3, 'd2', 'eu', 0, 0]), 'd2$eu');
    assert.throws(() => g.nameOf([4, 'd 3', 'eu', 0, 0]), fails('PARTITION_SPEC_INVALID_EXCEPTION'));
    assert.throws(() => g.nameOf([4, 'd 3', 'eu', 0, 0]), fails('PARTITION_SPEC_INVALID_EXCEPTION'));
  });

  it('refuses unknown, unsupported or missing partition keys', () => {
    assert.throws(() => new PartitionGetter(schema, ['nope']), fails('INVALID_PARTITION_KEY'));
    assert.throws(() => new PartitionGetter(schema, ['score']), fails('INVALID_PARTITION_KEY', /DOUBLE/));
    assert.throws(() => new PartitionGetter(schema, []), fails('TABLE_NOT_PARTITIONED_EXCEPTION'));
  });
});

describe('autoPartitionValue', () => {
  const units: AutoPartitionTimeUnit[] = ['HOUR', 'DAY', 'MONTH', 'QUARTER', 'YEAR'];
  const all = (epochMs: number, zone: string): string[] => units.map((u) => autoPartitionValue(u, epochMs, zone));

  it('formats each unit in UTC and in other zones across a year end', () => {
    const newYearsEve = at('2024-12-31T23:30:00Z');
    assert.deepEqual(all(newYearsEve, 'UTC'), ['2024123123', '20241231', '202412', '20244', '2024']);
    // 07:30 on 1 January 2025 in Shanghai (UTC+8).
    assert.deepEqual(all(newYearsEve, 'Asia/Shanghai'), ['2025010107', '20250101', '202501', '20251', '2025']);
    // 18:30 on 31 December in New York (UTC-5).
    assert.deepEqual(all(newYearsEve, 'America/New_York'), ['2024123118', '20241231', '202412', '20244', '2024']);
    assert.deepEqual(all(at('2024-07-01T00:00:00Z'), 'UTC'), ['2024070100', '20240701', '202407', '20243', '2024']);
  });

  it('follows the wall clock of a zone with daylight saving time', () => {
    const ny = (iso: string): string => autoPartitionValue('HOUR', at(iso), 'America/New_York');
    // Spring forward on 2024-03-10: 01:59 EST is followed by 03:00 EDT.
    assert.equal(ny('2024-03-10T06:30:00Z'), '2024031001');
    assert.equal(ny('2024-03-10T07:30:00Z'), '2024031003');
    // Fall back on 2024-11-03: 01:00-01:59 happens twice.
    assert.equal(ny('2024-11-03T05:30:00Z'), '2024110301');
    assert.equal(ny('2024-11-03T06:30:00Z'), '2024110301');
    assert.equal(ny('2024-11-03T07:30:00Z'), '2024110302');
  });

  it('rejects unknown time zones', () => {
    assert.throws(() => autoPartitionValue('DAY', 0, 'Mars/Olympus'), fails('INVALID_CONFIG_EXCEPTION', /Mars\/Olympus/));
  });
});

describe('autoPartitionPlan', () => {
  const plan = (timeUnit: AutoPartitionTimeUnit, timeZone: string, iso: string, numPrecreate: number, numRetention: number, existing: string[] = []) =>
    autoPartitionPlan({ timeUnit, timeZone, numPrecreate, numRetention }, at(iso), existing);

  it('creates the current and following periods that do not exist yet', () => {
    assert.deepEqual(plan('DAY', 'UTC', '2024-12-31T10:00:00Z', 2, 7), { toCreate: ['20241231', '20250101'], toDrop: [] });
    assert.deepEqual(plan('DAY', 'UTC', '2024-12-31T10:00:00Z', 2, 7, ['20241231']).toCreate, ['20250101']);
    assert.deepEqual(plan('DAY', 'UTC', '2024-02-28T10:00:00Z', 3, 0).toCreate, ['20240228', '20240229', '20240301']);
    assert.deepEqual(plan('DAY', 'UTC', '2024-02-28T10:00:00Z', 0, 0).toCreate, []);
  });

  it('drops only existing values of the unit older than the retained periods', () => {
    const existing = ['20241231', '20241220', '20241224', '20241223', 'manual', '2024122', '20240230', '202412', '20241301'];
    // Retention 7 on 31 December keeps 24 December onwards; 20240230 and 20241301 are no real days.
    assert.deepEqual(plan('DAY', 'UTC', '2024-12-31T10:00:00Z', 2, 7, existing), { toCreate: ['20250101'], toDrop: ['20241220', '20241223'] });
    assert.deepEqual(plan('DAY', 'UTC', '2024-12-31T10:00:00Z', 2, 0, existing).toDrop, []);
  });

  it('steps calendar days, months, quarters and years across a year end', () => {
    // 00:30 on 1 January 2025 in Shanghai.
    assert.deepEqual(plan('DAY', 'Asia/Shanghai', '2024-12-31T16:30:00Z', 2, 1, ['20241230', '20241231']), { toCreate: ['20250101', '20250102'], toDrop: ['20241230'] });
    assert.deepEqual(plan('MONTH', 'UTC', '2024-11-15T00:00:00Z', 3, 12, ['202310', '202311', '202313', '202312']), { toCreate: ['202411', '202412', '202501'], toDrop: ['202310'] });
    assert.deepEqual(plan('QUARTER', 'UTC', '2024-12-31T20:00:00Z', 2, 0).toCreate, ['20244', '20251']);
    assert.deepEqual(plan('QUARTER', 'Asia/Shanghai', '2024-12-31T20:00:00Z', 2, 4, ['20234', '20241', '20235']), { toCreate: ['20251', '20252'], toDrop: ['20234'] });
    assert.deepEqual(plan('YEAR', 'UTC', '2024-06-01T00:00:00Z', 3, 2, ['2020', '2021', '2022', '20']), { toCreate: ['2024', '2025', '2026'], toDrop: ['2020', '2021'] });
    // Still 22:00 on 31 December in New York, so December is current and November is retained.
    assert.deepEqual(plan('MONTH', 'America/New_York', '2025-01-01T03:00:00Z', 2, 1, ['202410', '202411']), { toCreate: ['202412', '202501'], toDrop: ['202410'] });
  });

  it('steps absolute hours through daylight saving changes', () => {
    // 00:30 EDT on 2024-11-03: the next hours are 01:30 EDT, 01:30 EST (the same value) and 02:30 EST.
    assert.deepEqual(plan('HOUR', 'America/New_York', '2024-11-03T04:30:00Z', 4, 0).toCreate, ['2024110300', '2024110301', '2024110302']);
    // 01:30 EST on 2024-03-10: 02:xx does not exist that day.
    assert.deepEqual(plan('HOUR', 'America/New_York', '2024-03-10T06:30:00Z', 3, 0).toCreate, ['2024031001', '2024031003', '2024031004']);
    // At 03:30 EDT, two hours back is 00:30 EST: hour 00 is kept, hour 23 of the day before goes.
    assert.deepEqual(plan('HOUR', 'America/New_York', '2024-03-10T07:30:00Z', 1, 2, ['2024030923', '2024031000', '2024031001', '2024031003', '2024031024']), {
      toCreate: [],
      toDrop: ['2024030923'],
    });
    // Days in the same zone step by the calendar, whatever the day's length.
    assert.deepEqual(plan('DAY', 'America/New_York', '2024-03-10T12:00:00Z', 2, 1, ['20240308', '20240309']), { toCreate: ['20240310', '20240311'], toDrop: ['20240308'] });
  });
});

describe('autoPartitionStrategy', () => {
  const schema = buildSchema([
    { name: 'id', type: 'INT' },
    { name: 'dt', type: 'STRING' },
    { name: 'region', type: 'STRING' },
    { name: 'n', type: 'INT' },
  ]);
  const strategy = (partitionKeys: string[], properties: Record<string, string>) => autoPartitionStrategy({ schema, partitionKeys, properties }, 'UTC');

  it('is off unless enabled', () => {
    assert.equal(strategy(['dt'], {}), undefined);
    assert.equal(strategy(['dt'], { 'table.auto-partition.enabled': 'false' }), undefined);
  });

  it('reads the options with their declared defaults', () => {
    assert.deepEqual(strategy(['dt'], { 'table.auto-partition.enabled': 'true' }), { key: 'dt', timeUnit: 'DAY', numPrecreate: 2, numRetention: 7, timeZone: 'UTC' });
    assert.deepEqual(
      strategy(['dt'], {
        'table.auto-partition.enabled': 'TRUE',
        'table.auto-partition.time-unit': 'hour',
        'table.auto-partition.num-precreate': '5',
        'table.auto-partition.num-retention': '0',
        'table.auto-partition.time-zone': 'Asia/Shanghai',
      }),
      { key: 'dt', timeUnit: 'HOUR', numPrecreate: 5, numRetention: 0, timeZone: 'Asia/Shanghai' },
    );
  });

  it('needs the key among several partition keys and creates nothing ahead for them', () => {
    assert.throws(() => strategy(['region', 'dt'], { 'table.auto-partition.enabled': 'true' }), fails('INVALID_CONFIG_EXCEPTION', /table\.auto-partition\.key/));
    assert.deepEqual(strategy(['region', 'dt'], { 'table.auto-partition.enabled': 'true', 'table.auto-partition.key': 'dt' }), {
      key: 'dt',
      timeUnit: 'DAY',
      numPrecreate: 0,
      numRetention: 7,
      timeZone: 'UTC',
    });
  });

  it('rejects a key that is no STRING partition key, and unknown zones', () => {
    const on = { 'table.auto-partition.enabled': 'true' };
    assert.throws(() => strategy(['dt'], { ...on, 'table.auto-partition.key': 'region' }), fails('INVALID_CONFIG_EXCEPTION', /not a partition key/));
    assert.throws(() => strategy(['n'], on), fails('INVALID_CONFIG_EXCEPTION', /STRING/));
    assert.throws(() => strategy([], on), fails('INVALID_CONFIG_EXCEPTION'));
    assert.throws(() => strategy(['dt'], { ...on, 'table.auto-partition.time-zone': 'Nowhere/Land' }), fails('INVALID_CONFIG_EXCEPTION', /Nowhere\/Land/));
  });
});
