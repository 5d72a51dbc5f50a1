/** The server's structured logger: one line per meaningful event (pino, JSON to stdout or stderr). */
import { pino } from 'pino';

export type Logger = pino.Logger;

export function createLogger(level = process.env.TRIBUTARY_LOG_LEVEL ?? 'info', destination: 1 | 2 = 2): Logger {
  return pino({ level, base: { service: 'tributary' } }, pino.destination({ fd: destination, sync: false }));
}
