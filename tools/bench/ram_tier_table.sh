#!/usr/bin/env bash
# The simulator's RAM-tier table for the real K3 shapes (docs/results/2026-12-ram-tier.md, "The simulator's RAM tier"):
# read-bound decode tokens/s for 64/128/192/256 GB of RAM x 1-4 drives of
# 7 GB/s, spine in BF16 and in row-int8, on a synthetic trace with K3's
# measured routing statistics (39% persistence, most-read expert ~10-20x the
# median). Compute is not modelled: these are ceilings from the read path.
# Usage: tools/bench/ram_tier_table.sh BINARY [WORKDIR]
set -euo pipefail
bin=${1:?usage: ram_tier_table.sh BINARY [WORKDIR]}
work=${2:-$(mktemp -d)}
mkdir -p "$work"
trace=$work/k3-synthetic.jsonl
span=17547264                # one K3 expert (inspect of k3-full-sparse), a multiple of 4 KiB
"$bin" make-trace --moe-layers 92 --experts 896 --top-k 16 --positions 264 --keep 0.38 --skew 0.4 --seed 1 --out "$trace"
"$bin" trace-stats --trace "$trace" --prompt-tokens 8 --union 1,2,4 | sed 's/^/  /'
# Resident besides the tier: the spine, one sequence's KDA state (0.475 GB)
# and a 32,768-token MLA cache (1.81 GB), and the margin of --ram-experts-gb
# auto (the larger of 2 GiB and 5% of RAM).
echo
echo "| RAM | spine | tier GB (share of experts) | hit rate | 1 drive | 2 drives | 3 drives | 4 drives |"
echo "|---|---|---|---|---|---|---|---|"
for ram in 64 128 192 256; do
  for spine in bf16:113.51 int8:56.8; do
    name=${spine%%:*} gb=${spine##*:}
    tier=$(python3 -c "r=$ram; m=max(2**31/1e9, 0.05*r); print(max(0.0, r - $gb - 0.475 - 1.81 - m))")
    if python3 -c "import sys; sys.exit(0 if $ram - $gb - 0.475 - 1.81 > 0 else 1)"; then :; else
      echo "| $ram GB | $name ($gb GB) | the spine does not fit | | | | | |"; continue
    fi
    "$bin" simulate-drives --trace "$trace" --experts 896 --moe-layers 92 --span-bytes $span --drive 7000:80 \
      --prompt-tokens 8 --ladder 4 --ram-gb "$tier" --json "$work/sim.json" > "$work/sim.txt"
    python3 - "$work/sim.json" "$ram" "$name" "$gb" "$tier" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
ram, name, gb, tier = sys.argv[2], sys.argv[3], sys.argv[4], float(sys.argv[5])
share = j["ram_slots"] / (92 * 896)
hit = j["ram_hits"] / j["ram_requests"] if j["ram_requests"] else 0.0
cells = " | ".join(f"{1 / r['seconds_per_token']:.3f}" for r in j["ladder"])
print(f"| {ram} GB | {name} ({gb} GB) | {tier:.1f} ({100 * share:.1f}%) | {100 * hit:.1f}% | {cells} |")
PY
  done
done
