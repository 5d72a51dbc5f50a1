#!/usr/bin/env -S node --max-semi-space-size=2 --initial-old-space-size=128
/**
 * The installed `tributary` command.
 *
 * Node starts with V8's young generation capped at semi-spaces of 2 MB (the first line: heap sizes
 * are fixed when the process starts, too early for src/cli/v8-options.ts). V8 grows them up to
 * 16 MB when many objects survive a scavenge, and a server's request path keeps objects for a few
 * milliseconds: grown, the scavenges came half as often and took 2-3 ms instead of under 1, and
 * in runs side by side the p99 of bench:latency at 10k rows/s was 13.0-13.3 ms against 8.7-10.4
 * with the cap (docs/benchmarks.md).
 *
 * It also starts with an old generation of 128 MB, below which V8 skips full collections (an
 * initial size given at start is also the floor of the limit V8 sets after each one). Some of a
 * request's objects outlive two scavenges; with the limit V8 derives from a small live heap they
 * brought on 6-7 full collections a minute at 10k rows/s, each pausing up to 9-16 ms; with this
 * floor, one. In runs side by side bench:latency's p99.9 was 15.5-19.8 ms (one run 62, a 107 ms
 * fsync) against 20.4-29.4 without it.
 *
 * libuv sizes its thread pool, which runs every file read, write and fsync, when it is first used,
 * and loading ES modules already uses it: only this CommonJS entry runs early enough to size it.
 * Four threads (libuv's default) are few for a node whose appends fsync beside checkpoints,
 * snapshots and lake files: with four background fsync writers, appends waited for a free thread
 * (bench:latency p50 7.8-8.6 ms with four, 5.0-6.9 ms with sixteen). A value the operator sets is
 * kept.
 */
process.env.UV_THREADPOOL_SIZE ??= '16';
void import('./main.js');
