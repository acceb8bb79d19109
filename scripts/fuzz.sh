#!/usr/bin/env bash
# scripts/fuzz.sh [SECONDS [TARGET...]] - build the libFuzzer targets and run
# each for SECONDS (default 60): model (with the structure-aware mutator),
# npy, csv, jsonl, image, jobfile, serveconfig.  See docs/reliability.md.
#
# Installs clang and its fuzzer runtime with apt when missing, builds
# build-fuzz/ (clang, -DTOPLU_FUZZ=ON: the library with
# -fsanitize=fuzzer-no-link,address,undefined), writes each target's seed
# corpus (fuzz/make-corpus.sh) to build-fuzz/fuzz-seeds/TARGET and runs
#   fuzz-TARGET -max_total_time=SECONDS -timeout=20 -rss_limit_mb=4096
# with the growing corpus in fuzz/corpus/TARGET (ignored by git, kept
# between runs), in libFuzzer's fork mode with one worker, so fuzzing goes
# on after a finding.  Findings (crash-*, leak-*, timeout-*, oom-*, in
# build-fuzz/fuzz-findings/TARGET/) are replayed and one input per distinct
# sanitizer report not already given by an input there is copied to
# tests/fuzz-regress/TARGET/open/ (every timeout and OOM: a
# regression input to commit, renamed to say what it is: ctest replays tests/fuzz-regress/TARGET/ once
# it is fixed and moved there, tests/fuzz.cmake).  Prints one line per
# target: executions, corpus size, coverage (cov: edges, ft: features),
# findings; exits 1 when there was a finding, 2 on a build error.
#
# Environment: TOPLU_FUZZ_NICE (niceness, default 10), TOPLU_FUZZ_BUILD
# (build folder, default build-fuzz), TOPLU_FUZZ_ARGS (more libFuzzer flags),
# TOPLU_FUZZ_MAX_PIXELS (fuzz-image: the pixel limit handed to the decoder,
# default 2^24; 0: the library's default 2^28).
set -uo pipefail

secs=${1:-60}
shift || true
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(model npy csv jsonl image jobfile serveconfig)
case $secs in '' | *[!0-9]* | 0) echo "usage: scripts/fuzz.sh [SECONDS [TARGET...]]" >&2; exit 2 ;; esac

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
  mkdir -p "$build"
  cmake -S . -B "$build" -DTOPLU_FUZZ=ON -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=RelWithDebInfo >"$build/cmake.log" 2>&1 ||
    { cat "$build/cmake.log" >&2; exit 2; }
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
  # Fork mode (one worker): a crash, timeout or OOM is saved and fuzzing goes
  # on in a fresh process, so one known finding does not end the campaign.
  # shellcheck disable=SC2086
  nice -n "$nice_n" "$bin" -fork=1 -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1 \
    -max_total_time="$secs" -timeout=20 -rss_limit_mb=4096 -artifact_prefix="$findings/" "${extra[@]}" \
    ${TOPLU_FUZZ_ARGS:-} "$corpus" "$seeds" >"$logs/$t.log" 2>&1
  rc=$?
  line=$(grep -E '^#[0-9]+: cov: [0-9]+' "$logs/$t.log" | tail -1)
  execs=$(sed -n 's/^#\([0-9]*\):.*/\1/p' <<<"$line")
  cov=$(sed -n 's/.*cov: \([0-9]*\).*/\1/p' <<<"$line") ft=$(sed -n 's/.*ft: \([0-9]*\).*/\1/p' <<<"$line")
  n_corpus=$(ls "$corpus" | wc -l)
  # Triage: replay each finding (the same build, without libFuzzer) and keep
  # one input per distinct sanitizer summary (or kind, for timeouts and OOMs).
  distinct=0
  declare -A seen=()
  report_key() { # report_key FILE: the first sanitizer line of its replay, addresses and values left out
    timeout 60 "$build/toplu-fuzz-replay" "$t" "$1" 2>&1 | grep -m1 -E 'SUMMARY:|runtime error:' |
      sed -E 's/0x[0-9a-f]+//g; s/ *in *$//; s/(runtime error: [^:]*):.*/\1/'
  }
  # Crashes already kept as open findings are not copied again.
  for f in "tests/fuzz-regress/$t/open"/*; do
    [ -f "$f" ] || continue
    case $(basename "$f") in timeout-* | oom-*) continue ;; esac
    [ "$(ls "$findings" | wc -l)" -gt 0 ] || break
    key=$(report_key "$f")
    [ -n "$key" ] && seen[$key]=$f
  done
  for f in "$findings"/*; do
    [ -f "$f" ] || continue
    kind=$(basename "$f" | sed 's/-.*//')
    key="$kind $(basename "$f")"  # timeouts and OOMs: each kept (no report to compare)
    if [ "$kind" = crash ] || [ "$kind" = leak ]; then
      key=$(report_key "$f")
      [ -n "$key" ] || key="$kind (no report on replay) $(basename "$f")"
    fi
    if [ -n "${seen[$key]:-}" ]; then
      case ${seen[$key]} in tests/*) echo "fuzz: $t known finding: $key (${seen[$key]})" ;; esac
      continue
    fi
    seen[$key]=$f
    distinct=$((distinct + 1))
    mkdir -p "tests/fuzz-regress/$t/open"
    cp -n "$f" "tests/fuzz-regress/$t/open/" 2>/dev/null || true
    echo "fuzz: $t finding: $key ($f -> tests/fuzz-regress/$t/open/$(basename "$f"))"
  done
  unset seen
  n_raw=$(ls "$findings" | wc -l)
  [ "$n_raw" -gt 0 ] && any=1
  [ $rc -ne 0 ] && [ "$n_raw" -eq 0 ] && { echo "fuzz: $t exited $rc (log: $logs/$t.log)" >&2; any=1; }
  s=$(printf '%-8s %10s execs  corpus %5d  cov %6s  ft %7s  findings %d (%d distinct)' "$t" "${execs:-?}" \
    "$n_corpus" "${cov:-?}" "${ft:-?}" "$n_raw" "$distinct")
  echo "fuzz: $s"
  summary+=("$s")
done
echo
echo "fuzz: $secs s per target (logs: $build/fuzz-logs/, findings: $build/fuzz-findings/, one per kind copied to tests/fuzz-regress/TARGET/open/)"
for s in "${summary[@]}"; do echo "  $s"; done
exit $any
