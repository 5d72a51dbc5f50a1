/**
 * One Kafka API: its key, the versions this listener serves, and its request and response
 * messages as data (schema.ts). The API files in `apis/` each declare one.
 */
import type { MessageSchema } from './schema.js';

export interface KafkaApi<Req = unknown, Resp = unknown> {
  key: number;
  name: string;
  minVersion: number;
  maxVersion: number;
  request: MessageSchema;
  response: MessageSchema;
  /** Phantom members carrying the value types of the request and response (never set). */
  readonly _types?: { request: Req; response: Resp };
}

export function kafkaApi<Req, Resp>(key: number, name: string, minVersion: number, maxVersion: number, request: MessageSchema, response: MessageSchema): KafkaApi<Req, Resp> {
  return { key, name, minVersion, maxVersion, request, response };
}

export type RequestOf<A> = A extends KafkaApi<infer Req, unknown> ? Req : never;
export type ResponseOf<A> = A extends KafkaApi<unknown, infer Resp> ? Resp : never;
