#!/usr/bin/env bash
# `run` and SIGINT (issue 18): one SIGINT stops generation cleanly at the next
# prompt block or decode step and prints the stats gathered so far (exit 130,
# --stats-json written); a second SIGINT exits at once.
# Usage: run_sigint.sh <deltafin-binary> <source-dir>
set -euo pipefail
BIN=$1
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; echo "--- stderr:"; cat "$T/err.txt" 2>/dev/null || true; exit 1; }
"$BIN" make-model --preset tiny --out "$T/model" --seed 3 > /dev/null
# Waits until the process catches SIGINT (bit 2 of SigCgt): generation has
# begun, so a SIGINT now is run's to handle (before it, it would just kill).
caught() {
  local mask
  for _ in $(seq 1 1500); do
    mask=$(awk '/^SigCgt:/ { print $2 }' "/proc/$1/status" 2> /dev/null || true)
    [[ -n $mask ]] && (( (16#$mask & 2) != 0 )) && return 0
    sleep 0.02
  done
  return 1
}

# 1. During decode: endless generation, SIGINT once some tokens are out.
"$BIN" run --model "$T/model" --prompt-ids 1,2,3 --max-new 16000000 --print-ids --threads 2 --stats \
  --stats-json "$T/sj.json" > "$T/out.txt" 2> "$T/err.txt" &
pid=$!
for _ in $(seq 1 600); do
  [[ $(wc -l < "$T/out.txt") -ge 5 ]] && break
  sleep 0.05
done
kill -INT "$pid"
rc=0; wait "$pid" || rc=$?
[[ $rc == 130 ]] || fail "decode: exit $rc after SIGINT, want 130"
grep -q -- "--- stats ---" "$T/err.txt" || fail "decode: no stats after SIGINT"
n=$(wc -l < "$T/out.txt")
grep -q "interrupted: 3 of 3 prompt tokens and $n generated tokens done" "$T/err.txt" || fail "decode: wrong count ($n printed)"
grep -q "^decode:  $((n - 1)) tokens" "$T/err.txt" || fail "decode: stats do not cover the $n tokens printed"
grep -q '"ids"' "$T/sj.json" || fail "decode: --stats-json not written"

# 2. During a long prefill of small blocks: stops between blocks.
ids=$(seq -s, 1 4000 | awk -F, '{for (i = 1; i <= NF; i++) printf "%s%d", (i > 1 ? "," : ""), $i % 500}')
"$BIN" run --model "$T/model" --prompt-ids "$ids" --prefill-chunk 16 --max-new 4 --print-ids --threads 2 --stats \
  > "$T/out.txt" 2> "$T/err.txt" &
pid=$!
caught "$pid" || fail "prefill: SIGINT handler never installed"
sleep 0.3
kill -INT "$pid"
rc=0; wait "$pid" || rc=$?
[[ $rc == 130 ]] || fail "prefill: exit $rc after SIGINT, want 130"
grep -q -- "--- stats ---" "$T/err.txt" || fail "prefill: no stats after SIGINT"
done_tokens=$(sed -n 's/^interrupted: \([0-9]*\) of 4000 prompt tokens and 0 generated.*/\1/p' "$T/err.txt")
[[ -n $done_tokens && $done_tokens -lt 4000 ]] || fail "prefill: not stopped part-way ('$done_tokens' of 4000 done)"
[[ ! -s "$T/out.txt" ]] || fail "prefill: tokens generated after SIGINT"

# 3. A second SIGINT exits at once, even inside one long prefill block.
"$BIN" run --model "$T/model" --prompt-ids "$ids" --prefill-chunk 4000 --max-new 4 --print-ids --threads 1 --stats \
  > "$T/out.txt" 2> "$T/err.txt" &
pid=$!
caught "$pid" || fail "second SIGINT: handler never installed"
kill -INT "$pid"
sleep 0.2
t0=$(date +%s.%N)
kill -INT "$pid" 2> /dev/null || true
rc=0; wait "$pid" || rc=$?
t1=$(date +%s.%N)
[[ $rc == 130 ]] || fail "second SIGINT: exit $rc, want 130"
grep -q "Ctrl-C again to exit now" "$T/err.txt" || fail "second SIGINT: the first one was not seen by run"
if grep -q -- "--- stats ---" "$T/err.txt"; then fail "second SIGINT: the block finished instead (prefill too short?)"; fi
awk -v a="$t0" -v b="$t1" 'BEGIN { exit !(b - a < 1.0) }' || fail "second SIGINT: took $(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }') s"
echo "PASS: run_sigint"
