/**
 * Which tablet servers hold the replicas of each bucket of a new table or partition: Kafka's
 * rack-aware round-robin, without its randomness.
 *
 * The live servers are arranged alternating racks (racks by name, servers by id within each, taking
 * one of each rack in turn), so that neighbours in the list sit on different racks. Bucket b's first
 * replica (its preferred leader) is server (start + b) mod n of that list; its followers come after
 * it at a shift that grows by one each time the buckets have gone round the list once, so the
 * followers of one server's leaderships spread over the others. A follower is skipped while it would
 * put a second replica on a rack that has one and some rack has none, or on a server that has one.
 * `start` and the first shift are derived from the table or partition id, so that the first buckets
 * of different tables lead on different servers; servers without a rack share one unnamed rack,
 * which with no racks at all is plain round-robin.
 */
import { tableOption, type Options } from '../../common/config.js';
import { TributaryError } from '../../common/errors.js';
import type { TableInfo } from '../../common/schema.js';

export interface AssignableServer {
  id: number;
  rack?: string;
}

/** The replication factor of a table: its table.replication.factor, else the server's default.replication.factor. */
export function replicationFactorOf(table: Pick<TableInfo, 'properties'>, options: Options): number {
  const own = tableOption(table.properties, 'table.replication.factor');
  return own !== undefined ? Number(own) : options.int('default.replication.factor');
}

/** INVALID_REPLICATION_FACTOR when `factor` replicas cannot each go to a different one of `live` servers. */
export function checkReplicationFactor(factor: number, live: number): void {
  if (factor <= live) return;
  const servers = live === 1 ? 'there is one tablet server: the factor can only be 1' : `there are ${live} live tablet servers: the factor can be at most ${live}`;
  throw new TributaryError('INVALID_REPLICATION_FACTOR', `'table.replication.factor' = '${factor}' asks for ${factor} replicas, but ${servers}`);
}

/** The servers alternating racks: the first of each rack, then the second of each, and so on. */
function rackAlternated(servers: readonly AssignableServer[]): AssignableServer[] {
  const byRack = new Map<string, AssignableServer[]>();
  for (const s of [...servers].sort((a, b) => a.id - b.id)) {
    const rack = s.rack ?? '';
    byRack.set(rack, [...(byRack.get(rack) ?? []), s]);
  }
  const racks = [...byRack.keys()].sort().map((r) => byRack.get(r)!);
  const arranged: AssignableServer[] = [];
  for (let i = 0; arranged.length < servers.length; i++) for (const rack of racks) if (i < rack.length) arranged.push(rack[i]);
  return arranged;
}

/** Kafka's follower position: never the first replica's own, `shift` places further on for the j-th follower. */
const followerIndex = (first: number, shift: number, j: number, n: number): number => (first + 1 + ((shift + j) % (n - 1))) % n;

/** The replica server ids of each of `bucketCount` buckets, first replica first. */
export function assignReplicas(servers: readonly AssignableServer[], bucketCount: number, factor: number, seed: number): number[][] {
  checkReplicationFactor(factor, servers.length);
  const arranged = rackAlternated(servers);
  const n = arranged.length;
  const rackCount = new Set(arranged.map((s) => s.rack ?? '')).size;
  const start = seed % n;
  let shift = Math.floor(seed / n) % n;
  const buckets: number[][] = [];
  for (let b = 0; b < bucketCount; b++) {
    if (b > 0 && b % n === 0) shift++;
    const first = (start + b) % n;
    const replicas = [arranged[first]];
    const racks = new Set([arranged[first].rack ?? '']);
    for (let j = 0; replicas.length < factor; j++) {
      const candidate = arranged[followerIndex(first, shift * rackCount, j, n)];
      const rack = candidate.rack ?? '';
      if ((racks.has(rack) && racks.size < rackCount) || replicas.includes(candidate)) continue;
      replicas.push(candidate);
      racks.add(rack);
    }
    buckets.push(replicas.map((s) => s.id));
  }
  return buckets;
}
