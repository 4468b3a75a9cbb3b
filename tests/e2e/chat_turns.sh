#!/usr/bin/env bash
# `deltafin chat` driven through a pipe on the demo model (issue 37): three
# turns, the second and third prefilling only the new turn (--stats: each
# reuses every token the previous turn left in the session, its prompt is the
# whole conversation rendered from scratch by `render-chat`), no control
# token in the output, /save writing a request render-chat reads, and the
# first answer equal to `run --chat` with the same prompt (same rendering,
# same greedy tokens, same display). `run --chat --raw` keeps the rendered
# stream.
# Usage: chat_turns.sh <deltafin-binary> <source-dir>
set -euo pipefail
BIN=$1
SRC=$2
MODEL=$SRC/models/demo
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; echo "--- stdout:"; cat "$T/out.txt" 2>/dev/null || true; echo "--- stderr:"; cat "$T/err.txt" 2>/dev/null || true; exit 1; }

Q1='What does `urlsplit` do?'
Q2='Explain `make_archive`.'
Q3='What does `urljoin` do?'
printf '%s\n%s\n/help\n%s\n/save %s\n' "$Q1" "$Q2" "$Q3" "$T/conv.json" |
  "$BIN" chat --model "$MODEL" --threads 2 --max-new 300 --stats > "$T/out.txt" 2> "$T/err.txt" || fail "chat exited $?"

grep -F -q '<|' "$T/out.txt" && fail "control-token text in the chat output"
grep -q '^  /reset' "$T/out.txt" || fail "/help did not list the commands"
[[ $(grep -c '^Thinking\.\.\.$' "$T/out.txt") == 3 ]] || fail "not three answers with their reasoning marked"
[[ $(grep -c '^\.\.\.done thinking\.$' "$T/out.txt") == 3 ]] || fail "not three reasoning blocks closed"
grep -q "^Saved 6 messages to $T/conv.json\.$" "$T/out.txt" || fail "/save did not write 6 messages"

# turn N: prefilled A new tokens (B reused) in X s; G tokens generated, ...
stat() { sed -n "s/^turn $1: prefilled \([0-9]*\) new tokens (\([0-9]*\) reused).*; \([0-9]*\) tokens generated.*/\\$2/p" "$T/err.txt"; }
for n in 1 2 3; do [[ -n $(stat $n 1) ]] || fail "no stats line for turn $n"; done
[[ $(stat 1 2) == 0 ]] || fail "turn 1 reused $(stat 1 2) tokens"
# The rendered prompt of turn n: messages[0 .. 2n-2] of the saved conversation.
rendered() {
  python3 - "$T/conv.json" "$1" > "$T/msgs.json" <<'EOF'
import json, sys
conv = json.load(open(sys.argv[1]))
print(json.dumps(conv["messages"][: 2 * int(sys.argv[2]) - 1]))
EOF
  "$BIN" render-chat --tokenizer "$MODEL" --messages "$(cat "$T/msgs.json")" --json |
    python3 -c 'import json, sys; print(len(json.load(sys.stdin)["ids"]))'
}
for n in 1 2 3; do
  a=$(stat $n 1); b=$(stat $n 2)
  want=$(rendered $n)
  (( a + b == want )) || fail "turn $n: $a prefilled + $b reused is not the $want tokens of the conversation rendered afresh"
done
for n in 2 3; do
  p=$((n - 1))
  # The previous turn's prompt and answer are in the session, its last token (the end of the message) pending.
  held=$(( $(stat $p 1) + $(stat $p 2) + $(stat $p 3) - 1 ))
  [[ $(stat $n 2) == "$held" ]] || fail "turn $n reused $(stat $n 2) tokens, want the $held the previous turn left"
done

# One turn through chat is `run --chat` with the same prompt.
printf '%s\n' "$Q1" | "$BIN" chat --model "$MODEL" --threads 2 --max-new 300 > "$T/chat1.txt" 2> "$T/err.txt" ||
  fail "chat (one turn) exited $?"
"$BIN" run --model "$MODEL" --threads 2 --max-new 300 --chat --prompt "$Q1" > "$T/run.txt" 2> "$T/err.txt" ||
  fail "run --chat exited $?"
grep -F -q '<|' "$T/run.txt" && fail "control-token text in run --chat's output"
printf '\n' >> "$T/run.txt"
cmp -s "$T/chat1.txt" "$T/run.txt" || { diff "$T/chat1.txt" "$T/run.txt" | head -20; fail "chat's first answer differs from run --chat"; }
"$BIN" run --model "$MODEL" --threads 2 --max-new 300 --chat --raw --prompt "$Q1" > "$T/raw.txt" 2> "$T/err.txt" ||
  fail "run --chat --raw exited $?"
grep -F -q '<|close|>think<|sep|><|open|>response<|sep|>' "$T/raw.txt" || fail "--raw does not show the rendered stream"
grep -F -q '<|end_of_msg|>' "$T/raw.txt" || fail "--raw does not show the end of the message"
echo "PASS: chat_turns"
