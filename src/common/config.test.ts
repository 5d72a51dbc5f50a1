import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Options } from './config.js';

const refused = (key: string, value: string, message: RegExp) =>
  assert.throws(() => new Options(key.startsWith('client.') ? 'client' : 'server', { [key]: value }), (err: { errorName?: string; message: string }) => err.errorName === 'INVALID_CONFIG_EXCEPTION' && message.test(err.message));

test('a deadline or interval of zero is refused, since it would close at once or spin', () => {
  for (const key of ['rpc.frame-timeout', 'netty.connection.max-idle-time', 'server.data-disk.check-interval', 'log.retention.check-interval', 'client.request-timeout']) {
    refused(key, '0', /at least 1ms/);
    refused(key, '0s', /at least 1ms/);
  }
  assert.equal(new Options('server', { 'rpc.frame-timeout': '1ms' }).durationMs('rpc.frame-timeout'), 1);
});

test('durations where zero has a meaning still take it', () => {
  assert.equal(new Options('server', { 'sql.query.timeout': '0' }).durationMs('sql.query.timeout'), 0);
  assert.equal(new Options('server', { 'rpc.max-wait': '0' }).durationMs('rpc.max-wait'), 0);
});
