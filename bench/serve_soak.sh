#!/usr/bin/env bash
# bench/serve_soak.sh - a soak of `toplu serve` at a fixed request rate.
#
#   bench/serve_soak.sh [--minutes M] [--rate R] [--window S] [--warm-all]
#
# Serves the PaddleOCR direction classifier (cls: max_batch_size 32, dynamic
# batching) and loads it open loop at R requests/s (default 200) for M
# minutes (default 10) as a chain of `toplu perf --request-rate-range R`
# runs of S seconds (default 10) each; after each it reads the server's
# VmRSS from /proc/PID/status.  Prints a row per window (time, VmRSS,
# infer/s, p50, p99, errors) and a verdict: RSS after the first minute grows
# < 5%, the p99 of the last 3 windows is within 25% of the first 3, no
# errors.  --warm-all: the model warms at its plan sizes 1, 2, 4, 8, 16, 32
# first (batches are padded up to those; a plan each), so plans first built
# mid-soak do not show as RSS growth.
# Exit 0 pass, 1 fail, 2 setup failed.  bench/serve_bench.py does
# the work (its "soak" check).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(dirname "$here")
build=${TOPLU_BUILD:-$root/build}
if [ ! -x "$build/toplu" ]; then
  [ -f "$build/CMakeCache.txt" ] || cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$build" -j"$(nproc)" --target toplu_cli >/dev/null
fi
export TOPLU_BUILD=$build
exec /usr/bin/python3 "$here/serve_bench.py" soak "$@"
