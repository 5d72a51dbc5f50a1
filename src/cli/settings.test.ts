import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { TributaryError } from '../common/errors.js';
import { parseSetting, readConfigFile } from './settings.js';
import { serverSettings } from './start.js';
import { testTempDir } from '../common/fixtures/temp-dirs.js';

test('config files are key: value lines with comments and optional quotes', () => {
  const file = path.join(testTempDir('conf'), 'server.yaml');
  fs.writeFileSync(file, "# a node\ndata.dir: /srv/tributary   # where data lives\n\nbind.listeners: 'TRIBUTARY://0.0.0.0:9123'\nlog.segment.file-size: 256mb\n");
  assert.deepEqual(readConfigFile(file), {
    'data.dir': '/srv/tributary',
    'bind.listeners': 'TRIBUTARY://0.0.0.0:9123',
    'log.segment.file-size': '256mb',
  });
  fs.writeFileSync(file, 'data.dir /srv\n');
  assert.throws(() => readConfigFile(file), (e: TributaryError) => e.errorName === 'INVALID_CONFIG_EXCEPTION' && /:1: expected 'key: value'/.test(e.message));
  assert.throws(() => readConfigFile(`${file}.missing`), (e: TributaryError) => e.errorName === 'INVALID_CONFIG_EXCEPTION');
});

test('flags override --set, which overrides the config file', () => {
  assert.deepEqual(parseSetting('a.b=c=d', { x: '1' }), { x: '1', 'a.b': 'c=d' });
  assert.throws(() => parseSetting('novalue'), (e: TributaryError) => e.errorName === 'INVALID_CONFIG_EXCEPTION');
  const dir = testTempDir('conf');
  const file = path.join(dir, 'c.yaml');
  fs.writeFileSync(file, 'data.dir: from-file\nhttp.port: 1\ndefault.bucket.number: 3\n');
  assert.deepEqual(serverSettings({ config: file, set: { 'http.port': '2', 'data.dir': 'from-set' }, dataDir: 'from-flag', port: '0' }), {
    'data.dir': 'from-flag',
    'http.port': '2',
    'default.bucket.number': '3',
    'bind.listeners': 'TRIBUTARY://127.0.0.1:0',
  });
});

test('--port or --host alone keeps the other part of the configured listener', () => {
  assert.equal(serverSettings({ set: { 'bind.listeners': 'TRIBUTARY://0.0.0.0:7000' }, port: '7001' })['bind.listeners'], 'TRIBUTARY://0.0.0.0:7001');
  assert.equal(serverSettings({ host: '10.0.0.1' })['bind.listeners'], 'TRIBUTARY://10.0.0.1:9123');
});

test('--kafka-port adds a KAFKA listener beside the RPC one and turns kafka.enabled on; --port keeps a configured KAFKA listener', () => {
  assert.deepEqual(serverSettings({ kafkaPort: '9092' }), { 'bind.listeners': 'TRIBUTARY://127.0.0.1:9123,KAFKA://127.0.0.1:9092', 'kafka.enabled': 'true' });
  const set = { 'bind.listeners': 'KAFKA://0.0.0.0:9092,TRIBUTARY://0.0.0.0:7000', 'kafka.enabled': 'true' };
  assert.equal(serverSettings({ set, port: '7001' })['bind.listeners'], 'TRIBUTARY://0.0.0.0:7001,KAFKA://0.0.0.0:9092');
});
