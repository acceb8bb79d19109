#!/bin/sh
# scripts/conformance.sh - run the ONNX node tests through toplu, regenerate
# docs/conformance.md and check every verdict against
# tests/conformance-expected.txt (as the CTest `conformance` test does).
#
#   scripts/conformance.sh [BUILD_DIR] [--update] [-- extra toplu-conformance options]
#
# Without --update the expected list is only read: the script fails when a
# test expected PASS does not pass, or any test crashes or times out, and
# names the tests that newly pass.  --update records this run's verdicts in
# tests/conformance-expected.txt (newly passing tests, new tests, changes
# among the non-passing verdicts) and refuses, leaving the file as it is, to
# turn a PASS into anything else or to record a CRASH or TIMEOUT: the list is
# never lowered by a script.  After adding an op: scripts/conformance.sh --update
#
# BUILD_DIR defaults to build/ (configured and built here when needed).
# Environment: TOPLU_NODE_TESTS (default /usr/share/libonnx-testdata/data/node),
# JOBS (default: online CPUs).
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
build="$root/build"
update=0
while [ $# -gt 0 ]; do
  case $1 in
    --update) update=1; shift ;;
    --) shift; break ;;
    -*) break ;;
    *) build=$1; shift ;;
  esac
done
tests=${TOPLU_NODE_TESTS:-/usr/share/libonnx-testdata/data/node}
jobs=${JOBS:-$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 2)}
expected="$root/tests/conformance-expected.txt"

if [ ! -d "$tests" ]; then
  echo "conformance.sh: $tests is missing (apt-get install libonnx-testdata)" >&2
  exit 1
fi
if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release
fi
cmake --build "$build" --target toplu_conformance -j "$jobs"

# the report covers the whole suite: a run given extra runner options (a
# --filter, say) leaves docs/conformance.md as it is
if [ $# -eq 0 ]; then
  set -- --all "$tests" --jobs "$jobs" --markdown "$root/docs/conformance.md"
else
  set -- --all "$tests" --jobs "$jobs" "$@"
fi
if [ "$update" = 1 ]; then
  set -- "$@" --update-expected "$expected"
else
  set -- "$@" --expected "$expected"
fi
exec "$build/toplu-conformance" "$@"
