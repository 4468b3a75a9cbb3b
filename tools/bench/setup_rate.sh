#!/usr/bin/env bash
# `setup`'s download rate on loopback against the rate at which the same
# machine copies the checkpoint locally (cp, then sync: setup syncs what it
# writes too), alternating, with the page cache dropped before each. The
# repository is served by nginx (Debian's nginx-light) as static files that
# tests/hub/hub_server.py --write-static lays out in the Hub's paths, so the
# server is not what is measured. Needs root (drop_caches).
# Usage: tools/bench/setup_rate.sh DELTAFIN CHECKPOINT_DIR WORKDIR [ROUNDS]
# (SETUP_ARGS, if set, is added to setup's options: e.g. "--connections 4")
set -euo pipefail
DF=$(realpath "$1") CK=$(realpath "$2") W=$3 ROUNDS=${4:-3}
SRC=$(cd "$(dirname "$0")/../.." && pwd)
source "$SRC/tools/bench/nginx_hub.sh"
start_setup_bench "$SRC" "$CK" "$W"
bytes=$CK_BYTES
for r in $(seq 1 "$ROUNDS"); do
  rm -rf "$W/copy" "$W/store" "$W/drive"; mkdir -p "$W/drive"; drop
  t0=$(date +%s.%N); cp -r "$CK" "$W/copy"; sync; t1=$(date +%s.%N)
  rm -rf "$W/copy"; drop
  "$DF" setup --repo bench/model --endpoint "$HUB_URL" --out "$W/store" --drive "$W/drive:1000" \
    --keep-checkpoint ${SETUP_ARGS:-} 2>&1 | tr '\r' '\n' | grep "^downloading" | tail -1 > "$W/setup.line"
  rate=$(sed -E 's/.* ([0-9.]+) MB\/s ETA.*/\1/' "$W/setup.line")
  python3 -c "import sys; b,t0,t1,r=int(sys.argv[1]),float(sys.argv[2]),float(sys.argv[3]),float(sys.argv[4]); c=b/(t1-t0)/1e6; print(f'round {sys.argv[5]}: cp+sync {c:.0f} MB/s, setup download {r:.0f} MB/s: {r/c:.2f} of the copy')" \
    "$bytes" "$t0" "$t1" "$rate" "$r"
done
rm -rf "$W/copy" "$W/store" "$W/drive"
