/** A raw Kafka connection for tests: requests encoded with the listener's own grammar, sent one at a time or pipelined. */
import assert from 'node:assert/strict';
import net from 'node:net';
import type { KafkaApi } from '../../src/kafka/protocol/api.js';
import { readResponseHeader, responseHeaderVersion, writeRequestHeader } from '../../src/kafka/protocol/headers.js';
import { Reader, Writer } from '../../src/kafka/protocol/primitives.js';
import { decodeMessage, encodeMessage } from '../../src/kafka/protocol/schema.js';

/** One Kafka connection sending requests one at a time and reading their answers. */
export class RawKafka {
  private buffered = Buffer.alloc(0);
  private waiting: ((frame: Buffer) => void) | undefined;
  private correlationId = 0;
  private constructor(readonly socket: net.Socket) {
    socket.on('data', (chunk) => {
      this.buffered = Buffer.concat([this.buffered, chunk]);
      this.deliver();
    });
  }
  static connect(address: string): Promise<RawKafka> {
    const [host, port] = address.split(':');
    return new Promise((resolve, reject) => {
      const s = net.connect(Number(port), host, () => resolve(new RawKafka(s)));
      s.once('error', reject);
    });
  }
  private deliver(): void {
    if (!this.waiting || this.buffered.length < 4) return;
    const size = this.buffered.readInt32BE(0);
    if (this.buffered.length < 4 + size) return;
    const frame = this.buffered.subarray(4, 4 + size);
    this.buffered = this.buffered.subarray(4 + size);
    const w = this.waiting;
    this.waiting = undefined;
    w(frame);
  }
  next(): Promise<Buffer> {
    return new Promise((resolve) => {
      this.waiting = resolve;
      this.deliver();
    });
  }
  sendRaw(bytes: Buffer): void {
    this.socket.write(bytes);
  }
  async request<T>(api: KafkaApi, version: number, body: object): Promise<T> {
    return (await this.pipelined<T>([{ api, version, body }]))[0];
  }
  /** Sends every request before reading any answer; checks that the answers come in request order. */
  async pipelined<T>(requests: { api: KafkaApi; version: number; body: object }[]): Promise<T[]> {
    const w = new Writer();
    const first = this.correlationId + 1;
    for (const { api, version, body } of requests) {
      const at = w.pos;
      w.int32(0);
      writeRequestHeader(w, api, { apiKey: api.key, apiVersion: version, correlationId: ++this.correlationId, clientId: 'test' });
      encodeMessage(api.request, version, body, w);
      w.patchInt32(at, w.pos - at - 4);
    }
    this.socket.write(w.finish());
    const answers: T[] = [];
    for (const [i, { api, version }] of requests.entries()) {
      const r = new Reader(await this.next());
      assert.equal(readResponseHeader(r, responseHeaderVersion(api, version)), first + i, 'answers come in request order');
      answers.push(decodeMessage<T>(api.response, version, r));
    }
    return answers;
  }
  close(): void {
    this.socket.destroy();
  }
}

