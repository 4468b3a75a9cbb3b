#!/usr/bin/env bash
# `deltafin serve` driven by the official openai npm package (tests/server),
# and its /v1/messages by the official @anthropic-ai/sdk (anthropic_test.mjs):
# chat and completions (streaming and not), models, 20+ refused requests,
# 413/405/404, the FIFO queue (twenty clients, one leaving, 429 when full),
# keep-alive, /metrics, disconnects, API keys, a refused non-loopback bind,
# conversation state reuse, seeded sampling (reproducible, identical with
# drafting), and SIGTERM shutdown. Loopback only.
# Usage: bash server_openai_client.sh <deltafin-binary> <source-dir>
set -euo pipefail
BIN=$(realpath "$1")
SRC=$(realpath "$2")
TMP=$(mktemp -d)
source "$SRC/tests/server/serve.sh"

"$BIN" make-model --preset tiny --out "$TMP/tiny" --seed 7 >/dev/null

# Starts a server on the tiny model (tests/server/serve.sh); sets SERVER_PID and PORT.
start_tiny() { start_server --model "$TMP/tiny" --threads 1 "$@"; }

# SIGTERM: the server must stop accepting, finish, and exit 0.
stop_server() {
  kill -TERM "$SERVER_PID"
  local rc=0
  wait "$SERVER_PID" || rc=$?
  SERVER_PID=""
  if [[ $rc -ne 0 ]] || ! grep -q "deltafin serve: stopped" "$TMP/server.log"; then
    cat "$TMP/server.log"; echo "server did not shut down cleanly (rc $rc)"; exit 1
  fi
}

client() { node "$SRC/tests/server/client_test.mjs" "$@"; }

start_tiny
client main "http://127.0.0.1:$PORT/v1" deltafin
node "$SRC/tests/server/anthropic_test.mjs" "http://127.0.0.1:$PORT" deltafin
# Output equals `deltafin run` for the same prompt and limit (when run takes text prompts).
if "$BIN" run --model "$TMP/tiny" --prompt "x" --max-new 1 >/dev/null 2>&1; then
  want=$("$BIN" run --model "$TMP/tiny" --threads 1 --prompt "Once upon a time" --max-new 12)
  got=$(node -e 'fetch(process.argv[1], {method: "POST", body: JSON.stringify({prompt: "Once upon a time", max_tokens: 12})})
        .then((r) => r.json()).then((j) => process.stdout.write(j.choices[0].text))' "http://127.0.0.1:$PORT/v1/completions")
  [[ "$got" == "$want" ]] || { echo "server text differs from deltafin run: '$got' vs '$want'"; exit 1; }
  echo "ok - completion text equals deltafin run"
fi
stop_server

start_tiny --queue 32
client queue "http://127.0.0.1:$PORT/v1" deltafin
stop_server

start_tiny --queue 1
client full "http://127.0.0.1:$PORT/v1" deltafin
stop_server

# Seeded sampling reproduces, and drafting does not change it.
start_tiny --memo-entries 0
plain=$(client sample "http://127.0.0.1:$PORT/v1" deltafin | tee /dev/stderr | tail -n 1)
stop_server
start_tiny --memo-entries 0 --draft ngram --draft-max 4
drafted=$(client sample "http://127.0.0.1:$PORT/v1" deltafin | tail -n 1)
stop_server
[[ "$plain" == "$drafted" ]] || { echo "seeded sampling differs with drafting: $plain vs $drafted"; exit 1; }
echo "ok - seeded sampling: identical with --draft ngram"

start_tiny --memo-entries 0
client reuse "http://127.0.0.1:$PORT/v1" deltafin
stop_server

start_tiny --api-key "test-key-123" --model-name k3-test
client auth "http://127.0.0.1:$PORT/v1" k3-test test-key-123
# Anthropic clients send x-api-key: the right key is served, a wrong one is a 401 in Anthropic's shape.
node -e '
const [url, key] = process.argv.slice(1);
const post = (k) => fetch(url, { method: "POST", headers: { "x-api-key": k, "content-type": "application/json" },
  body: JSON.stringify({ model: "k3-test", max_tokens: 2, messages: [{ role: "user", content: "hi" }] }) });
(async () => {
  const good = await post(key);
  if (good.status !== 200) throw new Error(`right key: ${good.status} ${await good.text()}`);
  const bad = await post("wrong");
  const j = await bad.json();
  if (bad.status !== 401 || j.type !== "error" || j.error.type !== "authentication_error") throw new Error(JSON.stringify(j));
  console.log("ok - /v1/messages: x-api-key accepted, a wrong key is 401 authentication_error");
})().catch((e) => { console.error(`not ok - ${e}`); process.exit(1); });' "http://127.0.0.1:$PORT/v1/messages" test-key-123
stop_server

# SIGTERM during a stream: the client gets an error frame, the server exits 0.
start_tiny
node "$SRC/tests/server/client_test.mjs" shutdown "http://127.0.0.1:$PORT/v1" deltafin "" "$SERVER_PID"
rc=0
wait "$SERVER_PID" || rc=$?
SERVER_PID=""
[[ $rc -eq 0 ]] && grep -q "deltafin serve: stopped" "$TMP/server.log" || { cat "$TMP/server.log"; echo "no clean exit after SIGTERM (rc $rc)"; exit 1; }
echo "ok - server exited cleanly after SIGTERM mid-stream"

# A non-loopback bind without a key is refused before anything is served.
if "$BIN" serve --model "$TMP/tiny" --host 0.0.0.0 --port 0 >"$TMP/refuse.log" 2>&1; then
  echo "non-loopback bind without --api-key was not refused"; exit 1
fi
grep -q "refusing to serve it without --api-key" "$TMP/refuse.log" || { cat "$TMP/refuse.log"; exit 1; }
echo "ok - non-loopback bind without --api-key refused"
echo "server_openai_client: all passed"
