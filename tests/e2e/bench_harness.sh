#!/usr/bin/env bash
# `deltafin bench` end to end on a tiny store:
# - arms that keep the tokens pass the oracle; an arm that changes them (a
#   different checkpoint) is rejected, marked, and the exit code says so;
# - the prefill read amplification it reports equals the count made by hand
#   from a route trace: per prefill block and MoE layer, the union of the
#   block's experts is read once; the denominator is the distinct experts the
#   whole prompt routed (so one block -> exactly 1, one row per block -> more;
#   that arm runs without next-layer guesses, whose wasted reads no hand
#   count can know);
# - the log has one JSON line per run, warm-ups marked, in ABBA order.
# Usage: bench_harness.sh <deltafin-binary> <source-dir>
set -euo pipefail
BIN=$1
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
"$BIN" make-model --preset tiny --out "$T/m1" --seed 3 > /dev/null
"$BIN" make-model --preset tiny --out "$T/m2" --seed 4 > /dev/null
mkdir -p "$T/d0" "$T/d1"
"$BIN" prepare --model "$T/m1" --out "$T/store" --drive "$T/d0" --drive "$T/d1:500" 2> /dev/null
IDS=9,300,12,45,2,2,19,88,101,7,7,64
B=(--store "$T/store" --prompt-ids "$IDS" --max-new 4 --threads 2 --probe-seconds 0.1 --membw-mib 16)

# 1. Oracle: "one" and "whole" keep the tokens; "other" runs another checkpoint.
set +e
"$BIN" bench "${B[@]}" --reps 2 --warmup 1 --out "$T/r1" \
  --arm "whole=--prefill-chunk 12" --arm "one=--prefill-chunk 1 --prefetch 0" --arm "other=--model $T/m2" > "$T/r1.txt" 2> "$T/r1.err"
rc=$?
set -e
[[ $rc == 3 ]] || { cat "$T/r1.err"; echo "FAIL: expected exit code 3 for a rejected arm, got $rc"; exit 1; }
grep -E '^other .*REJECTED' "$T/r1.txt" > /dev/null || { cat "$T/r1.txt"; echo "FAIL: 'other' not marked rejected"; exit 1; }
grep -E '^whole .* ok$' "$T/r1.txt" > /dev/null || { cat "$T/r1.txt"; echo "FAIL: 'whole' not ok"; exit 1; }
grep -E '^one .* ok$' "$T/r1.txt" > /dev/null || { cat "$T/r1.txt"; echo "FAIL: 'one' not ok"; exit 1; }

# 2. Read amplification, counted by hand from a route trace of the same prompt.
"$BIN" run --store "$T/store" --prompt-ids "$IDS" --max-new 1 --route-trace "$T/trace.jsonl" --print-ids > /dev/null
python3 - "$T" <<'PY'
import json, sys
T = sys.argv[1]
prompt = 12
rows = [json.loads(l) for l in open(f"{T}/trace.jsonl")]
rows = [r for r in rows if r["pos"] < prompt]
layers = sorted({r["layer"] for r in rows})
distinct = sum(len({e for r in rows if r["layer"] == L for e in r["experts"]}) for L in layers)
def reads(chunk):
    total = 0
    for L in layers:
        for c0 in range(0, prompt, chunk):
            total += len({e for r in rows if r["layer"] == L and c0 <= r["pos"] < c0 + chunk for e in r["experts"]})
    return total
expect = {"whole": reads(12) / distinct, "one": reads(1) / distinct}
assert abs(expect["whole"] - 1.0) < 1e-12
assert expect["one"] > 1.5, expect
log = [json.loads(l) for l in open(f"{T}/r1/runs.jsonl")]
for line in log:
    if line["arm"] in expect:
        got = line["prefill_read_amplification"]
        assert abs(got - expect[line["arm"]]) < 1e-9, (line["arm"], got, expect[line["arm"]])
        assert line["prefill_distinct_experts"] == distinct, (line["prefill_distinct_experts"], distinct)
# 3. The log: 3 warm-ups in arm order, then ABC CBA.
order = [(l["arm"], l["warmup"]) for l in log]
assert order == [("whole", True), ("one", True), ("other", True),
                 ("whole", False), ("one", False), ("other", False),
                 ("other", False), ("one", False), ("whole", False)], order
assert all(l["oracle"] == "ok" for l in log if l["arm"] != "other")
assert all(l["oracle"].startswith("mismatch") for l in log if l["arm"] == "other")
s = json.load(open(f"{T}/r1/summary.json"))
arms = {a["name"]: a for a in s["arms"]}
assert arms["other"]["rejected"] and not arms["whole"]["rejected"]
assert arms["whole"]["cold"] in (True, False)
assert s["limits"]["disk_mb_s"] > 0 and s["limits"]["membw_gb_s"] > 0
svg = open(f"{T}/r1/runs.svg").read()
assert svg.startswith("<svg") or svg.startswith("<?xml"), svg[:40]
for name in ("whole", "one", "other"):
    assert name in svg, name
print("amplification: whole %.3f, one %.3f (hand count agrees)" % (expect["whole"], expect["one"]))
PY
echo "PASS: bench_harness"
