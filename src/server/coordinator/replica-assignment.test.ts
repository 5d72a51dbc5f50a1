import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Options } from '../../common/config.js';
import { TributaryError } from '../../common/errors.js';
import { assignReplicas, checkReplicationFactor, replicationFactorOf } from './replica-assignment.js';

const servers = (...ids: number[]) => ids.map((id) => ({ id }));
const count = (values: number[]) => values.reduce((m, v) => m.set(v, (m.get(v) ?? 0) + 1), new Map<number, number>());

test('round-robin without racks: leaders rotate, followers shift once the buckets have gone round, every replica on its own server', () => {
  assert.deepEqual(assignReplicas(servers(2, 0, 1), 6, 2, 0), [
    [0, 1],
    [1, 2],
    [2, 0],
    [0, 2],
    [1, 0],
    [2, 1],
  ]);
  const wide = assignReplicas(servers(0, 1, 2, 3, 4), 20, 3, 7);
  for (const replicas of wide) assert.equal(new Set(replicas).size, 3);
  assert.deepEqual([...count(wide.map((r) => r[0])).values()], [4, 4, 4, 4, 4], 'every server leads as many buckets');
  assert.deepEqual([...count(wide.flat()).values()], [12, 12, 12, 12, 12], 'every server holds as many replicas');
});

test('the start comes from the table or partition id, the same every time', () => {
  assert.deepEqual(assignReplicas(servers(0, 1, 2), 3, 1, 1), [[1], [2], [0]]);
  assert.deepEqual(assignReplicas(servers(0, 1, 2), 3, 1, 5), [[2], [0], [1]]);
  assert.deepEqual(assignReplicas(servers(0, 1, 2, 3), 8, 3, 42), assignReplicas(servers(3, 2, 1, 0), 8, 3, 42));
});

test('rack-aware: the replicas of a bucket go to different racks first, then to any other server', () => {
  const racked = [
    { id: 0, rack: 'a' },
    { id: 1, rack: 'a' },
    { id: 2, rack: 'a' },
    { id: 3, rack: 'b' },
    { id: 4, rack: 'b' },
    { id: 5, rack: 'c' },
  ];
  const rackOf = (id: number) => racked.find((s) => s.id === id)!.rack;
  for (const replicas of assignReplicas(racked, 12, 3, 3)) {
    assert.equal(new Set(replicas.map(rackOf)).size, 3, `replicas ${replicas} span every rack`);
  }
  for (const replicas of assignReplicas(racked, 12, 5, 1)) {
    assert.equal(new Set(replicas).size, 5);
    assert.equal(new Set(replicas.map(rackOf)).size, 3);
  }
  // Two racks of two: each bucket's pair is one server of each.
  const pairs = assignReplicas(racked.slice(0, 2).concat(racked.slice(3, 5)), 8, 2, 0);
  for (const replicas of pairs) assert.notEqual(rackOf(replicas[0]), rackOf(replicas[1]));
});

test('more replicas than live tablet servers fails with INVALID_REPLICATION_FACTOR naming both numbers', () => {
  const refused = (fragment: string) => (e: unknown) => e instanceof TributaryError && e.errorName === 'INVALID_REPLICATION_FACTOR' && e.message.includes(fragment);
  assert.throws(() => assignReplicas(servers(0, 1), 4, 3, 0), refused("'table.replication.factor' = '3' asks for 3 replicas, but there are 2 live tablet servers: the factor can be at most 2"));
  assert.throws(() => checkReplicationFactor(2, 1), refused('asks for 2 replicas, but there is one tablet server: the factor can only be 1'));
  assert.deepEqual(assignReplicas(servers(0, 1), 2, 2, 0), [
    [0, 1],
    [1, 0],
  ]);
});

test("the factor is the table's own, else the server's default", () => {
  const options = new Options('server', { 'default.replication.factor': '2' });
  assert.equal(replicationFactorOf({ properties: {} }, options), 2);
  assert.equal(replicationFactorOf({ properties: { 'table.replication.factor': '3' } }, options), 3);
  assert.equal(replicationFactorOf({ properties: {} }, new Options('server', {})), 1);
});
