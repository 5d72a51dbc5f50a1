import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { buildSchema, type PartitionInfo, type TableInfo } from '../common/schema.js';
import { parseDataType } from '../common/types.js';
import { type DataFile, FileContent } from '../lake/iceberg/data-file.js';
import type { ScanTask } from '../lake/iceberg/scan.js';
import { toSingleValue } from '../lake/iceberg/single-value.js';
import { readPlanOf } from '../lake/iceberg/read-plan.js';
import { newTableMetadata, type TableMetadata } from '../lake/iceberg/table-metadata.js';
import type { IcebergPrimitive, IcebergSchema } from '../lake/iceberg/types.js';
import { columnFiltersOf } from './duckdb/query-shapes.js';
import { DuckSession } from './duckdb/session.js';
import { pruneLakeSplits, prunePartitions } from './lake-pruning.js';

let duck: DuckSession;
before(async () => {
  duck = await DuckSession.create();
});
after(() => duck.close());

const COLUMNS = 'id BIGINT, name STRING, price DECIMAL(10,2), day DATE, ts TIMESTAMP_LTZ(6), score DOUBLE, flag BOOLEAN, small INT';
const columns = COLUMNS.split(', ').map((c) => {
  const [name, ...type] = c.split(' ');
  return { name, type: parseDataType(type.join(' ')) };
});
const ICEBERG: IcebergPrimitive[] = ['long', 'string', 'decimal(10,2)', 'date', 'timestamptz', 'double', 'boolean', 'int'];
const schema: IcebergSchema = { type: 'struct', 'schema-id': 0, fields: columns.map((c, i) => ({ id: i + 1, name: c.name, required: false, type: ICEBERG[i] })) };
const DAY_ID = 4;

/** The rows of each file, as SQL; file 3 is written without metrics (any row may be in it). */
const ROWS = [
  "(0, 1, 'apple', 1.50, DATE '2024-01-01', TIMESTAMPTZ '2024-01-01 10:00:00+00', 1.0, true, 1)",
  "(0, 3, 'banana', 2.00, DATE '2024-01-01', TIMESTAMPTZ '2024-01-01 11:00:00+00', 2.0, true, 2)",
  "(0, 2, NULL, NULL, DATE '2024-01-01', NULL, NULL, NULL, 3)",
  "(1, 10, 'cherry', 5.00, DATE '2024-01-02', TIMESTAMPTZ '2024-01-02 10:00:00+00', CAST('NaN' AS DOUBLE), false, 4)",
  "(1, 12, 'date', 6.25, DATE '2024-01-02', TIMESTAMPTZ '2024-01-02 12:00:00+00', 3.5, true, 5)",
  '(2, 20, NULL, 9.99, NULL, NULL, -1.0, false, 6)',
  "(3, 30, 'fig', 7.00, DATE '2024-01-03', TIMESTAMPTZ '2024-01-03 00:00:00+00', 0.5, true, 7)",
];

describe('lake file pruning', () => {
  let metadata: TableMetadata;
  let tasks: ScanTask[];

  before(async () => {
    await duck.run(
      `CREATE TABLE lake_rows AS SELECT * FROM (VALUES ${ROWS.join(', ')}) AS r(file, ${columns.map((c) => c.name).join(', ')})`,
    );
    await duck.run(`CREATE OR REPLACE TABLE lake_rows AS SELECT file, ${columns.map((c) => `CAST(${c.name} AS ${c.type.kind === 'TIMESTAMP_LTZ' ? 'TIMESTAMPTZ' : c.type.kind === 'STRING' ? 'VARCHAR' : c.type.kind === 'INT' ? 'INTEGER' : c.type.kind === 'DECIMAL' ? 'DECIMAL(10,2)' : c.type.kind}) AS ${c.name}`).join(', ')} FROM lake_rows`);
    // The metrics a writer records, in Iceberg's value forms, computed by DuckDB from the rows.
    const forms = ['id', 'name', 'CAST(price * 100 AS BIGINT)', 'CAST(day - DATE \'1970-01-01\' AS INTEGER)', 'epoch_us(ts)', 'score', 'flag', 'small'];
    const stats = await duck.run(
      `SELECT file, count(*), ${forms
        .map((f, i) => {
          const real = i === 5 ? ' FILTER (WHERE NOT isnan(score))' : '';
          return `count(${columns[i].name}), min(${f})${real}, max(${f})${real}`;
        })
        .join(', ')}, count(*) FILTER (WHERE isnan(score)), any_value(${forms[3]}) FROM lake_rows GROUP BY file ORDER BY file`,
    );
    metadata = newTableMetadata({
      location: '/nowhere',
      schema,
      spec: { 'spec-id': 0, fields: [{ 'source-id': DAY_ID, 'field-id': 1000, name: 'day', transform: 'identity' }] },
      sortOrder: { 'order-id': 0, fields: [] },
    });
    tasks = stats.rows.map((r) => {
      const file = Number(r[0]);
      const records = Number(r[1]);
      const day = r[r.length - 1] as number | null;
      const dataFile: DataFile = { content: FileContent.DATA, filePath: `/nowhere/f${file}.parquet`, fileFormat: 'PARQUET', partition: [day], recordCount: records, fileSizeInBytes: 1 };
      if (file !== 3) {
        dataFile.valueCounts = new Map(schema.fields.map((f) => [f.id, records]));
        dataFile.nullValueCounts = new Map(schema.fields.map((f, i) => [f.id, records - Number(r[2 + i * 3])]));
        dataFile.nanValueCounts = new Map([[6, Number(r[r.length - 2])]]);
        dataFile.lowerBounds = new Map();
        dataFile.upperBounds = new Map();
        schema.fields.forEach((f, i) => {
          const [lower, upper] = [r[3 + i * 3], r[4 + i * 3]] as (number | bigint | string | boolean | null)[];
          if (lower !== null) dataFile.lowerBounds!.set(f.id, toSingleValue(f.type, lower));
          if (upper !== null) dataFile.upperBounds!.set(f.id, toSingleValue(f.type, upper));
        });
      }
      return { file: dataFile, dataSequenceNumber: 1n, deletes: [] };
    });
  });

  const cases: [string, number[]][] = [
    ['id = 11', [1, 3]],
    ['id > 3', [1, 2, 3]],
    ['id >= 3 AND id < 10', [0, 3]],
    ['id BETWEEN 4 AND 9', [3]],
    ["name = 'banana'", [0, 3]],
    ["name IN ('zz', 'date')", [1, 3]],
    ["day = DATE '2024-01-02'", [1]],
    ["day >= '2024-01-02'", [1, 3]],
    ['price < 1.6', [0, 3]],
    ["ts > TIMESTAMPTZ '2024-01-02 00:00:00+00'", [1, 3]],
    // File 1 holds a NaN score, which passes: its bounds say nothing of it.
    ['score > 100', [1, 3]],
    ['score < 0', [1, 2, 3]],
    ['flag = false', [1, 2, 3]],
    ['small IN (6, 7) AND id > 0', [2, 3]],
    ['id = NULL', [3]],
    ['id IN (NULL)', [3]],
    // No pruning: not a filter, or one that DuckDB cannot evaluate.
    ['name = 1', [0, 1, 2, 3]],
    ["id = 'x'", [0, 1, 2, 3]],
    ['id = 1 OR id = 30', [0, 1, 2, 3]],
  ];

  for (const [where, expected] of cases) {
    it(`keeps the files that may hold a row of WHERE ${where}`, async () => {
      const filters = columnFiltersOf((await duck.syntaxTree(`SELECT * FROM t WHERE ${where}`)).json, columns);
      const plan = await readPlanOf(metadata, schema, undefined, tasks);
      const kept = (await pruneLakeSplits(duck, plan.columns, plan.splits, filters)).map((t) => Number(/f(\d)/.exec(t.path)![1]));
      assert.deepEqual(kept, expected);
      // Whatever is kept, no file with a passing row is dropped.
      let holding: number[] = [];
      try {
        holding = (await duck.run(`SELECT DISTINCT file FROM lake_rows WHERE ${where} ORDER BY file`)).rows.map((r) => Number(r[0]));
      } catch {
        // The query itself fails: nothing to hold.
      }
      for (const f of holding) assert.ok(kept.includes(f), `file ${f} holds a row of ${where}`);
    });
  }
});

describe('log partition pruning', () => {
  const info: TableInfo = {
    path: { database: 'db', table: 't' },
    tableId: 1,
    schemaId: 0,
    schema: buildSchema([
      { name: 'dt', type: 'STRING' },
      { name: 'hr', type: 'INT' },
      { name: 'ts', type: 'TIMESTAMP(6)' },
      { name: 'v', type: 'BIGINT' },
    ]),
    partitionKeys: ['dt', 'hr', 'ts'],
    bucketCount: 1,
    bucketKeys: [],
    properties: {},
    createdTime: 0,
    modifiedTime: 0,
  };
  const partition = (id: number, dt: string, hr: string, ts: string): PartitionInfo => ({ partitionId: id, partitionName: `${dt}$${hr}$${ts}`, spec: { dt, hr, ts } });
  const partitions = [
    partition(0, '2024-01-01', '5', '2024-01-01-05-00-00_'),
    partition(1, '2024-01-01', '6', '2024-01-01-06-30-00_5'),
    partition(2, '2024-01-02', '5', '2024-01-02-05-00-00_'),
  ];

  const cases: [string, number[]][] = [
    ["dt = '2024-01-01'", [0, 1]],
    ['hr > 5', [1]],
    ["dt = '2024-01-02' AND hr IN (5, 7)", [2]],
    ["ts >= TIMESTAMP '2024-01-01 06:30:00.5'", [1, 2]],
    ["ts > TIMESTAMP '2024-01-01 06:30:00.5'", [2]],
    ['v = 1', [0, 1, 2]],
    ["dt = 'nope'", []],
  ];

  for (const [where, expected] of cases) {
    it(`reads the partitions that may hold a row of WHERE ${where}`, async () => {
      const filters = columnFiltersOf((await duck.syntaxTree(`SELECT * FROM t WHERE ${where}`)).json, info.schema.columns);
      assert.deepEqual(
        (await prunePartitions(duck, info, partitions, filters)).map((p) => p.partitionId),
        expected,
      );
    });
  }
});
