#!/usr/bin/env bash
# scripts/test.sh - the one test command.
#
#   scripts/test.sh [--no-asan]
#
# 1. installs missing Debian packages (scripts/install-deps.sh);
# 2. configures and builds build/ (Release);
# 3. fetches the real models and data (scripts/fetch-models.sh);
# 4. runs every CTest test in build/ (unit, loader, CLI, conformance, real models);
# 5. builds build-asan/ with AddressSanitizer + UndefinedBehaviorSanitizer and
#    runs there every test not labelled "slow": unit, loader, CLI and the
#    model tests labelled "quick" (skipped with --no-asan).
# Exits non-zero when any step or test fails.  TOPLU_BUILD / TOPLU_BUILD_ASAN
# name other build folders (defaults build and build-asan, under the root).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
asan=1
for a in "$@"; do
  case $a in
    --no-asan) asan=0 ;;
    *) echo "usage: scripts/test.sh [--no-asan]" >&2; exit 2 ;;
  esac
done
jobs=$(nproc 2>/dev/null || echo 2)
build=${TOPLU_BUILD:-build}
build_asan=${TOPLU_BUILD_ASAN:-build-asan}
step() { printf '\n== %s\n' "$*"; }

step "dependencies"
scripts/install-deps.sh

step "build (Release) in $build/"
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" -j"$jobs"

step "models and data"
scripts/fetch-models.sh

status=0
step "tests ($build/)"
ctest --test-dir "$build" --output-on-failure || status=1

if [ "$asan" = 1 ]; then
  step "build with ASan+UBSan in $build_asan/"
  cmake -S . -B "$build_asan" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTOPLU_SANITIZE=ON >/dev/null
  cmake --build "$build_asan" -j"$jobs"
  step "tests not labelled slow, under ASan+UBSan ($build_asan/)"
  ctest --test-dir "$build_asan" -LE slow --output-on-failure || status=1
fi

if [ "$status" = 0 ]; then
  step "all tests passed"
else
  step "some tests FAILED (see above)"
fi
exit "$status"
