#!/usr/bin/env bash
# Tool calls made by the demo model, end to end through `deltafin serve` with the
# official openai and @anthropic-ai/sdk clients (tests/server/tool_calls_test.mjs):
# the call, its streamed deltas, and the answer after the tool's result.
# Usage: bash demo_tool_calls.sh <deltafin-binary> <source-dir>
set -euo pipefail
BIN=$(realpath "$1")
SRC=$(realpath "$2")
TMP=$(mktemp -d)
source "$SRC/tests/server/serve.sh"

start_server --model "$SRC/models/demo" --threads 1
node "$SRC/tests/server/tool_calls_test.mjs" "http://127.0.0.1:$PORT" deltafin ||
  { tail -20 "$TMP/server.log"; exit 1; }
echo "ok - demo tool calls"
