#!/usr/bin/env bash
# scripts/install-deps.sh - install what a fresh Debian 12 needs to build and
# test toplu.  Installs only what is missing (apt-get update only then), with
# sudo only when not root; prints nothing when everything is there.
set -euo pipefail

pkgs=(cmake gcc clang make pkg-config git ca-certificates
  libprotobuf-c-dev protobuf-c-compiler libdnnl-dev libonnx-dev libonnx-testdata
  libcmocka-dev libjansson-dev libsqlite3-dev libpng-dev libturbojpeg0-dev
  libmicrohttpd-dev libcurl4-openssl-dev zlib1g-dev libxxhash-dev wrk strace qemu-user
  libclang-rt-14-dev libomp-14-dev
  python3-numpy python3-onnx python3-pil python3-torch python3-torchvision python3-matplotlib python3-skimage gnuplot-nox)

missing=()
installed=$(dpkg-query -W -f='${Package} ${Status}\n' "${pkgs[@]}" 2>/dev/null | awk '/ ok installed$/ {print $1}' || true)
for p in "${pkgs[@]}"; do
  grep -qx "$p" <<<"$installed" || missing+=("$p")
done
# Node.js and npm: any on PATH will do (machines of this kind have NodeSource's
# node 20, whose package is called nodejs and brings npm with it).
command -v node >/dev/null 2>&1 || missing+=(nodejs)
command -v npm >/dev/null 2>&1 || missing+=(npm)
[ ${#missing[@]} -eq 0 ] && exit 0

sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo=sudo; fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq >/dev/null
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
