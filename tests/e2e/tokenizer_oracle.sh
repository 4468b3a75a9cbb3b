#!/usr/bin/env bash
# Independent oracle: the official tiktoken npm package (WASM). For its
# cl100k_base and o200k_base rank data and patterns, and for K3's pattern on
# the same ranks, `deltafin tokenize` must give identical ids on a generated
# corpus of hard strings, and decoding must round-trip.
# Usage: bash tokenizer_oracle.sh <deltafin-binary> <source-dir>
set -euo pipefail
BIN=$1
SRC=$2
T="$SRC/tests/tokenizer"

command -v node >/dev/null || { echo "error: node is not installed (apt-get install nodejs npm)"; exit 1; }
bash "$T/ensure_modules.sh" "$SRC"

W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
node "$T/gen_corpus.js" "$W/corpus.jsonl" 2500
fails=0
check() {  # label, expected, actual
  node "$T/compare.js" ids "$W/corpus.jsonl" "$2" "$3" "$1" || fails=$((fails + 1))
}
for enc in cl100k_base o200k_base; do
  node "$T/export_ranks.js" "$enc" "$W"
  pat=$(node -e 'process.stdout.write(require(process.argv[1]).pat_str)' "$W/$enc.json")
  ranks="$W/$enc.tiktoken"

  node "$T/oracle.js" "$enc" native "$W/corpus.jsonl" "$W/$enc.expected"
  "$BIN" tokenize --tokenizer "$ranks" --pattern "$pat" --stdin --jsonl < "$W/corpus.jsonl" > "$W/$enc.ours"
  check "$enc" "$W/$enc.expected" "$W/$enc.ours"
  "$BIN" tokenize --tokenizer "$ranks" --pattern "$pat" --stdin --jsonl --decode < "$W/$enc.ours" > "$W/$enc.decoded"
  node "$T/compare.js" text "$W/corpus.jsonl" "$W/$enc.decoded" "$enc decode round-trip" || fails=$((fails + 1))

  # K3's pattern (with && intersections) on the same ranks: Rust regex in the
  # oracle, our PCRE2 translation here.
  node "$T/oracle.js" "$enc" "$T/k3_pattern.txt" "$W/corpus.jsonl" "$W/$enc.k3.expected"
  "$BIN" tokenize --tokenizer "$ranks" --stdin --jsonl < "$W/corpus.jsonl" > "$W/$enc.k3.ours"
  check "$enc + K3 pattern" "$W/$enc.k3.expected" "$W/$enc.k3.ours"

  # Special tokens enabled: tiktoken's encode(text, "all").
  node -e 'const j=require(process.argv[1]); process.stdout.write(JSON.stringify(j.special_tokens))' "$W/$enc.json" > "$W/$enc.specials"
  node "$T/oracle.js" "$enc" native "$W/corpus.jsonl" "$W/$enc.sp.expected" special
  "$BIN" tokenize --tokenizer "$ranks" --pattern "$pat" --special-tokens "$W/$enc.specials" --allow-special \
    --stdin --jsonl < "$W/corpus.jsonl" > "$W/$enc.sp.ours"
  check "$enc with specials" "$W/$enc.sp.expected" "$W/$enc.sp.ours"
done
if [ "$fails" -ne 0 ]; then
  echo "tokenizer oracle: $fails comparison(s) failed"
  exit 1
fi
echo "tokenizer oracle: all comparisons identical"
