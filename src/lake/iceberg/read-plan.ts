/**
 * A planned read of an Iceberg snapshot as a LakeReadPlan (lake-format.ts): the data files of
 * planScan with the delete files that apply to each, what each file holds of a column in plain
 * values, and the DuckDB SQL of some of them (duckdb-sql.ts).
 *
 * What a file holds of a column: an identity partition field of the column gives [value, value],
 * or only nulls for a null value (only while the table has one partition spec, so that the file's
 * partition tuple is known to be that spec's); else the column's lower and upper bounds (single-
 * value encoding), or only nulls when its value count equals its null count. A float column's
 * bounds are unknown unless the file counts no NaN (bounds leave NaN out).
 */
import { TributaryError } from '../../common/errors.js';
import type { LakeColumnSpan, LakeReadPlan, LakeSplit, LakeValue } from '../lake-format.js';
import { chosenFields, scanTasksSql } from './duckdb-sql.js';
import { PlanFiles } from './plan-files.js';
import type { ScanTask } from './scan.js';
import { fromSingleValue } from './single-value.js';
import type { TableMetadata } from './table-metadata.js';
import { lakeColumnsOf } from './table-shape.js';
import type { IcebergField, IcebergSchema } from './types.js';

class IcebergSplit implements LakeSplit {
  constructor(
    readonly task: ScanTask,
    private readonly fields: ReadonlyMap<number, IcebergField>,
    private readonly identity: ReadonlyMap<number, number>,
  ) {}

  get path(): string {
    return this.task.file.filePath;
  }

  get recordCount(): number {
    return this.task.file.recordCount;
  }

  span(columnId: number): LakeColumnSpan | undefined {
    const field = this.fields.get(columnId);
    if (!field) return undefined;
    const file = this.task.file;
    const position = this.identity.get(columnId);
    if (position !== undefined) {
      const value = file.partition[position];
      return value === null ? 'null' : { lower: value, upper: value };
    }
    const values = file.valueCounts?.get(columnId);
    if (values !== undefined && values === file.nullValueCounts?.get(columnId)) return 'null';
    if ((field.type === 'float' || field.type === 'double') && file.nanValueCounts?.get(columnId) !== 0) return {};
    const lower = bound(field, file.lowerBounds?.get(columnId));
    const upper = bound(field, file.upperBounds?.get(columnId));
    return { ...(lower !== undefined ? { lower } : {}), ...(upper !== undefined ? { upper } : {}) };
  }
}

/** A bound's value; undefined when absent or unreadable (e.g. a truncated string bound that is not UTF-8). */
function bound(field: IcebergField, bytes: Uint8Array | undefined): LakeValue | undefined {
  if (!bytes) return undefined;
  try {
    return fromSingleValue(field.type, bytes) as LakeValue;
  } catch {
    return undefined;
  }
}

/**
 * The read of `tasks` (planned on `metadata`) in `schema`. Its files are opened where they are on
 * a local warehouse; those on object storage are copied into the remote file cache when a read's
 * SQL is made, whole or only the columns it reads and the row groups its filters keep
 * (plan-files.ts), and stay pinned there until the plan is released.
 */
export async function readPlanOf(metadata: TableMetadata, schema: IcebergSchema, snapshotId: bigint | undefined, tasks: readonly ScanTask[]): Promise<LakeReadPlan> {
  const fields = new Map(schema.fields.map((f) => [f.id, f]));
  const files = new PlanFiles(fields);
  // Partition position of each identity-partitioned field id, when every file has the one spec.
  const identity = new Map<number, number>();
  if (metadata.partitionSpecs.length === 1) {
    metadata.partitionSpecs[0].fields.forEach((p, i) => {
      if (p.transform === 'identity') identity.set(p['source-id'], i);
    });
  }
  const splits = tasks.map((t) => new IcebergSplit(t, fields, identity));
  return {
    ...(snapshotId !== undefined ? { snapshotId } : {}),
    columns: lakeColumnsOf(schema),
    splits,
    rowsSql: async (chosen, columns, filter) => {
      const chosenTasks = chosen.map(taskOf);
      const names = columns && [...columns];
      const pathOf = await files.paths(chosenTasks, names && chosenFields(schema, names).map((f) => f.id), filter);
      return scanTasksSql(metadata, chosenTasks, { schema, pathOf, ...(names ? { columns: names } : {}) });
    },
    release: () => files.release(),
  };
}

function taskOf(split: LakeSplit): ScanTask {
  if (!(split instanceof IcebergSplit)) throw new TributaryError('INVALID_ARGUMENT', 'a split of another lake format');
  return split.task;
}
