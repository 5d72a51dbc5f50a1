/**
 * Kafka consumer groups on a real server process: three kafkajs members in three child processes
 * share a 6-partition topic through rebalances as they join, as one is killed (kill -9: its
 * partitions move once its session times out) and as one leaves; every message is processed at
 * least once, the committed offsets survive a kill -9 of the server, and a member started after the
 * restart goes on from them without skipping a message. kcat (librdkafka) consumes as a group too,
 * and SHOW CONSUMER GROUPS shows the groups and their lag.
 */
import assert from 'node:assert/strict';
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { Kafka, logLevel } from 'kafkajs';
import { CLI_ARGS, ServerProcess } from './support/server-process.js';

const run = promisify(execFile);
const MEMBER = path.join(import.meta.dirname, 'support', 'kafka-group-member.ts');
const TOPIC = 'orders';
const GROUP = 'billing';
const PARTITIONS = 6;

const SETTINGS = { 'kafka.group.min-session-timeout': '1s', 'kafka.group.initial-rebalance-delay': '300ms' };

/** A group member process and what it printed. */
class Member {
  readonly assignments: number[][] = [];
  readonly processed: { p: number; o: number; v: string }[] = [];
  private readonly waiters: (() => void)[] = [];
  private readonly child: ChildProcess;
  private readonly exited: Promise<void>;
  constructor(broker: string, group: string) {
    this.child = spawn(process.execPath, ['--import', 'tsx', MEMBER, broker, group, TOPIC], { stdio: ['ignore', 'pipe', 'inherit'] });
    this.exited = new Promise((resolve) => this.child.once('exit', () => resolve()));
    let buffered = '';
    this.child.stdout!.on('data', (d: Buffer) => {
      buffered += d.toString();
      const lines = buffered.split('\n');
      buffered = lines.pop()!;
      for (const line of lines) {
        const e = JSON.parse(line) as { joined?: number[]; p?: number; o?: string; v?: string };
        if (e.joined) this.assignments.push(e.joined);
        if (e.v !== undefined) this.processed.push({ p: e.p!, o: Number(e.o), v: e.v });
      }
      for (const w of this.waiters.splice(0)) w();
    });
  }
  get assigned(): number[] {
    return this.assignments.at(-1) ?? [];
  }
  /** Resolves once `done()` holds after some output (or at once). */
  async until(done: () => boolean, what: string): Promise<void> {
    const deadline = Date.now() + 60_000;
    while (!done()) {
      if (Date.now() > deadline) throw new Error(`member never got to: ${what} (assignments ${JSON.stringify(this.assignments)}, ${this.processed.length} processed)`);
      await new Promise<void>((resolve) => {
        this.waiters.push(resolve);
        setTimeout(resolve, 200);
      });
    }
  }
  async kill(): Promise<void> {
    this.child.kill('SIGKILL');
    await this.exited;
  }
  async leave(): Promise<void> {
    this.child.kill('SIGTERM');
    await this.exited;
  }
}

/** Waits until `check` holds, polling; the test's own limit bounds it. */
async function eventually(check: () => boolean | Promise<boolean>, what: string): Promise<void> {
  const deadline = Date.now() + 60_000;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`never: ${what}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

async function sql(bootstrap: string, statement: string): Promise<Record<string, unknown>[]> {
  const { stdout } = await run(process.execPath, [...CLI_ARGS, 'sql', '--bootstrap', bootstrap, '--format', 'json', '-e', statement]);
  return stdout.trim().split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as Record<string, unknown>);
}

describe('Kafka consumer groups', () => {
  let server: ServerProcess;
  const produced: string[] = [];
  before(async () => {
    server = await ServerProcess.start({ args: ['--no-tiering', '--kafka-port', '0'], settings: SETTINGS });
  });
  after(() => server.stopAndRemove());

  const kafka = (): Kafka => new Kafka({ brokers: [server.kafka], logLevel: logLevel.NOTHING });

  async function produce(count: number, tag: string): Promise<void> {
    const producer = kafka().producer();
    await producer.connect();
    const messages = Array.from({ length: count }, (_, i) => ({ partition: i % PARTITIONS, value: `${tag}-${i}` }));
    await producer.send({ topic: TOPIC, acks: -1, messages });
    await producer.disconnect();
    produced.push(...messages.map((m) => m.value));
  }

  async function committed(group: string): Promise<Map<number, number>> {
    const admin = kafka().admin();
    await admin.connect();
    try {
      const [t] = await admin.fetchOffsets({ groupId: group, topics: [TOPIC] });
      return new Map(t.partitions.map((p) => [p.partition, Number(p.offset)]));
    } finally {
      await admin.disconnect();
    }
  }

  async function logEnds(): Promise<Map<number, number>> {
    const admin = kafka().admin();
    await admin.connect();
    try {
      return new Map((await admin.fetchTopicOffsets(TOPIC)).map((p) => [p.partition, Number(p.high)]));
    } finally {
      await admin.disconnect();
    }
  }

  it('three kafkajs members rebalance as they join, crash and leave; every message is processed, committed offsets survive a server kill -9', async () => {
    const admin = kafka().admin();
    await admin.connect();
    await admin.createTopics({ topics: [{ topic: TOPIC, numPartitions: PARTITIONS }] });
    await admin.disconnect();
    await produce(120, 'a');

    const a = new Member(server.kafka, GROUP);
    await a.until(() => a.assigned.length === PARTITIONS, 'a holds every partition');
    const b = new Member(server.kafka, GROUP);
    await b.until(() => b.assigned.length === 3, 'b holds half');
    await a.until(() => a.assigned.length === 3, 'a gave half away');
    const c = new Member(server.kafka, GROUP);
    await c.until(() => c.assigned.length === 2, 'c holds a third');
    await eventually(() => a.assigned.length === 2 && b.assigned.length === 2, 'a and b hold a third each');
    assert.deepEqual([...a.assigned, ...b.assigned, ...c.assigned].sort(), [0, 1, 2, 3, 4, 5]);
    await produce(120, 'b');

    // kill -9: b's partitions move to a and c only after its session times out.
    const held = b.assigned;
    await b.kill();
    await eventually(() => a.assigned.length + c.assigned.length === PARTITIONS && a.assigned.length === 3, "b's partitions moved to a and c");
    assert.deepEqual([...a.assigned, ...c.assigned].sort(), [0, 1, 2, 3, 4, 5]);
    assert.ok(held.every((p) => a.assigned.includes(p) || c.assigned.includes(p)));
    await produce(120, 'c');

    // c leaves: a takes everything at once.
    await c.leave();
    await a.until(() => a.assigned.length === PARTITIONS, 'a holds every partition again');
    await produce(120, 'd');

    const seen = (): Set<string> => new Set([a, b, c].flatMap((m) => m.processed.map((x) => x.v)));
    await eventually(() => produced.every((v) => seen().has(v)), 'every message processed');
    const ends = await logEnds();
    await eventually(async () => {
      const offsets = await committed(GROUP);
      return [...ends].every(([p, end]) => offsets.get(p) === end);
    }, 'the group committed up to the log end');

    const rows = await sql(server.bootstrap, 'SHOW CONSUMER GROUPS');
    const billing = rows.find((r) => r.group === GROUP && r.topic === TOPIC);
    assert.ok(billing, JSON.stringify(rows));
    assert.deepEqual([billing.state, billing.members, billing.protocol_type, billing.protocol, billing.lag], ['Stable', 1, 'consumer', 'RoundRobinAssigner', 0]);

    // The server dies mid-flight and restarts on its data dir; a stops with it.
    await a.kill();
    const before = await committed(GROUP);
    await server.kill();
    server = await ServerProcess.start({ dataDir: server.dataDir, args: ['--no-tiering', '--kafka-port', '0'], settings: SETTINGS });
    assert.deepEqual(await committed(GROUP), before, 'the committed offsets survived');
    await produce(60, 'e');
    const lagRows = await sql(server.bootstrap, 'SHOW CONSUMER GROUPS');
    assert.equal(lagRows.find((r) => r.group === GROUP)?.lag, 60, 'lag = log end minus committed');

    // A new member goes on from the committed offsets: nothing before them again, nothing after them skipped.
    const d = new Member(server.kafka, GROUP);
    const fresh = produced.filter((v) => v.startsWith('e-'));
    await d.until(() => fresh.every((v) => d.processed.some((x) => x.v === v)), 'd processed the new messages');
    for (const x of d.processed) assert.ok(x.o >= before.get(x.p)!, `d read offset ${x.o} of partition ${x.p}, below the committed ${before.get(x.p)}`);
    await d.leave();
  });

  it('kcat consumes as a group member (-G) and commits; ListGroups and DescribeGroups see the groups', async () => {
    const out = await new Promise<string>((resolve, reject) => {
      execFile(
        'kcat',
        ['-b', server.kafka, '-G', 'kcat-group', TOPIC, '-X', 'auto.offset.reset=earliest', '-c', String(produced.length), '-q', '-f', '%p %o %s\\n'],
        { timeout: 60_000 },
        (err, stdout, stderr) => (err ? reject(new Error(`kcat: ${stderr}`)) : resolve(stdout)),
      ).stdin!.end();
    });
    assert.deepEqual(new Set(out.trim().split('\n').map((l) => l.split(' ')[2])), new Set(produced));
    const ends = await logEnds();
    assert.deepEqual(await committed('kcat-group'), ends, 'kcat committed what it read when it closed');
    const admin = kafka().admin();
    await admin.connect();
    const { groups } = await admin.listGroups();
    assert.deepEqual(groups.map((g) => g.groupId).sort(), [GROUP, 'kcat-group']);
    const described = await admin.describeGroups(['kcat-group', 'no-such-group']);
    assert.deepEqual(described.groups.map((g) => [g.groupId, g.state]), [['kcat-group', 'Empty'], ['no-such-group', 'Dead']]);
    await admin.disconnect();
    const rows = await sql(server.bootstrap, 'SHOW CONSUMER GROUPS');
    assert.equal(rows.find((r) => r.group === 'kcat-group')?.lag, 0);
    const metrics = await (await fetch(`http://${server.http}/metrics`)).text();
    assert.match(metrics, /^tributary_kafka_consumer_groups 2$/m);
    assert.match(metrics, /^tributary_kafka_consumer_group_lag\{group="kcat-group",topic="orders"\} 0$/m);
    assert.match(metrics, new RegExp(`^tributary_kafka_consumer_group_lag\\{group="${GROUP}",topic="orders"\\} \\d+$`, 'm'));
  });
});
