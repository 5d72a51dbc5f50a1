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
import { align8, bufferCountOf, frameMessage, readPayloadMetadata } from './arrow-payload.js';
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

/** Bytes to copy from a stored payload or batch into its projected form. */
export interface ByteCopy {
  /** Where they are in the stored bytes. */
  from: number;
  /** Where they go in the projected bytes. */
  to: number;
  length: number;
}

/** A projected form laid out: everything but the kept buffers written, and the copies that fill those in. */
export interface Cut {
  out: Uint8Array;
  copies: ByteCopy[];
}

/** Adds a copy, merging it into the last one when both sides continue it with the same gap (the stored padding). */
function addCopy(copies: ByteCopy[], from: number, to: number, length: number): void {
  if (length === 0) return;
  const last = copies[copies.length - 1];
  if (last && from >= last.from + last.length && from - last.from === to - last.to) {
    last.length = from - last.from + length;
    return;
  }
  copies.push({ from, to, length });
}

/**
 * The projection of a payload of `payloadLength` bytes written with `arrowSchema` to `columns`
 * (indexes into `arrowSchema`, in the order wanted), planned from `head`, its first bytes up to
 * the body at least (`arrowPayloadBodyStart`). `out` has `headroom` free bytes before the payload
 * (it is a view of a larger buffer, as frameMessage lays out); the copies count from the stored
 * payload's first byte and `out`'s. Undefined when the payload is its own projection.
 */
export function cutArrowPayload(head: Uint8Array, payloadLength: number, arrowSchema: arrow.Schema, columns: readonly number[], headroom = 0): Cut | undefined {
  const plan = planOf(arrowSchema, columns);
  const { header, bodyStart } = readPayloadMetadata(head, payloadLength, arrowSchema);
  if (plan.identity) return undefined;
  const regions: BufferRegion[] = new Array(plan.buffers.length);
  let bodyLength = 0;
  for (let i = 0; i < plan.buffers.length; i++) {
    const length = header.buffers[plan.buffers[i]].length;
    regions[i] = new BufferRegion(bodyLength, length);
    bodyLength += align8(length);
  }
  const projected = new RecordBatchHeader(header.length, plan.nodes.map((n) => header.nodes[n]), regions, header.compression);
  const { out, bodyStart: outBodyStart } = frameMessage(Message.encode(Message.from(projected, bodyLength)), bodyLength, headroom);
  const copies: ByteCopy[] = [];
  for (let i = 0; i < plan.buffers.length; i++) {
    const { offset, length } = header.buffers[plan.buffers[i]];
    addCopy(copies, bodyStart + offset, outBodyStart + regions[i].offset, length);
  }
  return { out, copies };
}
