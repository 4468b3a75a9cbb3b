#!/usr/bin/env bash
# Deltafin next to llama.cpp on the same weights, in one memory cgroup that
# plays the machine's RAM (docs/results/2026-12-larger-than-ram.md).
# Both engines run in the cgroup, so llama.cpp's page cache and Deltafin's RAM
# tier (--ram-experts-gb auto sizes itself from the cgroup's limit) get the
# same memory. The page cache is dropped before every process. Rounds
# alternate which engine goes first. Workloads: decode of 64 tokens after an
# 8-token prompt, and the TTFT of a 512-token prompt.
#
# Usage: llamacpp_side_by_side.sh DELTAFIN LLAMA_IDS_BENCH GGUF STORE LIMIT_GIB ROUNDS OUTDIR [deltafin run args...]
#   LLAMA_IDS_BENCH: tools/peer/llama_ids_bench.cpp built against llama.cpp (outside this repo).
#   Needs root (cgroup v1 memory controller at /sys/fs/cgroup/memory, drop_caches).
set -euo pipefail
DF=$1 LL=$2 GGUF=$3 STORE=$4 LIMIT=$5 ROUNDS=$6 OUT=$7
shift 7
EXTRA=("$@")
mkdir -p "$OUT"
cg=/sys/fs/cgroup/memory/deltafin-side-by-side
mkdir -p "$cg"
echo $((LIMIT * 1024 * 1024 * 1024)) > "$cg/memory.limit_in_bytes"
in_cg() { sh -c 'echo $$ > "$0/cgroup.procs" && exec "$@"' "$cg" "$@"; }
drop() { sync; echo 3 > /proc/sys/vm/drop_caches; }
peak() { echo $(( $(cat "$cg/memory.max_usage_in_bytes") / 1048576 )); }
ids8=11,22,33,44,55,66,77,88
ids512=$(seq -s, 0 511)
raw=$OUT/raw.jsonl
: > "$raw"
echo "memory cgroup limit ${LIMIT} GiB; gguf $(stat -c %s "$GGUF") bytes; $("$DF" doctor --store "$STORE" 2>&1 | grep -m1 -i 'experts' || true)" | tee "$OUT/setup.txt"
llama() {  # llama WORKLOAD IDS N_GEN
  drop; echo 0 > "$cg/memory.max_usage_in_bytes"
  local line
  line=$(in_cg "$LL" "$GGUF" 2 "$2" "$3")
  echo "$line" >> "$OUT/llama.txt"
  python3 - "$1" "$line" "$(peak)" >> "$raw" <<'PY'
import json, re, sys
w, line, peak = sys.argv[1], sys.argv[2], int(sys.argv[3])
g = lambda k: float(re.search(k + r" ([0-9.]+)", line).group(1))
print(json.dumps({"engine": "llama.cpp", "workload": w, "ttft_s": g("ttft_s"), "decode_tok_s": g("decode_tok_s"),
                  "load_s": g("load_s"), "peak_mib": peak}))
PY
}
deltafin() {  # deltafin WORKLOAD IDS N_GEN
  drop; echo 0 > "$cg/memory.max_usage_in_bytes"
  local js=$OUT/df-$1-$round.json
  in_cg "$DF" run --store "$STORE" --prompt-ids "$2" --max-new "$3" --threads 2 --ram-experts-gb auto --no-heat \
    --stats --stats-json "$js" "${EXTRA[@]}" > /dev/null 2> "${js%.json}.err"
  python3 - "$1" "$js" "$(peak)" "${js%.json}.err" >> "$raw" <<'PY'
import json, re, sys
w, path, peak, err = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
r = json.load(open(path))
# The drive probe the run made before and after itself (--stats): the disk's rate in the same run.
probes = re.findall(r"raw probe ([0-9.]+) MB/s before, ([0-9.]+) MB/s after", open(err).read())
r["disk_probe_mb_s"] = sum(float(a) + float(b) for a, b in probes) / (2 * len(probes)) if probes else 0
steps = r.get("step_s", [])
tok_s = len(steps) / sum(steps) if steps and sum(steps) > 0 else 0
hits, misses = r.get("ram_hits", 0), r.get("ram_misses", 0)
print(json.dumps({"engine": "deltafin", "workload": w, "ttft_s": r["ttft_s"], "decode_tok_s": tok_s,
                  "load_s": r.get("load_s", 0), "peak_mib": peak, "ram_tier_slots": r.get("ram_tier_slots", 0),
                  "ram_hit_rate": hits / (hits + misses) if hits + misses else 0,
                  "decode_read_bytes_per_token": r.get("decode_read_bytes", 0) / max(1, len(steps)),
                  "disk_probe_mb_s": r.get("disk_probe_mb_s", 0)}))
PY
}
for round in $(seq 1 "$ROUNDS"); do
  if (( round % 2 )); then order="llama deltafin"; else order="deltafin llama"; fi
  for e in $order; do
    echo "round $round: $e decode"; $e decode "$ids8" 64
    echo "round $round: $e prefill512"; $e prefill512 "$ids512" 1
  done
done
python3 - "$raw" <<'PY' | tee "$OUT/summary.txt"
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
def med(e, w, k):
    v = [r[k] for r in rows if r["engine"] == e and r["workload"] == w]
    return statistics.median(v) if v else float("nan"), v
for w, k in (("decode", "decode_tok_s"), ("prefill512", "ttft_s")):
    a, av = med("deltafin", w, k)
    b, bv = med("llama.cpp", w, k)
    print(f"{w:10s} {k:13s} deltafin {a:8.3f} {[round(x, 3) for x in av]}  llama.cpp {b:8.3f} {[round(x, 3) for x in bv]}"
          f"  ratio deltafin/llama.cpp {a / b:.2f}")
for e in ("deltafin", "llama.cpp"):
    print(f"{e}: peak cgroup memory {max(r['peak_mib'] for r in rows if r['engine'] == e)} MiB")
d = [r for r in rows if r["engine"] == "deltafin" and r["workload"] == "decode"]
for r in d:
    probe = r["disk_probe_mb_s"] * 1e6
    pred = probe / r["decode_read_bytes_per_token"] if r["decode_read_bytes_per_token"] and probe else float("nan")
    print(f"deltafin decode: ram tier {r['ram_tier_slots']} slots, hit rate {r['ram_hit_rate']:.3f}, "
          f"{r['decode_read_bytes_per_token'] / 1e6:.1f} MB read/token, probe {r['disk_probe_mb_s']:.0f} MB/s, "
          f"read-bound prediction {pred:.2f} tok/s, measured {r['decode_tok_s']:.2f} ({r['decode_tok_s'] / pred:.2f} of it)")
PY
