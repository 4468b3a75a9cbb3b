#!/usr/bin/env bash
# Deltafin's decode against its read-bound prediction, for arms of `run`
# options, in a memory cgroup that plays the machine's RAM (as
# llamacpp_side_by_side.sh runs it, without llama.cpp): 64 tokens after an
# 8-token prompt, RAM tier `auto`, cold (--no-heat, page cache dropped before
# each process), 2 threads unless the arm says otherwise, arms in turn within
# each round. Per process it prints the
# decode rate, the tier's hit rate, the bytes read per decoded token, the
# drive probe (the mean of the run's before and after probes), the
# prediction (probe / bytes per token) and the ratio, then the drive's line.
# Usage: tier_decode_arms.sh DELTAFIN STORE LIMIT_GIB ROUNDS OUTDIR "NAME=run options" ...
# Needs root (cgroup v1 memory controller at /sys/fs/cgroup/memory, drop_caches).
# READ_MBPS=N caps the process's reads at N MB/s (10^6 bytes) with the cgroup
# v1 blkio throttle on the disk that holds STORE (READ_DEV=MAJ:MIN names
# another): a slower drive on the same machine, to see where decode stops
# following the drive. The run's own probes read under the same cap.
set -euo pipefail
DF=$1 STORE=$2 LIMIT=$3 ROUNDS=$4 OUT=$5
shift 5
mkdir -p "$OUT"
cg=/sys/fs/cgroup/memory/deltafin-tier-arms
mkdir -p "$cg"
echo $((LIMIT * 1024 * 1024 * 1024)) > "$cg/memory.limit_in_bytes"
blk=/sys/fs/cgroup/blkio/deltafin-tier-arms
if [[ -n ${READ_MBPS:-} ]]; then
  dev=${READ_DEV:-}
  if [[ -z $dev ]]; then  # the whole disk under STORE's filesystem: the throttle takes disks, not partitions
    src=$(findmnt -no SOURCE -T "$STORE")
    parent=$(lsblk -no PKNAME "$src" | head -1)
    [[ -n $parent ]] && src=/dev/$parent
    dev=$(lsblk -dno MAJ:MIN "$src" | tr -d ' ')
  fi
  mkdir -p "$blk"
  echo "$dev $((READ_MBPS * 1000000))" > "$blk/blkio.throttle.read_bps_device"
  echo "reads capped at $READ_MBPS MB/s on $dev"
else
  blk=
fi
for round in $(seq 1 "$ROUNDS"); do
  for arm in "$@"; do
    name=${arm%%=*} args=${arm#*=}
    sync; echo 3 > /proc/sys/vm/drop_caches
    js=$OUT/$name-$round.json
    threads=(--threads 2)
    [[ " $args " == *" --threads "* ]] && threads=()
    # shellcheck disable=SC2086  # the arm's options are words
    sh -c 'echo $$ > "$0/cgroup.procs" && { [ -z "$1" ] || echo $$ > "$1/cgroup.procs"; } && shift && exec "$@"' \
      "$cg" "$blk" "$DF" run --store "$STORE" \
      --prompt-ids 11,22,33,44,55,66,77,88 --max-new 64 "${threads[@]}" --ram-experts-gb auto --no-heat \
      --stats --stats-json "$js" $args > /dev/null 2> "${js%.json}.err"
    python3 - "round $round $name" "$js" "${js%.json}.err" <<'PY'
import json, re, sys
label, path, err = sys.argv[1:4]
r, e = json.load(open(path)), open(err).read()
probes = [float(x) for p in re.findall(r"raw probe ([0-9.]+) MB/s before, ([0-9.]+) MB/s after", e) for x in p]
probe = sum(probes) / len(probes) * 1e6
steps = r["step_s"]
tok = len(steps) / sum(steps)
hit = r["ram_hits"] / max(1, r["ram_hits"] + r["ram_misses"])
per_tok = r["decode_read_bytes"] / len(steps)
pred = probe / per_tok
print(f"{label}: {tok:.2f} tok/s, tier hit rate {hit:.3f}, {per_tok / 1e6:.1f} MB read/token, probe {probe / 1e6:.0f} MB/s,"
      f" prediction {pred:.2f} tok/s, ratio {tok / pred:.2f}")
drive = re.search(r"achieved .*", e)
print("  " + (drive.group(0) if drive else "no drive line"))
PY
  done
done
