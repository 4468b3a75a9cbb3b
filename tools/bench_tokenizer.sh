#!/usr/bin/env bash
# Tokenizer throughput: deltafin vs the tiktoken npm package (WASM) on the same
# deterministic 10 MB mixed text, in one run. Not a test.
# Usage: tools/bench_tokenizer.sh [deltafin-binary]   (default build/deltafin)
# Needs node and tests/tokenizer/node_modules (npm ci --prefix tests/tokenizer).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${1:-$ROOT/build/deltafin}
T="$ROOT/tests/tokenizer"
[ -f "$T/node_modules/tiktoken/package.json" ] || npm ci --prefix "$T" --no-audit --no-fund >/dev/null
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
node "$T/gen_bench_text.js" "$W/bench.txt"
best_of_3() {  # prints the fastest of three --stats lines
  for _ in 1 2 3; do "$@" < "$W/bench.txt"; done |
    node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>{const l=s.trim().split("\n").map(JSON.parse);l.sort((a,b)=>a.seconds-b.seconds);console.log(JSON.stringify(l[0]))})'
}
for enc in cl100k_base o200k_base; do
  node "$T/export_ranks.js" "$enc" "$W" >/dev/null
  pat=$(node -e 'process.stdout.write(require(process.argv[1]).pat_str)' "$W/$enc.json")
  for p in native k3; do
    if [ "$p" = native ]; then popt=(--pattern "$pat"); nodepat=native; else popt=(); nodepat="$T/k3_pattern.txt"; fi
    echo "== $enc ranks, $p pattern"
    echo "tiktoken npm (1 thread):  $(node "$T/bench.js" "$enc" "$nodepat" "$W/bench.txt")"
    echo "deltafin --threads 1:     $(best_of_3 "$BIN" tokenize --tokenizer "$W/$enc.tiktoken" "${popt[@]}" --stdin --stats --threads 1)"
    echo "deltafin --threads $(nproc):     $(best_of_3 "$BIN" tokenize --tokenizer "$W/$enc.tiktoken" "${popt[@]}" --stdin --stats --threads "$(nproc)")"
  done
done
