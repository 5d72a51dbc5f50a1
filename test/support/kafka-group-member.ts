/**
 * A kafkajs consumer group member in a process of its own, for test/kafka-groups.e2e.test.ts:
 * `node --import tsx kafka-group-member.ts <broker> <group> <topic> <name>`. It prints one JSON
 * line per event on stdout: `{"joined": [partitions]}` after each rebalance and
 * `{"p": partition, "o": offset, "v": value}` per message processed. SIGTERM leaves the group
 * (disconnect), then the process exits; SIGKILL leaves nothing behind, as a crash.
 */
import { Kafka, logLevel } from 'kafkajs';

const [broker, groupId, topic] = process.argv.slice(2);
const kafka = new Kafka({ brokers: [broker], logLevel: logLevel.NOTHING, retry: { retries: 20, initialRetryTime: 100, maxRetryTime: 1000 } });
const consumer = kafka.consumer({ groupId, sessionTimeout: 3000, heartbeatInterval: 300, rebalanceTimeout: 10_000, maxWaitTimeInMs: 200 });
const print = (o: object): void => void process.stdout.write(`${JSON.stringify(o)}\n`);

consumer.on(consumer.events.GROUP_JOIN, (e) => {
  const assigned = (e.payload.memberAssignment[topic] as number[] | undefined) ?? [];
  print({ joined: [...assigned].sort((a, b) => a - b) });
});
consumer.on(consumer.events.CRASH, (e) => print({ crash: String(e.payload.error) }));

process.on('SIGTERM', () => {
  void consumer.disconnect().then(() => process.exit(0));
});

await consumer.connect();
await consumer.subscribe({ topic, fromBeginning: true });
await consumer.run({
  autoCommitInterval: 200,
  eachMessage: async ({ partition, message }) => {
    print({ p: partition, o: message.offset, v: message.value?.toString() });
  },
});
print({ running: true });
