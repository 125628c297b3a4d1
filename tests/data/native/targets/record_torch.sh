#!/bin/sh
# Record torchrun logs of tests/data/native/torch/ (README.md there): each MODE of torch_ranks.py
# under torchrun with 2 CPU ranks on gloo over loopback, with and without --tee (line prefixes).
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=$(dirname "$HERE")/torch
VENV=${VENV:-$HERE/../../../../.venv}
PORT=${PORT:-6419}
export GLOO_SOCKET_IFNAME=lo OMP_NUM_THREADS=1
run() {  # run NAME SECONDS EXTRA_ENV... -- TORCHRUN_ARGS...
  name=$1; secs=$2; shift 2
  env_args=""
  while [ "$1" != "--" ]; do env_args="$env_args $1"; shift; done
  shift
  ( env $env_args timeout -s INT "$secs" "$VENV/bin/torchrun" --nproc-per-node 2 --master-addr 127.0.0.1 \
      --master-port "$PORT" "$@" > "$OUT/$name.log" 2>&1 ) || true
  sleep 2
}
mkdir -p "$OUT"
run skip-tee 20 -- --tee 3 "$HERE/torch_ranks.py" skip
run skip 20 -- "$HERE/torch_ranks.py" skip
run mismatch-tee 60 TORCH_DISTRIBUTED_DEBUG=DETAIL -- --tee 3 "$HERE/torch_ranks.py" mismatch
run mismatch 60 TORCH_DISTRIBUTED_DEBUG=DETAIL -- "$HERE/torch_ranks.py" mismatch
run timeout-tee 60 -- --tee 3 "$HERE/torch_ranks.py" timeout
run monitored 60 -- "$HERE/torch_ranks.py" monitored

