#!/usr/bin/env bash
# Qwen3-MoE through the store: for BF16 and FP8 experts, `run --store` (two
# drives, with and without the RAM tier) gives the ids and bit-identical
# logits of `run --model`; `doctor --full` passes. A checkpoint whose FP8
# block scale is 0 is refused by run, prepare and inspect with a message
# naming the tensor or expert. A qwen3_moe store's manifest records its
# model type and expert format.
# Usage: qwen3_store.sh <deltafin-binary> <source-dir>
set -euo pipefail
BIN=$1
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
P=(--prompt-ids 7,300,12,45,2,2,19,88,101,5,6,7 --max-new 8 --print-ids --threads 2)
for fmt in bf16 fp8; do
  "$BIN" make-model --preset qwen3-moe-tiny --expert-format "$fmt" --seed 4 --out "$T/$fmt" > /dev/null
  "$BIN" run --model "$T/$fmt" "${P[@]}" --dump-logits "$T/$fmt.ref.bin" > "$T/$fmt.ref.txt"
  mkdir -p "$T/$fmt.d0" "$T/$fmt.d1"
  "$BIN" prepare --model "$T/$fmt" --out "$T/$fmt.store" --drive "$T/$fmt.d0" --drive "$T/$fmt.d1" --quiet
  grep -q "\"expert_format\": \"$( [[ $fmt == fp8 ]] && echo fp8_block || echo bf16 )\"" "$T/$fmt.store/manifest.json" \
    || { echo "FAIL: $fmt manifest does not record the expert format"; exit 1; }
  grep -q '"model_type": "qwen3_moe"' "$T/$fmt.store/manifest.json" || { echo "FAIL: no model_type"; exit 1; }
  for mode in "--no-probe" "--no-probe --ram-experts-gb 0.002 --prefetch 2"; do
    # shellcheck disable=SC2086
    "$BIN" run --store "$T/$fmt.store" "${P[@]}" --dump-logits "$T/s.bin" $mode > "$T/s.txt" 2> "$T/s.err" \
      || { cat "$T/s.err"; echo "FAIL: run --store $fmt $mode"; exit 1; }
    cmp "$T/$fmt.ref.bin" "$T/s.bin" || { echo "FAIL: $fmt logits differ ($mode)"; exit 1; }
    cmp "$T/$fmt.ref.txt" "$T/s.txt" || { echo "FAIL: $fmt ids differ ($mode)"; exit 1; }
  done
  "$BIN" doctor --full --store "$T/$fmt.store" > "$T/doctor.txt" 2>&1 || { cat "$T/doctor.txt"; echo "FAIL: doctor $fmt"; exit 1; }
done

# A zero FP8 block scale in layer 0's expert 3 gate_proj.
cp -r "$T/fp8" "$T/bad"
/usr/bin/python3 - "$T/bad" <<'PY'
import json, os, struct, sys
d = sys.argv[1]
idx = json.load(open(os.path.join(d, "model.safetensors.index.json")))["weight_map"]
name = next(n for n in idx if ".mlp.experts.3.gate_proj.weight_scale_inv" in n)
path = os.path.join(d, idx[name])
with open(path, "r+b") as f:
    n = struct.unpack("<Q", f.read(8))[0]
    start, _ = json.loads(f.read(n))[name]["data_offsets"]
    f.seek(8 + n + start)
    f.write(struct.pack("<f", 0.0))
print(name)
PY
expect_error() {  # what, pattern, command...
  local what=$1 pattern=$2; shift 2
  if "$@" > "$T/out.txt" 2>&1; then echo "FAIL: $what accepted a zero FP8 scale"; exit 1; fi
  grep -q "$pattern" "$T/out.txt" || { cat "$T/out.txt"; echo "FAIL: $what: no message matching '$pattern'"; exit 1; }
}
expect_error "inspect --verify-experts" "scale" "$BIN" inspect --model "$T/bad" --verify-experts
mkdir -p "$T/bad.d0"
expect_error "prepare" "block scale" "$BIN" prepare --model "$T/bad" --out "$T/bad.store" --drive "$T/bad.d0" --quiet
# run: only a row routed to expert 3 of that layer reads it; force it with a
# prompt long enough that some row is (16 experts, top-4).
ids=$(awk 'BEGIN { for (i = 0; i < 64; i++) printf "%s%d", (i ? "," : ""), (i * 37 + 5) % 500 }')
expect_error "run" "scale" "$BIN" run --model "$T/bad" --prompt-ids "$ids" --max-new 1 --print-ids
echo "PASS: qwen3_store"
