# Shared by the e2e scripts that run `deltafin setup` against the Hub stand-in
# (tests/e2e/setup_hub.sh, tests/e2e/setup_network_faults.sh); sourced, not run.
# The caller sets BIN, SRC, T (its scratch directory) and REPO before use.

SERVER_PID=""
P=(--prompt-ids 3,1,4,1,5,9,2,6 --max-new 5 --print-ids --threads 2)

fail() { echo "FAIL: $*"; exit 1; }

stop_server() {
  [[ -n "$SERVER_PID" ]] && { kill "$SERVER_PID" 2> /dev/null || true; wait "$SERVER_PID" 2> /dev/null || true; }
  SERVER_PID=""
}

# start_server ROOT [hub_server options]: sets SERVER_PID and URL.
start_server() {
  local root=$1; shift
  stop_server
  rm -f "$T/port"
  python3 "$SRC/tests/hub/hub_server.py" --root "$root" --repo "$REPO" --port-file "$T/port" "$@" \
    2> "$T/server.log" &
  SERVER_PID=$!
  for _ in $(seq 1 500); do [[ -f "$T/port" ]] && break; sleep 0.02; done
  [[ -f "$T/port" ]] || { cat "$T/server.log"; echo "FAIL: hub_server did not start"; exit 1; }
  URL="http://127.0.0.1:$(cat "$T/port")"
}

# same_logits STORE REF_BIN: run --store gives the reference's logits byte for byte.
same_logits() {
  "$BIN" run --store "$1" "${P[@]}" --dump-logits "$T/got.bin" > "$T/got.txt"
  cmp "$T/got.bin" "$2"
}
