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
SERVER_PID=""
cleanup() {
  if [[ -n "$SERVER_PID" ]]; then kill "$SERVER_PID" 2>/dev/null || true; wait "$SERVER_PID" 2>/dev/null || true; fi
  rm -rf "$TMP"
}
trap cleanup EXIT
bash "$SRC/tests/server/ensure_modules.sh" "$SRC"

: >"$TMP/server.log"
"$BIN" serve --model "$SRC/models/demo" --port 0 --threads 1 --memo-entries 0 >"$TMP/server.log" 2>&1 &
SERVER_PID=$!
PORT=""
for _ in $(seq 1 300); do
  PORT=$(sed -n 's/.*listening on http:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p' "$TMP/server.log")
  [[ -n "$PORT" ]] && break
  kill -0 "$SERVER_PID" 2>/dev/null || { cat "$TMP/server.log"; echo "server exited early"; exit 1; }
  sleep 0.1
done
[[ -n "$PORT" ]] || { cat "$TMP/server.log"; echo "server did not start"; exit 1; }
mkdir -p "$OUT"
# Chromium keeps its profile and crash files under HOME.
HOME="$TMP" node "$SRC/tests/server/web_chat_test.mjs" "http://127.0.0.1:$PORT" "$OUT/web-chat.png" ||
  { tail -20 "$TMP/server.log"; exit 1; }
echo "ok - web chat"
