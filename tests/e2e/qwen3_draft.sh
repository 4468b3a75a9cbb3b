#!/usr/bin/env bash
# Drafting on Qwen3-MoE changes no token: with the n-gram drafter and with a
# Qwen3 dense model of the same vocabulary as the drafter, greedy and seeded
# sampling print the ids drafting off prints (verification runs the GQA
# layers' KV cache through verify/commit, rolling back rejected rows).
# Usage: qwen3_draft.sh <deltafin-binary> <source-dir>
set -euo pipefail
BIN=$1
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
"$BIN" make-model --preset qwen3-moe-tiny --seed 6 --out "$T/target" > /dev/null
"$BIN" make-model --preset qwen3-tiny --seed 7 --out "$T/drafter" > /dev/null
# A repetitive prompt so the n-gram drafter proposes.
ids=$(awk 'BEGIN { for (i = 0; i < 48; i++) printf "%s%d", (i ? "," : ""), (i * 7 + 5) % 40 }')
for sampling in "" "--temperature 0.8 --seed 11"; do
  # shellcheck disable=SC2086
  "$BIN" run --model "$T/target" --prompt-ids "$ids" --max-new 24 --print-ids $sampling > "$T/off.txt"
  for d in ngram "$T/drafter"; do
    # shellcheck disable=SC2086
    "$BIN" run --model "$T/target" --prompt-ids "$ids" --max-new 24 --print-ids --draft "$d" --stats $sampling \
      > "$T/on.txt" 2> "$T/on.err" || { cat "$T/on.err"; echo "FAIL: --draft $d $sampling"; exit 1; }
    cmp "$T/off.txt" "$T/on.txt" || { echo "FAIL: --draft $d $sampling changed the ids"; exit 1; }
    # Greedy output of this prompt repeats itself: the drafters must have been asked and heard.
    if [[ -z $sampling ]] && ! grep -Eq "draft: [1-9][0-9]* proposals" "$T/on.err"; then
      cat "$T/on.err"; echo "FAIL: --draft $d proposed nothing"; exit 1
    fi
  done
done
echo "PASS: qwen3_draft"
