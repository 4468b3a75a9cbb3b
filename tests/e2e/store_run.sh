#!/usr/bin/env bash
# prepare a tiny model onto three drive directories with replicas (one from a
# route trace recorded by `run --route-trace` when available), then `run
# --store` must print the same ids and bit-identical logits as `run --model`
# on every I/O mode; `doctor --full` passes; a second prepare is a no-op.
# Usage: store_run.sh <deltafin-binary> <source-dir>
set -euo pipefail
BIN=$1
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
"$BIN" make-model --preset tiny --out "$T/model" --seed 5 > /dev/null
P=(--prompt-ids 7,300,12,45,2,2,19,88,101 --max-new 6 --print-ids --threads 2)
"$BIN" run --model "$T/model" "${P[@]}" --dump-logits "$T/ref.bin" > "$T/ref.txt"
# A route trace in the simple text format: layer 1's experts 0..7 are "hot".
for e in 0 1 2 3 4 5 6 7; do echo "1 $e $((10 - e))"; done > "$T/trace.txt"
mkdir -p "$T/d0" "$T/d1" "$T/d2"
"$BIN" prepare --model "$T/model" --out "$T/store" --drive "$T/d0" --drive "$T/d1" --drive "$T/d2:700" \
  --replicas-from "$T/trace.txt" 2> "$T/prepare.err"
grep -q "8 replicas" "$T/prepare.err" || { cat "$T/prepare.err"; echo "FAIL: expected 8 replicas"; exit 1; }
# The first mode also runs the raw drive probe; the others skip it to keep CI short.
for mode in "" "--io pread --no-probe" "--io pread --direct off --no-probe" "--io uring --no-probe" "--verify off --no-probe" \
            "--queue-depth 1 --no-probe"; do
  # shellcheck disable=SC2086
  "$BIN" run --store "$T/store" "${P[@]}" --dump-logits "$T/s.bin" $mode --stats > "$T/s.txt" 2> "$T/s.err" \
    || { cat "$T/s.err"; echo "FAIL: run --store $mode"; exit 1; }
  cmp "$T/ref.bin" "$T/s.bin" || { echo "FAIL: logits differ ($mode)"; exit 1; }
  cmp "$T/ref.txt" "$T/s.txt" || { echo "FAIL: ids differ ($mode)"; exit 1; }
  grep -q "^drive 0 (" "$T/s.err" || { cat "$T/s.err"; echo "FAIL: no per-drive stats ($mode)"; exit 1; }
done
"$BIN" doctor --full --store "$T/store"
# (Captured, not piped into grep -q: under pipefail a writer cut off by grep's early exit fails the line.)
again=$("$BIN" prepare --model "$T/model" --out "$T/store" --drive "$T/d0" --drive "$T/d1" --drive "$T/d2:700" \
  --replicas-from "$T/trace.txt" 2>&1)
grep -q "already complete" <<<"$again" || { echo "$again"; echo "FAIL: a second prepare did not say it was complete"; exit 1; }
# --model and --store are exclusive.
if "$BIN" run --model "$T/model" --store "$T/store" --prompt-ids 1 > /dev/null 2>&1; then
  echo "FAIL: --model with --store accepted"; exit 1
fi
echo "PASS: store_run"
