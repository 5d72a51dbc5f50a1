/**
 * Iceberg's primitive types and schemas in their table-metadata JSON form (spec: "Schemas and
 * Data Types", "Appendix C: JSON serialization"). Tributary's lake tables use primitives only.
 *
 *   primitive := boolean | int | long | float | double | decimal(P,S) | date | time | timestamp
 *              | timestamptz | string | uuid | fixed[L] | binary
 *   field     := { id, name, required, type, doc? }
 *   schema    := { type: "struct", schema-id, identifier-field-ids?, fields: [field…] }
 */
export type IcebergPrimitive = string;

export interface IcebergField {
  id: number;
  name: string;
  required: boolean;
  type: IcebergPrimitive;
  doc?: string;
}

export interface IcebergSchema {
  type: 'struct';
  'schema-id': number;
  'identifier-field-ids'?: number[];
  fields: IcebergField[];
}

/** Decimal precision and scale of a `decimal(P,S)` type string, or undefined for other types. */
export function decimalOf(type: IcebergPrimitive): { precision: number; scale: number } | undefined {
  const m = /^decimal\(\s*(\d+)\s*,\s*(\d+)\s*\)$/.exec(type);
  return m ? { precision: Number(m[1]), scale: Number(m[2]) } : undefined;
}

/** Length of a `fixed[L]` type string, or undefined for other types. */
export function fixedLengthOf(type: IcebergPrimitive): number | undefined {
  const m = /^fixed\[(\d+)\]$/.exec(type);
  return m ? Number(m[1]) : undefined;
}
