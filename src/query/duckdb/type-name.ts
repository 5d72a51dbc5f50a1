/** DuckDB's spelling of a Tributary type: the target of the casts that fit values to columns. */
import type { DataType } from '../../common/types.js';

export function duckTypeName(t: DataType): string {
  switch (t.kind) {
    case 'INT':
      return 'INTEGER';
    case 'DECIMAL':
      return `DECIMAL(${t.precision}, ${t.scale})`;
    case 'CHAR':
    case 'STRING':
      return 'VARCHAR';
    case 'BINARY':
    case 'BYTES':
      return 'BLOB';
    case 'TIME':
      return 'TIME';
    case 'TIMESTAMP':
      return 'TIMESTAMP';
    case 'TIMESTAMP_LTZ':
      return 'TIMESTAMPTZ';
    default:
      return t.kind;
  }
}
