#!/bin/sh
# fuzz/make-corpus.sh DIR - seed corpus for fuzz-load: the ONNX node tests'
# models (small, one op each; every 4th test, so ~230 files) and the first
# 64 KiB of the real models under /work/shared/models (or $TOPLU_MODELS).
set -eu
out=${1:?usage: make-corpus.sh DIR}
nodes=${TOPLU_NODE_TESTS:-/usr/share/libonnx-testdata/data/node}
models=${TOPLU_MODELS:-/work/shared/models}
root=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$out"
i=0
for d in "$nodes"/test_*; do
  [ -f "$d/model.onnx" ] || continue
  if [ $((i % 4)) -eq 0 ]; then cp "$d/model.onnx" "$out/node-$(basename "$d").onnx"; fi
  i=$((i + 1))
done
for f in "$models"/*/*.onnx; do
  [ -f "$f" ] || continue
  head -c 65536 "$f" > "$out/real-$(basename "$f")"
done
# Reproducers of bugs found earlier stay in the corpus.
for f in "$root"/tests/data/malformed/*.onnx; do
  [ -f "$f" ] && cp "$f" "$out/repro-$(basename "$f")"
done
echo "fuzz corpus: $(ls "$out" | wc -l) files in $out"
