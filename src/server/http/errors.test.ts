import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { test } from 'node:test';
import pino from 'pino';
import { TributaryError } from '../../common/errors.js';
import { httpStatusOf, logFailure } from './errors.js';

function capture(): { log: pino.Logger; levels: number[] } {
  const levels: number[] = [];
  const sink = new Writable({ write: (chunk: Buffer, _enc, done) => (levels.push(JSON.parse(chunk.toString()).level), done()) });
  return { log: pino({ level: 'info' }, sink), levels };
}

test('a refusal that asks the client to come back is not logged as a server failure; a server failure is', async () => {
  const { log, levels } = capture();
  const req = { method: 'POST', url: '/api/v1/sql' };
  for (const name of ['SERVER_BUSY', 'DISK_WRITE_LOCKED', 'QUERY_TIMEOUT'] as const) {
    const err = new TributaryError(name, 'refused');
    logFailure(log, httpStatusOf(err), err, req, 'REST API request failed');
  }
  await new Promise((resolve) => setImmediate(resolve));
  assert.deepEqual(levels, []);
  const err = new TributaryError('UNKNOWN_SERVER_ERROR', 'broken');
  logFailure(log, httpStatusOf(err), err, req, 'REST API request failed');
  await new Promise((resolve) => setImmediate(resolve));
  assert.deepEqual(levels, [50]);
});
