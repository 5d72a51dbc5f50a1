#!/usr/bin/env node
/**
 * The installed `tributary` command. libuv sizes its thread pool, which runs every file read,
 * write and fsync, when it is first used, and loading ES modules already uses it: only this
 * CommonJS entry runs early enough to size it. Four threads (libuv's default) are few for a node
 * whose appends fsync beside checkpoints, snapshots and lake files: with four background fsync
 * writers, appends waited for a free thread (bench:latency p50 7.8-8.6 ms with four, 5.0-6.9 ms
 * with sixteen). A value the operator sets is kept.
 */
process.env.UV_THREADPOOL_SIZE ??= '16';
void import('./main.js');
