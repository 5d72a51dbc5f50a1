/**
 * V8 options of every `tributary` process, set before any other module loads: main.ts imports
 * this module first.
 *
 * WebAssembly (the Parquet writer; ZSTD where node:zlib has none) is compiled optimized on first
 * use rather than in tiers. With V8's dynamic tiering, a function first runs as quickly compiled
 * baseline code and is recompiled on background threads once it is hot, so a newly started tiering
 * worker ran its first large rounds partly in baseline code while spending CPU on recompiling them:
 * those rounds took 12% longer (bench:tiering, docs/benchmarks.md).
 *
 * Allocation-site pretenuring is off. V8 allocates the objects of an allocation site in the old
 * generation once most of them have survived a scavenge; on a request path it misjudges sites
 * whose objects live a few milliseconds, and those then die in the old generation, keep the young
 * objects they point to alive through scavenges and bring on full collections. A client
 * producing 10k rows/s promoted about 2 MB a second with it, in scavenges of 7–11 ms, and 0.3 MB
 * in scavenges of 2 ms without it; the server's and client's p99.9 in bench:latency fell with it
 * off (docs/benchmarks.md).
 */
import v8 from 'node:v8';

v8.setFlagsFromString('--no-wasm-dynamic-tiering');
v8.setFlagsFromString('--no-allocation-site-pretenuring');
