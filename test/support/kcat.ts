/** Runs Debian's `kcat` (librdkafka), an independent Kafka client, with `input` on its stdin. */
import { execFile } from 'node:child_process';

/** Most output a run may print: a consume of many large values. */
const MAX_OUTPUT = 64 * 1024 * 1024;

export function kcat(args: string[], input?: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = execFile('kcat', args, { timeout: 30_000, maxBuffer: MAX_OUTPUT }, (err, stdout, stderr) => (err ? reject(new Error(`kcat ${args.join(' ')}: ${stderr}`)) : resolve(stdout)));
    child.stdin!.end(input ?? '');
  });
}
