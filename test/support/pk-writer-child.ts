/**
 * An upserting producer for crash tests: in round r it upserts every key 0..keys-1 with v = r
 * (acks=all, idempotent) and prints `acked r` once the round's flush resolves.
 * Usage: pk-writer-child.ts <bootstrap> <database.table> <keys> <rounds> [request timeout, 5s by default]
 */
import { Connection } from '../../src/client/index.js';

const [bootstrap, name, keysText, roundsText, requestTimeout = '5s'] = process.argv.slice(2);
const [database, table] = name.split('.');
const conn = await Connection.create({
  'bootstrap.servers': bootstrap,
  'client.writer.batch-timeout': '2ms',
  'client.writer.batch-size': '8kb',
  'client.request-timeout': requestTimeout,
  'client.connect-timeout': '1s',
});
const writer = await (await conn.getTable({ database, table })).newUpsert().createWriter();
for (let round = 0; round < Number(roundsText); round++) {
  for (let k = 0; k < Number(keysText); k++) await writer.upsert({ k: BigInt(k), v: round });
  await writer.flush();
  process.stdout.write(`acked ${round}\n`);
}
await writer.close();
await conn.close();
process.stdout.write('done\n');
