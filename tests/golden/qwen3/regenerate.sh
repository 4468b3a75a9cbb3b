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
