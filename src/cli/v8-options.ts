/**
 * V8 options of every `tributary` process, set before any other module loads: main.ts imports
 * this module first.
 *
 * WebAssembly (the Parquet writer; ZSTD where node:zlib has none) is compiled optimized on first
 * use rather than in tiers. With V8's dynamic tiering, a function first runs as quickly compiled
 * baseline code and is recompiled on background threads once it is hot, so a newly started tiering
 * worker ran its first large rounds partly in baseline code while spending CPU on recompiling them:
 * those rounds took 12% longer (bench:tiering, docs/benchmarks.md).
 */
import v8 from 'node:v8';

v8.setFlagsFromString('--no-wasm-dynamic-tiering');
