#!/usr/bin/env bash
# `deltafin tokenize` end to end on a byte-level checkpoint-style tokenizer:
# encode, decode, specials only when allowed, and clear errors for bad input.
# Usage: bash tokenizer_cli.sh <deltafin-binary> <source-dir>
set -euo pipefail
BIN=$1
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# Byte-level rank file: rank n is byte n.
for b in $(seq 0 255); do
  printf "$(printf '\\%03o' "$b")" | base64 | tr -d '\n'
  echo " $b"
done > "$W/tiktoken.model"
cat > "$W/tokenizer_config.json" <<'JSON'
{"added_tokens_decoder": {"256": {"content": "[BOS]"}, "258": {"content": "<|end_of_msg|>"},
 "259": {"content": "<|open|>"}, "261": {"content": "<|sep|>"}}}
JSON

out=$("$BIN" tokenize --tokenizer "$W" --text "Hi <|open|>")
[ "$out" = "[72,105,32,60,124,111,112,101,110,124,62]" ] || fail "plain encode gave $out"
out=$("$BIN" tokenize --tokenizer "$W" --allow-special --text "Hi <|open|>")
[ "$out" = "[72,105,32,259]" ] || fail "special encode gave $out"
out=$(printf 'caf\xc3\xa9' | "$BIN" tokenize --tokenizer "$W/tiktoken.model" --stdin)
[ "$out" = "[99,97,102,195,169]" ] || fail "stdin encode gave $out"
out=$("$BIN" tokenize --tokenizer "$W" --decode --text "[72,105,258]")
[ "$out" = "Hi<|end_of_msg|>" ] || fail "decode gave $out"

# Errors: one line, non-zero exit, naming the problem.
if err=$(printf 'a\xffb' | "$BIN" tokenize --tokenizer "$W" --stdin 2>&1); then fail "invalid UTF-8 accepted"; fi
[[ "$err" == *"invalid UTF-8 at byte 1"* ]] || fail "invalid UTF-8 message: $err"
sed '5s/.*/@@@@ 4/' "$W/tiktoken.model" > "$W/bad.model"
if err=$("$BIN" tokenize --tokenizer "$W/bad.model" --text x 2>&1); then fail "corrupt rank file accepted"; fi
[[ "$err" == *"bad.model:5: bad base64"* ]] || fail "corrupt rank file message: $err"
if err=$("$BIN" tokenize --tokenizer "$W" --decode --text "[70000]" 2>&1); then fail "unknown id accepted"; fi
[[ "$err" == *"unknown token id 70000"* ]] || fail "unknown id message: $err"
if "$BIN" tokenize --tokenizer "$W" >/dev/null 2>&1; then fail "missing --text/--stdin accepted"; fi
echo "tokenizer cli: ok"
