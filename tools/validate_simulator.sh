#!/usr/bin/env bash
# Validates `deltafin simulate-drives` against measured cold runs on this
# machine: each round decodes from STORE (O_DIRECT, so the page cache is
# bypassed) with a route trace, then immediately replays that trace through
# the simulator with the drive model probed on the store's own packs, and
# compares the predicted expert-read time per decode token with the measured
# one (per MoE layer: first request of the union to last expert ready).
# The runs use --prefetch 0: the simulator replays demand reads only (it has
# no model of next-layer guesses), so that is what it can be compared with.
# Usage: tools/validate_simulator.sh BIN STORE [ROUNDS] [MAX_NEW]
set -euo pipefail
BIN=$1 STORE=$2 ROUNDS=${3:-3} MAX_NEW=${4:-33}
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
printf "%-6s %14s %16s %10s %12s\n" round "measured ms" "simulated ms" "sim/meas" "probe MB/s"
for r in $(seq 1 "$ROUNDS"); do
  "$BIN" run --store "$STORE" --prompt-ids "$((r * 7)),$((r * 11)),3,4,5,6,7,8" --max-new "$MAX_NEW" --print-ids --prefetch 0 \
    --route-trace "$W/trace.jsonl" --stats-json "$W/run.json" > /dev/null 2> "$W/run.err"
  "$BIN" simulate-drives --trace "$W/trace.jsonl" --store "$STORE" --drive "probe-store:$STORE" --prompt-tokens 8 \
    --json "$W/sim.json" > /dev/null 2> "$W/sim.err"
  python3 - "$W" "$r" <<'PY'
import json, re, sys
w, r = sys.argv[1], sys.argv[2]
run = json.load(open(f"{w}/run.json"))
sim = json.load(open(f"{w}/sim.json"))
measured = run["decode_read_s"] / len(run["step_s"])
simulated = sim["decode"]["seconds"] / sim["decode"]["steps"]
probe = re.search(r"([0-9.]+) MB/s", open(f"{w}/sim.err").read()).group(1)
print(f"{r:<6} {measured*1e3:14.1f} {simulated*1e3:16.1f} {simulated/measured:10.3f} {probe:>12}")
PY
done
