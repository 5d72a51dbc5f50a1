/**
 * The progress line of long work on a terminal: `\r` and the text (what, rows so far, their rate
 * since that work's first report, the statement's elapsed time), rewritten at most every `intervalMs` (4 times a second), shown only once the work
 * has run `delayMs` (quick statements print nothing), and erased by `end()` before the result is
 * printed. It is off when its stream is not a terminal (stderr piped or redirected) and with
 * `--no-progress`, so captured output never holds progress characters.
 */

/** Where the line goes: process.stderr, or any stream that says whether it is a terminal. */
export interface ProgressOutput {
  isTTY?: boolean;
  columns?: number;
  write(text: string): unknown;
}

export interface ProgressOptions {
  /** false: never draw (`--no-progress`). */
  enabled?: boolean;
  delayMs?: number;
  intervalMs?: number;
  now?: () => number;
}

const ERASE_LINE = '\r\x1b[K';
const count = new Intl.NumberFormat('en-US');

export class ProgressLine {
  /** Whether anything may be drawn: a terminal, and not disabled. */
  readonly enabled: boolean;
  private readonly delayMs: number;
  private readonly intervalMs: number;
  private readonly now: () => number;
  private startedAt: number;
  private drawnAt = Number.NEGATIVE_INFINITY;
  private shown = false;
  /** What is being done, and since when: the rate counts from its first report, not from the start. */
  private phase?: { what: string; since: number };

  constructor(
    private readonly out: ProgressOutput,
    options: ProgressOptions = {},
  ) {
    this.enabled = (options.enabled ?? true) && out.isTTY === true;
    this.delayMs = options.delayMs ?? 1000;
    this.intervalMs = options.intervalMs ?? 250;
    this.now = options.now ?? Date.now;
    this.startedAt = this.now();
  }

  /** Starts timing new work (the next statement); erases the line of the previous one. */
  start(): void {
    this.end();
    this.startedAt = this.now();
    this.drawnAt = Number.NEGATIVE_INFINITY;
    this.phase = undefined;
  }

  /** The work so far: `what` (e.g. "writing db.t"), `done` of `total` (when known) `unit`s. */
  update(what: string, done: number, total?: number, unit = 'rows'): void {
    if (!this.enabled) return;
    const now = this.now();
    if (this.phase?.what !== what) this.phase = { what, since: now };
    const elapsedMs = now - this.startedAt;
    if (elapsedMs < this.delayMs || now - this.drawnAt < this.intervalMs) return;
    this.drawnAt = now;
    const phaseSeconds = (now - this.phase.since) / 1000;
    const rate = phaseSeconds > 0 ? `, ${count.format(Math.round(done / phaseSeconds))} ${unit}/s` : '';
    const text = `${what}: ${count.format(done)}${total !== undefined ? ` of ${count.format(total)}` : ''} ${unit}${rate}, ${(elapsedMs / 1000).toFixed(1)} s`;
    // Kept to one terminal line: a wrapped line cannot be rewritten with \r. Some terminals report 0 columns.
    const width = (this.out.columns || 80) - 1;
    this.out.write(`${ERASE_LINE}${text.length > width ? text.slice(0, width) : text}`);
    this.shown = true;
  }

  /** Erases the line, if one was drawn. */
  end(): void {
    if (!this.shown) return;
    this.out.write(ERASE_LINE);
    this.shown = false;
  }
}
