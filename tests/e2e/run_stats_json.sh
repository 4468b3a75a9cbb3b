#!/usr/bin/env bash
# `run --stats-json NAME` with a bare file name (no directory part) writes the
# record into the working directory (issue 18: it used to fail after the run).
# Usage: run_stats_json.sh <deltafin-binary> <source-dir>
set -euo pipefail
BIN=$(realpath "$1")
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
"$BIN" make-model --preset tiny --out "$T/model" --seed 4 > /dev/null
cd "$T"
"$BIN" run --model model --prompt-ids 1,2,3 --max-new 3 --print-ids --threads 2 --stats-json sj.json > out.txt 2> err.txt \
  || { cat err.txt; echo "FAIL: run --stats-json sj.json"; exit 1; }
grep -q '"ids"' sj.json || { echo "FAIL: sj.json has no record"; exit 1; }
[[ ! -e sj.json.tmp ]] || { echo "FAIL: temp file left behind"; exit 1; }
echo "PASS: run_stats_json"
