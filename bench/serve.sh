#!/usr/bin/env bash
# bench/serve.sh - issue 13's serving measurements of `toplu serve`.
#
#   bench/serve.sh [batching|overhead|wrk|all] [--rounds R] [--seconds S] [--trials N]
#                  [--concurrency N[,N...]] [--threads T]
#
#   batching  dynamic batching on against off at concurrency 16 (target: >= 2.5x)
#   overhead  server latency at concurrency 1 minus a direct engine call
#             (toplu_bench, same threads; target: < 100 us)
#   wrk       toplu perf against wrk -t 1 at concurrency 8 and 16 (target: within 10%)
#   all       the three (default)
#
# The soak is bench/serve_soak.sh.  Builds toplu and toplu_bench in
# ${TOPLU_BUILD:-build} when missing, then runs bench/serve_bench.py, which
# documents each check; its output is the record for docs/performance.md
# ("Serving").  Exit 0: every target met, 1: one missed, 2: setup failed.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(dirname "$here")
build=${TOPLU_BUILD:-$root/build}
check=all
case "${1:-}" in batching|overhead|wrk|all) check=$1; shift ;; esac
if [ ! -x "$build/toplu" ] || [ ! -x "$build/toplu_bench" ]; then
  [ -f "$build/CMakeCache.txt" ] || cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$build" -j"$(nproc)" --target toplu_cli toplu_bench >/dev/null
fi
export TOPLU_BUILD=$build
exec /usr/bin/python3 "$here/serve_bench.py" "$check" "$@"
