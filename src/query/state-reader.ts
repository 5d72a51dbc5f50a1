/**
 * Reads the current state of a primary-key table as Arrow batches of some of its columns: all of
 * it (a batch scan of every bucket's committed state), or only the rows of given keys (point
 * lookups). Either way what a SELECT over the table sees.
 */
import type * as arrow from 'apache-arrow';
import { TributaryError } from '../common/errors.js';
import type { Schema } from '../common/schema.js';
import type { Row } from '../common/values.js';
import type { Table } from '../client/table.js';
import { ColumnBatchBuilder } from '../record/column-batch-builder.js';
import { tablePathString } from '../common/schema.js';
import { rowCounter } from './progress.js';

/** Builds batches of the projected columns from rows that hold (at least) those columns. */
class ProjectedBatches {
  readonly builder: ColumnBatchBuilder;
  readonly batches: arrow.RecordBatch[] = [];
  private readonly projected: Row;

  constructor(
    schema: Schema,
    private readonly columns: string[],
  ) {
    this.builder = new ColumnBatchBuilder({ columns: columns.map((c) => schema.columns.find((x) => x.name === c)!), highestFieldId: schema.highestFieldId });
    this.projected = Object.fromEntries(columns.map((c) => [c, null]));
  }

  /** Adds rows; returns how many. */
  add(rows: Iterable<Row>): number {
    for (const row of rows) {
      for (const c of this.columns) this.projected[c] = row[c];
      this.builder.appendRow(this.projected);
    }
    const n = this.builder.rowCount;
    if (n > 0) this.batches.push(this.builder.build());
    return n;
  }
}

/** The whole current state, the server projecting `columns`. */
export async function readState(table: Table, columns: string[]): Promise<{ schema: arrow.Schema; batches: arrow.RecordBatch[] }> {
  const out = new ProjectedBatches(table.info.schema, columns);
  const scanner = table.newScan().project(columns).createBatchScanner();
  const read = rowCounter('read', tablePathString(table.info.path));
  for (let rows = await scanner.pollBatch(); rows; rows = await scanner.pollBatch()) read(out.add(rows));
  return { schema: out.builder.arrowSchema, batches: out.batches };
}

/**
 * The rows of these primary keys (each once, however often it is asked for), projected on
 * `columns`. A key that cannot be stored in the table — a value out of its column's range or a
 * partition value that cannot exist — has no row.
 */
export async function lookupState(table: Table, keys: Row[], columns: string[]): Promise<{ schema: arrow.Schema; batches: arrow.RecordBatch[] }> {
  const lookuper = table.newLookup().createLookuper();
  const found = await Promise.all(
    keys.map((key) =>
      lookuper.lookup(key).catch((err: unknown) => {
        if (err instanceof TributaryError && (err.errorName === 'INVALID_ROW' || err.errorName === 'PARTITION_SPEC_INVALID_EXCEPTION')) return null;
        throw err;
      }),
    ),
  );
  // Two literals may name one stored key (e.g. timestamps below the column's precision).
  const primaryKey = table.info.schema.primaryKey ?? [];
  const seen = new Set<string>();
  const rows = found.filter((row): row is Row => {
    if (!row) return false;
    const id = JSON.stringify(primaryKey.map((c) => String(row[c] instanceof Uint8Array ? Buffer.from(row[c] as Uint8Array).toString('hex') : row[c])));
    if (seen.has(id)) return false;
    seen.add(id);
    return true;
  });
  const out = new ProjectedBatches(table.info.schema, columns);
  out.add(rows);
  return { schema: out.builder.arrowSchema, batches: out.batches };
}
