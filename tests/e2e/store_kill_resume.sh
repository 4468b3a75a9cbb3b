#!/usr/bin/env bash
# prepare killed with SIGKILL at random points, rerun each time: the store is
# refused while incomplete and, once a rerun finishes, passes `doctor --full`
# and `run --store` gives logits bit-identical to `run --model`.
# Usage: store_kill_resume.sh <deltafin-binary> <source-dir>
set -euo pipefail
BIN=$1
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
"$BIN" make-model --preset tiny --out "$T/model" --seed 21 > /dev/null
mkdir -p "$T/d0" "$T/d1" "$T/d2"
ARGS=(prepare --quiet --model "$T/model" --out "$T/store" --drive "$T/d0:900" --drive "$T/d1:600" --drive "$T/d2:700"
      --replicate-hot 50 --pause-ms 30)
kills=0
for round in $(seq 1 20); do
  [[ $kills -ge 6 ]] && break
  # Kill once 1-2 more units are recorded (so the kill lands mid-prepare on a
  # fast or a slow machine alike), or at a random early moment on odd rounds.
  units() { { ls "$T/store/.prepare/done" 2> /dev/null || true; } | wc -l; }
  target=$(( $(units) + 1 + RANDOM % 2 ))
  early=$(( round % 2 ? 1 + RANDOM % 8 : 0 ))
  "$BIN" "${ARGS[@]}" & pid=$!
  for _ in $(seq 1 1000); do
    sleep 0.01
    kill -0 "$pid" 2> /dev/null || break
    if (( early > 0 )); then early=$((early - 1)); (( early == 0 )) && break; continue; fi
    (( $(units) >= target )) && break
  done
  delay_ms="(after $(units) units)"
  kill -9 "$pid" 2> /dev/null || true
  wait "$pid" 2> /dev/null || true
  if [[ -f "$T/store/manifest.json" ]]; then
    echo "round $round: prepare finished before the SIGKILL ${delay_ms}"
    break
  fi
  kills=$((kills + 1))
  echo "round $round: SIGKILL ${delay_ms}"
  # Incomplete: refused by run and doctor.
  if "$BIN" run --store "$T/store" --prompt-ids 1,2 --max-new 1 > /dev/null 2> "$T/err"; then
    echo "FAIL: run accepted an incomplete store"; exit 1
  fi
  if "$BIN" doctor --store "$T/store" > /dev/null; then echo "FAIL: doctor passed an incomplete store"; exit 1; fi
done
echo "interrupted $kills prepare runs"
[[ $kills -ge 5 ]] || { echo "FAIL: fewer than 5 kills landed mid-prepare"; exit 1; }
"$BIN" "${ARGS[@]}"
"$BIN" doctor --full --store "$T/store"
[[ ! -e "$T/store/.prepare" ]] || { echo "FAIL: .prepare left behind"; exit 1; }
P=(--prompt-ids 3,1,4,1,5,9,2,6 --max-new 5 --print-ids --threads 2)
"$BIN" run --model "$T/model" "${P[@]}" --dump-logits "$T/a.bin" > "$T/a.txt"
"$BIN" run --store "$T/store" "${P[@]}" --dump-logits "$T/b.bin" > "$T/b.txt"
cmp "$T/a.bin" "$T/b.bin"
cmp "$T/a.txt" "$T/b.txt"
echo "PASS: store_kill_resume"
