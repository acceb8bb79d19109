#!/bin/sh
# scripts/conformance.sh - run the ONNX node tests through toplu, regenerate
# docs/conformance.md and tests/conformance-baseline.txt.
#
#   scripts/conformance.sh [BUILD_DIR] [-- extra toplu-conformance options]
#
# BUILD_DIR defaults to build/ (configured and built here when needed).
# Environment: TOPLU_NODE_TESTS (default /usr/share/libonnx-testdata/data/node),
# JOBS (default: online CPUs), NO_BASELINE=1 to leave the baseline alone.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
build="$root/build"
case "${1:-}" in
  "" | -*) ;;
  *) build=$1; shift ;;
esac
if [ "${1:-}" = "--" ]; then shift; fi
tests=${TOPLU_NODE_TESTS:-/usr/share/libonnx-testdata/data/node}
jobs=${JOBS:-$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 2)}

if [ ! -d "$tests" ]; then
  echo "conformance.sh: $tests is missing (apt-get install libonnx-testdata)" >&2
  exit 1
fi
if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release
fi
cmake --build "$build" --target toplu_conformance -j "$jobs"

set -- --all "$tests" --jobs "$jobs" --markdown "$root/docs/conformance.md" "$@"
if [ "${NO_BASELINE:-0}" != 1 ]; then
  set -- "$@" --baseline "$root/tests/conformance-baseline.txt"
fi
exec "$build/toplu-conformance" "$@"
