#!/usr/bin/env bash
# Why `async` moves between runs on a VM: alternates a measurement of the one-way latency of a
# cache line between CPUs 0 and 1 (two pinned threads passing a counter back and forth) with a
# short `parbench async` run, and prints both per round. Each engine op moves a few lines
# between the pushing core and the worker's, so its cost follows that latency, which a host
# changes when it moves the vCPUs. Not part of CI; needs a C compiler and two CPUs.
#
#   scripts/cross-core.sh [rounds]      (default 10)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-10}
if [ "$(nproc)" -lt 2 ]; then echo "cross-core.sh: needs two CPUs, this machine offers $(nproc)" >&2; exit 2; fi
cargo build --release --quiet
bin=target/release/parbench
probe=target/cross-core-latency
cc -O2 -pthread -x c -o "$probe" - <<'C'
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <time.h>
/* Alone on its pair of cache lines. */
static _Atomic long line __attribute__((aligned(128)));
static const long hops = 200000;
static void pin(int cpu) {
  cpu_set_t s; CPU_ZERO(&s); CPU_SET(cpu, &s);
  pthread_setaffinity_np(pthread_self(), sizeof s, &s);
}
static void *pong(void *arg) {
  (void)arg; pin(1);
  for (long i = 0; i < hops; i++) {
    while (atomic_load_explicit(&line, memory_order_acquire) != 2 * i + 1) {}
    atomic_store_explicit(&line, 2 * i + 2, memory_order_release);
  }
  return 0;
}
int main(void) {
  pin(0);
  pthread_t t; pthread_create(&t, 0, pong, 0);
  struct timespec t0, t1; clock_gettime(CLOCK_MONOTONIC, &t0);
  for (long i = 0; i < hops; i++) {
    atomic_store_explicit(&line, 2 * i + 1, memory_order_release);
    while (atomic_load_explicit(&line, memory_order_acquire) != 2 * i + 2) {}
  }
  clock_gettime(CLOCK_MONOTONIC, &t1); pthread_join(t, 0);
  printf("%.1f\n", ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / hops / 2);
  return 0;
}
C
printf '%-6s %16s %18s %8s\n' round 'one-way (ns)' 'async per op (ns)' ratio
for r in $(seq 1 "$rounds"); do
  lat=$("$probe")
  op=$("$bin" async --min-samples 5 --max-samples 5 --min-time 0 --json --quiet |
    python3 -c 'import json,sys; d=json.load(sys.stdin); print("%.1f" % (d["runs"][0]["derived"]["async_per_op_s"] * 1e9))')
  printf '%-6s %16s %18s %8s\n' "$r" "$lat" "$op" "$(python3 -c "print(f'{$op/$lat:.1f}')")"
done
