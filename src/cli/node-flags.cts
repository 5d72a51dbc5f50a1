/**
 * Node flags of the `tributary` server processes, which V8 reads once, at start: they have to be
 * on the process's command line. CommonJS, because the installed
 * command (bin.cts) applies them before any ES module loads.
 *
 * Garbage collection on the main thread alone (`--single-threaded-gc`) on a machine of two cores
 * or fewer: V8's parallel collection hands its work to helper threads and waits for the slowest,
 * and with both cores busy (the node's appends and fetches, its file threads, clients on the same
 * machine) a helper waits for a core and the pause grows. In bench:latency at 50k rows/s on two
 * cores, server and client processes so started cut the p99.9 of produce to consume from 34–37
 * to 18–22 ms and its maximum from 50–53 to 30–31 ms (docs/benchmarks.md). With more cores the
 * helpers find one free and parallel collection is faster. `TRIBUTARY_GC` = `single` or
 * `parallel` chooses either way.
 */
import os from 'node:os';

/** The commands that run a server. */
export const SERVER_COMMANDS: readonly string[] = ['start', 'coordinator-server', 'tablet-server'];

const SINGLE_THREADED_GC = '--single-threaded-gc';

/** The GC flags a process latency matters to runs with: on `cores` (this machine's by default), or as `TRIBUTARY_GC` says. */
export function gcFlags(env: NodeJS.ProcessEnv = process.env, cores: number = os.availableParallelism()): string[] {
  const mode = env.TRIBUTARY_GC || (cores <= 2 ? 'single' : 'parallel');
  if (mode !== 'single' && mode !== 'parallel') throw new Error(`TRIBUTARY_GC is 'single' or 'parallel', got '${mode}'`);
  return mode === 'single' ? [SINGLE_THREADED_GC] : [];
}

/** Of `flags`, those the running process was not started with. */
export function missingFlags(flags: readonly string[], execArgv: readonly string[] = process.execArgv): string[] {
  return flags.filter((f) => !execArgv.includes(f));
}
