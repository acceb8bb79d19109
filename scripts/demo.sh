#!/usr/bin/env bash
# scripts/demo.sh - toplu's main job as a user runs it, on real models and real input.
#
# From a clean clone on Debian 12: installs the missing packages
# (scripts/install-deps.sh) first, then fetches the models and data
# (scripts/fetch-models.sh, which needs them), builds build/ when there is no
# build/toplu yet, and then uses the command line alone between the input
# files and the results:
#   1. toplu plan and a short toplu tune pick MNIST's batch size;
#   2. toplu run puts the 10,000 MNIST digits (NPY) into SQLite (argmax);
#   3. toplu run classifies a folder of photos into JSONL, with declared
#      preprocessing (--preprocess) and top-5 labels (--postprocess topk).
# Python only reads the results afterwards (accuracy, top-1 labels).
# Every command is echoed ("$ toplu ...").  TOPLU=path uses another binary;
# TOPLU_THREADS sets --threads (default: all cores).  About ten seconds on 2 cores once installed.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
shared=$(cd "$root/.." && pwd)/shared
cache=${TOPLU_CACHE:-$HOME/.cache/toplu}
py=/usr/bin/python3

# Dependencies before anything that needs them: fetch-models.sh uses numpy.
"$root/scripts/install-deps.sh"
"$root/scripts/fetch-models.sh" >/dev/null
toplu=${TOPLU:-$root/build/toplu}
if [ ! -x "$toplu" ]; then
  echo "demo: building $root/build"
  cmake -S "$root" -B "$root/build" -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$root/build" -j"$(nproc)" >/dev/null
  toplu=$root/build/toplu
fi
threads=${TOPLU_THREADS:-0}
work=$(mktemp -d "${TMPDIR:-/tmp}/toplu-demo-XXXXXX")
trap 'rm -rf "$work"' EXIT
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive} # share the cores politely

run() { # echo a command, then run it
  printf '$ %s\n' "$*"
  "$@"
}

mnist=$shared/models/mnist/mnist.onnx
[ -f "$mnist" ] || mnist=$cache/models/mnist/mnist.onnx
digits=$cache/data/mnist_x.npy
labels_y=$cache/data/mnist_y.npy

echo
echo "== 1. Which batch size for MNIST?  The planner's answer, then a short measurement"
run "$toplu" plan "$mnist"
run "$toplu" tune "$mnist" --batch-sizes 1,16,64,256 --max-seconds 1 --time-limit 30 --threads "$threads" \
  --out "$work/tune"

echo
echo "== 2. The 10,000 MNIST digits (NPY) into SQLite, at the batch size toplu tune chose"
run "$toplu" run "$mnist" --input "Input3=$digits" --output "$work/digits.sqlite" \
  --batch-size auto --tune "$work/tune/tune.json" --postprocess argmax --threads "$threads"
"$py" - "$work/digits.sqlite" "$labels_y" <<'EOF'
import sqlite3, sys
import numpy as np
con = sqlite3.connect(sys.argv[1])
pred = dict(con.execute('SELECT id, argmax FROM results'))
y = np.load(sys.argv[2])
right = sum(int(pred.get(str(i), -1)) == int(t) for i, t in enumerate(y))
print(f'{sys.argv[1].rsplit("/", 1)[-1]}: {len(pred)} rows; accuracy {right / len(y):.4f} ({right}/{len(y)} right)')
sys.exit(0 if right / len(y) >= 0.99 else 1)
EOF

echo
echo "== 3. A folder of photos through MobileNetV2 int8: top-5 classes with labels, into JSONL"
mdir=$shared/models/imagenet-mobilenet
photos=$work/photos
mkdir -p "$photos"
for p in ortex-goldfish.jpg ortex-kimono.jpg ortex-wolves.jpg wonnx-bald_eagle.jpeg wonnx-pelican.jpeg; do
  if [ -f "$shared/data/images/$p" ]; then cp "$shared/data/images/$p" "$photos/"; fi
done
if [ -z "$(ls -A "$photos")" ]; then # ../shared absent: Debian's sample photos instead
  echo "(../shared/data/images absent: using Debian's photos)"
  for p in chelsea.png coffee.png rocket.jpg astronaut.png; do
    if [ -f "$cache/images/$p" ]; then cp "$cache/images/$p" "$photos/"; fi
  done
fi
run "$toplu" run "$mdir/mobilenet_v2_1.0_224_int8_per_tensor.onnx" --input "$photos" --output "$work/photos.jsonl" \
  --batch-size 8 --preprocess resize=224x224,color=rgb,layout=nhwc,dtype=uint8 \
  --postprocess topk=5 --labels "$mdir/labels_imagenet_2012.txt" --errors "$work/photos.errors" --threads "$threads"
"$py" - "$work/photos.jsonl" <<'EOF'
import json, sys
for line in open(sys.argv[1]):
    row = json.loads(line)
    top = row['topk'][0]
    print(f'{row["id"]:24s} -> {top.get("label", top["index"])} {top["score"]:.2f}')
EOF
