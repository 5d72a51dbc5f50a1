/**
 * Request and response headers, and the frame around them:
 *
 *   frame            = Size int32, then Size bytes: header, body
 *   request header   v0: ApiKey int16, ApiVersion int16, CorrelationId int32
 *                    v1: v0, ClientId nullable string (int16 length, even in flexible requests)
 *                    v2: v1, tagged fields
 *   response header  v0: CorrelationId int32
 *                    v1: v0, tagged fields
 *
 * A request uses header v2 in the API's flexible versions and v1 before them; its response v1 and
 * v0. ApiVersions answers with header v0 always, so that a client that does not yet know the
 * broker's versions can read the answer.
 */
import type { KafkaApi } from './api.js';
import { Reader, Writer } from './primitives.js';

export const API_VERSIONS_KEY = 18;

export interface RequestHeader {
  apiKey: number;
  apiVersion: number;
  correlationId: number;
  clientId: string | null;
}

/** The first eight bytes of every request header, readable before the API is known. */
export function readRequestHeaderStart(r: Reader): Omit<RequestHeader, 'clientId'> {
  return { apiKey: r.int16(), apiVersion: r.int16(), correlationId: r.int32() };
}

/** The rest of the header of a request of `api` at `version` (client id; tagged fields when flexible). */
export function readRequestHeaderRest(r: Reader, api: KafkaApi, version: number): string | null {
  const clientId = r.nullableString();
  if (version >= api.request.firstFlexible) r.taggedFields();
  return clientId;
}

export function writeRequestHeader(w: Writer, api: KafkaApi, header: RequestHeader): Writer {
  w.int16(header.apiKey).int16(header.apiVersion).int32(header.correlationId).nullableString(header.clientId);
  if (header.apiVersion >= api.request.firstFlexible) w.taggedFields();
  return w;
}

export function responseHeaderVersion(api: KafkaApi, version: number): 0 | 1 {
  return api.key !== API_VERSIONS_KEY && version >= api.response.firstFlexible ? 1 : 0;
}

export function writeResponseHeader(w: Writer, headerVersion: 0 | 1, correlationId: number): Writer {
  w.int32(correlationId);
  if (headerVersion === 1) w.taggedFields();
  return w;
}

export function readResponseHeader(r: Reader, headerVersion: 0 | 1): number {
  const correlationId = r.int32();
  if (headerVersion === 1) r.taggedFields();
  return correlationId;
}
