/**
 * A smaller Parquet file holding some columns and some row groups of another, built from byte
 * ranges of it: the footer, then the column chunks kept, laid out anew after the magic "PAR1" with
 * every offset the footer gives moved to match (parquet-format, "File Format"):
 *
 *   "PAR1" <column chunks kept, in the source's order> <FileMetaData> <its length, u32 LE> "PAR1"
 *
 * It is a valid file of its own that any reader opens. With every row group kept it has every row
 * of the source, so row positions (position deletes) stay the same; with some row groups left
 * out (statistics.ts says which may hold rows a query wants) the rows after one left out move up,
 * and the file's row count is that of the groups kept. What the footer says of bytes not copied
 * goes: page indexes and bloom filters of every column (their offsets would point nowhere), the
 * sorting columns of a row group (their indexes name columns of the source) and its ordinal (its
 * place in the source), the kept columns' column orders stay and the dropped ones' go, and the
 * `ARROW:schema` key-value entry (it describes every column of the source) goes. Each kept schema
 * leaf keeps its field_id, which Iceberg readers resolve columns by.
 *
 * Files no larger than the first read of a footer (64 KiB) are not projected. Only flat schemas
 * (the root and one leaf per column) are projected, and only footers that leave no doubt: not
 * encrypted, every column chunk in this file, chunks that do not overlap and lie between the magic
 * and the footer. Otherwise there is no projection and the reader takes the whole file.
 */
import fs from 'node:fs';
import { TributaryError } from '../../common/errors.js';
import { decodeStruct, encodeStruct, fieldOf, removeField, setField, type TList, type TStruct, TType } from './thrift-compact.js';

const MAGIC = Buffer.from('PAR1');
/** Bytes read from the end of a file at first: the footer of a file of a few dozen columns fits. */
const FOOTER_GUESS = 64 * 1024;
/** Ranges fetched at once while one file is built. */
const FETCHES_IN_FLIGHT = 4;

/** Reads `length` bytes of the source from `offset`. */
export type RangeReader = (offset: number, length: number) => Promise<Uint8Array>;

/** The FileMetaData of a Parquet file, as read from its end. */
export interface ParquetFooter {
  /** The FileMetaData's bytes. */
  metadata: Uint8Array;
  /** Where they start in the file, which is where its data ends. */
  metadataStart: number;
  /** Bytes read of the file for them. */
  bytesRead: number;
  /** The end of the file read with them, from `offset`: ranges within it need not be read again. */
  tail?: { offset: number; bytes: Uint8Array };
}

/** What a projection keeps: the leaves of these field ids (all by default), the row groups of these indexes (all by default). */
export interface ProjectedPart {
  fieldIds?: ReadonlySet<number>;
  rowGroups?: ReadonlySet<number>;
}

/** How to build the projection of one file. */
export interface Projection {
  /** Ranges of the source to copy, in order, adjacent ones merged. */
  ranges: { offset: number; length: number }[];
  /** What follows them: the new FileMetaData, its length and the magic. */
  footer: Uint8Array;
  /** Bytes of the projected file. */
  size: number;
  /** The end of the source read with the footer, from `offset`: ranges within it are not read again. */
  tail?: { offset: number; bytes: Uint8Array };
}

// Field ids of parquet.thrift.
const FILE_SCHEMA = 2;
const FILE_NUM_ROWS = 3;
const FILE_ROW_GROUPS = 4;
const FILE_KEY_VALUES = 5;
const FILE_COLUMN_ORDERS = 7;
const FILE_ENCRYPTION = 8;
const SCHEMA_NUM_CHILDREN = 5;
const SCHEMA_FIELD_ID = 9;
const KEY_VALUE_KEY = 1;
const GROUP_COLUMNS = 1;
const GROUP_TOTAL_BYTE_SIZE = 2;
const GROUP_NUM_ROWS = 3;
const GROUP_SORTING_COLUMNS = 4;
const GROUP_FILE_OFFSET = 5;
const GROUP_TOTAL_COMPRESSED_SIZE = 6;
const GROUP_ORDINAL = 7;
const CHUNK_FILE_PATH = 1;
const CHUNK_FILE_OFFSET = 2;
const CHUNK_META = 3;
const CHUNK_PAGE_INDEXES = [4, 5, 6, 7];
const CHUNK_CRYPTO = [8, 9];
const META_PATH = 3;
const META_UNCOMPRESSED = 6;
const META_COMPRESSED = 7;
const META_DATA_PAGE = 9;
const META_INDEX_PAGE = 10;
const META_DICTIONARY_PAGE = 11;
const META_BLOOM_FILTER = [14, 15];

/**
 * The projection of the Parquet file whose footer is `footer` to `part`; undefined when there is
 * none to make (see the header).
 */
export function planProjection(footer: ParquetFooter, part: ProjectedPart): Projection | undefined {
  if (!isProjectable(footer.metadataStart + footer.metadata.length + 8)) return undefined;
  let projected: ReturnType<typeof projectMetadata>;
  try {
    projected = projectMetadata(footer.metadata, footer.metadataStart, part);
  } catch {
    return undefined; // a footer this code cannot follow is read by the whole file's reader
  }
  return projected && { ...projected, ...(footer.tail ? { tail: footer.tail } : {}) };
}

/** False for a file no larger than the first read of its footer: it is better read whole by that one read. */
export function isProjectable(fileSize: number): boolean {
  return fileSize > FOOTER_GUESS;
}

/** The footer of the Parquet file read by `read` (`fileSize` bytes); undefined when it is not Parquet. */
export async function readParquetFooter(read: RangeReader, fileSize: number): Promise<ParquetFooter | undefined> {
  if (fileSize < 12) return undefined;
  const tailLength = Math.min(fileSize, FOOTER_GUESS);
  const tail = await read(fileSize - tailLength, tailLength);
  if (tail.length !== tailLength || !MAGIC.equals(tail.subarray(tailLength - 4))) return undefined;
  const metadataLength = Buffer.from(tail.buffer, tail.byteOffset, tail.length).readUInt32LE(tailLength - 8);
  const metadataStart = fileSize - 8 - metadataLength;
  if (metadataStart < MAGIC.length) return undefined;
  const end = { offset: fileSize - tailLength, bytes: tail };
  if (metadataLength + 8 <= tailLength) return { metadata: tail.subarray(tailLength - 8 - metadataLength, tailLength - 8), metadataStart, bytesRead: tailLength, tail: end };
  const metadata = await read(metadataStart, metadataLength);
  return metadata.length === metadataLength ? { metadata, metadataStart, bytesRead: tailLength + metadataLength, tail: end } : undefined;
}

/**
 * Bytes of each column of a local Parquet file by field id (Iceberg's column_sizes: every column
 * chunk of the column, compressed, no footer), for the leaves that have a field id.
 */
export async function columnSizesOf(file: string): Promise<Map<number, number>> {
  const handle = await fs.promises.open(file, 'r');
  try {
    const read: RangeReader = async (offset, length) => {
      const buf = Buffer.alloc(length);
      const { bytesRead } = await handle.read(buf, 0, length, offset);
      return buf.subarray(0, bytesRead);
    };
    const footer = await readParquetFooter(read, (await handle.stat()).size);
    if (!footer) throw new TributaryError('STORAGE_EXCEPTION', `${file} is not a Parquet file`);
    const { struct } = decodeStruct(footer.metadata);
    const leaves = (((fieldOf(struct, FILE_SCHEMA) as TList | undefined)?.items ?? []) as TStruct[]).filter((e) => fieldOf(e, SCHEMA_NUM_CHILDREN) === undefined);
    const sizes = new Map<number, number>();
    for (const group of ((fieldOf(struct, FILE_ROW_GROUPS) as TList | undefined)?.items ?? []) as TStruct[]) {
      ((fieldOf(group, GROUP_COLUMNS) as TList | undefined)?.items ?? []).forEach((chunk, i) => {
        const id = leaves[i] && (fieldOf(leaves[i], SCHEMA_FIELD_ID) as number | undefined);
        const meta = fieldOf(chunk as TStruct, CHUNK_META) as TStruct | undefined;
        if (id !== undefined && meta) sizes.set(id, (sizes.get(id) ?? 0) + Number(fieldOf(meta, META_COMPRESSED) as bigint));
      });
    }
    return sizes;
  } finally {
    await handle.close();
  }
}

/** A column chunk kept: where it is in the source, how long, and its footer structs to move. */
interface KeptChunk {
  start: number;
  length: number;
  chunk: TStruct;
  meta: TStruct;
}

/** The projection of FileMetaData `bytes` (the source's data ends at `dataEnd`); undefined on any doubt. */
function projectMetadata(bytes: Uint8Array, dataEnd: number, part: ProjectedPart): Omit<Projection, 'tail'> | undefined {
  const { struct: file } = decodeStruct(bytes);
  if (fieldOf(file, FILE_ENCRYPTION) !== undefined) return undefined;
  const schema = fieldOf(file, FILE_SCHEMA) as TList | undefined;
  if (!schema || schema.items.length < 2) return undefined;
  const [root, ...leaves] = schema.items as TStruct[];
  if (fieldOf(root, SCHEMA_NUM_CHILDREN) !== leaves.length || leaves.some((l) => fieldOf(l, SCHEMA_NUM_CHILDREN) !== undefined)) return undefined;
  const { fieldIds, rowGroups } = part;
  const kept = leaves.flatMap((leaf, i) => (!fieldIds || fieldIds.has(fieldOf(leaf, SCHEMA_FIELD_ID) as number) ? [i] : []));
  if (kept.length === 0) return undefined;

  const all: { start: number; end: number }[] = [];
  const keptChunks: KeptChunk[] = [];
  const rowGroupList = fieldOf(file, FILE_ROW_GROUPS) as TList | undefined;
  const groups = ((rowGroupList?.items ?? []) as TStruct[]).filter((_, g) => !rowGroups || rowGroups.has(g));
  // Every chunk of the source is checked (`all`), those of the groups kept are moved.
  for (const [g, group] of ((rowGroupList?.items ?? []) as TStruct[]).entries()) {
    const keep = !rowGroups || rowGroups.has(g);
    const columns = fieldOf(group, GROUP_COLUMNS) as TList | undefined;
    if (!columns || columns.items.length !== leaves.length) return undefined;
    const chunks: KeptChunk[] = [];
    for (const [i, chunk] of (columns.items as TStruct[]).entries()) {
      const meta = fieldOf(chunk, CHUNK_META) as TStruct | undefined;
      if (!meta || fieldOf(chunk, CHUNK_FILE_PATH) !== undefined || CHUNK_CRYPTO.some((id) => fieldOf(chunk, id) !== undefined)) return undefined;
      if ((fieldOf(meta, META_PATH) as TList | undefined)?.items.length !== 1) return undefined;
      const data = Number(fieldOf(meta, META_DATA_PAGE) as bigint);
      const dictionary = fieldOf(meta, META_DICTIONARY_PAGE) as bigint | undefined;
      // Some writers put 0 for "no dictionary page"; a dictionary page comes before the data pages.
      const start = dictionary !== undefined && dictionary > 0n && Number(dictionary) < data ? Number(dictionary) : data;
      const length = Number(fieldOf(meta, META_COMPRESSED) as bigint);
      if (!Number.isSafeInteger(start) || !(length > 0) || start < MAGIC.length || start + length > dataEnd) return undefined;
      all.push({ start, end: start + length });
      if (keep && kept.includes(i)) chunks.push({ start, length, chunk, meta });
    }
    if (!keep) continue;
    columns.items = chunks.map((c) => c.chunk);
    keptChunks.push(...chunks);
    removeField(group, GROUP_SORTING_COLUMNS, GROUP_ORDINAL);
    setField(group, GROUP_TOTAL_BYTE_SIZE, TType.I64, chunks.reduce((n, c) => n + (fieldOf(c.meta, META_UNCOMPRESSED) as bigint), 0n));
    setField(group, GROUP_TOTAL_COMPRESSED_SIZE, TType.I64, BigInt(chunks.reduce((n, c) => n + c.length, 0)));
  }
  if (rowGroupList && rowGroups) {
    rowGroupList.items = groups;
    setField(file, FILE_NUM_ROWS, TType.I64, groups.reduce((n, g) => n + (fieldOf(g, GROUP_NUM_ROWS) as bigint), 0n));
  }
  all.sort((a, b) => a.start - b.start);
  for (let i = 1; i < all.length; i++) if (all[i].start < all[i - 1].end) return undefined;

  // Lay the kept chunks out in the source's order and move every offset with its chunk.
  keptChunks.sort((a, b) => a.start - b.start);
  const ranges: { offset: number; length: number }[] = [];
  let at = MAGIC.length;
  const newStart = new Map<TStruct, number>();
  for (const c of keptChunks) {
    const shift = BigInt(at - c.start);
    const moved = (offset: bigint | undefined): bigint | undefined => (offset !== undefined && offset >= BigInt(c.start) && offset <= BigInt(c.start + c.length) ? offset + shift : undefined);
    setField(c.meta, META_DATA_PAGE, TType.I64, moved(fieldOf(c.meta, META_DATA_PAGE) as bigint)!);
    const dictionary = moved(fieldOf(c.meta, META_DICTIONARY_PAGE) as bigint | undefined);
    if (dictionary !== undefined) setField(c.meta, META_DICTIONARY_PAGE, TType.I64, dictionary);
    else removeField(c.meta, META_DICTIONARY_PAGE);
    const index = moved(fieldOf(c.meta, META_INDEX_PAGE) as bigint | undefined);
    if (index !== undefined) setField(c.meta, META_INDEX_PAGE, TType.I64, index);
    else removeField(c.meta, META_INDEX_PAGE);
    removeField(c.meta, ...META_BLOOM_FILTER);
    setField(c.chunk, CHUNK_FILE_OFFSET, TType.I64, moved(fieldOf(c.chunk, CHUNK_FILE_OFFSET) as bigint | undefined) ?? BigInt(at));
    removeField(c.chunk, ...CHUNK_PAGE_INDEXES);
    newStart.set(c.chunk, at);
    const last = ranges[ranges.length - 1];
    if (last && last.offset + last.length === c.start) last.length += c.length;
    else ranges.push({ offset: c.start, length: c.length });
    at += c.length;
  }
  for (const group of groups) {
    const first = ((fieldOf(group, GROUP_COLUMNS) as TList).items as TStruct[]).map((c) => newStart.get(c)!).sort((a, b) => a - b)[0];
    if (first !== undefined) setField(group, GROUP_FILE_OFFSET, TType.I64, BigInt(first));
  }

  setField(root, SCHEMA_NUM_CHILDREN, TType.I32, kept.length);
  schema.items = [root, ...kept.map((i) => leaves[i])];
  const orders = fieldOf(file, FILE_COLUMN_ORDERS) as TList | undefined;
  if (orders && orders.items.length === leaves.length) orders.items = kept.map((i) => orders.items[i]);
  else removeField(file, FILE_COLUMN_ORDERS);
  const keyValues = fieldOf(file, FILE_KEY_VALUES) as TList | undefined;
  if (keyValues) {
    keyValues.items = keyValues.items.filter((kv) => Buffer.from(fieldOf(kv as TStruct, KEY_VALUE_KEY) as Uint8Array).toString() !== 'ARROW:schema');
    if (keyValues.items.length === 0) removeField(file, FILE_KEY_VALUES);
  }

  const metadata = encodeStruct(file);
  const length = Buffer.alloc(4);
  length.writeUInt32LE(metadata.length);
  const footer = Buffer.concat([metadata, length, MAGIC]);
  return { ranges, footer, size: at + footer.length };
}

/** Writes `projection` of the source read by `read` as `file` (whole, then renamed into place); returns the source bytes it read for it (the footer's read not counted). */
export async function writeProjection(read: RangeReader, projection: Projection, file: string): Promise<number> {
  const staged = `${file}.part`;
  const out = await fs.promises.open(staged, 'w');
  try {
    await out.write(MAGIC);
    let fetched = 0;
    /** Each range's bytes, in order, and how many of them were read for it. */
    const pending: Promise<{ bytes: Uint8Array; read: number }>[] = [];
    let next = 0;
    const { tail } = projection;
    const fetch = (): void => {
      const r = projection.ranges[next++];
      const inTail = tail && r.offset >= tail.offset ? tail.bytes.subarray(r.offset - tail.offset, r.offset - tail.offset + r.length) : undefined;
      const p = (inTail ? Promise.resolve(inTail) : read(r.offset, r.length)).then((bytes) => {
        if (bytes.length !== r.length) throw new Error(`read ${bytes.length} of ${r.length} bytes at ${r.offset}`);
        return { bytes, read: inTail ? 0 : bytes.length };
      });
      p.catch(() => {}); // awaited in order below
      pending.push(p);
    };
    while (next < projection.ranges.length && pending.length < FETCHES_IN_FLIGHT) fetch();
    while (pending.length > 0) {
      const range = await pending.shift()!;
      if (next < projection.ranges.length) fetch();
      await out.write(range.bytes);
      fetched += range.read;
    }
    await out.write(projection.footer);
    await out.close();
    await fs.promises.rename(staged, file);
    return fetched;
  } catch (err) {
    await out.close().catch(() => {});
    await fs.promises.rm(staged, { force: true });
    throw err;
  }
}
