#!/usr/bin/env bash
# Two `deltafin` builds' whole `setup` (the default: each shard downloaded,
# verified, converted and deleted) of the same repository on loopback,
# alternating, with the page cache dropped before each, next to the time the
# machine takes to copy the checkpoint locally (cp, then sync). The
# repository is served by nginx (tools/bench/nginx_hub.sh). Needs root
# (drop_caches).
# Usage: tools/bench/setup_ab.sh DELTAFIN_A DELTAFIN_B CHECKPOINT_DIR WORKDIR [ROUNDS]
# (SETUP_ARGS, if set, is added to both setups' options)
set -euo pipefail
A=$(realpath "$1") B=$(realpath "$2") CK=$(realpath "$3") W=$4 ROUNDS=${5:-3}
SRC=$(cd "$(dirname "$0")/../.." && pwd)
source "$SRC/tools/bench/nginx_hub.sh"
start_setup_bench "$SRC" "$CK" "$W"
bytes=$CK_BYTES
now() { date +%s.%N; }
secs() { python3 -c "import sys; print(f'{float(sys.argv[2])-float(sys.argv[1]):.2f}')" "$1" "$2"; }
one_setup() {  # DELTAFIN: prints its wall seconds
  rm -rf "$W/store" "$W/drive"; mkdir -p "$W/drive"; drop
  local t0 t1
  t0=$(now)
  "$1" setup --quiet --repo bench/model --endpoint "$HUB_URL" --out "$W/store" --drive "$W/drive:1000" \
    ${SETUP_ARGS:-} > /dev/null
  t1=$(now)
  secs "$t0" "$t1"
}
for r in $(seq 1 "$ROUNDS"); do
  rm -rf "$W/copy"; drop
  t0=$(now); cp -r "$CK" "$W/copy"; sync; t1=$(now); rm -rf "$W/copy"
  c=$(secs "$t0" "$t1")
  if (( r % 2 )); then a=$(one_setup "$A"); b=$(one_setup "$B"); else b=$(one_setup "$B"); a=$(one_setup "$A"); fi
  python3 -c "import sys; by,c,a,b=int(sys.argv[1]),*map(float,sys.argv[2:5]);
print(f'round {sys.argv[5]}: cp+sync {c:.2f} s ({by/c/1e6:.0f} MB/s); setup A {a:.2f} s ({by/a/1e6:.0f} MB/s, {c/a:.2f} of the copy), B {b:.2f} s ({by/b/1e6:.0f} MB/s, {c/b:.2f})')" \
    "$bytes" "$c" "$a" "$b" "$r"
done
rm -rf "$W/store" "$W/drive"
