/**
 * Server-side column projection of ARROW payloads (DESIGN.md §3): the projected payload keeps the
 * field nodes and body buffers of the chosen columns, in the order asked for, and their stored bytes
 * unchanged (still compressed, under the same BodyCompression); only the metadata is written anew.
 * No value is decoded, so the cost is one metadata parse and one copy of the kept buffers.
 *
 * Which nodes and buffers a projection keeps depends only on the schema and the columns, and is
 * cached per (Arrow schema object, columns).
 */
import type * as arrow from 'apache-arrow';
import { BufferRegion, Message, RecordBatch as RecordBatchHeader } from 'apache-arrow/ipc/metadata/message';
import { align8, bufferCountOf, frameMessage, readPayloadMessage } from './arrow-payload.js';
import { checkProjection } from './arrow-schema.js';

interface ProjectionPlan {
  /** Field node indexes to keep, in output order. */
  nodes: number[];
  /** Body buffer indexes to keep, in output order. */
  buffers: number[];
  /** All columns in schema order: the payload is its own projection. */
  identity: boolean;
}

const plans = new WeakMap<arrow.Schema, Map<string, ProjectionPlan>>();

function planOf(arrowSchema: arrow.Schema, columns: readonly number[]): ProjectionPlan {
  let bySchema = plans.get(arrowSchema);
  if (!bySchema) {
    bySchema = new Map();
    plans.set(arrowSchema, bySchema);
  }
  const key = columns.join(',');
  let plan = bySchema.get(key);
  if (!plan) {
    const fields = arrowSchema.fields;
    checkProjection(columns, fields.length);
    const firstBuffer: number[] = [];
    let bufferCount = 0;
    for (const f of fields) {
      firstBuffer.push(bufferCount);
      bufferCount += bufferCountOf(f.type);
    }
    const buffers: number[] = [];
    for (const c of columns) {
      for (let b = 0; b < bufferCountOf(fields[c].type); b++) buffers.push(firstBuffer[c] + b);
    }
    plan = { nodes: [...columns], buffers, identity: columns.length === fields.length && columns.every((c, i) => c === i) };
    bySchema.set(key, plan);
  }
  return plan;
}

/**
 * The payload holding only `columns` (indexes into `arrowSchema`, in the order wanted) of a
 * payload written with `arrowSchema`. It decodes with `toArrowSchema(schema, columns)`.
 */
export function projectArrowPayload(payload: Uint8Array, arrowSchema: arrow.Schema, columns: readonly number[]): Uint8Array {
  const plan = planOf(arrowSchema, columns);
  const { header, body } = readPayloadMessage(payload, arrowSchema);
  if (plan.identity) return payload;
  const regions: BufferRegion[] = new Array(plan.buffers.length);
  let bodyLength = 0;
  for (let i = 0; i < plan.buffers.length; i++) {
    const length = header.buffers[plan.buffers[i]].length;
    regions[i] = new BufferRegion(bodyLength, length);
    bodyLength += align8(length);
  }
  const projected = new RecordBatchHeader(header.length, plan.nodes.map((n) => header.nodes[n]), regions, header.compression);
  const { out, bodyStart } = frameMessage(Message.encode(Message.from(projected, bodyLength)), bodyLength);
  for (let i = 0; i < plan.buffers.length; i++) {
    const { offset, length } = header.buffers[plan.buffers[i]];
    out.set(body.subarray(offset, offset + length), bodyStart + regions[i].offset);
  }
  return out;
}
