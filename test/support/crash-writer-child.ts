/**
 * A producer for crash tests: appends rows with consecutive ids (acks=all, idempotent) in rounds
 * and prints `acked <lastId>` after each flush resolves, until it has written `total` rows.
 * Usage: crash-writer-child.ts <bootstrap> <database.table> <total> [request timeout, 5s by default] [partitions]
 * With `partitions` (comma-separated values), row `id` also has `part` = the (id mod n)-th value.
 */
import { Connection } from '../../src/client/index.js';

const [bootstrap, name, totalText, requestTimeout = '5s', partitionList] = process.argv.slice(2);
const partitions = partitionList?.split(',');
const [database, table] = name.split('.');
const total = Number(totalText);
const ROUND = 250;

const conn = await Connection.create({
  'bootstrap.servers': bootstrap,
  'client.writer.acks': 'all',
  'client.writer.batch-timeout': '2ms',
  'client.writer.batch-size': '16kb',
  'client.request-timeout': requestTimeout,
  'client.connect-timeout': '1s',
});
const writer = await (await conn.getTable({ database, table })).newAppend().createWriter();
for (let id = 0; id < total; ) {
  const end = Math.min(total, id + ROUND);
  for (; id < end; id++) await writer.append({ id: BigInt(id), payload: `row-${id}`, ...(partitions ? { part: partitions[id % partitions.length] } : {}) });
  await writer.flush();
  process.stdout.write(`acked ${end - 1}\n`);
}
await writer.close();
await conn.close();
process.stdout.write('done\n');
