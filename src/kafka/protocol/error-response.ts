/**
 * An API's error answer in the API's own response shape, built from the schema (schema.ts) and,
 * where the request decoded, the request: a client reads it as it reads any answer of that API and
 * version, and fails the request with the error.
 *
 *   top-level ErrorCode in this version     that field carries the code (ErrorMessage too, if any);
 *                                           arrays are empty
 *   else, per requested item (errorItems)   one response item per request item with the request's
 *                                           keys (topic name, partition index, ...) and the code at
 *                                           the highest level that has an ErrorCode; below it,
 *                                           nothing
 *   no request (it did not decode)          every array empty
 * Every other field keeps its default.
 */
import type { ErrorItems, KafkaApi } from './api.js';
import { defaults, type Field, inRange } from './schema.js';

export function errorResponse(api: KafkaApi, version: number, request: unknown, errorCode: number, errorMessage: string | null = null): Record<string, unknown> {
  const out = defaults(api.response.fields, version);
  if (setError(api.response.fields, version, out, errorCode, errorMessage)) return out;
  if (api.errorItems && request) fill(api.response.fields, version, out, api.errorItems, request as Record<string, unknown>, errorCode, errorMessage);
  return out;
}

/** Sets ErrorCode (and ErrorMessage) of a struct; false when it has none in this version. */
function setError(fields: Field[], version: number, into: Record<string, unknown>, errorCode: number, errorMessage: string | null): boolean {
  const code = fields.find((f) => f.name === 'ErrorCode' && inRange(f.versions, version));
  if (!code) return false;
  into[code.key] = errorCode;
  const message = fields.find((f) => f.name === 'ErrorMessage' && inRange(f.versions, version));
  if (message && errorMessage !== null) into[message.key] = errorMessage;
  return true;
}

function fill(fields: Field[], version: number, into: Record<string, unknown>, mirror: ErrorItems, request: Record<string, unknown>, errorCode: number, errorMessage: string | null): void {
  const field = fields.find((f) => f.key === mirror.response);
  const type = field?.type;
  if (!type || typeof type === 'string' || !('array' in type) || typeof type.array === 'string') throw new RangeError(`errorItems: ${mirror.response} is not an array of structs`);
  const element = type.array;
  const requested = (request[mirror.request] as unknown[] | null) ?? [];
  into[mirror.response] = requested.map((item) => {
    const out = defaults(element, version);
    for (const [to, from] of Object.entries(mirror.keys)) out[to] = from === '' ? item : (item as Record<string, unknown>)[from];
    if (!setError(element, version, out, errorCode, errorMessage) && mirror.items) fill(element, version, out, mirror.items, item as Record<string, unknown>, errorCode, errorMessage);
    return out;
  });
}
