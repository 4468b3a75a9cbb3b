#!/usr/bin/env bash
# `run --draft off|ngram|auto|DIR` on the demo model: every variant prints the
# same ids and dumps byte-identical logits; --stats reports the drafter, the
# tokens per target pass and the time split; auto finds models/demo-draft
# beside models/demo, and, from a store prepared from models/demo, the same
# drafter through the store's source; a DSpark-layout drafter made by
# make-model runs; seeded sampling gives the same ids with and without
# drafting; a bad --draft is an error.
# Usage: draft_run.sh <deltafin-binary> <source-dir>
set -euo pipefail
BIN=$1; SRC=$2
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
DEMO="$SRC/models/demo"
P=(--prompt $'    def __init__(self, value):\n        self.value = value\n\n    def __repr__(self):\n' --max-new 48 --print-ids --threads 2)
"$BIN" run --model "$DEMO" "${P[@]}" --draft off --dump-logits "$T/off.bin" > "$T/off.txt"
"$BIN" make-model --preset dspark --target "$DEMO" --seed 3 --out "$T/dspark" > /dev/null
for d in ngram auto "$SRC/models/demo-draft" "$T/dspark"; do
  "$BIN" run --model "$DEMO" "${P[@]}" --draft "$d" --dump-logits "$T/d.bin" --stats > "$T/d.txt" 2> "$T/d.err" \
    || { cat "$T/d.err"; echo "FAIL: run --draft $d"; exit 1; }
  cmp "$T/off.bin" "$T/d.bin" || { echo "FAIL: logits differ with --draft $d"; exit 1; }
  cmp "$T/off.txt" "$T/d.txt" || { echo "FAIL: ids differ with --draft $d"; exit 1; }
  grep -q "tokens per target pass" "$T/d.err" || { cat "$T/d.err"; echo "FAIL: no draft stats ($d)"; exit 1; }
  grep -q "^draft: time drafting" "$T/d.err" || { cat "$T/d.err"; echo "FAIL: no time split ($d)"; exit 1; }
done
"$BIN" run --model "$DEMO" "${P[@]}" --draft auto --stats > /dev/null 2> "$T/auto.err"
grep -q "^draft: model drafter .*models/demo-draft" "$T/auto.err" || { cat "$T/auto.err"; echo "FAIL: auto did not find models/demo-draft"; exit 1; }
# From a store: the drafter is found through the store's source checkpoint.
mkdir -p "$T/d0"  # prepare never creates a drive root
"$BIN" prepare --quiet --model "$DEMO" --out "$T/store" --drive "$T/d0:1000" 2> /dev/null
"$BIN" run --store "$T/store" "${P[@]}" --draft auto --no-probe --stats --dump-logits "$T/s.bin" > "$T/s.txt" 2> "$T/s.err" \
  || { cat "$T/s.err"; echo "FAIL: run --store --draft auto"; exit 1; }
cmp "$T/off.bin" "$T/s.bin" || { echo "FAIL: logits differ from the store"; exit 1; }
grep -q "^draft: model drafter" "$T/s.err" || { cat "$T/s.err"; echo "FAIL: store auto did not find the drafter"; exit 1; }
# Seeded sampling: the same ids with and without drafting; the same seed repeats, another differs.
S=(--temperature 0.9 --top-p 0.95 --frequency-penalty 0.2)
"$BIN" run --model "$DEMO" "${P[@]}" "${S[@]}" --seed 5 --draft off > "$T/s5.txt"
"$BIN" run --model "$DEMO" "${P[@]}" "${S[@]}" --seed 5 --draft "$SRC/models/demo-draft" > "$T/s5d.txt"
"$BIN" run --model "$DEMO" "${P[@]}" "${S[@]}" --seed 5 --draft ngram --draft-gate off > "$T/s5n.txt"
"$BIN" run --model "$DEMO" "${P[@]}" "${S[@]}" --seed 6 > "$T/s6.txt"
cmp "$T/s5.txt" "$T/s5d.txt" || { echo "FAIL: sampled ids differ with the model drafter"; exit 1; }
cmp "$T/s5.txt" "$T/s5n.txt" || { echo "FAIL: sampled ids differ with the n-gram drafter"; exit 1; }
if cmp -s "$T/s5.txt" "$T/s6.txt"; then echo "FAIL: seeds 5 and 6 gave the same ids"; exit 1; fi
if cmp -s "$T/s5.txt" "$T/off.txt"; then echo "FAIL: sampling gave the greedy ids"; exit 1; fi
# No drafter beside a model: auto falls back to n-gram.
"$BIN" make-model --preset tiny --seed 2 --out "$T/tiny" > /dev/null
"$BIN" run --model "$T/tiny" --prompt-ids 1,2,3,1,2,3,1,2 --max-new 8 --print-ids --draft auto --stats > /dev/null 2> "$T/t.err"
grep -q "^draft: ngram" "$T/t.err" || { cat "$T/t.err"; echo "FAIL: auto without a drafter is not ngram"; exit 1; }
# A drafter that does not fit is an error when named.
if "$BIN" run --model "$T/tiny" --prompt-ids 1,2 --max-new 2 --draft "$SRC/models/demo-draft" > /dev/null 2>&1; then
  echo "FAIL: a drafter with another vocabulary was accepted"; exit 1
fi
if "$BIN" run --model "$DEMO" --prompt-ids 1,2 --max-new 2 --draft "$T/nothing" > /dev/null 2>&1; then
  echo "FAIL: a missing drafter directory was accepted"; exit 1
fi
echo "PASS: draft_run"
