/**
 * Request fields read at the RPC boundary, for every service alike. Proto3 leaves an absent string
 * empty, an absent message undefined and numbers unbounded, so handlers read names, paths, ids and
 * JSON through these, once per request, and a bad field gets a named error that says the API and
 * the field (`CreateTable: table_path.table_name is required`).
 */
import { type ErrorName, TributaryError } from '../common/errors.js';
import { type TablePath, validateIdentifier } from '../common/schema.js';
import type { Api } from './api-keys.js';
import type { PbTablePath } from './gen/tributary_pb.js';

export function fieldError(api: Api, field: string, problem: string, name: ErrorName = 'INVALID_ARGUMENT'): TributaryError {
  return new TributaryError(name, `${api.name}: ${field} ${problem}`);
}

export function databaseNameOf(api: Api, name: string, field = 'database_name'): string {
  validateIdentifier('database', name, `${api.name}: ${field}`);
  return name;
}

export function tablePathOf(api: Api, p: PbTablePath | undefined, field = 'table_path'): TablePath {
  if (!p) throw fieldError(api, field, 'is required', 'INVALID_TABLE_EXCEPTION');
  const database = databaseNameOf(api, p.databaseName, `${field}.database_name`);
  validateIdentifier('table', p.tableName, `${api.name}: ${field}.table_name`);
  return { database, table: p.tableName };
}

const MAX_ID = BigInt(Number.MAX_SAFE_INTEGER);

/** An int64 id (table, partition) as a number: ids are never negative and stay below 2^53. */
export function idOf(api: Api, field: string, id: bigint): number {
  if (id < 0n || id > MAX_ID) throw fieldError(api, field, `${id} is out of range (0 to 2^53 - 1)`);
  return Number(id);
}

export function optionalIdOf(api: Api, field: string, id: bigint | undefined): number | undefined {
  return id === undefined ? undefined : idOf(api, field, id);
}

/** An int field that must lie in [min, max]. */
export function intIn(api: Api, field: string, value: number, min: number, max: number, name: ErrorName = 'INVALID_ARGUMENT'): number {
  if (!Number.isInteger(value) || value < min || value > max) throw fieldError(api, field, `must be between ${min} and ${max}, got ${value}`, name);
  return value;
}

/** A JSON document field; `error` names what a document that does not parse is. */
export function jsonOf(api: Api, field: string, text: string, error: ErrorName): unknown {
  try {
    return JSON.parse(text);
  } catch (err) {
    throw fieldError(api, field, `is not valid JSON: ${(err as Error).message}`, error);
  }
}
