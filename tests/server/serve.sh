# Sourced by the e2e scripts that start `deltafin serve` (tests/e2e/server_openai_client.sh,
# tests/e2e/web_chat.sh, tests/e2e/demo_tool_calls.sh). Needs BIN (the binary), SRC (the source tree) and TMP (a
# scratch directory, removed on exit with the server).
SERVER_PID=""
cleanup() {
  if [[ -n "$SERVER_PID" ]]; then kill "$SERVER_PID" 2>/dev/null || true; wait "$SERVER_PID" 2>/dev/null || true; fi
  rm -rf "$TMP"
}
trap cleanup EXIT

# The npm modules of tests/server (every script that sources this drives the server from node).
bash "$SRC/tests/server/ensure_modules.sh" "$SRC"

# start_server ARGS...: `deltafin serve --port 0 ARGS...` on a free loopback
# port, its output in $TMP/server.log; sets SERVER_PID and PORT.
start_server() {
  : >"$TMP/server.log"  # exists before the first poll (the background redirect may not have run yet)
  "$BIN" serve --port 0 "$@" >"$TMP/server.log" 2>&1 &
  SERVER_PID=$!
  PORT=""
  for _ in $(seq 1 300); do
    PORT=$(sed -n 's/.*listening on http:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p' "$TMP/server.log")
    [[ -n "$PORT" ]] && return 0
    kill -0 "$SERVER_PID" 2>/dev/null || { cat "$TMP/server.log"; echo "server exited early"; exit 1; }
    sleep 0.1
  done
  cat "$TMP/server.log"; echo "server did not start"; exit 1
}
