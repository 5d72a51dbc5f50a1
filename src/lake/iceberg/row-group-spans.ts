/**
 * What each row group of a Parquet data file holds of the columns of a read schema, from its
 * statistics (lake/parquet/statistics.ts), as the lake's plain values: what a split says of a
 * whole file (read-plan.ts), said of a row group, for pruning row groups by a query's filters.
 */
import type { LakeColumnSpan, LakeSpans, LakeValue } from '../lake-format.js';
import { type ColumnStatistics, type RowGroupStatistics, rowGroupStatistics } from '../parquet/statistics.js';
import { decimalOf, type IcebergField } from './types.js';

/** The row groups of the file of FileMetaData `metadata`, read in a schema of `fields` (by id); undefined when the footer says nothing. */
export function rowGroupSpans(metadata: Uint8Array, fields: ReadonlyMap<number, IcebergField>): RowGroupSpans[] | undefined {
  return rowGroupStatistics(metadata)?.map((g, i) => new RowGroupSpans(i, g, fields));
}

/** What a row group holds of each column, as a split says of a file (read-plan.ts), in the lake's plain values. */
export class RowGroupSpans implements LakeSpans {
  constructor(
    readonly index: number,
    private readonly group: RowGroupStatistics,
    private readonly fields: ReadonlyMap<number, IcebergField>,
  ) {}

  span(columnId: number): LakeColumnSpan | undefined {
    const field = this.fields.get(columnId);
    const stats = this.group.columns.get(columnId);
    if (!field || typeof field.type !== 'string' || !stats) return undefined;
    if (stats.nullCount === this.group.rows) return 'null';
    const lower = lakeValueOf(field.type, stats, stats.min);
    const upper = lakeValueOf(field.type, stats, stats.max);
    return { ...(lower !== undefined ? { lower } : {}), ...(upper !== undefined ? { upper } : {}) };
  }
}

/**
 * A statistic's value as a plain value of Iceberg type `type` (as single-value.ts decodes
 * bounds); undefined when the file's type is not one the column's values read back exactly as
 * (an int file value of a long column is; a decimal of another scale, a timestamp in millis, are not).
 */
function lakeValueOf(type: string, stats: ColumnStatistics, value: ColumnStatistics['min']): LakeValue | undefined {
  if (value === undefined) return undefined;
  const { type: stat } = stats;
  switch (type) {
    case 'int':
    case 'date':
    case 'string':
      return stat.kind === type ? value : undefined;
    case 'long':
      return stat.kind === 'long' ? value : stat.kind === 'int' ? BigInt(value) : undefined;
    case 'time':
      return stat.kind === 'time' && stat.unit === 'micros' ? value : undefined;
    case 'timestamp':
    case 'timestamptz':
      return stat.kind === 'timestamp' && stat.unit === 'micros' ? value : undefined;
  }
  const decimal = decimalOf(type);
  return decimal && stat.kind === 'decimal' && stat.scale === decimal.scale ? value : undefined;
}
