#!/usr/bin/env bash
# `setup --stream`'s time to a first token on loopback: the time setup
# --stream takes (spine by Range, manifest, sparse packs), then the first
# token of an 8-token prompt with no expert local (each routed expert
# fetched on first use), the same prompt again (all of them local now), and
# the complete store that setup without --stream makes, for comparison. The
# repository is served by nginx (tools/bench/nginx_hub.sh); the page cache is
# dropped before each step. Needs root (drop_caches).
# Usage: tools/bench/stream_first_token.sh DELTAFIN CHECKPOINT_DIR WORKDIR [ROUNDS]
set -euo pipefail
DF=$(realpath "$1") CK=$(realpath "$2") W=$3 ROUNDS=${4:-3}
SRC=$(cd "$(dirname "$0")/../.." && pwd)
source "$SRC/tools/bench/nginx_hub.sh"
start_setup_bench "$SRC" "$CK" "$W"
now() { date +%s.%N; }
P=(--prompt-ids 3,1,4,1,5,9,2,6 --max-new 1 --threads 2)
# run_ttft STORE JSON: the process's wall time to exit after one token, and the record's TTFT.
run_ttft() {
  drop
  local t0 t1
  t0=$(now); "$DF" run --store "$1" "${P[@]}" --stats-json "$2" > /dev/null 2> "$2.err"; t1=$(now)
  python3 -c "import json,sys; print(f'{float(sys.argv[2])-float(sys.argv[1]):.2f} s wall (TTFT {json.load(open(sys.argv[3]))[\"ttft_s\"]:.2f} s)')" \
    "$t0" "$t1" "$2"
}
rm -rf "$W/full" "$W/full-d"; mkdir -p "$W/full-d"; drop
t0=$(now); "$DF" setup --quiet --repo bench/model --endpoint "$HUB_URL" --out "$W/full" --drive "$W/full-d:1000"; t1=$(now)
echo "complete setup (no --stream): $(python3 -c "import sys; print(f'{float(sys.argv[2])-float(sys.argv[1]):.1f}')" "$t0" "$t1") s"
for r in $(seq 1 "$ROUNDS"); do
  rm -rf "$W/s" "$W/d"; mkdir -p "$W/d"; drop
  t0=$(now); "$DF" setup --quiet --stream --repo bench/model --endpoint "$HUB_URL" --out "$W/s" --drive "$W/d:1000"; t1=$(now)
  cold=$(run_ttft "$W/s" "$W/cold.json")
  fetched=$(( $(stat -c %s "$W/s/.stream/fetched.log") / 64 ))
  warm=$(run_ttft "$W/s" "$W/warm.json")
  full=$(run_ttft "$W/full" "$W/full.json")
  echo "round $r: setup --stream $(python3 -c "import sys; print(f'{float(sys.argv[2])-float(sys.argv[1]):.2f}')" "$t0" "$t1") s;" \
       "first run, no expert local: $cold, $fetched experts fetched; second run: $warm; complete store: $full"
done
rm -rf "$W/s" "$W/d" "$W/full" "$W/full-d"
