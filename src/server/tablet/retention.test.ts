import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { ClosedSegment } from './log/log-tablet.js';
import type { Replica } from './replica.js';
import { localSegmentDeletable, needsRemoteCopy, remoteSegmentExpired } from './retention.js';

const NOW = 10 * 86_400_000;
const DAY = 86_400_000;

/** The fields of a replica that retention reads. */
function replica(properties: Record<string, string>, state: Partial<Pick<Replica, 'lakeEndOffset' | 'remoteLog' | 'snapshots'>> = {}): Replica {
  return { table: { properties }, ...state } as unknown as Replica;
}

const segment = (endOffset: bigint, ageMs: number): ClosedSegment => ({ baseOffset: endOffset - 10n, endOffset, sizeBytes: 100, maxTimestamp: NOW - ageMs, files: { log: '', index: '', timeindex: '' } });
const remote = (end: bigint) => ({ remoteLogEndOffset: end, remoteLogStartOffset: 0n, manifestPath: 'm' });

test('without a remote log a local segment goes when the TTL expired it, and for a lake table once the lake holds it', () => {
  const log = localSegmentDeletable(replica({ 'table.log.ttl': '1d' }), false, NOW);
  assert.equal(log(segment(10n, 2 * DAY), 1), true);
  assert.equal(log(segment(10n, DAY / 2), 5), false, 'not expired');
  const lake = localSegmentDeletable(replica({ 'table.log.ttl': '1d', 'table.datalake.enabled': 'true' }, { lakeEndOffset: 15n }), false, NOW);
  assert.equal(lake(segment(10n, 2 * DAY), 1), true);
  assert.equal(lake(segment(20n, 2 * DAY), 1), false, 'the lake does not hold it yet');
});

test('with a remote log a local segment goes once the remote log or the lake holds it, keeping the newest local segments, whatever its age', () => {
  const r = localSegmentDeletable(replica({}, { remoteLog: remote(30n) }), true, NOW);
  assert.equal(r(segment(20n, 0), 2), true, 'uploaded: goes though young');
  assert.equal(r(segment(20n, 0), 1), false, 'table.log.tiered.local-segments (2) stay');
  assert.equal(r(segment(40n, 30 * DAY), 5), false, 'not uploaded: stays though expired');
  assert.equal(localSegmentDeletable(replica({}), true, NOW)(segment(10n, 30 * DAY), 5), false, 'no remote log committed yet');
  const three = localSegmentDeletable(replica({ 'table.log.tiered.local-segments': '3' }, { remoteLog: remote(30n) }), true, NOW);
  assert.equal(three(segment(20n, 0), 2), false);
  const lake = localSegmentDeletable(replica({ 'table.datalake.enabled': 'true' }, { lakeEndOffset: 50n }), true, NOW);
  assert.equal(lake(segment(40n, 0), 2), true, 'the lake holds it: no remote copy needed');
});

test('a primary-key bucket keeps the changelog its registered KV snapshot needs, remote log or not', () => {
  const snapshots = { registered: { logOffset: 15n } } as unknown as Replica['snapshots'];
  const r = localSegmentDeletable(replica({}, { remoteLog: remote(30n), snapshots }), true, NOW);
  assert.equal(r(segment(10n, 0), 5), true);
  assert.equal(r(segment(20n, 0), 5), false);
  const none = localSegmentDeletable(replica({}, { remoteLog: remote(30n), snapshots: {} as Replica['snapshots'] }), true, NOW);
  assert.equal(none(segment(10n, 0), 5), false, 'no snapshot yet: the whole changelog stays');
});

test('what the lake holds needs no remote copy and leaves the remote log; otherwise table.log.ttl expires remote segments', () => {
  const lake = replica({ 'table.datalake.enabled': 'true', 'table.log.ttl': '1d' }, { lakeEndOffset: 50n });
  assert.equal(needsRemoteCopy(lake, segment(50n, DAY), NOW), false);
  assert.equal(needsRemoteCopy(lake, segment(60n, DAY), NOW), true);
  assert.equal(remoteSegmentExpired(lake, { endOffset: 50n, maxTimestamp: NOW }, NOW), true);
  assert.equal(remoteSegmentExpired(lake, { endOffset: 60n, maxTimestamp: NOW - 30 * DAY }, NOW), false, 'never before the lake holds it');
  const plain = replica({ 'table.log.ttl': '1d' });
  assert.equal(needsRemoteCopy(plain, segment(10n, 0), NOW), true, 'without a lake a segment is uploaded once closed');
  assert.equal(remoteSegmentExpired(plain, { endOffset: 10n, maxTimestamp: NOW - 2 * DAY }, NOW), true);
  assert.equal(remoteSegmentExpired(plain, { endOffset: 10n, maxTimestamp: NOW - DAY / 2 }, NOW), false);
  assert.equal(remoteSegmentExpired(replica({ 'table.log.ttl': '0' }), { endOffset: 10n, maxTimestamp: 0 }, NOW), false, 'ttl 0 keeps them forever');
});

test('a lake-enabled segment the lake does not hold yet waits for it twice table.datalake.freshness before it is uploaded', () => {
  const minute = 60_000;
  const lake = replica({ 'table.datalake.enabled': 'true', 'table.datalake.freshness': '3min' }, { lakeEndOffset: 50n });
  assert.equal(needsRemoteCopy(lake, segment(60n, 5 * minute), NOW), false, 'a round is still to take it');
  assert.equal(needsRemoteCopy(lake, segment(60n, 7 * minute), NOW), true, 'the lake lags: the remote log holds it');
  assert.equal(needsRemoteCopy(replica({ 'table.datalake.enabled': 'true', 'table.datalake.freshness': '1s' }), segment(60n, 3000), NOW), true, 'no lake snapshot yet, and the wait is over');
});
