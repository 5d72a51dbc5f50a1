/**
 * Merge engines: what a write does to the stored row of its key and which changelog rows it emits
 * (DESIGN.md §3, Fluss's row mergers). Pure: no I/O, inputs never mutated (returned rows may be the
 * input arrays). Rows are arrays of internal values in schema column order; a stored row written
 * with an earlier schema may be shorter, its missing trailing columns read as null.
 *
 * Changelog (table.changelog.image = FULL):
 *   new key                          +I new
 *   stored key, row changed          -U old, +U new   (WAL: +U new only)
 *   delete of a stored key           -D old
 *   missing key, ignored write       nothing, value undefined
 *
 * Engines:
 *   last_row     the written row wins, even when equal to the stored one (-U/+U as Fluss). With
 *                WAL a full-row upsert needs no stored row: needsOldValue is false and every
 *                full-row upsert emits +U new, for new and stored keys alike (as Fluss).
 *   first_row    the first row stays; later upserts change nothing; insert-only changelog.
 *   versioned    the written row wins when its version >= the stored one; a null version is the
 *                smallest (as Fluss), so it wins only over a null version, and a new key takes it.
 *   aggregation  a new key stores the written row; a stored key combines column by column with
 *                the functions of aggregate-functions.ts (-U/+U even when nothing changed, as Fluss).
 *
 * Partial writes (targetColumns, last_row and aggregation only; checked by validatePartialUpdate,
 * and a target list covering every column is a full-row write): a partial upsert takes the target
 * columns from the written row (aggregation: aggregates them) and keeps the stored others; a new key
 * gets nulls in the others; a stored key written on its primary key alone changes nothing. A partial
 * delete removes the row when its non-target columns are all null, else it nulls the non-key target
 * columns (INVALID_TARGET_COLUMN if one of them is NOT NULL).
 *
 * Deletes follow table.delete.behavior before anything else: IGNORE changes nothing, DISABLE throws
 * DELETION_DISABLED_EXCEPTION (even for a missing key), ALLOW deletes.
 */
import type { ChangeType } from '../../../common/change-type.js';
import { TributaryError } from '../../../common/errors.js';
import { type PrimaryKeyTableOptions, primaryKeyTableOptions, validatePartialUpdate } from '../../../common/pk-table.js';
import type { Schema } from '../../../common/schema.js';
import { type Aggregator, createAggregator } from './aggregate-functions.js';

export interface Change {
  type: ChangeType;
  row: unknown[];
}

export interface MergeInput {
  /** The stored row of the key; undefined when the key is absent (or not looked up, see needsOldValue). */
  old: unknown[] | undefined;
  /** A full row to write; with targetColumns only those columns are meaningful. */
  upsert?: unknown[];
  /** The row to delete (at least its primary key columns are set). */
  delete?: unknown[];
  /** Partial update or delete: the column positions written, primary key included. */
  targetColumns?: readonly number[];
}

export interface MergeResult {
  /** The new stored row; null deletes the key; undefined leaves it unchanged (and changes is empty). */
  value: unknown[] | null | undefined;
  /** The changelog rows, in order. Shared and frozen when empty: do not mutate. */
  changes: readonly Change[];
}

export interface MergeEngine {
  merge(input: MergeInput): MergeResult;
  /** The changelog holds only +I, so readers may treat it as append-only (first_row). */
  readonly insertOnly: boolean;
  /**
   * Whether a full-row upsert must be given the stored row of its key. Deletes and partial writes
   * always need it; only last_row with table.changelog.image = WAL answers false.
   */
  readonly needsOldValue: boolean;
  /**
   * Whether a full-row upsert is merged without looking into the written or the stored row: what
   * it returns then depends only on whether the key holds a row (last_row). Full-row deletes never
   * look into the rows.
   */
  readonly upsertsBlind: boolean;
}

const NO_CHANGE: MergeResult = Object.freeze({ value: undefined, changes: Object.freeze([]) });

/** What an engine makes of an upsert on a stored key: the new row, or undefined to keep the old. */
type Update = (old: unknown[], row: unknown[], targets: Uint8Array | undefined) => unknown[] | undefined;

/** Builds the merge engine of a primary-key table from its options; throws on invalid options. */
export function createMergeEngine(table: { schema: Schema; properties: Record<string, string> }): MergeEngine {
  const options = primaryKeyTableOptions(table.schema, table.properties);
  return new RowMergeEngine(table.schema, options, updateOf(table.schema, options));
}

function updateOf(schema: Schema, options: PrimaryKeyTableOptions): Update {
  switch (options.mergeEngine) {
    case 'last_row':
      return (old, row, targets) => (targets === undefined ? row : overlay(old, row, targets));
    case 'first_row':
      return () => undefined;
    case 'versioned': {
      const v = options.versionColumn!;
      return (old, row) => {
        const written = row[v] as number | bigint | null;
        const stored = old[v] as number | bigint | null;
        if (written === null) return stored === null ? row : undefined;
        return stored === null || written >= stored ? row : undefined;
      };
    }
    case 'aggregation': {
      const aggregators: (Aggregator | undefined)[] = options.aggregations!.map((a, i) =>
        a === undefined ? undefined : createAggregator(a.fn, schema.columns[i], a.delimiter),
      );
      return (old, row, targets) => {
        const merged = new Array<unknown>(aggregators.length);
        for (let i = 0; i < aggregators.length; i++) {
          const aggregate = aggregators[i];
          merged[i] = aggregate === undefined || (targets !== undefined && targets[i] === 0) ? old[i] : aggregate(old[i], row[i]);
        }
        return merged;
      };
    }
  }
}

/** `row`'s target columns over `old`'s others. */
function overlay(old: unknown[], row: unknown[], targets: Uint8Array): unknown[] {
  const merged = new Array<unknown>(targets.length);
  for (let i = 0; i < targets.length; i++) merged[i] = targets[i] === 1 ? row[i] : old[i];
  return merged;
}

class RowMergeEngine implements MergeEngine {
  readonly insertOnly: boolean;
  readonly needsOldValue: boolean;
  readonly upsertsBlind: boolean;
  private readonly width: number;
  private readonly keyColumn: Uint8Array;
  private readonly fullImage: boolean;
  // The layout of the last target list seen: a batch passes one array for all its records, which
  // must not change between calls.
  private lastTargets: readonly number[] | undefined;
  private targets: Uint8Array | undefined;
  private targetsKeyOnly = false;

  constructor(
    private readonly schema: Schema,
    private readonly options: PrimaryKeyTableOptions,
    private readonly update: Update,
  ) {
    this.width = schema.columns.length;
    this.keyColumn = Uint8Array.from(schema.columns, (c) => (schema.primaryKey?.includes(c.name) ? 1 : 0));
    this.fullImage = options.changelogImage === 'FULL';
    this.insertOnly = options.mergeEngine === 'first_row';
    this.needsOldValue = !(options.mergeEngine === 'last_row' && !this.fullImage);
    this.upsertsBlind = options.mergeEngine === 'last_row';
  }

  merge(input: MergeInput): MergeResult {
    const targets = input.targetColumns === undefined ? undefined : this.targetLayout(input.targetColumns);
    const old = input.old === undefined || input.old.length >= this.width ? input.old : this.padded(input.old);
    if (input.delete !== undefined) return this.delete(old, targets);
    const row = input.upsert!;
    if (!this.needsOldValue && targets === undefined) return { value: row, changes: [{ type: '+U', row }] };
    if (old === undefined) {
      const inserted = targets === undefined ? row : this.nullsBesides(row, targets);
      return { value: inserted, changes: [{ type: '+I', row: inserted }] };
    }
    if (targets !== undefined && this.targetsKeyOnly) return NO_CHANGE;
    const updated = this.update(old, row, targets);
    return updated === undefined ? NO_CHANGE : this.updated(old, updated);
  }

  private delete(old: unknown[] | undefined, targets: Uint8Array | undefined): MergeResult {
    const behavior = this.options.deleteBehavior;
    if (behavior === 'IGNORE') return NO_CHANGE;
    if (behavior === 'DISABLE') {
      throw new TributaryError('DELETION_DISABLED_EXCEPTION', "deletes are disabled for this table ('table.delete.behavior' = DISABLE)");
    }
    if (old === undefined) return NO_CHANGE;
    if (targets === undefined || this.othersAllNull(old, targets)) return { value: null, changes: [{ type: '-D', row: old }] };
    const kept = old.slice();
    for (let i = 0; i < this.width; i++) {
      if (targets[i] === 0 || this.keyColumn[i] === 1) continue;
      const column = this.schema.columns[i];
      if (!column.nullable) throw new TributaryError('INVALID_TARGET_COLUMN', `a partial delete sets its target columns to null, but column '${column.name}' is NOT NULL`);
      kept[i] = null;
    }
    return this.updated(old, kept);
  }

  private updated(old: unknown[], row: unknown[]): MergeResult {
    return { value: row, changes: this.fullImage ? [{ type: '-U', row: old }, { type: '+U', row }] : [{ type: '+U', row }] };
  }

  /** The target mask of a partial write, undefined when every column is a target (a full-row write). */
  private targetLayout(targetColumns: readonly number[]): Uint8Array | undefined {
    if (targetColumns !== this.lastTargets) {
      validatePartialUpdate(this.schema, this.options.mergeEngine, targetColumns);
      const mask = new Uint8Array(this.width);
      for (const p of targetColumns) mask[p] = 1;
      this.targets = targetColumns.length === this.width ? undefined : mask;
      this.targetsKeyOnly = mask.every((t, i) => t === this.keyColumn[i]);
      this.lastTargets = targetColumns;
    }
    return this.targets;
  }

  private othersAllNull(row: unknown[], targets: Uint8Array): boolean {
    for (let i = 0; i < this.width; i++) if (targets[i] === 0 && row[i] !== null) return false;
    return true;
  }

  private nullsBesides(row: unknown[], targets: Uint8Array): unknown[] {
    const out = new Array<unknown>(this.width);
    for (let i = 0; i < this.width; i++) out[i] = targets[i] === 1 ? row[i] : null;
    return out;
  }

  private padded(old: unknown[]): unknown[] {
    const out = old.slice();
    for (let i = old.length; i < this.width; i++) out.push(null);
    return out;
  }
}
