/**
 * An ObjectStore on the S3 API (AWS S3, MinIO and other S3-compatible stores), on the official AWS
 * SDK. A location is `s3://bucket/key` (or `s3a://`). Requests retry with the SDK's standard
 * strategy (exponential back-off with jitter, `s3.max-attempts` tries; a file streamed in one
 * PutObject is retried here, since the SDK cannot rewind a stream), at most
 * `s3.max-connections` run at once. An object of `s3.multipart.threshold` or more goes up as a
 * multipart upload in `s3.multipart.part-size` parts (aborted when it fails, so no part of it is
 * ever visible), a smaller one as one PutObject: each multipart request costs a round trip, and a
 * store completes the upload by assembling the parts, which on some (s3rver) is a second write of
 * every byte.
 *
 * `publish` (compare-and-set) is made safe twice over, because not every S3-compatible store
 * enforces conditional writes (s3rver, the test server, ignores them):
 *   1. a claim: the writer puts `<key>.claims/<uuid>`, lists `<key>.claims/`, and goes on only if
 *      its claim is the only live one; otherwise it deletes its claim, backs off at random and
 *      tries again. Of two writers whose claims overlap, the one that listed second sees the
 *      first's claim, so at most one holds the claim at a time. This needs strongly consistent
 *      puts and listings (AWS S3 since December 2020, MinIO, s3rver). A claim older than
 *      `s3.commit.claim-timeout` (by the store's clock) is taken for a dead writer's and deleted.
 *   2. while holding it, the writer checks the object against the expectation and writes it with
 *      `If-None-Match: *` (create) or `If-Match: <etag>` (replace), which AWS S3 (since 2024) and
 *      MinIO enforce on their own: there the guarantee holds even for a writer that stalled past
 *      the claim timeout.
 * Errors are STORAGE_EXCEPTION naming the action, the location and the S3 error, with the
 * credentials cut out of the text (s3-settings.ts).
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import { setTimeout as sleep } from 'node:timers/promises';
import { countRequest, countTransfer } from './storage-stats.js';
import {
  AbortMultipartUploadCommand,
  CompleteMultipartUploadCommand,
  CreateMultipartUploadCommand,
  DeleteObjectCommand,
  DeleteObjectsCommand,
  GetObjectCommand,
  HeadObjectCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  S3Client,
  UploadPartCommand,
} from '@aws-sdk/client-s3';
import { TributaryError } from '../common/errors.js';
import type { ByteRange, ObjectHead, ObjectInfo, ObjectStore, PublishExpectation } from './object-store.js';
import { redactSecrets, type S3Settings } from './s3-settings.js';

/** DeleteObjects takes at most this many keys a request. */
const DELETE_BATCH = 1000;
/** Parts of one multipart upload in flight at once. */
const PART_CONCURRENCY = 4;
/** Back-off of a retried file upload, as the SDK's standard retries: random up to 100 ms × 2^attempt, at most 20 s. */
const RETRY_BACKOFF_MS = 100;
const RETRY_BACKOFF_MAX_MS = 20_000;
const CLAIM_BACKOFF_MS = 20;
const CLAIM_BACKOFF_MAX_MS = 1_000;

interface S3Address {
  bucket: string;
  key: string;
}

/** Bucket and key of `s3://bucket/key`. */
export function s3AddressOf(location: string): S3Address {
  const m = /^s3a?:\/\/([^/]+)\/?(.*)$/.exec(location);
  if (!m) throw new TributaryError('INVALID_ARGUMENT', `not an S3 location: ${location}`);
  return { bucket: m[1], key: m[2] };
}

/** Runs at most `limit` tasks at once. */
class Semaphore {
  private running = 0;
  private readonly waiting: (() => void)[] = [];

  constructor(private readonly limit: number) {}

  async run<T>(task: () => Promise<T>): Promise<T> {
    if (this.running >= this.limit) await new Promise<void>((resolve) => this.waiting.push(resolve));
    this.running++;
    try {
      return await task();
    } finally {
      this.running--;
      this.waiting.shift()?.();
    }
  }
}

export class S3ObjectStore implements ObjectStore {
  readonly kind = 's3';
  private readonly client: S3Client;
  private readonly requests: Semaphore;

  constructor(private readonly settings: S3Settings) {
    const agent = { keepAlive: true, maxSockets: settings.maxConnections };
    this.client = new S3Client({
      region: settings.region,
      ...(settings.endpoint ? { endpoint: settings.endpoint } : {}),
      forcePathStyle: settings.pathStyle,
      maxAttempts: settings.maxAttempts,
      retryMode: 'standard',
      // Checksums only where S3 requires them: by default the SDK sends a streamed body (putWholeFile)
      // aws-chunked with a trailing checksum, which not every S3-compatible store decodes (s3rver
      // stores the encoding as the object's bytes).
      requestChecksumCalculation: 'WHEN_REQUIRED',
      requestHandler: { httpAgent: new http.Agent(agent), httpsAgent: new https.Agent(agent) },
      // The SDK logs nothing by default but for a failed streamed request, which putWholeFile retries itself.
      logger: { debug: () => {}, info: () => {}, warn: () => {}, error: () => {} },
      ...(settings.accessKeyId && settings.secretAccessKey
        ? { credentials: { accessKeyId: settings.accessKeyId, secretAccessKey: settings.secretAccessKey, ...(settings.sessionToken ? { sessionToken: settings.sessionToken } : {}) } }
        : {}),
    });
    this.requests = new Semaphore(settings.maxConnections);
    // Counted per HTTP attempt (below the SDK's retries), with the bytes each carried.
    this.client.middlewareStack.add(
      (next, context) => async (args) => {
        const operation = String(context.commandName ?? 'request').replace(/Command$/, '');
        const request = args.request as { headers?: Record<string, string> };
        try {
          const out = await next(args);
          countRequest(operation, false);
          countTransfer('up', Number(request.headers?.['content-length'] ?? 0));
          const response = out.response as { headers?: Record<string, string> };
          if (operation === 'GetObject') countTransfer('down', Number(response.headers?.['content-length'] ?? 0));
          return out;
        } catch (err) {
          countRequest(operation, true);
          throw err;
        }
      },
      { step: 'finalizeRequest', name: 'tributaryStorageStats' },
    );
  }

  localPath(): undefined {
    return undefined;
  }

  async put(location: string, body: Uint8Array | string): Promise<void> {
    const { bucket, key } = s3AddressOf(location);
    await this.send(`write`, location, () => this.client.send(new PutObjectCommand({ Bucket: bucket, Key: key, Body: body, ContentLength: Buffer.byteLength(body) })));
  }

  /** Held in memory up to `s3.multipart.threshold`: a stream that ends below it goes up in one request. */
  async putStream(location: string, body: AsyncIterable<Uint8Array>): Promise<void> {
    const rest = body[Symbol.asyncIterator]();
    const head: Uint8Array[] = [];
    let headBytes = 0;
    while (headBytes < this.settings.multipartThreshold) {
      const next = await rest.next();
      if (next.done) return this.put(location, Buffer.concat(head, headBytes));
      head.push(next.value);
      headBytes += next.value.length;
    }
    await this.multipart(location, partsOf(chained(head, rest), this.settings.partSize));
  }

  async putFile(location: string, file: string): Promise<void> {
    const { size } = await fs.promises.stat(file);
    if (size < this.settings.multipartThreshold) return this.putWholeFile(location, file, size);
    const handle = await fs.promises.open(file, 'r');
    try {
      await this.multipart(location, filePartsOf(handle, size, this.settings.partSize));
    } finally {
      await handle.close();
    }
  }

  /**
   * One PutObject of a file read as a stream, so no copy of it is held in memory. The SDK retries
   * no request whose body is a stream (it cannot rewind one), so each try here opens the file anew.
   */
  private async putWholeFile(location: string, file: string, size: number): Promise<void> {
    const { bucket, key } = s3AddressOf(location);
    for (let attempt = 1; ; attempt++) {
      try {
        await this.requests.run(async () => {
          const body = fs.createReadStream(file, { highWaterMark: 1 << 20 });
          try {
            await this.client.send(new PutObjectCommand({ Bucket: bucket, Key: key, Body: body, ContentLength: size }));
          } finally {
            body.destroy();
          }
        });
        return;
      } catch (err) {
        if (attempt >= this.settings.maxAttempts || !isTransient(err)) throw this.error('write', location, err);
        await sleep(Math.random() * Math.min(RETRY_BACKOFF_MAX_MS, RETRY_BACKOFF_MS * 2 ** attempt));
      }
    }
  }

  /**
   * A multipart upload of `parts` (each but the last at least 5 MB), PART_CONCURRENCY of them in
   * flight: the next part is taken from `parts` only when one of those is done, which bounds the
   * bytes held. Any failure aborts the upload, so no part of it is ever visible.
   */
  private async multipart(location: string, parts: AsyncIterable<Uint8Array>): Promise<void> {
    const { bucket, key } = s3AddressOf(location);
    const uploadId = (await this.send('start an upload of', location, () => this.client.send(new CreateMultipartUploadCommand({ Bucket: bucket, Key: key })))).UploadId!;
    const uploaded: { PartNumber: number; ETag: string }[] = [];
    const inFlight = new Set<Promise<void>>();
    let failure: unknown;
    try {
      let partNumber = 0;
      for await (const bytes of parts) {
        const n = ++partNumber;
        const task = this.send('upload a part of', location, () =>
          this.client.send(new UploadPartCommand({ Bucket: bucket, Key: key, UploadId: uploadId, PartNumber: n, Body: bytes, ContentLength: bytes.length })),
        ).then(
          (r) => void uploaded.push({ PartNumber: n, ETag: r.ETag! }),
          (err: unknown) => void (failure ??= err),
        );
        inFlight.add(task);
        void task.finally(() => inFlight.delete(task));
        if (inFlight.size >= PART_CONCURRENCY) await Promise.race(inFlight);
        if (failure) throw failure;
      }
      await Promise.all(inFlight);
      if (failure) throw failure;
      uploaded.sort((a, b) => a.PartNumber - b.PartNumber);
      await this.send('complete the upload of', location, () =>
        this.client.send(new CompleteMultipartUploadCommand({ Bucket: bucket, Key: key, UploadId: uploadId, MultipartUpload: { Parts: uploaded } })),
      );
    } catch (err) {
      await Promise.allSettled(inFlight);
      await this.send('abort the upload of', location, () => this.client.send(new AbortMultipartUploadCommand({ Bucket: bucket, Key: key, UploadId: uploadId }))).catch(() => {});
      throw this.error('write', location, err);
    }
  }

  async get(location: string, range?: ByteRange): Promise<Uint8Array | undefined> {
    const { bucket, key } = s3AddressOf(location);
    const header = range ? `bytes=${range.offset}-${range.length === undefined ? '' : range.offset + range.length - 1}` : undefined;
    if (range?.length === 0) return new Uint8Array(0);
    try {
      return await this.requests.run(async () => {
        const r = await this.client.send(new GetObjectCommand({ Bucket: bucket, Key: key, ...(header ? { Range: header } : {}) }));
        return r.Body!.transformToByteArray();
      });
    } catch (err) {
      if (isNotFound(err)) return undefined;
      if (range && httpStatus(err) === 416) return new Uint8Array(0);
      throw this.error('read', location, err);
    }
  }

  async getToFile(location: string, file: string): Promise<boolean> {
    const { bucket, key } = s3AddressOf(location);
    const tmp = `${file}.${crypto.randomUUID()}.tmp`;
    try {
      await this.requests.run(async () => {
        const r = await this.client.send(new GetObjectCommand({ Bucket: bucket, Key: key }));
        await fs.promises.writeFile(tmp, r.Body as NodeJS.ReadableStream);
      });
      await fs.promises.rename(tmp, file);
      return true;
    } catch (err) {
      await fs.promises.rm(tmp, { force: true }).catch(() => {});
      if (isNotFound(err)) return false;
      throw this.error('download', location, err);
    }
  }

  async head(location: string): Promise<ObjectHead | undefined> {
    const { bucket, key } = s3AddressOf(location);
    try {
      const r = await this.requests.run(() => this.client.send(new HeadObjectCommand({ Bucket: bucket, Key: key })));
      return { location, size: r.ContentLength ?? 0, lastModifiedMs: r.LastModified?.getTime() ?? 0, etag: r.ETag ?? '' };
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw this.error('read', location, err);
    }
  }

  async list(dir: string): Promise<ObjectInfo[]> {
    return (await this.listPrefix(directoryOf(dir), false)).objects;
  }

  async listDirectories(dir: string): Promise<string[]> {
    return (await this.listPrefix(directoryOf(dir), true)).directories;
  }

  async delete(location: string): Promise<void> {
    const { bucket, key } = s3AddressOf(location);
    await this.send('delete', location, () => this.client.send(new DeleteObjectCommand({ Bucket: bucket, Key: key })));
  }

  async deleteMany(locations: readonly string[]): Promise<void> {
    const byBucket = new Map<string, string[]>();
    for (const l of locations) {
      const { bucket, key } = s3AddressOf(l);
      byBucket.set(bucket, [...(byBucket.get(bucket) ?? []), key]);
    }
    for (const [bucket, keys] of byBucket) {
      for (let i = 0; i < keys.length; i += DELETE_BATCH) {
        const batch = keys.slice(i, i + DELETE_BATCH);
        const where = `s3://${bucket}/${batch[0]}`;
        const r = await this.send('delete', where, () => this.client.send(new DeleteObjectsCommand({ Bucket: bucket, Delete: { Objects: batch.map((Key) => ({ Key })), Quiet: true } })));
        const failed = r.Errors?.[0];
        if (failed) throw new TributaryError('STORAGE_EXCEPTION', `cannot delete s3://${bucket}/${failed.Key}: ${redactSecrets(`${failed.Code} ${failed.Message ?? ''}`, this.settings)}`);
      }
    }
  }

  async deleteDirectory(dir: string): Promise<void> {
    await this.deleteMany((await this.list(dir)).map((o) => o.location));
  }

  async publish(location: string, body: Uint8Array | string, expected: PublishExpectation): Promise<ObjectHead | undefined> {
    const release = await this.claim(location);
    try {
      const current = await this.head(location);
      if ('absent' in expected ? current !== undefined : current?.etag !== expected.etag) return undefined;
      const { bucket, key } = s3AddressOf(location);
      const condition = 'absent' in expected ? { IfNoneMatch: '*' } : { IfMatch: expected.etag };
      try {
        await this.requests.run(() => this.client.send(new PutObjectCommand({ Bucket: bucket, Key: key, Body: body, ContentLength: Buffer.byteLength(body), ...condition })));
      } catch (err) {
        const status = httpStatus(err);
        if (status === 412 || status === 409) return undefined;
        throw this.error('write', location, err);
      }
      return await this.head(location);
    } finally {
      await release();
    }
  }

  /** Holds the claim of `location` (see the header); resolves to its release. */
  private async claim(location: string): Promise<() => Promise<void>> {
    const claims = `${location}.claims/`;
    for (let attempt = 0; ; attempt++) {
      const mine = `${claims}${crypto.randomUUID()}`;
      await this.put(mine, '');
      const { objects } = await this.listPrefix(claims, false);
      const own = objects.find((o) => o.location === mine);
      const now = own?.lastModifiedMs ?? Date.now();
      const stale = objects.filter((o) => o.location !== mine && now - o.lastModifiedMs > this.settings.commitClaimTimeoutMs);
      const rivals = objects.filter((o) => o.location !== mine && !stale.includes(o));
      if (stale.length > 0) await this.deleteMany(stale.map((o) => o.location));
      if (own && rivals.length === 0) return () => this.delete(mine);
      await this.delete(mine);
      const ceiling = Math.min(CLAIM_BACKOFF_MAX_MS, CLAIM_BACKOFF_MS * 2 ** Math.min(attempt, 10));
      await sleep(Math.random() * ceiling);
    }
  }

  private async listPrefix(prefix: string, delimited: boolean): Promise<{ objects: ObjectInfo[]; directories: string[] }> {
    const { bucket, key } = s3AddressOf(prefix);
    const scheme = prefix.slice(0, prefix.indexOf('://') + 3);
    const objects: ObjectInfo[] = [];
    const directories: string[] = [];
    let token: string | undefined;
    do {
      const page = await this.send('list', prefix, () =>
        this.client.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: key, ...(delimited ? { Delimiter: '/' } : {}), ...(token ? { ContinuationToken: token } : {}) })),
      );
      for (const o of page.Contents ?? []) objects.push({ location: `${scheme}${bucket}/${o.Key}`, size: o.Size ?? 0, lastModifiedMs: o.LastModified?.getTime() ?? 0 });
      for (const p of page.CommonPrefixes ?? []) directories.push(p.Prefix!.slice(key.length).replace(/\/$/, ''));
      token = page.IsTruncated ? page.NextContinuationToken : undefined;
    } while (token);
    return { objects, directories: directories.sort() };
  }

  private async send<T>(action: string, location: string, request: () => Promise<T>): Promise<T> {
    try {
      return await this.requests.run(request);
    } catch (err) {
      throw this.error(action, location, err);
    }
  }

  /** A named error without the SDK's error object, which a logger would print whole. */
  private error(action: string, location: string, err: unknown): TributaryError {
    if (err instanceof TributaryError) return err;
    const e = err as Error;
    const status = httpStatus(err);
    const text = `cannot ${action} ${location}: ${e.name}${status ? ` (HTTP ${status})` : ''}: ${e.message}`;
    return new TributaryError('STORAGE_EXCEPTION', redactSecrets(text, this.settings));
  }
}

/** Whether a failed request may succeed when tried again: no answer at all, a timeout, throttling or a server error (as the SDK's standard retries take them). */
function isTransient(err: unknown): boolean {
  const status = httpStatus(err);
  return status === undefined || status === 429 || status >= 500 || (err as Error).name === 'RequestTimeout';
}

/** `head`, then what is left of `rest`. */
async function* chained(head: Uint8Array[], rest: AsyncIterator<Uint8Array>): AsyncGenerator<Uint8Array> {
  yield* head;
  for (let next = await rest.next(); !next.done; next = await rest.next()) yield next.value;
}

/** `chunks` cut into parts of `partSize` bytes, the last one smaller. */
async function* partsOf(chunks: AsyncIterable<Uint8Array>, partSize: number): AsyncGenerator<Uint8Array> {
  let pending: Uint8Array[] = [];
  let pendingBytes = 0;
  for await (const chunk of chunks) {
    pending.push(chunk);
    pendingBytes += chunk.length;
    if (pendingBytes < partSize) continue;
    let all = Buffer.concat(pending, pendingBytes);
    for (; all.length >= partSize; all = all.subarray(partSize)) yield all.subarray(0, partSize);
    pending = [all];
    pendingBytes = all.length;
  }
  if (pendingBytes > 0) yield Buffer.concat(pending, pendingBytes);
}

/** The file's parts of `partSize` bytes, each read at its offset when it is asked for. */
async function* filePartsOf(handle: fs.promises.FileHandle, size: number, partSize: number): AsyncGenerator<Uint8Array> {
  for (let offset = 0; offset < size; offset += partSize) {
    const part = Buffer.allocUnsafe(Math.min(partSize, size - offset));
    const { bytesRead } = await handle.read(part, 0, part.length, offset);
    if (bytesRead < part.length) throw new Error(`the file shrank to ${offset + bytesRead} bytes while it was uploaded`);
    yield part;
  }
}

function httpStatus(err: unknown): number | undefined {
  return (err as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode;
}

function isNotFound(err: unknown): boolean {
  const name = (err as Error).name;
  return name === 'NoSuchKey' || name === 'NotFound' || httpStatus(err) === 404;
}

/** `dir` as a key prefix ending in '/' (the bucket's root stays empty). */
function directoryOf(dir: string): string {
  return /^s3a?:\/\/[^/]+\/?$/.test(dir) ? dir.replace(/\/?$/, '/') : dir.replace(/\/*$/, '/');
}
