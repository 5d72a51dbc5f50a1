/**
 * What every ObjectStore promises (object-store.ts), as one suite run against both stores: a
 * temp directory, and S3 on a real S3-protocol server (s3rver) on loopback.
 */
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { TributaryError } from '../common/errors.js';
import { Options } from '../common/config.js';
import { startS3Server, type S3TestServer } from './fixtures/s3-server.js';
import { LocalObjectStore } from './local-store.js';
import { joinLocation, type ObjectStore } from './object-store.js';
import { describeS3Settings, s3SettingsOf } from './s3-settings.js';
import { storageStats } from './storage-stats.js';
import { FileCache } from './file-cache.js';
import { testTempDir } from '../common/fixtures/temp-dirs.js';
import { S3ObjectStore } from './s3-store.js';

interface Backend {
  name: string;
  start(): Promise<{ store: ObjectStore; root: () => string; stop(): Promise<void> }>;
}

const backends: Backend[] = [
  {
    name: 'local directory',
    start: async () => {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tributary-store-'));
      let n = 0;
      return { store: new LocalObjectStore(), root: () => path.join(dir, `t${n++}`), stop: async () => fs.rmSync(dir, { recursive: true, force: true }) };
    },
  },
  {
    name: 'S3 (s3rver)',
    start: async () => {
      const server = await startS3Server();
      let n = 0;
      return { store: new S3ObjectStore(server.settings), root: () => server.location(`t${n++}`), stop: () => server.stop() };
    },
  },
];

async function* chunks(bytes: Uint8Array, size: number): AsyncIterable<Uint8Array> {
  for (let i = 0; i < bytes.length; i += size) yield bytes.subarray(i, i + size);
}

for (const backend of backends) {
  describe(`ObjectStore on a ${backend.name}`, () => {
    let store: ObjectStore;
    let root: () => string;
    let stop: () => Promise<void>;
    before(async () => ({ store, root, stop } = await backend.start()));
    after(() => stop());

    test('put then get gives the bytes back, whole or a byte range; head gives the size; a missing object is undefined', async () => {
      const at = joinLocation(root(), 'a', 'b.bin');
      const bytes = crypto.randomBytes(1000);
      await store.put(at, bytes);
      assert.deepEqual(Buffer.from((await store.get(at))!), bytes);
      assert.deepEqual(Buffer.from((await store.get(at, { offset: 990 }))!), bytes.subarray(990));
      assert.deepEqual(Buffer.from((await store.get(at, { offset: 100, length: 50 }))!), bytes.subarray(100, 150));
      assert.equal((await store.head(at))?.size, 1000);
      assert.equal(await store.get(joinLocation(root(), 'missing')), undefined);
      assert.equal(await store.head(joinLocation(root(), 'missing')), undefined);
      await store.put(at, 'replaced');
      assert.equal(Buffer.from((await store.get(at))!).toString(), 'replaced');
    });

    test('a stream larger than a part goes up whole (multipart on S3), and downloads to a file', async () => {
      const at = joinLocation(root(), 'big.bin');
      const bytes = crypto.randomBytes(11 << 20);
      await store.putStream(at, chunks(bytes, 1 << 20));
      assert.equal((await store.head(at))?.size, bytes.length);
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tributary-download-'));
      try {
        const file = path.join(dir, 'copy');
        assert.equal(await store.getToFile(at, file), true);
        assert.ok(crypto.createHash('sha256').update(fs.readFileSync(file)).digest().equals(crypto.createHash('sha256').update(bytes).digest()));
        assert.equal(await store.getToFile(joinLocation(root(), 'missing'), path.join(dir, 'none')), false);
        assert.deepEqual(fs.readdirSync(dir), ['copy']);
        fs.writeFileSync(path.join(dir, 'up'), 'from a file');
        await store.putFile(joinLocation(root(), 'up'), path.join(dir, 'up'));
      } finally {
        fs.rmSync(dir, { recursive: true, force: true });
      }
    });

    test('list gives every object under a prefix at any depth, listDirectories the children; deletes of one, many and a directory', async () => {
      const base = root();
      const names = ['x/1', 'x/2', 'x/y/3', 'z/4', 'top'];
      for (const n of names) await store.put(joinLocation(base, n), n);
      await store.put(`${base}-sibling/5`, 'not under base');
      assert.deepEqual((await store.list(base)).map((o) => o.location.slice(base.length + 1)), ['top', 'x/1', 'x/2', 'x/y/3', 'z/4']);
      assert.deepEqual((await store.list(joinLocation(base, 'x'))).map((o) => o.size), [3, 3, 5]);
      assert.deepEqual(await store.listDirectories(base), ['x', 'z']);
      assert.deepEqual(await store.list(joinLocation(base, 'nothing')), []);
      await store.delete(joinLocation(base, 'top'));
      await store.delete(joinLocation(base, 'top'));
      await store.deleteMany([joinLocation(base, 'x/1'), joinLocation(base, 'never')]);
      assert.deepEqual((await store.list(base)).map((o) => o.location.slice(base.length + 1)), ['x/2', 'x/y/3', 'z/4']);
      await store.deleteDirectory(joinLocation(base, 'x'));
      assert.deepEqual((await store.list(base)).map((o) => o.location.slice(base.length + 1)), ['z/4']);
      assert.equal((await store.list(`${base}-sibling`)).length, 1);
    });

    test('publish creates only where nothing is, and replaces only over the etag it was given', async () => {
      const dir = root();
      const at = joinLocation(dir, 'pointer');
      const first = await store.publish(at, 'v1', { absent: true });
      assert.ok(first);
      assert.equal(await store.publish(at, 'v1 again', { absent: true }), undefined);
      const second = await store.publish(at, 'v2', { etag: first.etag });
      assert.ok(second);
      assert.notEqual(second.etag, first.etag);
      assert.equal(await store.publish(at, 'v3 on a stale etag', { etag: first.etag }), undefined);
      assert.equal(Buffer.from((await store.get(at))!).toString(), 'v2');
      assert.deepEqual((await store.list(dir)).map((o) => o.location), [at], 'no claim, lock or temp object is left behind');
    });

    test('of writers racing to publish over the same etag, exactly one wins', async () => {
      const dir = root();
      const at = joinLocation(dir, 'race');
      const base = (await store.publish(at, 'base', { absent: true }))!;
      const results = await Promise.all(Array.from({ length: 6 }, (_, i) => store.publish(at, `writer ${i}`, { etag: base.etag })));
      const winners = results.flatMap((r, i) => (r ? [i] : []));
      assert.equal(winners.length, 1);
      assert.equal(Buffer.from((await store.get(at))!).toString(), `writer ${winners[0]}`);
      const creates = await Promise.all(Array.from({ length: 6 }, (_, i) => store.publish(joinLocation(dir, 'new'), `creator ${i}`, { absent: true })));
      assert.equal(creates.filter((r) => r !== undefined).length, 1);
    });
  });
}

describe('S3 settings and secrets', () => {
  let server: S3TestServer;
  before(async () => (server = await startS3Server()));
  after(() => server.stop());

  test('options win over the AWS environment, which fills what they leave out', () => {
    const env = { AWS_ENDPOINT_URL: 'http://127.0.0.1:1', AWS_REGION: 'eu-west-1', AWS_ACCESS_KEY_ID: 'envkey', AWS_SECRET_ACCESS_KEY: 'envsecret' };
    const fromEnv = s3SettingsOf(undefined, env);
    assert.deepEqual([fromEnv.endpoint, fromEnv.region, fromEnv.accessKeyId, fromEnv.secretAccessKey, fromEnv.pathStyle], ['http://127.0.0.1:1', 'eu-west-1', 'envkey', 'envsecret', true]);
    const options = new Options('server', { 's3.region': 'ap-south-1', 's3.access-key': 'optkey', 's3.secret-key': 'optsecret', 's3.path-style-access': 'false' });
    const both = s3SettingsOf(options, env);
    assert.deepEqual([both.endpoint, both.region, both.accessKeyId, both.secretAccessKey, both.pathStyle], ['http://127.0.0.1:1', 'ap-south-1', 'optkey', 'optsecret', false]);
    assert.throws(() => s3SettingsOf(new Options('server', { 's3.multipart.part-size': '1mb' }), {}), (e: unknown) => e instanceof TributaryError && e.errorName === 'INVALID_CONFIG_EXCEPTION');
  });

  test('s3.multipart.threshold is 128mb unless set, and at least s3.multipart.part-size and at most 5gb', () => {
    const invalid = (message: RegExp) => (e: unknown) => e instanceof TributaryError && e.errorName === 'INVALID_CONFIG_EXCEPTION' && message.test(e.message);
    assert.equal(s3SettingsOf(new Options('server', {}), {}).multipartThreshold, 128 << 20);
    assert.equal(s3SettingsOf(undefined, {}).multipartThreshold, 128 << 20);
    assert.equal(s3SettingsOf(new Options('server', { 's3.multipart.threshold': '8mb' }), {}).multipartThreshold, 8 << 20);
    assert.equal(s3SettingsOf(new Options('server', { 's3.multipart.threshold': '5gb' }), {}).multipartThreshold, 5 * 1024 ** 3);
    assert.throws(() => s3SettingsOf(new Options('server', { 's3.multipart.threshold': '4mb' }), {}), invalid(/s3\.multipart\.threshold .*must be at least s3\.multipart\.part-size/));
    assert.throws(() => s3SettingsOf(new Options('server', { 's3.multipart.threshold': '16mb', 's3.multipart.part-size': '32mb' }), {}), invalid(/at least s3\.multipart\.part-size/));
    assert.throws(() => s3SettingsOf(new Options('server', { 's3.multipart.threshold': '6gb' }), {}), invalid(/at most 5gb/));
  });

  test('objects below s3.multipart.threshold go up in one PutObject and larger ones as multipart uploads, from a stream and from a file', async () => {
    const store = new S3ObjectStore({ ...server.settings, partSize: 5 << 20, multipartThreshold: 6 << 20 });
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tributary-threshold-'));
    try {
      for (const [size, expected] of [
        [(6 << 20) - 1, { PutObject: 1, CreateMultipartUpload: 0, UploadPart: 0, CompleteMultipartUpload: 0 }],
        [6 << 20, { PutObject: 0, CreateMultipartUpload: 1, UploadPart: 2, CompleteMultipartUpload: 1 }],
        [(12 << 20) + 1, { PutObject: 0, CreateMultipartUpload: 1, UploadPart: 3, CompleteMultipartUpload: 1 }],
      ] as const) {
        const bytes = crypto.randomBytes(size);
        const file = path.join(dir, `f${size}`);
        fs.writeFileSync(file, bytes);
        const ways = { stream: (at: string) => store.putStream(at, chunks(bytes, 1 << 20)), file: (at: string) => store.putFile(at, file) };
        for (const [way, put] of Object.entries(ways)) {
          const at = server.location(`threshold/${way}/${size}`);
          const before = { ...storageStats(), requests: new Map(storageStats().requests) };
          await put(at);
          const now = storageStats();
          const made = Object.fromEntries(Object.keys(expected).map((op) => [op, (now.requests.get(op) ?? 0) - (before.requests.get(op) ?? 0)]));
          assert.deepEqual(made, expected, `${size} bytes from a ${way}`);
          // Each byte is sent once; a multipart upload's completion adds its list of parts.
          const sent = now.uploadedBytes - before.uploadedBytes;
          assert.ok(sent >= size && sent - size < 1024, `${size} bytes from a ${way}: ${sent} sent`);
          assert.ok(Buffer.from((await store.get(at))!).equals(bytes), `${size} bytes from a ${way} read back`);
        }
      }
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  test('refused credentials never show in errors or in the settings described', async () => {
    const secret = 'wrong-secret-7f3a9c';
    const accessKeyId = 'AKIAWRONGKEY42';
    // s3rver does not check SigV4 signatures, only the key id, which it echoes in its error.
    const store = new S3ObjectStore({ ...server.settings, accessKeyId, secretAccessKey: secret, maxAttempts: 1 });
    const err = await store.put(server.location('denied'), 'x').then(
      () => assert.fail('s3rver takes only its own key pair'),
      (e: unknown) => e,
    );
    assert.ok(err instanceof TributaryError && err.errorName === 'STORAGE_EXCEPTION', String(err));
    const shown = `${err.message} ${JSON.stringify(err)} ${String(err.stack)} ${String(err.cause ?? '')}`;
    assert.match(err.message, /InvalidAccessKeyId/);
    assert.ok(!shown.includes(secret), shown);
    assert.ok(!shown.includes(accessKeyId), shown);
    const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'tributary-denied-')), 'f');
    fs.writeFileSync(file, 'a file streamed up');
    const fileErr = await store.putFile(server.location('denied-file'), file).then(
      () => assert.fail('s3rver takes only its own key pair'),
      (e: unknown) => e,
    );
    fs.rmSync(path.dirname(file), { recursive: true, force: true });
    assert.ok(fileErr instanceof TributaryError && fileErr.errorName === 'STORAGE_EXCEPTION' && /InvalidAccessKeyId/.test(fileErr.message), String(fileErr));
    assert.ok(!fileErr.message.includes(secret) && !fileErr.message.includes(accessKeyId), fileErr.message);
    const described = JSON.stringify(describeS3Settings({ ...server.settings, accessKeyId, secretAccessKey: secret }));
    assert.ok(!described.includes(secret) && !described.includes(accessKeyId), described);
    const invalid = (() => {
      try {
        new Options('server', { 's3.secret-key': secret, 's3.max-attempts': 'many' });
      } catch (e) {
        return e as Error;
      }
    })();
    assert.ok(invalid && !invalid.message.includes(secret));
  });

  test('a file streamed in one PutObject is tried again, from its start, while the server is down', async () => {
    const store = new S3ObjectStore({ ...server.settings, maxAttempts: 30 });
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tributary-retry-'));
    try {
      const file = path.join(dir, 'f');
      const bytes = crypto.randomBytes(100_000);
      fs.writeFileSync(file, bytes);
      await server.pause();
      const failedBefore = storageStats().failedRequests;
      let settled = false;
      const put = store.putFile(server.location('retried'), file).finally(() => (settled = true));
      put.catch(() => {});
      while (!settled && storageStats().failedRequests === failedBefore) await new Promise((r) => setTimeout(r, 10));
      await server.resume();
      await put;
      assert.ok(Buffer.from((await store.get(server.location('retried')))!).equals(bytes));
    } finally {
      await server.resume();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  test('the process counts its S3 requests, the bytes each way, and the file cache its hits and misses', async () => {
    const store = new S3ObjectStore(server.settings);
    const before = { ...storageStats(), requests: new Map(storageStats().requests) };
    const location = server.location('counted/object');
    await store.put(location, Buffer.alloc(1000, 1));
    assert.equal((await store.get(location))?.length, 1000);
    assert.equal(await store.get(server.location('counted/missing')), undefined);
    const now = storageStats();
    const delta = (op: string): number => (now.requests.get(op) ?? 0) - (before.requests.get(op) ?? 0);
    assert.deepEqual([delta('PutObject'), delta('GetObject')], [1, 2]);
    assert.equal(now.failedRequests - before.failedRequests, 1, 'the missing object');
    assert.equal(now.uploadedBytes - before.uploadedBytes, 1000);
    assert.equal(now.downloadedBytes - before.downloadedBytes, 1000);
    const cache = new FileCache(testTempDir('counted-cache'), 1 << 20);
    (await cache.pin(store, [location])).release();
    (await cache.pin(store, [location])).release();
    assert.deepEqual([storageStats().cacheMisses - before.cacheMisses, storageStats().cacheHits - before.cacheHits, storageStats().cacheFetchedBytes - before.cacheFetchedBytes], [1, 1, 1000]);
  });
});
