#!/usr/bin/env bash
# make-model --preset k3-shaped with a tiny expert budget, twice: a complete
# checkpoint, and a spine-only checkpoint with its experts generated straight
# into a store (killed once mid-way and rerun). `run --store` must give
# bit-identical logits to `run --model` on the complete checkpoint; the
# spine-only directory holds no experts; the option errors are clear.
# Usage: make_model_store.sh <deltafin-binary> <source-dir>
set -euo pipefail
BIN=$1
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
GB=0.02
"$BIN" make-model --preset k3-shaped --experts-gb $GB --out "$T/full" --seed 4 > "$T/full.out"
grep -q "896 experts (top-16, 2 shared)" "$T/full.out" || { cat "$T/full.out"; echo "FAIL: sizes not printed"; exit 1; }
mkdir -p "$T/d0" "$T/d1"
ARGS=(make-model --preset k3-shaped --experts-gb $GB --out "$T/spine" --seed 4 --store "$T/store"
      --drive "$T/d0:900" --drive "$T/d1:500" --quiet)
# Kill once after the first pack is recorded, then rerun to completion.
"$BIN" "${ARGS[@]}" --pause-ms 50 > /dev/null & pid=$!
for _ in $(seq 1 1500); do
  sleep 0.01
  kill -0 "$pid" 2> /dev/null || break
  ls "$T/store/.prepare/done" 2> /dev/null | grep -q '^pack-' && break
done
kill -9 "$pid" 2> /dev/null || true
wait "$pid" 2> /dev/null || true
[[ -f "$T/store/manifest.json" ]] && echo "note: finished before the kill"
"$BIN" "${ARGS[@]}" > /dev/null
"$BIN" doctor --full --store "$T/store" > /dev/null
[[ ! -e "$T/store/.prepare" ]] || { echo "FAIL: .prepare left behind"; exit 1; }
# One copy of everything: no expert tensors in the spine directory, and the
# store's spine shares the spine directory's blocks (du counts a hard link once).
if grep -q 'experts\.[0-9]' "$T/spine/model.safetensors.index.json"; then echo "FAIL: expert tensors in the spine dir"; exit 1; fi
ls "$T/spine" | grep -q deltafin-expert-generator.json || { echo "FAIL: no generator record"; exit 1; }
spine_kb=$(du -sk "$T/spine" | cut -f1)
store_kb=$(du -sk "$T/spine" "$T/store" | tail -1 | cut -f1)
(( store_kb * 10 < spine_kb )) || { echo "FAIL: store spine takes $store_kb KB next to a $spine_kb KB spine dir"; exit 1; }
P=(--prompt-ids 3,1,4,1,5,9 --max-new 2 --print-ids --threads 2)
"$BIN" run --model "$T/full" "${P[@]}" --dump-logits "$T/a.bin" > "$T/a.txt"
"$BIN" run --store "$T/store" "${P[@]}" --dump-logits "$T/b.bin" > "$T/b.txt"
cmp "$T/a.bin" "$T/b.bin" || { echo "FAIL: logits differ"; exit 1; }
cmp "$T/a.txt" "$T/b.txt" || { echo "FAIL: ids differ"; exit 1; }
# A rerun into the same spine directory with another routing option rewrites
# the spine (its generator record names the option), not only the store.
before=$(cat "$T"/spine/*.safetensors | md5sum)
mkdir -p "$T/d2"
"$BIN" make-model --preset k3-shaped --experts-gb $GB --out "$T/spine" --seed 4 --store "$T/store2" \
    --drive "$T/d2" --route-persist 0.85 --quiet > /dev/null
[[ $(cat "$T"/spine/*.safetensors | md5sum) != "$before" ]] || { echo "FAIL: spine kept after --route-persist"; exit 1; }
grep -q '"route_persist": 0.85' "$T/spine/deltafin-expert-generator.json" || { echo "FAIL: option not recorded"; exit 1; }
# Option errors.
expect_fail() {  # expect_fail MESSAGE_PART ARGS...
  local want=$1; shift
  if "$BIN" "$@" > "$T/err.out" 2>&1; then echo "FAIL: accepted: $*"; exit 1; fi
  grep -q -- "$want" "$T/err.out" || { cat "$T/err.out"; echo "FAIL: no '$want' for: $*"; exit 1; }
}
expect_fail "needs --experts-gb" make-model --preset k3-shaped --out "$T/x"
expect_fail "k3-shaped only" make-model --preset tiny --experts-gb 1 --out "$T/x"
expect_fail "go together" make-model --preset tiny --out "$T/x" --store "$T/s2"
[[ ! -e "$T/x" ]] || { echo "FAIL: a refused make-model wrote output"; exit 1; }
echo "PASS: make_model_store"
