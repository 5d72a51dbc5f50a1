import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  FrameDecoder,
  MAX_INT32,
  REQUEST_HEADER_SIZE,
  RESPONSE_HEADER_SIZE,
  ResponseType,
  parseRequestFrame,
  parseResponseFrame,
  requestHeader,
  responseHeader,
} from './frame.js';

// ProduceLog (1014) v0, request id 7, body "abc".
const REQUEST_FIXTURE = Buffer.from('0000000b' + '03f6' + '0000' + '00000007' + '616263', 'hex');
// Error response to request 7, body 0x08 0x0d (ErrorResponse{error_code: 13}).
const RESPONSE_FIXTURE = Buffer.from('00000007' + '01' + '00000007' + '080d', 'hex');

function decodeAll(decoder: FrameDecoder, chunks: Buffer[]): Buffer[] {
  const frames: Buffer[] = [];
  for (const chunk of chunks) assert.equal(decoder.push(chunk, (f) => frames.push(Buffer.from(f))), undefined);
  return frames;
}

function requestFrame(requestId: number, body: Buffer): Buffer {
  return Buffer.concat([requestHeader(1007, 0, requestId, body.length), body]);
}

test('request frame fixture decodes and re-encodes to the same bytes', () => {
  const frames = decodeAll(new FrameDecoder(REQUEST_HEADER_SIZE, 1024), [REQUEST_FIXTURE]);
  assert.equal(frames.length, 1);
  const { apiKey, apiVersion, requestId, body } = parseRequestFrame(frames[0]);
  assert.deepEqual({ apiKey, apiVersion, requestId, body: body.toString() }, { apiKey: 1014, apiVersion: 0, requestId: 7, body: 'abc' });
  assert.deepEqual(Buffer.concat([requestHeader(apiKey, apiVersion, requestId, body.length), body]), REQUEST_FIXTURE);
});

test('response frame fixture decodes and re-encodes to the same bytes', () => {
  const frames = decodeAll(new FrameDecoder(RESPONSE_HEADER_SIZE, 1024), [RESPONSE_FIXTURE]);
  const { type, requestId, body } = parseResponseFrame(frames[0]);
  assert.deepEqual({ type, requestId, body: body.toString('hex') }, { type: ResponseType.ERROR, requestId: 7, body: '080d' });
  assert.deepEqual(Buffer.concat([responseHeader(ResponseType.ERROR, requestId, body.length), body]), RESPONSE_FIXTURE);
});

test('frames split across chunks and merged into chunks decode the same', () => {
  const bodies = [0, 1, 3, 300, 70_000, 2].map((n, i) => Buffer.alloc(n, i + 1));
  const stream = Buffer.concat(bodies.map((b, i) => requestFrame(i + 1, b)));
  for (const size of [1, 2, 3, 4, 5, 7, 11, 12, 13, 4096, 65_536, stream.length]) {
    const chunks: Buffer[] = [];
    for (let at = 0; at < stream.length; at += size) chunks.push(stream.subarray(at, at + size));
    const frames = decodeAll(new FrameDecoder(REQUEST_HEADER_SIZE, 1 << 20), chunks);
    assert.equal(frames.length, bodies.length, `chunk size ${size}`);
    frames.forEach((f, i) => {
      const { requestId, body } = parseRequestFrame(f);
      assert.equal(requestId, i + 1);
      assert.deepEqual(body, bodies[i], `chunk size ${size}, frame ${i}`);
    });
  }
});

test('every single split point of a small stream decodes', () => {
  const stream = Buffer.concat([requestFrame(1, Buffer.from('xy')), requestFrame(2, Buffer.alloc(0)), requestFrame(3, Buffer.from('z'))]);
  for (let a = 0; a <= stream.length; a++) {
    for (let b = a; b <= stream.length; b++) {
      const frames = decodeAll(new FrameDecoder(REQUEST_HEADER_SIZE, 64), [stream.subarray(0, a), stream.subarray(a, b), stream.subarray(b)]);
      assert.deepEqual(frames.map((f) => parseRequestFrame(f).requestId), [1, 2, 3], `splits ${a}/${b}`);
    }
  }
});

test('a frame inside one chunk is a view of it; a frame across chunks is copied once', () => {
  const decoder = new FrameDecoder(REQUEST_HEADER_SIZE, 1024);
  const whole = requestFrame(1, Buffer.from('hello'));
  const seen: Buffer[] = [];
  decoder.push(whole, (f) => seen.push(f));
  whole[whole.length - 1] = 0x21; // '!' shows through a view
  assert.equal(parseRequestFrame(seen[0]).body.toString(), 'hell!');

  const split = requestFrame(2, Buffer.from('world'));
  decoder.push(split.subarray(0, 9), (f) => seen.push(f));
  assert.equal(seen.length, 1);
  assert.equal(decoder.bufferedBytes, 9);
  decoder.push(split.subarray(9), (f) => seen.push(f));
  assert.equal(decoder.bufferedBytes, 0);
  split[split.length - 1] = 0x21;
  assert.equal(parseRequestFrame(seen[1]).body.toString(), 'world');
});

test('an oversized length is reported as soon as the length field is read', () => {
  const decoder = new FrameDecoder(REQUEST_HEADER_SIZE, 100);
  const before = requestFrame(1, Buffer.from('ok'));
  const prefix = Buffer.alloc(4);
  prefix.writeInt32BE(101);
  const frames: Buffer[] = [];
  const error = decoder.push(Buffer.concat([before, prefix]), (f) => frames.push(f));
  assert.equal(frames.length, 1, 'the frame before the bad one is delivered');
  assert.deepEqual(error, { kind: 'oversized', length: 101, header: undefined });
  assert.equal(decoder.bufferedBytes, 0);
  assert.deepEqual(decoder.push(Buffer.alloc(50), () => assert.fail('no frame after an error')), error);
});

test('an oversized frame reports its header when it came with the length', () => {
  const decoder = new FrameDecoder(REQUEST_HEADER_SIZE, 100);
  const head = requestHeader(1014, 0, 42, 1000);
  const error = decoder.push(Buffer.concat([head, Buffer.alloc(10)]), () => assert.fail('no frame'));
  assert.equal(error?.kind, 'oversized');
  assert.ok(error?.kind === 'oversized' && error.header);
  assert.equal(parseRequestFrame(error.header).requestId, 42);
});

test('the length limit is inclusive and the largest int32 length passes the format check', () => {
  const atLimit = requestFrame(1, Buffer.alloc(92)); // length 100
  assert.equal(decodeAll(new FrameDecoder(REQUEST_HEADER_SIZE, 100), [atLimit]).length, 1);
  const huge = Buffer.alloc(4);
  huge.writeInt32BE(MAX_INT32);
  assert.equal(new FrameDecoder(RESPONSE_HEADER_SIZE, MAX_INT32).push(huge, () => {}), undefined);
});

test('negative and too-short lengths are corrupt, also when the length field is split', () => {
  for (const length of [-1, -0x7fffffff, 0, 7]) {
    const prefix = Buffer.alloc(4);
    prefix.writeInt32BE(length);
    const decoder = new FrameDecoder(REQUEST_HEADER_SIZE, 1024);
    assert.equal(decoder.push(prefix.subarray(0, 3), () => {}), undefined);
    assert.deepEqual(decoder.push(prefix.subarray(3), () => {}), { kind: 'corrupt', length });
  }
  // A response header is 5 bytes, so 5 is fine there and 4 is not.
  const five = Buffer.from('00000005' + '00' + '00000001', 'hex');
  assert.equal(decodeAll(new FrameDecoder(RESPONSE_HEADER_SIZE, 1024), [five]).length, 1);
  assert.deepEqual(new FrameDecoder(RESPONSE_HEADER_SIZE, 1024).push(Buffer.from('00000004', 'hex'), () => {}), { kind: 'corrupt', length: 4 });
});
