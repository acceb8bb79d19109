#!/usr/bin/env bash
# scripts/test.sh - the one test command.
#
#   scripts/test.sh [--no-asan]
#   scripts/test.sh --update-test-list
#
# 1. installs missing Debian packages (scripts/install-deps.sh);
# 2. configures and builds build/ (Release); configuring fails when a test
#    dependency is missing (cmocka, /usr/bin/python3 with numpy, onnx, PIL);
# 3. fetches the real models and data (scripts/fetch-models.sh), which fails,
#    naming what is missing, when the shared folder is incomplete;
# 4. runs every CTest test in build/ (unit, loader, CLI, conformance, real models);
# 5. builds build-asan/ with AddressSanitizer + UndefinedBehaviorSanitizer and
#    runs there every test not labelled "slow": unit, loader, CLI and the
#    model tests labelled "quick" (skipped with --no-asan).
# After each ctest run, tests/check_test_run.py fails the run when a test of
# tests/expected-tests.txt is not registered, a selected test did not run, or
# a test skipped without an entry in tests/allowed-skips.txt; the summary
# names the allowed skips that happened.
# Exits non-zero when any step or test fails, or a test skipped.
#
# --update-test-list configures build/ and writes the registered tests to
# tests/expected-tests.txt (after adding or removing a test on purpose).
#
# Environment: TOPLU_SHARED (the shared folder; default ../shared beside the
# project), TOPLU_CACHE (default ~/.cache/toplu), TOPLU_BUILD / TOPLU_BUILD_ASAN
# (build folders; defaults build and build-asan, under the root).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
asan=1
update_list=0
for a in "$@"; do
  case $a in
    --no-asan) asan=0 ;;
    --update-test-list) update_list=1 ;;
    *) echo "usage: scripts/test.sh [--no-asan] | --update-test-list" >&2; exit 2 ;;
  esac
done
jobs=$(nproc 2>/dev/null || echo 2)
build=${TOPLU_BUILD:-build}
build_asan=${TOPLU_BUILD_ASAN:-build-asan}
export TOPLU_SHARED=${TOPLU_SHARED:-$root/../shared}
PY=/usr/bin/python3
step() { printf '\n== %s\n' "$*"; }
# configure DIR [cmake args]: the shared folder is passed on every time (the
# cache would otherwise keep the first one).
configure() {
  local dir=$1
  shift
  cmake -S . -B "$dir" -DTOPLU_SHARED_DIR="$TOPLU_SHARED" "$@" >/dev/null
}

if [ "$update_list" = 1 ]; then
  configure "$build" -DCMAKE_BUILD_TYPE=Release
  exec "$PY" tests/check_test_run.py --build "$build" --write-expected tests/expected-tests.txt
fi

step "dependencies"
scripts/install-deps.sh

step "build (Release) in $build/"
configure "$build" -DCMAKE_BUILD_TYPE=Release
cmake --build "$build" -j"$jobs"

step "models and data"
if ! scripts/fetch-models.sh; then
  step "FAILED: the models and data the tests need are not all here (see the fetch-models line above)"
  exit 1
fi

status=0
summary=()
# run_ctest DIR [ctest args]: ctest, then the completeness check of the run.
run_ctest() {
  local dir=$1 junit
  shift
  junit=$(cd "$dir" && pwd)/ctest-junit.xml
  rm -f "$junit"
  ctest --test-dir "$dir" --output-on-failure --output-junit "$junit" \
    --test-output-size-passed 1048576 --test-output-size-failed 1048576 "$@" || status=1
  local excl=()
  if [ "${1:-}" = -LE ]; then excl=(--exclude-label "$2"); fi
  local out
  if out=$("$PY" tests/check_test_run.py --build "$dir" --junit "$junit" "${excl[@]}"); then :; else status=1; fi
  printf '%s\n' "$out"
  summary+=("$dir/: $out")
}

step "tests ($build/)"
run_ctest "$build"

if [ "$asan" = 1 ]; then
  step "build with ASan+UBSan in $build_asan/"
  configure "$build_asan" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTOPLU_SANITIZE=ON
  cmake --build "$build_asan" -j"$jobs"
  step "tests not labelled slow, under ASan+UBSan ($build_asan/)"
  run_ctest "$build_asan" -LE slow
fi

step "summary"
printf '%s\n' "${summary[@]}"
if [ "$status" = 0 ]; then
  step "all tests passed, none skipped but those allowed above"
else
  step "some tests FAILED, skipped or did not run (see above)"
fi
exit "$status"
