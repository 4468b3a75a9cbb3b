#!/usr/bin/env bash
# Builds deltafin and runs the embedded default model on a prompt.
# Usage: scripts/demo.sh ["prompt text"]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)" --target deltafin
prompt=${1:-$'class Queue:\n    def __init__(self'}
if [[ -f models/demo/config.json ]]; then
  exec ./build/deltafin run --model models/demo --prompt "$prompt" --max-new 64 --stats
fi
# No trained demo model in this tree: a random-weight `tiny` checkpoint shows the plumbing.
dir=${TMPDIR:-/tmp}/deltafin-tiny
[[ -f $dir/config.json ]] || ./build/deltafin make-model --preset tiny --out "$dir" --seed 1
exec ./build/deltafin run --model "$dir" --prompt-ids 1,2,3,4,5 --max-new 32 --print-ids --stats
