#!/usr/bin/env bash
# bench/run.sh - toplu against ONNX Runtime on real models, side by side.
#
#   bench/run.sh [--threads T] [--runs R] [--seconds S] [--models a,b] [--batches 1,8,32] [--doc FILE]
#
# Fetches the models (scripts/fetch-models.sh), builds bench/toplu_bench in
# ${TOPLU_BUILD:-build} when it is missing, makes the batch-freed MNIST copy for
# ONNX Runtime, then runs bench/bench.py: resnet50, mobilenet_v2, PaddleOCR det
# at 640x640 and MNIST at batch 1, 8 and 32, R alternating process pairs each,
# T threads on both sides (default: all cores).  See bench/README.md.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(dirname "$here")
build=${TOPLU_BUILD:-$root/build}
CACHE=${TOPLU_CACHE:-$HOME/.cache/toplu}
export TOPLU_CACHE=$CACHE

"$root/scripts/fetch-models.sh" >/dev/null
if [ ! -x "$build/toplu_bench" ]; then
  echo "bench: building toplu_bench in $build"
  [ -f "$build/CMakeCache.txt" ] || cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$build" -j"$(nproc)" --target toplu_bench >/dev/null
fi
shared=$root/../shared
mkdir -p "$CACHE/bench"
if [ ! -f "$CACHE/bench/mnist_batch.onnx" ] && [ -f "$shared/models/mnist/mnist.onnx" ]; then
  /usr/bin/python3 "$here/free_batch.py" "$shared/models/mnist/mnist.onnx" "$CACHE/bench/mnist_batch.onnx.tmp" >/dev/null
  mv "$CACHE/bench/mnist_batch.onnx.tmp" "$CACHE/bench/mnist_batch.onnx"
fi
exec /usr/bin/python3 "$here/bench.py" --toplu-bench "$build/toplu_bench" --shared "$shared" "$@"
