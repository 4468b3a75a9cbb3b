#!/usr/bin/env bash
# K3-shaped decode (64 tokens after 8) and a 512-token prefill from RAM, two
# builds alternating (before and after a change), `run --stats` lines only.
# Usage: k3_refactor_abab.sh OLD_BIN NEW_BIN MODEL_DIR [ROUNDS=3]
#   MODEL_DIR: e.g. `deltafin make-model --preset k3-shaped --experts-gb 2 --seed 7 --out DIR`
set -euo pipefail
OLD=$1; NEW=$2; M=$3; ROUNDS=${4:-3}
ids8=$(awk 'BEGIN { for (i = 0; i < 8; i++) printf "%s%d", (i ? "," : ""), (i * 37 + 5) % 500 }')
ids512=$(awk 'BEGIN { for (i = 0; i < 512; i++) printf "%s%d", (i ? "," : ""), (i * 37 + 5) % 500 }')
cat "$M/model.safetensors.index.json" > /dev/null  # the page cache holds the model after the first run
for round in $(seq 1 "$ROUNDS"); do
  for arm in before after; do
    bin=$OLD; [[ $arm == after ]] && bin=$NEW
    d=$("$bin" run --model "$M" --prompt-ids "$ids8" --max-new 64 --print-ids --threads 2 --stats 2>&1 >/dev/null | grep '^decode:')
    p=$("$bin" run --model "$M" --prompt-ids "$ids512" --max-new 1 --print-ids --threads 2 --stats 2>&1 >/dev/null | grep '^prefill:')
    echo "round $round $arm | $d | $p"
  done
done
