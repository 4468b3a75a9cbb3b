#!/usr/bin/env bash
# The web chat page at GET / in headless Chromium (tests/server/web_chat_test.mjs):
# a long sampled answer streamed and stopped, then a greedy answer with its
# numbers line (tests/server/web_chat_test.mjs has the details); a screenshot of the
# page is kept as web-chat.png in the directory the test runs in (ctest: the
# build directory) or in $DELTAFIN_TEST_ARTIFACTS.
# Usage: bash web_chat.sh <deltafin-binary> <source-dir>
set -euo pipefail
BIN=$(realpath "$1")
SRC=$(realpath "$2")
OUT=${DELTAFIN_TEST_ARTIFACTS:-$PWD}
command -v "${CHROMIUM:-chromium}" >/dev/null ||
  { echo "error: chromium is not installed (scripts/bootstrap.sh installs it)"; exit 1; }
TMP=$(mktemp -d)
source "$SRC/tests/server/serve.sh"

start_server --model "$SRC/models/demo" --threads 1 --memo-entries 0
mkdir -p "$OUT"
# Chromium keeps its profile and crash files under HOME.
HOME="$TMP" node "$SRC/tests/server/web_chat_test.mjs" "http://127.0.0.1:$PORT" "$OUT/web-chat.png" ||
  { tail -20 "$TMP/server.log"; exit 1; }
echo "ok - web chat"
