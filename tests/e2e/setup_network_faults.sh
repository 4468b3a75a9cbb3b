#!/usr/bin/env bash
# `deltafin setup` and a streamed store's expert fetches on a flaky network,
# against the Hub stand-in (tests/hub/hub_server.py) with a fault plan per
# path: a TCP reset mid-file (a small file, a shard, and mid-chunk with
# --connections 4), a stall mid-body, 503/502/429 answers then success; each
# ends with a store whose logits equal prepare's, and each retry is resumed by
# a Range request from the last byte written (the server's request log shows
# where). A failure that outlasts the retries ends with the URL, the bytes
# done and the command that resumes; that command, with the network back,
# continues from those bytes. The same for experts fetched on first use.
# Short backoffs and stall timeouts keep it fast.
# Usage: setup_network_faults.sh <deltafin-binary> <source-dir>
set -euo pipefail
BIN=$(realpath "$1")
SRC=$(realpath "$2")
T=$(mktemp -d)
REPO=deltafin-test/k3-tiny
# shellcheck source=../hub/hub_test_lib.sh
source "$SRC/tests/hub/hub_test_lib.sh"
trap 'stop_server; rm -rf "$T"' EXIT
FAST=(--retries 3 --retry-backoff-ms 50 --stall-timeout 2)

"$BIN" make-model --preset tiny --out "$T/tiny" --seed 9 > /dev/null
mkdir -p "$T/ref-d"
"$BIN" prepare --quiet --model "$T/tiny" --out "$T/ref" --drive "$T/ref-d:1000"
"$BIN" run --store "$T/ref" "${P[@]}" --dump-logits "$T/tiny.bin" > /dev/null
S1=model-00001-of-00003.safetensors
S2=model-00002-of-00003.safetensors
S3=model-00003-of-00003.safetensors
IDX=model.safetensors.index.json
size() { stat -c %s "$T/tiny/$1"; }
MiB=1048576

# resumed_from FILE END LOW HIGH: the start of a request for FILE's bytes up
# to END that began in (LOW, HIGH] (a retry from the bytes already written),
# or nothing.
resumed_from() {
  awk -v f="$1" -v e="$2" -v lo="$3" -v hi="$4" '$1 == f && $3 == e && $2 > lo && $2 <= hi { print $2; exit }' "$T/req.log"
}
# setup_ok NAME [setup args]: a fresh setup into $T/NAME that must succeed.
setup_ok() {
  local name=$1; shift
  mkdir -p "$T/$name-d"
  "$BIN" setup --repo "$REPO" --endpoint "$URL" --out "$T/$name" --drive "$T/$name-d:1000" "${FAST[@]}" "$@" \
    2> "$T/$name.err" || { cat "$T/$name.err"; fail "setup $name"; }
}

# --- resets mid-file: a small file and a shard, one chunk each --------------
rm -f "$T/req.log"
start_server "$T/tiny" --request-log "$T/req.log" --reset "$IDX:65536" --reset "$S3:$((2 * MiB))"
setup_ok a
for f in "$IDX" "$S3"; do
  grep -q "setup: $f: GET $URL/.*: .*reset.*; retry 1 of 3 in 0.1 s from byte [0-9]*" "$T/a.err" \
    || { cat "$T/a.err"; fail "no retry line for the reset in $f"; }
done
[[ -n $(resumed_from "$IDX" $(( $(size "$IDX") - 1 )) 0 65536) ]] || { cat "$T/req.log"; fail "$IDX not resumed by Range"; }
[[ -n $(resumed_from "$S3" $(( $(size "$S3") - 1 )) 8 $((2 * MiB))) ]] || { cat "$T/req.log"; fail "$S3 not resumed by Range"; }
same_logits "$T/a" "$T/tiny.bin"
echo "ok - a reset mid-file (a small file, a shard): resumed by Range, logits identical"

# --- a reset mid-chunk with 4 connections on 1 MiB chunks ------------------
rm -f "$T/req.log"
start_server "$T/tiny" --request-log "$T/req.log" --reset "$S2:$((MiB + MiB / 2))"
setup_ok b --chunk-mb 1 --connections 4
grep -q "setup: $S2: GET .*reset.*; retry 1 of 3 in 0.1 s from byte" "$T/b.err" || { cat "$T/b.err"; fail "no retry line"; }
[[ -n $(resumed_from "$S2" $((2 * MiB - 1)) "$MiB" $((MiB + MiB / 2))) ]] \
  || { cat "$T/req.log"; fail "chunk 1 of $S2 not resumed from its last byte"; }
same_logits "$T/b" "$T/tiny.bin"
echo "ok - a reset mid-chunk with --connections 4: that chunk resumed, logits identical"

# --- a stall mid-body: detected by the stall timeout, resumed --------------
rm -f "$T/req.log"
start_server "$T/tiny" --request-log "$T/req.log" --stall "$S1:$((MiB + 12345)):8"
setup_ok c
grep -q "setup: $S1: GET .*stalled: no data for 2 s.*; retry 1 of 3 in 0.1 s from byte" "$T/c.err" \
  || { cat "$T/c.err"; fail "stall not detected"; }
[[ -n $(resumed_from "$S1" $(( $(size "$S1") - 1 )) 8 $((MiB + 12345))) ]] || { cat "$T/req.log"; fail "stall not resumed"; }
same_logits "$T/c" "$T/tiny.bin"
echo "ok - a stall mid-body: detected after --stall-timeout, resumed, logits identical"

# --- 503, 502 and 429, then success (the API's requests too) ---------------
start_server "$T/tiny" --status-first "@revision:503:1" --status-first "@tree:429:1" \
  --status-first "config.json:502:1" --status-first "$S1:503:2"
setup_ok d
for pat in "revision/main: HTTP 503.*; retry 1 of 3" "tree/[0-9a-f]*?recursive=true: HTTP 429.*; retry 1 of 3" \
           "config.json: HTTP 502.*; retry 1 of 3" "resolve/[0-9a-f]*/$S1: HTTP 503 (Injected: injected failure 503); retry 2 of 3"; do
  grep -q "$pat" "$T/d.err" || { cat "$T/d.err"; fail "no retry line matching '$pat'"; }
done
same_logits "$T/d" "$T/tiny.bin"
echo "ok - 503, 502 and 429 retried after a backoff, logits identical"

# --- a 404 is not retried --------------------------------------------------
start_server "$T/tiny" --status "config.json:404"
mkdir -p "$T/e-d"
if "$BIN" setup --repo "$REPO" --endpoint "$URL" --out "$T/e" --drive "$T/e-d" "${FAST[@]}" 2> "$T/e.err"; then
  fail "setup succeeded with a 404"
fi
grep -q "config.json: HTTP 404 (Injected: injected failure 404)" "$T/e.err" || { cat "$T/e.err"; fail "404 not named"; }
! grep -q "; retry [0-9]" "$T/e.err" || { cat "$T/e.err"; fail "a 404 was retried"; }
grep -q "error: GET .*config.json: HTTP 404 (Injected: injected failure 404) for bytes 0-[0-9]*$" "$T/e.err" || { cat "$T/e.err"; fail "a 404 message changed"; }
echo "ok - a 404 fails at once"

# --- a permanent failure: the message, then the command it names resumes ----
start_server "$T/tiny" --reset "$S1:1000000:always"
PORT=$(cat "$T/port")
mkdir -p "$T/f-d"
if "$BIN" setup --repo "$REPO" --endpoint "$URL" --out "$T/f" --drive "$T/f-d:1000" --retries 2 --retry-backoff-ms 50 \
  --stall-timeout 2 2> "$T/f.err"; then
  fail "setup succeeded against a server that always resets"
fi
[[ $(grep -c "setup: $S1: .*; retry [0-9] of 2" "$T/f.err") == 2 ]] || { cat "$T/f.err"; fail "not exactly 2 retries"; }
msg=$(grep "error:" "$T/f.err" | tail -1)
echo "$msg" | grep -q "GET $URL/$REPO/resolve/[0-9a-f]*/$S1 (bytes [0-9]*-[0-9]*): .* (gave up after 2 retries); [0-9]* of $(size "$S1") bytes of $S1 are on disk and kept; \`deltafin setup .*\` resumes from there" \
  || { cat "$T/f.err"; fail "the final message lacks the URL, the bytes done or the command"; }
done_bytes=$(echo "$msg" | sed -n "s/.*; \([0-9]*\) of $(size "$S1") bytes of $S1 are on disk.*/\1/p")
(( done_bytes > 0 )) || fail "no bytes kept ($done_bytes)"
cmd=$(echo "$msg" | sed -n 's/.*`\(deltafin setup [^`]*\)` resumes from there.*/\1/p')
[[ "$cmd" == *"--retries 2"* && "$cmd" == *"--out $T/f"* && "$cmd" == *"--drive $T/f-d:1000"* ]] || fail "resume command: $cmd"
rm -f "$T/req.log"
start_server "$T/tiny" --port "$PORT" --request-log "$T/req.log"
eval "\"$BIN\" ${cmd#deltafin }" 2> "$T/f2.err" || { cat "$T/f2.err"; fail "the named command did not resume"; }
first=$(awk -v f="$S1" -v e=$(( $(size "$S1") - 1 )) '$1 == f && $3 == e { print $2; exit }' "$T/req.log")
[[ "$first" == "$done_bytes" ]] || { cat "$T/req.log"; fail "the rerun asked for $S1 from byte $first, not $done_bytes"; }
same_logits "$T/f" "$T/tiny.bin"
echo "ok - a permanent failure names the URL, $done_bytes bytes kept and the command; that command resumes from them"

# --- --stream: the spine's ranges, then experts fetched on first use --------
# A reset 100000 bytes into the first response for a shard that is longer (the
# headers are shorter: a spine range), resumed from its last byte.
rm -f "$T/req.log"
start_server "$T/tiny" --request-log "$T/req.log" --reset "$S2:+100000"
PORT=$(cat "$T/port")
mkdir -p "$T/g-d"
"$BIN" setup --stream --repo "$REPO" --endpoint "$URL" --out "$T/g" --drive "$T/g-d:1000" "${FAST[@]}" 2> "$T/g0.err" \
  || { cat "$T/g0.err"; fail "setup --stream"; }
from=$(sed -n "s/^setup: $S2: GET .*reset.*; retry 1 of 3 in 0.1 s from byte \([0-9]*\)$/\1/p" "$T/g0.err")
[[ -n "$from" ]] && (( from > 100000 )) || { cat "$T/g0.err"; fail "no retry of a spine range"; }
awk -v f="$S2" -v b="$from" '$1 == f && $2 == b { ok = 1 } END { exit !ok }' "$T/req.log" \
  || { cat "$T/req.log"; fail "the spine range was not resumed from byte $from"; }
start_server "$T/tiny" --port "$PORT" --reset "*:+200:3" --stall "*:+100:6:1" --status-first "*:503:2"
DELTAFIN_FETCH_RETRY_BACKOFF_MS=50 DELTAFIN_FETCH_STALL_TIMEOUT=2 \
  "$BIN" run --store "$T/g" "${P[@]}" --dump-logits "$T/got.bin" > /dev/null 2> "$T/g.err" \
  || { cat "$T/g.err"; fail "run on a streamed store over a flaky network"; }
for pat in "reset" "stalled: no data for 2 s" "HTTP 503"; do
  grep -q "^fetch: layer [0-9]* expert [0-9]*: GET $URL/.*$pat.*; retry [0-9] of 5 in 0.1 s from byte" "$T/g.err" \
    || { cat "$T/g.err"; fail "no fetch retry line for '$pat'"; }
done
cmp "$T/got.bin" "$T/tiny.bin" || fail "logits of the streamed store differ from prepare's"
echo "ok - --stream: a spine range resumed; expert fetches retried through resets, a stall and 503s; logits identical"

# A permanent failure of a fetch: named, then a rerun with the network back.
P2=(--prompt-ids 11,12,13,14,15,16,17,18,19,20,21,22 --max-new 8 --print-ids --threads 2)
"$BIN" run --store "$T/ref" "${P2[@]}" --dump-logits "$T/tiny2.bin" > /dev/null
start_server "$T/tiny" --port "$PORT" --status-first "*:503:always"
if DELTAFIN_FETCH_RETRIES=2 DELTAFIN_FETCH_RETRY_BACKOFF_MS=50 "$BIN" run --store "$T/g" "${P2[@]}" > /dev/null \
  2> "$T/h.err"; then
  fail "run succeeded with every fetch refused"
fi
grep -q "error: layer [0-9]* expert [0-9]*: not local, and fetching it from $URL/$REPO@[0-9a-f]* failed: GET $URL/$REPO/resolve/[0-9a-f]*/model-.*: HTTP 503 .* (gave up after 2 retries); 0 of the piece's [0-9]* bytes arrived (the experts fetched so far are kept; run again" \
  "$T/h.err" || { cat "$T/h.err"; fail "the fetch failure lacks the URL, the retries or the bytes"; }
DELTAFIN_FETCH_RETRIES=x "$BIN" run --store "$T/g" "${P2[@]}" > /dev/null 2> "$T/h2.err" && fail "a bad DELTAFIN_FETCH_RETRIES was taken"
grep -q "DELTAFIN_FETCH_RETRIES=x" "$T/h2.err" || { cat "$T/h2.err"; fail "a bad DELTAFIN_FETCH_RETRIES not named"; }
start_server "$T/tiny" --port "$PORT"
"$BIN" run --store "$T/g" "${P2[@]}" --dump-logits "$T/got.bin" > /dev/null 2> "$T/h3.err" || { cat "$T/h3.err"; fail "rerun"; }
cmp "$T/got.bin" "$T/tiny2.bin" || fail "logits after the failed fetch differ"
echo "ok - a fetch that outlasts its retries is named; a rerun with the network back completes"
echo "PASS: setup_network_faults"
