/**
 * An ObjectStore on the S3 API (AWS S3, MinIO and other S3-compatible stores), on the official AWS
 * SDK. A location is `s3://bucket/key` (or `s3a://`). Requests retry with the SDK's standard
 * strategy (exponential back-off with jitter, `s3.max-attempts` tries), at most
 * `s3.max-connections` run at once, and an object larger than `s3.multipart.part-size` goes up as a
 * multipart upload (aborted when it fails, so no part of it is ever visible).
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
      requestHandler: { httpAgent: new http.Agent(agent), httpsAgent: new https.Agent(agent) },
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

  async putStream(location: string, body: AsyncIterable<Uint8Array>): Promise<void> {
    const { bucket, key } = s3AddressOf(location);
    const partSize = this.settings.partSize;
    let pending: Uint8Array[] = [];
    let pendingBytes = 0;
    let uploadId: string | undefined;
    let partsStarted = 0;
    const parts: { PartNumber: number; ETag: string }[] = [];
    const inFlight = new Set<Promise<void>>();
    let failure: unknown;
    const takePart = (): Buffer => {
      const all = Buffer.concat(pending);
      pending = all.length > partSize ? [all.subarray(partSize)] : [];
      pendingBytes = all.length - Math.min(all.length, partSize);
      return all.subarray(0, partSize);
    };
    const uploadPart = async (bytes: Buffer): Promise<void> => {
      uploadId ??= (await this.send('start an upload of', location, () => this.client.send(new CreateMultipartUploadCommand({ Bucket: bucket, Key: key })))).UploadId!;
      const partNumber = ++partsStarted;
      const task = this.send('upload a part of', location, () => this.client.send(new UploadPartCommand({ Bucket: bucket, Key: key, UploadId: uploadId, PartNumber: partNumber, Body: bytes }))).then(
        (r) => {
          parts.push({ PartNumber: partNumber, ETag: r.ETag! });
        },
        (err: unknown) => {
          failure ??= err;
        },
      );
      inFlight.add(task);
      void task.finally(() => inFlight.delete(task));
      if (inFlight.size >= PART_CONCURRENCY) await Promise.race(inFlight);
    };
    try {
      for await (const chunk of body) {
        pending.push(chunk);
        pendingBytes += chunk.length;
        while (pendingBytes > partSize) {
          await uploadPart(takePart());
          if (failure) throw failure;
        }
      }
      if (partsStarted === 0) {
        const bytes = Buffer.concat(pending);
        await this.send('write', location, () => this.client.send(new PutObjectCommand({ Bucket: bucket, Key: key, Body: bytes, ContentLength: bytes.length })));
        return;
      }
      if (pendingBytes > 0) await uploadPart(takePart());
      await Promise.all(inFlight);
      if (failure) throw failure;
      parts.sort((a, b) => a.PartNumber - b.PartNumber);
      await this.send('complete the upload of', location, () =>
        this.client.send(new CompleteMultipartUploadCommand({ Bucket: bucket, Key: key, UploadId: uploadId, MultipartUpload: { Parts: parts } })),
      );
    } catch (err) {
      await Promise.allSettled(inFlight);
      if (uploadId !== undefined) {
        const id = uploadId;
        await this.send('abort the upload of', location, () => this.client.send(new AbortMultipartUploadCommand({ Bucket: bucket, Key: key, UploadId: id }))).catch(() => {});
      }
      throw this.error('write', location, err);
    }
  }

  async putFile(location: string, file: string): Promise<void> {
    await this.putStream(location, fs.createReadStream(file, { highWaterMark: 1 << 20 }));
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
