#!/usr/bin/env bash
# scripts/demo.sh - toplu on real models and real input.
#
# Fetches what it needs (scripts/fetch-models.sh), builds build/ when there is
# no build/toplu yet, then runs the 10,000 MNIST digits through `toplu run` at
# batch 64 (accuracy, throughput) and classifies five photos with MobileNetV2
# int8 (top-1 labels).  TOPLU=path uses another toplu binary.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
toplu=${TOPLU:-$root/build/toplu}
"$root/scripts/fetch-models.sh" >/dev/null
if [ ! -x "$toplu" ]; then
  echo "demo: building $root/build"
  "$root/scripts/install-deps.sh"
  cmake -S "$root" -B "$root/build" -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$root/build" -j"$(nproc)" >/dev/null
  toplu=$root/build/toplu
fi
exec /usr/bin/python3 "$root/scripts/demo.py" --toplu "$toplu" --shared "$root/../shared"
