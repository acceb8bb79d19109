#!/usr/bin/env bash
# scripts/fuzz.sh [SECONDS [TARGET...]] - build the libFuzzer targets and run
# each for SECONDS (default 60): model (with the structure-aware mutator),
# npy, csv, jsonl, image, jobfile.  See docs/reliability.md.
#
# Installs clang and its fuzzer runtime with apt when missing, builds
# build-fuzz/ (clang, -DTOPLU_FUZZ=ON: the library with
# -fsanitize=fuzzer-no-link,address,undefined), writes each target's seed
# corpus (fuzz/make-corpus.sh) to build-fuzz/fuzz-seeds/TARGET and runs
#   fuzz-TARGET -max_total_time=SECONDS -timeout=20 -rss_limit_mb=4096
# with the growing corpus in fuzz/corpus/TARGET (ignored by git, kept
# between runs).  A finding (crash-*, leak-*, timeout-*, oom-*) is copied to
# tests/fuzz-regress/TARGET/open/ (a regression input to commit: the ctest
# replay tests/fuzz.cmake runs tests/fuzz-regress/TARGET/ once it is fixed)
# and the target is started again for the time left (at most 8 findings
# per target).  Prints one line per target: executions, corpus size,
# coverage (cov: edges, ft: features), findings; exits 1 when there was a
# finding, 2 on a build error.
#
# Environment: TOPLU_FUZZ_NICE (niceness, default 10), TOPLU_FUZZ_BUILD
# (build folder, default build-fuzz), TOPLU_FUZZ_ARGS (more libFuzzer flags),
# TOPLU_FUZZ_MAX_PIXELS (fuzz-image: skip PNGs declaring more pixels: gets
# past the decompression-bomb finding, issue 14 item 3; default none).
set -uo pipefail

secs=${1:-60}
shift || true
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(model npy csv jsonl image jobfile)
case $secs in '' | *[!0-9]*) echo "usage: scripts/fuzz.sh [SECONDS [TARGET...]]" >&2; exit 2 ;; esac

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
build=${TOPLU_FUZZ_BUILD:-build-fuzz}
nice_n=${TOPLU_FUZZ_NICE:-10}
jobs=${TOPLU_JOBS:-2}

# clang and libFuzzer (libclang-rt-14-dev); the rest as scripts/install-deps.sh.
scripts/install-deps.sh || exit 2
need=()
command -v clang >/dev/null 2>&1 || need+=(clang)
dpkg-query -W -f='${Status}\n' libclang-rt-14-dev 2>/dev/null | grep -q 'ok installed' || need+=(libclang-rt-14-dev)
if [ ${#need[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo=sudo
  echo "fuzz: installing ${need[*]}"
  DEBIAN_FRONTEND=noninteractive $sudo apt-get update -qq >/dev/null &&
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null ||
    { echo "fuzz: could not install ${need[*]}" >&2; exit 2; }
fi

if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S . -B "$build" -DTOPLU_FUZZ=ON -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=RelWithDebInfo >"$build.cmake.log" 2>&1 ||
    { cat "$build.cmake.log" >&2; exit 2; }
fi
nice -n "$nice_n" cmake --build "$build" -j"$jobs" --target fuzz >"$build/fuzz-build.log" 2>&1 ||
  { tail -40 "$build/fuzz-build.log" >&2; echo "fuzz: build failed (log: $build/fuzz-build.log)" >&2; exit 2; }

# oneDNN's JIT and OpenMP keep process-wide state; one thread is enough.
export OMP_NUM_THREADS=1
export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=0:detect_leaks=1:allocator_may_return_null=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

any=0
summary=()
for t in "${targets[@]}"; do
  bin=$build/fuzz-$t
  [ -x "$bin" ] || { echo "fuzz: no target $t ($bin)" >&2; exit 2; }
  seeds=$build/fuzz-seeds/$t corpus=fuzz/corpus/$t findings=$build/fuzz-findings/$t logs=$build/fuzz-logs
  rm -rf "$seeds" "$findings"
  sh fuzz/make-corpus.sh "$t" "$seeds" >/dev/null
  mkdir -p "$corpus" "$findings" "$logs"
  extra=()
  case $t in
  model) extra=(-dict=fuzz/onnx.dict -max_len=1048576) ;;
  image) extra=(-max_len=262144) ;;
  *) extra=(-max_len=65536) ;;
  esac
  start=$(date +%s) left=$secs execs=0 cov=0 ft=0 n_find=0 round=0
  : >"$logs/$t.log"
  while [ "$left" -gt 0 ] && [ $n_find -lt 8 ]; do
    round=$((round + 1))
    before=$(ls "$findings" | wc -l)
    # shellcheck disable=SC2086
    nice -n "$nice_n" "$bin" -max_total_time="$left" -timeout=20 -rss_limit_mb=4096 -print_final_stats=1 \
      -artifact_prefix="$findings/" "${extra[@]}" ${TOPLU_FUZZ_ARGS:-} "$corpus" "$seeds" >>"$logs/$t.log" 2>&1
    rc=$?
    e=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$logs/$t.log" | tail -1 | grep -o '[0-9]*$')
    execs=$((execs + ${e:-0}))
    line=$(grep -E '^#[0-9]+.*cov: [0-9]+' "$logs/$t.log" | tail -1)
    c=$(sed -n 's/.*cov: \([0-9]*\).*/\1/p' <<<"$line") f=$(sed -n 's/.*ft: \([0-9]*\).*/\1/p' <<<"$line")
    [ -n "$c" ] && [ "$c" -gt "$cov" ] && cov=$c
    [ -n "$f" ] && [ "$f" -gt "$ft" ] && ft=$f
    after=$(ls "$findings" | wc -l)
    if [ "$after" -gt "$before" ]; then
      n_find=$((n_find + after - before))
    elif [ $rc -ne 0 ]; then
      echo "fuzz: $t exited $rc without a finding (log: $logs/$t.log)" >&2
      n_find=$((n_find + 1))
      break
    fi
    left=$((secs - ($(date +%s) - start)))
    [ $rc -eq 0 ] && break
  done
  n_corpus=$(ls "$corpus" | wc -l)
  kinds=""
  if [ "$(ls "$findings" | wc -l)" -gt 0 ]; then
    mkdir -p "tests/fuzz-regress/$t/open"
    for f in "$findings"/*; do
      cp -n "$f" "tests/fuzz-regress/$t/open/" 2>/dev/null || true
    done
    kinds=$(ls "$findings" | sed 's/-.*//' | sort | uniq -c | awk '{print $1 " " $2}' | paste -sd, -)
    any=1
  fi
  s=$(printf '%-8s %10d execs  corpus %5d  cov %6d  ft %7d  findings %s' "$t" "$execs" "$n_corpus" "$cov" "$ft" \
    "${kinds:-0}")
  echo "fuzz: $s"
  summary+=("$s")
done
echo
echo "fuzz: $secs s per target (logs: $build/fuzz-logs/, findings: $build/fuzz-findings/ and tests/fuzz-regress/TARGET/open/)"
for s in "${summary[@]}"; do echo "  $s"; done
exit $any
