/**
 * Kafka messages as data. Each API file (`apis/*.ts`) declares its request and response the way
 * Kafka's message schemas do: fields with the versions they exist in (`versions`), the versions in
 * which they may be null (`nullableVersions`), and, for flexible versions, the fields carried as
 * tagged fields (`taggedVersions` with a `tag`). One codec reads and writes every message:
 *
 *   message      = field* [tagged fields]              tagged fields only in flexible versions
 *   struct       = field* [tagged fields]              same rule for every struct and array element
 *   field        = absent                              when the version is outside `versions`
 *                | value of its type                   strings, bytes and arrays in their compact
 *                                                      form in flexible versions (primitives.ts)
 *
 * Values are plain objects keyed by the field name with its first letter in lower case
 * (ThrottleTimeMs -> throttleTimeMs). A field absent from a version decodes to its default.
 */
import { KafkaDecodeError, Reader, Writer } from './primitives.js';

export type Primitive = 'int8' | 'int16' | 'uint16' | 'int32' | 'int64' | 'float64' | 'bool' | 'string' | 'bytes' | 'records' | 'uuid';
export type FieldType = Primitive | { array: Primitive | Field[] } | { struct: Field[] };

export interface Field {
  name: string;
  /** camelCase key of the field in a value object. */
  key: string;
  type: FieldType;
  versions: VersionRange;
  nullable: VersionRange | null;
  tagged: { versions: VersionRange; tag: number } | null;
  default: unknown;
}

export interface VersionRange {
  min: number;
  max: number;
}

export interface MessageSchema {
  name: string;
  /** From this version on the message is flexible (compact types, tagged fields); Infinity when never. */
  firstFlexible: number;
  fields: Field[];
}

/** Parses Kafka's version notation: `3+`, `0-7`, `5`, `none`. */
export function versions(spec: string): VersionRange {
  if (spec === 'none') return { min: 1, max: 0 };
  let m = /^(\d+)\+$/.exec(spec);
  if (m) return { min: Number(m[1]), max: Number.MAX_SAFE_INTEGER };
  m = /^(\d+)-(\d+)$/.exec(spec);
  if (m) return { min: Number(m[1]), max: Number(m[2]) };
  m = /^(\d+)$/.exec(spec);
  if (m) return { min: Number(m[1]), max: Number(m[1]) };
  throw new RangeError(`bad version range '${spec}'`);
}

export const inRange = (r: VersionRange | null, v: number): boolean => r !== null && v >= r.min && v <= r.max;

export interface FieldOptions {
  nullableVersions?: string;
  taggedVersions?: string;
  tag?: number;
  default?: unknown;
}

/** Declares a field as Kafka's JSON schemas do. */
export function field(name: string, type: FieldType, versionSpec: string, options: FieldOptions = {}): Field {
  return {
    name,
    key: name[0].toLowerCase() + name.slice(1),
    type,
    versions: versions(versionSpec),
    nullable: options.nullableVersions ? versions(options.nullableVersions) : null,
    tagged: options.taggedVersions !== undefined ? { versions: versions(options.taggedVersions), tag: options.tag ?? 0 } : null,
    default: options.default,
  };
}

export function message(name: string, flexibleVersions: string, fields: Field[]): MessageSchema {
  const flexible = versions(flexibleVersions);
  return { name, firstFlexible: flexible.min > flexible.max ? Infinity : flexible.min, fields };
}

function defaultOf(f: Field, version: number): unknown {
  if (f.default !== undefined) return f.default;
  if (inRange(f.nullable, version) && typeof f.type !== 'string' && 'array' in f.type) return null;
  const t = f.type;
  if (typeof t !== 'string') return 'array' in t ? [] : defaults(t.struct, version);
  switch (t) {
    case 'int64':
      return 0n;
    case 'bool':
      return false;
    case 'string':
      return inRange(f.nullable, version) ? null : '';
    case 'bytes':
    case 'records':
      return inRange(f.nullable, version) ? null : Buffer.alloc(0);
    case 'uuid':
      return Buffer.alloc(16);
    default:
      return 0;
  }
}

/** Every field of `fields` at its default for `version`. */
export function defaults(fields: Field[], version: number): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const f of fields) out[f.key] = defaultOf(f, version);
  return out;
}

// ------------------------------------------------------------------ decode

export function decodeMessage<T>(schema: MessageSchema, version: number, r: Reader): T {
  return readStruct(schema.fields, version, version >= schema.firstFlexible, r) as T;
}

function readStruct(fields: Field[], version: number, flexible: boolean, r: Reader): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  const tagged = new Map<number, Field>();
  for (const f of fields) {
    if (flexible && inRange(f.tagged?.versions ?? null, version)) {
      tagged.set(f.tagged!.tag, f);
      out[f.key] = defaultOf(f, version);
    } else if (inRange(f.versions, version)) {
      out[f.key] = readValue(f, f.type, version, flexible, r);
    } else {
      out[f.key] = defaultOf(f, version);
    }
  }
  if (flexible) {
    r.taggedFields((tag, fr) => {
      const f = tagged.get(tag);
      if (f) out[f.key] = readValue(f, f.type, version, flexible, fr);
    });
  }
  return out;
}

function readValue(f: Field, t: FieldType, version: number, flexible: boolean, r: Reader): unknown {
  const nullable = inRange(f.nullable, version);
  if (typeof t !== 'string') {
    if ('struct' in t) return readStruct(t.struct, version, flexible, r);
    const n = r.arrayLength(flexible);
    if (n === -1) {
      if (!nullable) throw new KafkaDecodeError(`${f.name} is null`);
      return null;
    }
    const out: unknown[] = [];
    const element = t.array;
    for (let i = 0; i < n; i++) out.push(typeof element === 'string' ? readValue(f, element, version, flexible, r) : readStruct(element, version, flexible, r));
    return out;
  }
  switch (t) {
    case 'int8':
      return r.int8();
    case 'int16':
      return r.int16();
    case 'uint16':
      return r.uint16();
    case 'int32':
      return r.int32();
    case 'int64':
      return r.int64();
    case 'float64':
      return r.float64();
    case 'bool':
      return r.bool();
    case 'uuid':
      return r.uuid();
    case 'string': {
      const s = flexible ? r.compactNullableString() : r.nullableString();
      if (s === null && !nullable) throw new KafkaDecodeError(`${f.name} is null`);
      return s;
    }
    case 'bytes':
    case 'records': {
      const b = flexible ? r.compactNullableBytes() : r.nullableBytes();
      if (b === null && !nullable) throw new KafkaDecodeError(`${f.name} is null`);
      return b;
    }
  }
}

// ------------------------------------------------------------------ encode

export function encodeMessage(schema: MessageSchema, version: number, value: object, w: Writer = new Writer()): Writer {
  writeStruct(schema.fields, version, version >= schema.firstFlexible, value as Record<string, unknown>, w);
  return w;
}

function writeStruct(fields: Field[], version: number, flexible: boolean, value: Record<string, unknown>, w: Writer): void {
  const tagged: [number, Uint8Array][] = [];
  for (const f of fields) {
    const v = value[f.key] === undefined ? defaultOf(f, version) : value[f.key];
    if (flexible && inRange(f.tagged?.versions ?? null, version)) {
      if (!sameAsDefault(v, defaultOf(f, version))) {
        const fw = new Writer(32);
        writeValue(f, f.type, version, flexible, v, fw);
        tagged.push([f.tagged!.tag, fw.finish()]);
      }
    } else if (inRange(f.versions, version)) {
      writeValue(f, f.type, version, flexible, v, w);
    }
  }
  if (flexible) w.taggedFields(tagged);
}

function sameAsDefault(v: unknown, d: unknown): boolean {
  if (v === d) return true;
  if (Array.isArray(v) && Array.isArray(d)) return v.length === 0 && d.length === 0;
  if (v && d && typeof v === 'object' && typeof d === 'object' && !Buffer.isBuffer(v)) {
    return Object.keys(d).every((k) => sameAsDefault((v as Record<string, unknown>)[k], (d as Record<string, unknown>)[k]));
  }
  return false;
}

function writeValue(f: Field, t: FieldType, version: number, flexible: boolean, v: unknown, w: Writer): void {
  const nullable = inRange(f.nullable, version);
  if (v === null && !nullable && !(t === 'string' || t === 'bytes' || t === 'records')) throw new RangeError(`${f.name} may not be null in version ${version}`);
  if (typeof t !== 'string') {
    if ('struct' in t) {
      writeStruct(t.struct, version, flexible, v as Record<string, unknown>, w);
      return;
    }
    const items = v as unknown[] | null;
    w.arrayLength(items === null ? null : items.length, flexible);
    const element = t.array;
    for (const item of items ?? []) {
      if (typeof element === 'string') writeValue(f, element, version, flexible, item, w);
      else writeStruct(element, version, flexible, item as Record<string, unknown>, w);
    }
    return;
  }
  switch (t) {
    case 'int8':
      w.int8(v as number);
      return;
    case 'int16':
      w.int16(v as number);
      return;
    case 'uint16':
      w.uint16(v as number);
      return;
    case 'int32':
      w.int32(v as number);
      return;
    case 'int64':
      w.int64(v as bigint);
      return;
    case 'float64':
      w.float64(v as number);
      return;
    case 'bool':
      w.bool(v as boolean);
      return;
    case 'uuid':
      w.uuid(v as Uint8Array);
      return;
    case 'string': {
      const s = v === null && !nullable ? '' : (v as string | null);
      if (flexible) w.compactNullableString(s);
      else w.nullableString(s);
      return;
    }
    case 'bytes':
    case 'records': {
      const b = v === null && !nullable ? Buffer.alloc(0) : (v as Uint8Array | null);
      if (flexible) w.compactNullableBytes(b);
      else w.nullableBytes(b);
      return;
    }
  }
}
