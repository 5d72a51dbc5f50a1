import { storageStats } from '../storage/storage-stats.js';
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import pino from 'pino';
import { ServerActivity } from '../common/activity.js';
import { NodeMetrics } from './metrics.js';
import type { FollowerMetrics } from './tablet/tablet-server.js';

const activity = new ServerActivity(pino({ level: 'silent' }));
after(() => activity.close());

const processSources = { rpc: () => ({ connections: 0, heldBytes: 0 }), dataDisk: () => ({ writeLocked: false, usedRatio: 0.5 }), activity: () => activity.take(), storage: storageStats };

const follower = (bucket: number, id: number, lagRecords: bigint | undefined, sinceCaughtUpMs: number): FollowerMetrics => ({
  database: 'db',
  table: 't',
  partition: '',
  bucket,
  follower: id,
  ...(lagRecords !== undefined ? { lagRecords } : {}),
  sinceCaughtUpMs,
});

/** The samples of `name` in a scrape, as `{labels} value` lines. */
function samples(text: string, name: string): string[] {
  return text.split('\n').filter((l) => l.startsWith(`${name}{`) || l.startsWith(`${name} `)).map((l) => l.slice(name.length));
}

test('a server without the coordinator\'s sources exports none of its metrics, and the process ones', async () => {
  const text = (await new NodeMetrics(processSources).exposition()).toString();
  for (const name of ['tributary_tables', 'tributary_tablet_servers', 'tributary_under_replicated_buckets', 'tributary_lake_tiering_lag_records', 'tributary_log_end_offset', 'tributary_server_led_buckets']) {
    assert.doesNotMatch(text, new RegExp(`^# HELP ${name} `, 'm'), `${name} is not exported`);
  }
  assert.deepEqual(samples(text, 'tributary_data_disk_used_ratio'), [' 0.5']);
});

test('the followers\' lag: the most lagging bucket series up to the cap, totals per follower over every bucket, and the led counts', async () => {
  const followers = [follower(0, 2, 0n, 0), follower(1, 2, 50n, 4000), follower(2, 3, 7n, 1500), follower(3, 3, undefined, 9000)];
  const metrics = new NodeMetrics({ ...processSources, buckets: () => [], replicas: () => ({ led: 4, underReplicated: 1, followers }) }, 2);
  const text = (await metrics.exposition()).toString();
  assert.deepEqual(samples(text, 'tributary_replica_lag_records'), ['{database="db",table="t",partition="",bucket="1",follower="2"} 50', '{database="db",table="t",partition="",bucket="2",follower="3"} 7']);
  assert.deepEqual(samples(text, 'tributary_replica_last_caught_up_seconds'), ['{database="db",table="t",partition="",bucket="1",follower="2"} 4', '{database="db",table="t",partition="",bucket="2",follower="3"} 1.5']);
  assert.deepEqual(samples(text, 'tributary_follower_lag_records'), ['{follower="2"} 50', '{follower="3"} 7']);
  assert.deepEqual(samples(text, 'tributary_follower_last_caught_up_seconds'), ['{follower="2"} 4', '{follower="3"} 9']);
  assert.deepEqual(samples(text, 'tributary_server_led_buckets'), [' 4']);
  assert.deepEqual(samples(text, 'tributary_server_under_replicated_buckets'), [' 1']);

  const uncapped = (await new NodeMetrics({ ...processSources, replicas: () => ({ led: 4, underReplicated: 1, followers }) }).exposition()).toString();
  assert.equal(samples(uncapped, 'tributary_replica_lag_records').length, 3, 'every follower whose log end is known');
  assert.equal(samples(uncapped, 'tributary_replica_last_caught_up_seconds').length, 4);
});

test('a server with a Kafka listener exports the request bytes it holds beside the RPC listener\'s; one without does not', async () => {
  const withKafka = (await new NodeMetrics({ ...processSources, kafka: () => ({ heldBytes: 4096 }) }).exposition()).toString();
  assert.deepEqual(samples(withKafka, 'tributary_kafka_held_bytes'), [' 4096']);
  assert.deepEqual(samples(withKafka, 'tributary_rpc_held_bytes'), [' 0']);
  assert.deepEqual(samples((await new NodeMetrics(processSources).exposition()).toString(), 'tributary_kafka_held_bytes'), []);
});
