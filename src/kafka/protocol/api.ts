/**
 * One Kafka API: its key, the versions this listener serves, and its request and response
 * messages as data (schema.ts). The API files in `apis/` each declare one.
 */
import type { MessageSchema } from './schema.js';

/**
 * How a response's items mirror a request's, for an error answer (error-response.ts): the
 * response array `response` has one item per item of the request array `request`, carrying the
 * request item's `keys` (response key <- request key; '' for a request item that is the key itself,
 * as DeleteTopics' topic names); `items` says the same one level down.
 */
export interface ErrorItems {
  response: string;
  request: string;
  keys: Record<string, string>;
  items?: ErrorItems;
}

export interface KafkaApi<Req = unknown, Resp = unknown> {
  key: number;
  name: string;
  minVersion: number;
  maxVersion: number;
  request: MessageSchema;
  response: MessageSchema;
  /** Where an error answer repeats the requested items; none when every version has a top-level ErrorCode. */
  errorItems?: ErrorItems;
  /** Phantom members carrying the value types of the request and response (never set). */
  readonly _types?: { request: Req; response: Resp };
}

export function kafkaApi<Req, Resp>(
  key: number,
  name: string,
  minVersion: number,
  maxVersion: number,
  request: MessageSchema,
  response: MessageSchema,
  errorItems?: ErrorItems,
): KafkaApi<Req, Resp> {
  return { key, name, minVersion, maxVersion, request, response, ...(errorItems ? { errorItems } : {}) };
}

export type RequestOf<A> = A extends KafkaApi<infer Req, unknown> ? Req : never;
export type ResponseOf<A> = A extends KafkaApi<unknown, infer Resp> ? Resp : never;
