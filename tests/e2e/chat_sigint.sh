#!/usr/bin/env bash
# `deltafin chat` and SIGINT (issue 37), driven through a fifo: a SIGINT
# while an answer is being written stops it and returns to the prompt (the
# chat goes on: the next turn reuses the state the interrupted one left),
# the next line is answered, and closing stdin ends the chat with exit 0. A
# SIGINT at the prompt leaves, with exit 0.
# Usage: chat_sigint.sh <deltafin-binary> <source-dir>
set -euo pipefail
BIN=$1
SRC=$2
MODEL=$SRC/models/demo
T=$(mktemp -d)
pid=
cleanup() {
  exec 3>&- 2> /dev/null || true
  [[ -n $pid ]] && kill "$pid" 2> /dev/null || true
  rm -rf "$T"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; echo "--- stdout:"; cat "$T/out.txt" 2>/dev/null || true; echo "--- stderr:"; cat "$T/err.txt" 2>/dev/null || true; exit 1; }
# Waits (up to 60 s) until `grep -q PATTERN FILE` holds.
await() {
  for _ in $(seq 1 1200); do
    grep -q -- "$1" "$2" 2> /dev/null && return 0
    kill -0 "$pid" 2> /dev/null || return 1
    sleep 0.05
  done
  return 1
}

mkfifo "$T/in"
# Sampling at temperature 2 keeps the demo model writing (it would stop only
# at --max-new), so the SIGINT surely comes while it answers; the turn after
# it is cut at a small --max-new (/set) to stay short.
"$BIN" chat --model "$MODEL" --threads 2 --max-new 1000000 --temperature 2 --seed 1 --stats \
  < "$T/in" > "$T/out.txt" 2> "$T/err.txt" &
pid=$!
exec 3> "$T/in"
echo 'Explain `make_archive` in detail, with examples.' >&3
# The answer has begun: some of its reasoning is out.
await '^Thinking' "$T/out.txt" || fail "the answer never started"
for _ in $(seq 1 400); do (( $(wc -c < "$T/out.txt") > 40 )) && break; sleep 0.02; done
kill -INT "$pid"
await '^\[interrupted' "$T/err.txt" || fail "SIGINT during the answer did not stop it"
await '^turn 1: ' "$T/err.txt" || fail "no stats for the interrupted turn"
kill -0 "$pid" 2> /dev/null || fail "the chat exited on a SIGINT during an answer"

echo '/set max-new 40' >&3
echo 'What does `urljoin` do?' >&3
await '^turn 2: ' "$T/err.txt" || fail "the turn after the SIGINT was not answered"
gen2=$(sed -n 's/^turn 2: .*; \([0-9]*\) tokens generated.*/\1/p' "$T/err.txt")
(( gen2 > 0 && gen2 <= 40 )) || fail "the turn after the SIGINT generated $gen2 tokens"
# What the interrupted turn left (its prompt at least) is reused.
prompt1=$(sed -n 's/^turn 1: prefilled \([0-9]*\) new tokens.*/\1/p' "$T/err.txt")
reused2=$(sed -n 's/^turn 2: prefilled [0-9]* new tokens (\([0-9]*\) reused).*/\1/p' "$T/err.txt")
(( reused2 >= prompt1 )) || fail "the turn after the SIGINT reused $reused2 tokens, less than the $prompt1 of the prompt before"
exec 3>&-
for _ in $(seq 1 400); do kill -0 "$pid" 2> /dev/null || break; sleep 0.05; done
kill -0 "$pid" 2> /dev/null && fail "the chat did not end at the end of input"
rc=0; wait "$pid" || rc=$?
pid=
[[ $rc == 0 ]] || fail "exit $rc at the end of input, want 0"
grep -F -q '<|' "$T/out.txt" && fail "control-token text in the output"
grep -q '^Set max-new to 40\.$' "$T/out.txt" || fail "/set did not answer"

# A SIGINT at the prompt ends the chat (exit 0).
"$BIN" chat --model "$MODEL" --threads 2 --max-new 20 --stats < "$T/in" > "$T/out.txt" 2> "$T/err.txt" &
pid=$!
exec 3> "$T/in"
echo 'Hi' >&3
await '^turn 1: ' "$T/err.txt" || fail "the one turn was not answered"
sleep 0.3
kill -INT "$pid"
for _ in $(seq 1 400); do kill -0 "$pid" 2> /dev/null || break; sleep 0.05; done
kill -0 "$pid" 2> /dev/null && fail "a SIGINT at the prompt did not end the chat"
rc=0; wait "$pid" || rc=$?
pid=
[[ $rc == 0 ]] || fail "exit $rc after a SIGINT at the prompt, want 0"
echo "PASS: chat_sigint"
