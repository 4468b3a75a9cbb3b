#!/usr/bin/env bash
# `deltafin tokenize` with a Hugging Face tokenizer.json: a directory holding
# tokenizer.json uses it (even beside tiktoken.model), a .json path works
# too, `run --prompt` encodes with it, and bad files are one-line errors with
# a non-zero exit.
# Usage: bash tokenizer_json_cli.sh <deltafin-binary> <source-dir>
set -euo pipefail
BIN=$1
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
command -v python3 >/dev/null || { echo "python3 missing"; exit 77; }

# Byte-level vocab (id = byte), "ab" = 256 by merge, "<think>" non-special
# 257, "<|end|>" special 258; Qwen's Split regex and NFC.
python3 - "$W" <<'PY'
import json, sys
bs = list(range(ord('!'), ord('~') + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
cs, n = bs[:], 0
for b in range(256):
    if b not in bs:
        bs.append(b); cs.append(256 + n); n += 1
ch = {b: chr(c) for b, c in zip(bs, cs)}
vocab = {ch[b]: b for b in range(256)}
vocab["ab"] = 256
regex = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
tok = {
  "version": "1.0", "truncation": None, "padding": None,
  "added_tokens": [
    {"id": 257, "content": "<think>", "single_word": False, "lstrip": False, "rstrip": False, "normalized": False, "special": False},
    {"id": 258, "content": "<|end|>", "single_word": False, "lstrip": False, "rstrip": False, "normalized": False, "special": True}],
  "normalizer": {"type": "NFC"},
  "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
    {"type": "Split", "pattern": {"Regex": regex}, "behavior": "Isolated", "invert": False},
    {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}]},
  "post_processor": None, "decoder": {"type": "ByteLevel"},
  "model": {"type": "BPE", "dropout": None, "unk_token": None, "vocab": vocab, "merges": [["a", "b"]]},
}
json.dump(tok, open(sys.argv[1] + "/tokenizer.json", "w"), ensure_ascii=False)
tok["pre_tokenizer"]["pretokenizers"][0] = {"type": "Punctuation"}
json.dump(tok, open(sys.argv[1] + "/unknown_pre.json", "w"))
PY
for b in $(seq 0 255); do
  printf "$(printf '\\%03o' "$b")" | base64 | tr -d '\n'
  echo " $b"
done > "$W/tiktoken.model"

out=$("$BIN" tokenize --tokenizer "$W" --text "ab <think><|end|>")
[ "$out" = "[256,32,257,60,124,101,110,100,124,62]" ] || fail "dir encode gave $out"
out=$("$BIN" tokenize --tokenizer "$W" --allow-special --text "ab <think><|end|>")
[ "$out" = "[256,32,257,258]" ] || fail "allow-special encode gave $out"
out=$(printf 'e\xcc\x81' | "$BIN" tokenize --tokenizer "$W/tokenizer.json" --stdin)
[ "$out" = "[195,169]" ] || fail "NFC encode gave $out"
out=$("$BIN" tokenize --tokenizer "$W" --decode --text "[256,32,257,258,195,169]")
[ "$out" = "ab <think><|end|>é" ] || fail "decode gave $out"
out=$("$BIN" tokenize --tokenizer "$W/tiktoken.model" --text "ab")
[ "$out" = "[97,98]" ] || fail "the rank file beside it gave $out"

# `run --prompt` on a checkpoint directory whose tokenizer is tokenizer.json.
"$BIN" make-model --preset tiny --out "$W/model" >/dev/null
rm -f "$W/model/tiktoken.model" "$W/model/tokenizer_config.json"
if err=$("$BIN" run --model "$W/model" --prompt "ab" --max-new 1 2>&1); then fail "run --prompt without a tokenizer accepted"; fi
[[ "$err" == *"no tiktoken.model or tokenizer.json"* ]] || fail "no-tokenizer message: $err"
cp "$W/tokenizer.json" "$W/model/"
"$BIN" run --model "$W/model" --prompt "ab <think>" --max-new 1 >/dev/null || fail "run --prompt with tokenizer.json failed"

# Errors: one line, non-zero exit, naming the problem.
printf '{"model": ' > "$W/broken.json"
if err=$("$BIN" tokenize --tokenizer "$W/broken.json" --text x 2>&1); then fail "malformed JSON accepted"; fi
[[ "$err" == *"broken.json: malformed JSON"* && $(wc -l <<< "$err") -eq 1 ]] || fail "malformed JSON message: $err"
if err=$("$BIN" tokenize --tokenizer "$W/unknown_pre.json" --text x 2>&1); then fail "unknown pre-tokenizer accepted"; fi
[[ "$err" == *"pre_tokenizer type 'Punctuation'"* ]] || fail "unknown pre-tokenizer message: $err"
if err=$("$BIN" tokenize --tokenizer "$W" --pattern 'x' --text x 2>&1); then fail "--pattern with tokenizer.json accepted"; fi
if err=$("$BIN" tokenize --tokenizer "$W" --decode --text "[259]" 2>&1); then fail "unknown id accepted"; fi
[[ "$err" == *"unknown token id 259"* ]] || fail "unknown id message: $err"
echo "tokenizer.json cli: ok"
