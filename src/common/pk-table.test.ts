import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { optionDef, validateTableProperties } from './config.js';
import { ErrorCodes, TributaryError, type ErrorName } from './errors.js';
import {
  primaryKeyTableOptions,
  validateLogTableOptions,
  validatePartialUpdate,
  validatePrimaryKeyTable,
} from './pk-table.js';
import { buildSchema, type ColumnSpec } from './schema.js';

const fails = (name: ErrorName, pattern?: RegExp) => (e: unknown): boolean =>
  e instanceof TributaryError && e.errorName === name && (pattern === undefined || pattern.test(e.message));

/** id INT, region STRING, then one nullable column per type used below; PK (id, region). */
const COLUMNS: ColumnSpec[] = [
  { name: 'id', type: 'INT' },
  { name: 'region', type: 'STRING' },
  { name: 'b', type: 'BOOLEAN' },
  { name: 'ti', type: 'TINYINT' },
  { name: 'si', type: 'SMALLINT' },
  { name: 'i', type: 'INT' },
  { name: 'bi', type: 'BIGINT' },
  { name: 'f', type: 'FLOAT' },
  { name: 'd', type: 'DOUBLE' },
  { name: 'dec', type: 'DECIMAL(10, 2)' },
  { name: 'ch', type: 'CHAR(3)' },
  { name: 's', type: 'STRING' },
  { name: 'bin', type: 'BINARY(4)' },
  { name: 'by', type: 'BYTES' },
  { name: 'dt', type: 'DATE' },
  { name: 'tm', type: 'TIME(3)' },
  { name: 'ts', type: 'TIMESTAMP(6)' },
  { name: 'ltz', type: 'TIMESTAMP_LTZ(3)' },
];
const schema = buildSchema(COLUMNS, ['id', 'region']);
const options = (props: Record<string, string>) => primaryKeyTableOptions(schema, props);
const agg = (props: Record<string, string>) => options({ 'table.merge-engine': 'aggregation', ...props });

describe('error codes', () => {
  it('keeps the numbers Fluss gives them', () => {
    assert.equal(ErrorCodes.INVALID_TARGET_COLUMN, 35);
    assert.equal(ErrorCodes.DELETION_DISABLED_EXCEPTION, 57);
  });
});

describe('primaryKeyTableOptions', () => {
  it('defaults to last_row, deletes allowed, full changelog', () => {
    assert.deepEqual(options({}), { mergeEngine: 'last_row', deleteBehavior: 'ALLOW', changelogImage: 'FULL' });
  });

  it('reads engine names and enum values in any case', () => {
    assert.equal(options({ 'table.merge-engine': 'FIRST_ROW' }).mergeEngine, 'first_row');
    assert.equal(options({ 'table.merge-engine': ' First_Row ' }).mergeEngine, 'first_row');
    assert.equal(options({ 'table.merge-engine': 'last_row' }).mergeEngine, 'last_row');
    assert.equal(options({ 'table.delete.behavior': 'disable' }).deleteBehavior, 'DISABLE');
    assert.equal(options({ 'table.changelog.image': 'wal' }).changelogImage, 'WAL');
  });

  it('accepts what the option declaration accepts, and the declaration accepts Fluss spellings', () => {
    for (const [key, value] of [
      ['table.merge-engine', 'first_row'],
      ['table.merge-engine', 'AGGREGATION'],
      ['table.delete.behavior', 'ignore'],
      ['table.changelog.image', 'Wal'],
    ]) {
      validateTableProperties({ [key]: value });
    }
    assert.throws(() => validateTableProperties({ 'table.merge-engine': 'deduplicate' }), fails('INVALID_CONFIG_EXCEPTION'));
  });

  it('defaults deletes to IGNORE for every engine but last_row', () => {
    assert.equal(options({ 'table.merge-engine': 'first_row' }).deleteBehavior, 'IGNORE');
    assert.equal(options({ 'table.merge-engine': 'versioned', 'table.merge-engine.versioned.ver-column': 'bi' }).deleteBehavior, 'IGNORE');
    assert.equal(agg({}).deleteBehavior, 'IGNORE');
    assert.equal(agg({ 'table.delete.behavior': 'ALLOW' }).deleteBehavior, 'ALLOW');
    assert.equal(options({ 'table.delete.behavior': 'IGNORE' }).deleteBehavior, 'IGNORE');
  });

  it('rejects unknown enum values, naming the option', () => {
    assert.throws(() => options({ 'table.merge-engine': 'dedup' }), fails('INVALID_CONFIG_EXCEPTION', /'dedup' for option 'table.merge-engine'/));
    assert.throws(() => options({ 'table.delete.behavior': 'maybe' }), fails('INVALID_CONFIG_EXCEPTION', /table.delete.behavior/));
    assert.throws(() => options({ 'table.changelog.image': 'HALF' }), fails('INVALID_CONFIG_EXCEPTION', /table.changelog.image/));
  });

  it('does not let first_row or versioned delete', () => {
    assert.throws(() => options({ 'table.merge-engine': 'first_row', 'table.delete.behavior': 'allow' }), fails('INVALID_CONFIG_EXCEPTION', /first_row merge engine cannot delete/));
    assert.throws(
      () => options({ 'table.merge-engine': 'versioned', 'table.merge-engine.versioned.ver-column': 'bi', 'table.delete.behavior': 'ALLOW' }),
      fails('INVALID_CONFIG_EXCEPTION', /versioned merge engine cannot delete/),
    );
    assert.equal(options({ 'table.merge-engine': 'first_row', 'table.delete.behavior': 'DISABLE' }).deleteBehavior, 'DISABLE');
  });

  it('needs a version column of INT, BIGINT, TIMESTAMP or TIMESTAMP_LTZ for versioned', () => {
    const versioned = (column?: string) =>
      options({ 'table.merge-engine': 'versioned', ...(column === undefined ? {} : { 'table.merge-engine.versioned.ver-column': column }) });
    assert.equal(versioned('i').versionColumn, 5);
    assert.equal(versioned('bi').versionColumn, 6);
    assert.equal(versioned('ts').versionColumn, 16);
    assert.equal(versioned('ltz').versionColumn, 17);
    assert.throws(() => versioned(), fails('INVALID_CONFIG_EXCEPTION', /needs 'table.merge-engine.versioned.ver-column'/));
    assert.throws(() => versioned(''), fails('INVALID_CONFIG_EXCEPTION', /needs/));
    assert.throws(() => versioned('nope'), fails('INVALID_CONFIG_EXCEPTION', /'nope', which is not a column/));
    for (const bad of ['si', 'ti', 'd', 'dec', 's', 'dt', 'tm', 'b']) {
      assert.throws(() => versioned(bad), fails('INVALID_CONFIG_EXCEPTION', new RegExp(`version column '${bad}' has type`)), bad);
    }
  });

  it('rejects a version column on other engines', () => {
    assert.throws(() => options({ 'table.merge-engine.versioned.ver-column': 'bi' }), fails('INVALID_CONFIG_EXCEPTION', /only to the versioned merge engine, not last_row/));
  });

  it('needs the FULL changelog for aggregation', () => {
    assert.throws(() => agg({ 'table.changelog.image': 'WAL' }), fails('INVALID_CONFIG_EXCEPTION', /aggregation merge engine needs 'table.changelog.image' = FULL/));
    assert.equal(options({ 'table.changelog.image': 'WAL', 'table.merge-engine': 'first_row' }).changelogImage, 'WAL');
  });
});

describe('aggregate functions of the aggregation engine', () => {
  it('default to last_value_ignore_nulls and leave key columns without a function', () => {
    const a = agg({ 'fields.i.agg': 'sum' }).aggregations!;
    assert.equal(a.length, COLUMNS.length);
    assert.equal(a[0], undefined);
    assert.equal(a[1], undefined);
    assert.deepEqual(a[5], { fn: 'sum', delimiter: ',' });
    assert.deepEqual(a[6], { fn: 'last_value_ignore_nulls', delimiter: ',' });
  });

  it('read names in any case and with hyphens, and string_agg as listagg with its own parameter key', () => {
    const a = agg({ 'fields.i.agg': 'SUM', 'fields.s.agg': 'Last-Value', 'fields.ch.agg': 'string_agg', 'fields.ch.string_agg.delimiter': ' | ' }).aggregations!;
    assert.equal(a[5]!.fn, 'sum');
    assert.equal(a[11]!.fn, 'last_value');
    assert.deepEqual(a[10], { fn: 'listagg', delimiter: ' | ' });
    assert.deepEqual(agg({ 'fields.s.agg': 'listagg', 'fields.s.listagg.delimiter': ';' }).aggregations![11], { fn: 'listagg', delimiter: ';' });
  });

  const ALL_TYPES = ['b', 'ti', 'si', 'i', 'bi', 'f', 'd', 'dec', 'ch', 's', 'bin', 'by', 'dt', 'tm', 'ts', 'ltz'];
  const TAKES: Record<string, string[]> = {
    sum: ['ti', 'si', 'i', 'bi', 'f', 'd', 'dec'],
    product: ['ti', 'si', 'i', 'bi', 'f', 'd', 'dec'],
    max: ['ti', 'si', 'i', 'bi', 'f', 'd', 'dec', 'ch', 's', 'dt', 'tm', 'ts', 'ltz'],
    min: ['ti', 'si', 'i', 'bi', 'f', 'd', 'dec', 'ch', 's', 'dt', 'tm', 'ts', 'ltz'],
    last_value: ALL_TYPES,
    last_value_ignore_nulls: ALL_TYPES,
    first_value: ALL_TYPES,
    first_value_ignore_nulls: ALL_TYPES,
    listagg: ['ch', 's'],
    string_agg: ['ch', 's'],
    bool_and: ['b'],
    bool_or: ['b'],
  };

  it('are the functions the option declaration lists', () => {
    assert.deepEqual([...optionDef('fields.<col>.agg')!.enumValues!].sort(), Object.keys(TAKES).sort());
  });

  for (const [fn, takes] of Object.entries(TAKES)) {
    it(`${fn} takes exactly its column types`, () => {
      for (const column of ALL_TYPES) {
        const props = { [`fields.${column}.agg`]: fn };
        if (takes.includes(column)) agg(props);
        else assert.throws(() => agg(props), fails('INVALID_CONFIG_EXCEPTION', new RegExp(`${fn} cannot aggregate column '${column}' of type`)), `${fn} on ${column}`);
      }
    });
  }

  it('rejects unknown functions, naming the option and the choices', () => {
    assert.throws(() => agg({ 'fields.i.agg': 'avg' }), fails('INVALID_CONFIG_EXCEPTION', /option 'fields.i.agg': unknown aggregate function 'avg'; expected one of sum, product/));
    assert.throws(() => agg({ 'fields.by.agg': 'rbm32' }), fails('INVALID_CONFIG_EXCEPTION', /unknown aggregate function 'rbm32'/));
    assert.throws(() => agg({ 'fields.i.agg': '' }), fails('INVALID_CONFIG_EXCEPTION', /unknown aggregate function ''/));
  });

  it('rejects functions on key columns and on columns the table does not have', () => {
    assert.throws(() => agg({ 'fields.id.agg': 'sum' }), fails('INVALID_CONFIG_EXCEPTION', /primary key column 'id' cannot have an aggregate function/));
    assert.throws(() => agg({ 'fields.region.agg': 'max' }), fails('INVALID_CONFIG_EXCEPTION', /primary key column 'region'/));
    assert.throws(() => agg({ 'fields.nope.agg': 'sum' }), fails('INVALID_CONFIG_EXCEPTION', /'fields.nope.agg' names 'nope', which is not a column/));
    assert.throws(() => agg({ 'fields.I.agg': 'sum' }), fails('INVALID_CONFIG_EXCEPTION', /names 'I'/));
    assert.throws(() => agg({ 'fields.nope.listagg.delimiter': ';' }), fails('INVALID_CONFIG_EXCEPTION', /names 'nope'/));
  });

  it('rejects malformed fields.* keys', () => {
    for (const key of ['fields.i', 'fields.i.aggregate', 'fields.i.sum.x.y', 'fields.', 'fields.i.agg.']) {
      assert.throws(() => agg({ [key]: 'sum' }), fails('INVALID_CONFIG_EXCEPTION'), key);
    }
    assert.throws(() => agg({ 'fields.i.aggregate': 'sum' }), fails('INVALID_CONFIG_EXCEPTION', /unknown option 'fields.i.aggregate'/));
  });

  it('checks function parameters against the function of the column', () => {
    assert.throws(() => agg({ 'fields.s.listagg.delimiter': ';' }), fails('INVALID_CONFIG_EXCEPTION', /column 's' is not aggregated with listagg/));
    assert.throws(() => agg({ 'fields.s.agg': 'max', 'fields.s.listagg.delimiter': ';' }), fails('INVALID_CONFIG_EXCEPTION', /not aggregated with listagg/));
    assert.throws(() => agg({ 'fields.s.agg': 'string_agg', 'fields.s.listagg.delimiter': ';' }), fails('INVALID_CONFIG_EXCEPTION', /not aggregated with listagg/));
    assert.throws(() => agg({ 'fields.i.agg': 'sum', 'fields.i.sum.delimiter': ';' }), fails('INVALID_CONFIG_EXCEPTION', /sum has no parameter 'delimiter'/));
    assert.throws(() => agg({ 'fields.s.agg': 'listagg', 'fields.s.listagg.separator': ';' }), fails('INVALID_CONFIG_EXCEPTION', /listagg has no parameter 'separator'/));
    assert.throws(() => agg({ 'fields.s.agg': 'listagg', 'fields.s.listagg.delimiter': '' }), fails('INVALID_CONFIG_EXCEPTION', /delimiter must not be empty/));
    assert.equal(agg({ 'fields.s.agg': 'listagg', 'fields.s.listagg.delimiter': ' ' }).aggregations![11]!.delimiter, ' ');
  });

  it('belong to the aggregation engine only', () => {
    assert.throws(() => options({ 'fields.i.agg': 'sum' }), fails('INVALID_CONFIG_EXCEPTION', /'fields.i.agg' applies only to the aggregation merge engine, not last_row/));
    assert.throws(() => options({ 'table.merge-engine': 'first_row', 'fields.s.listagg.delimiter': ';' }), fails('INVALID_CONFIG_EXCEPTION', /not first_row/));
  });
});

describe('validatePrimaryKeyTable', () => {
  const table = (cols: ColumnSpec[], pk: string[]) => buildSchema(cols, pk);
  const three = table([{ name: 'dt', type: 'STRING' }, { name: 'id', type: 'BIGINT' }, { name: 'sub', type: 'INT' }, { name: 'v', type: 'STRING' }], ['dt', 'id', 'sub']);

  it('defaults the bucket key to the primary key minus the partition keys, in key order', () => {
    assert.deepEqual(validatePrimaryKeyTable(three, [], [], {}), ['dt', 'id', 'sub']);
    assert.deepEqual(validatePrimaryKeyTable(three, ['dt'], [], {}), ['id', 'sub']);
    assert.deepEqual(validatePrimaryKeyTable(three, ['id'], [], {}), ['dt', 'sub']);
  });

  it('keeps a bucket key within the primary key minus the partition keys', () => {
    assert.deepEqual(validatePrimaryKeyTable(three, ['dt'], ['sub'], {}), ['sub']);
    assert.deepEqual(validatePrimaryKeyTable(three, [], ['id', 'dt'], {}), ['id', 'dt']);
    assert.throws(() => validatePrimaryKeyTable(three, [], ['v'], {}), fails('INVALID_BUCKET_KEY', /'v' must be part of the primary key/));
    assert.throws(() => validatePrimaryKeyTable(three, ['dt'], ['dt'], {}), fails('INVALID_BUCKET_KEY', /'dt' is a partition key/));
    assert.throws(() => validatePrimaryKeyTable(three, [], ['nope'], {}), fails('INVALID_BUCKET_KEY', /'nope' is not a column/));
  });

  it('needs partition keys within the primary key, leaving at least one key column', () => {
    assert.throws(() => validatePrimaryKeyTable(three, ['v'], [], {}), fails('INVALID_PARTITION_KEY', /'v' must be part of the primary key/));
    const two = table([{ name: 'dt', type: 'STRING' }, { name: 'v', type: 'INT' }], ['dt']);
    assert.throws(() => validatePrimaryKeyTable(two, ['dt'], [], {}), fails('INVALID_TABLE_EXCEPTION', /primary key \(dt\) must have a column that is not a partition key/));
  });

  it('needs a primary key', () => {
    const log = buildSchema([{ name: 'a', type: 'INT' }]);
    assert.throws(() => validatePrimaryKeyTable(log, [], [], {}), fails('INVALID_TABLE_EXCEPTION', /needs a primary key/));
  });

  it('accepts every scalar type in the primary key, as Fluss does', () => {
    const keyed = buildSchema(COLUMNS, COLUMNS.map((c) => c.name));
    assert.deepEqual(validatePrimaryKeyTable(keyed, [], [], {}), COLUMNS.map((c) => c.name));
  });

  it('validates the merge options', () => {
    assert.throws(() => validatePrimaryKeyTable(three, [], [], { 'table.merge-engine': 'versioned' }), fails('INVALID_CONFIG_EXCEPTION', /needs 'table.merge-engine.versioned.ver-column'/));
    assert.throws(() => validatePrimaryKeyTable(three, [], [], { 'table.merge-engine': 'aggregation', 'fields.v.agg': 'sum' }), fails('INVALID_CONFIG_EXCEPTION', /sum cannot aggregate column 'v'/));
    assert.deepEqual(validatePrimaryKeyTable(three, [], [], { 'table.merge-engine': 'aggregation', 'fields.v.agg': 'listagg', custom: 'kept' }), ['dt', 'id', 'sub']);
  });
});

describe('validateLogTableOptions', () => {
  it('rejects the options of primary-key tables', () => {
    for (const key of ['table.merge-engine', 'table.merge-engine.versioned.ver-column', 'table.delete.behavior', 'table.changelog.image', 'fields.a.agg', 'fields.a.listagg.delimiter', 'fields.anything']) {
      assert.throws(() => validateLogTableOptions({ [key]: 'x' }), fails('INVALID_CONFIG_EXCEPTION', new RegExp(`'${key.replace(/\./g, '\\.')}' applies only to primary-key tables`)), key);
    }
  });

  it('accepts the other options and custom properties', () => {
    validateLogTableOptions({ 'table.log.ttl': '1d', 'bucket.num': '3', owner: 'me', 'fieldsx.y': '1' });
  });
});

describe('validatePartialUpdate', () => {
  const s = buildSchema(
    [
      { name: 'a', type: 'INT' },
      { name: 'v', type: 'STRING' },
      { name: 'b', type: 'INT' },
      { name: 'req', type: 'INT', nullable: false },
      { name: 'w', type: 'DOUBLE' },
    ],
    ['b', 'a'],
  );

  it('accepts target columns holding the primary key and every NOT NULL column', () => {
    validatePartialUpdate(s, 'last_row', [0, 2, 3]);
    validatePartialUpdate(s, 'aggregation', [3, 2, 0, 4]);
    validatePartialUpdate(s, 'last_row', [0, 1, 2, 3, 4]);
  });

  it('rejects engines without partial updates', () => {
    assert.throws(() => validatePartialUpdate(s, 'first_row', [0, 2, 3]), fails('INVALID_TARGET_COLUMN', /first_row merge engine does not support partial updates/));
    assert.throws(() => validatePartialUpdate(s, 'versioned', [0, 1, 2, 3, 4]), fails('INVALID_TARGET_COLUMN', /versioned/));
  });

  it('rejects missing key columns, omitted NOT NULL columns and positions that are not columns', () => {
    assert.throws(() => validatePartialUpdate(s, 'last_row', [0, 3]), fails('INVALID_TARGET_COLUMN', /must include the primary key \(b, a\); 'b' is missing/));
    assert.throws(() => validatePartialUpdate(s, 'last_row', []), fails('INVALID_TARGET_COLUMN', /'a' is missing/));
    assert.throws(() => validatePartialUpdate(s, 'last_row', [0, 2]), fails('INVALID_TARGET_COLUMN', /column 'req' is NOT NULL/));
    assert.throws(() => validatePartialUpdate(s, 'last_row', [0, 2, 3, 5]), fails('INVALID_TARGET_COLUMN', /target column 5 is not a column position of the table \(0 to 4\)/));
    assert.throws(() => validatePartialUpdate(s, 'last_row', [0, 2, 3, -1]), fails('INVALID_TARGET_COLUMN', /-1/));
    assert.throws(() => validatePartialUpdate(s, 'last_row', [0, 2, 3, 1.5]), fails('INVALID_TARGET_COLUMN', /1.5/));
    assert.throws(() => validatePartialUpdate(s, 'last_row', [0, 2, 3, 2]), fails('INVALID_TARGET_COLUMN', /'b' is listed twice/));
  });
});
