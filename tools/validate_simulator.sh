#!/usr/bin/env bash
# Validates `deltafin simulate-drives` against measured cold runs on this
# machine's single drive: each round decodes from STORE (O_DIRECT, so the page
# cache is bypassed) with a route trace, then replays that trace through the
# simulator and compares the predicted expert-read time per decode token with
# the measured one (per MoE layer: first request of the union to last expert
# ready).
#
# The drive model is probed on the store's own packs right before AND right
# after each run (PROBE_SECONDS each, default 8) and the two are averaged, so
# a disk whose rate drifts from minute to minute (this machine's swings by
# +-15% between consecutive 2 s probes) is sampled on both sides of the run
# it is compared with. The runs use --prefetch 0: the simulator replays demand
# reads only (it has no model of next-layer guesses).
# Usage: tools/validate_simulator.sh BIN STORE [ROUNDS] [MAX_NEW]
set -euo pipefail
BIN=$1 STORE=$2 ROUNDS=${3:-3} MAX_NEW=${4:-33}
PROBE_SECONDS=${PROBE_SECONDS:-8}
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT

# Prints "MB/s latency_us per_request_MB/s" of drive 0, probed now.
probe_model() {
  "$BIN" simulate-drives --trace "$W/warm.jsonl" --store "$STORE" --drive "probe-store:$STORE" \
    --probe-seconds "$PROBE_SECONDS" --prompt-tokens 1 2>&1 > /dev/null |
    sed -n 's|^drive 0 of probe-store:.*: \([0-9.]*\) MB/s, \([0-9.]*\) us latency, \([0-9.]*\) MB/s per request.*|\1 \2 \3|p'
}

# A short warm-up run: loads the spine and gives the probe a trace to replay.
"$BIN" run --store "$STORE" --prompt-ids 1,2 --max-new 2 --prefetch 0 --route-trace "$W/warm.jsonl" > /dev/null 2>&1

printf "%-6s %12s %13s %9s %22s\n" round "measured ms" "simulated ms" "sim/meas" "probe MB/s before/after"
for r in $(seq 1 "$ROUNDS"); do
  before=$(probe_model)
  "$BIN" run --store "$STORE" --prompt-ids "$((r * 7)),$((r * 11)),3,4,5,6,7,8" --max-new "$MAX_NEW" --print-ids --prefetch 0 \
    --route-trace "$W/trace.jsonl" --stats-json "$W/run.json" > /dev/null 2> "$W/run.err"
  after=$(probe_model)
  drive=$(python3 -c '
import sys
b, a = [list(map(float, s.split())) for s in sys.argv[1:3]]
req = [x for x in (b[2], a[2]) if x > 0]
print(f"{(b[0] + a[0]) / 2:.1f}:{(b[1] + a[1]) / 2:.1f}:4:{sum(req) / len(req) if req else 0:.1f}")
' "$before" "$after")
  "$BIN" simulate-drives --trace "$W/trace.jsonl" --store "$STORE" --drive "$drive" --prompt-tokens 8 \
    --json "$W/sim.json" > /dev/null 2> "$W/sim.err"
  python3 - "$W" "$r" "$before" "$after" <<'PY'
import json, sys
w, r, before, after = sys.argv[1], sys.argv[2], sys.argv[3].split()[0], sys.argv[4].split()[0]
run = json.load(open(f"{w}/run.json"))
sim = json.load(open(f"{w}/sim.json"))
measured = run["decode_read_s"] / len(run["step_s"])
simulated = sim["decode"]["seconds"] / sim["decode"]["steps"]
print(f"{r:<6} {measured*1e3:12.1f} {simulated*1e3:13.1f} {simulated/measured:9.3f} {before:>11}/{after}")
with open(f"{w}/ratios", "a") as f:
    f.write(f"{simulated/measured}\n")
PY
done
python3 - "$W/ratios" <<'PY'
import statistics, sys
r = [float(x) for x in open(sys.argv[1])]
within = sum(1 for x in r if abs(x - 1) <= 0.15)
print(f"median sim/meas {statistics.median(r):.3f}; {within} of {len(r)} rounds within 15%")
PY
