#!/usr/bin/env bash
# Rebuilds the Qwen3 golden files in this folder: for each preset/format/seed,
# `deltafin make-model` writes the checkpoint and the float64 PyTorch reference
# (tools/reference/qwen3_golden.py) records 4 prompts x 16 greedy steps of
# logits. Needs PyTorch for /usr/bin/python3 (Debian python3-torch).
# Usage: tests/golden/qwen3/regenerate.sh [deltafin-binary] [out-dir]
#   defaults: build/deltafin, this folder. tests/e2e/qwen3_torch_live.sh runs it
#   into a temp dir and compares with the committed files;
#   tests/unit/qwen3_reference_test.cpp checks the engine against them.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$(cd "$HERE/../../.." && pwd)
BIN=${1:-$SRC/build/deltafin}
OUT=${2:-$HERE}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
mkdir -p "$OUT"
for spec in qwen3-moe-tiny:bf16 qwen3-moe-tiny:fp8 qwen3-tiny:bf16; do
  preset=${spec%%:*}; fmt=${spec##*:}
  for seed in 1 2 3; do
    name=$preset-$fmt-s$seed
    "$BIN" make-model --preset "$preset" --expert-format "$fmt" --seed "$seed" --out "$T/$name" > /dev/null
    /usr/bin/python3 "$SRC/tools/reference/qwen3_golden.py" "$T/$name" "$OUT/$name" --seed "$seed"
    rm -rf "${T:?}/$name"
  done
done
# YaRN: the seed-1 MoE checkpoint under rope_scaling (factor 4, original context 64).
name=qwen3-moe-tiny-bf16-yarn-s1
"$BIN" make-model --preset qwen3-moe-tiny --seed 1 --out "$T/$name" > /dev/null
overrides='{"rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64}}'
/usr/bin/python3 - "$T/$name/config.json" "$overrides" <<'PY'
import json, sys
cfg = json.load(open(sys.argv[1])); cfg.update(json.loads(sys.argv[2]))
json.dump(cfg, open(sys.argv[1], "w"), indent=2)
PY
/usr/bin/python3 "$SRC/tools/reference/qwen3_golden.py" "$T/$name" "$OUT/$name" --seed 1
/usr/bin/python3 - "$OUT/$name.json" "$overrides" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1])); doc["config_overrides"] = json.loads(sys.argv[2])
json.dump(doc, open(sys.argv[1], "w"), indent=1)
PY
rm -rf "${T:?}/$name"
