#!/usr/bin/env bash
# `deltafin setup` against a local stand-in for the Hugging Face Hub
# (tests/hub/hub_server.py, loopback only): a `small` checkpoint in the Hub's
# layout (paged listing, LFS SHA-256s, redirects to a CDN path, Range) becomes
# a store whose logits are memcmp-identical to `prepare` from the same
# checkpoint; then the faults: a connection dropped mid-shard, a byte flipped
# in transit, 404 and 500, a token required, SIGKILL at random points, and a
# disk too small (refused before a byte is downloaded); and --stream (run
# before the experts are local, then setup --resume).
# Usage: setup_hub.sh <deltafin-binary> <source-dir>
set -euo pipefail
BIN=$(realpath "$1")
SRC=$(realpath "$2")
T=$(mktemp -d)
REPO=deltafin-test/k3-small
# start_server, stop_server, same_logits, fail, P (the prompt).
# shellcheck source=../hub/hub_test_lib.sh
source "$SRC/tests/hub/hub_test_lib.sh"
cleanup() {
  stop_server
  mountpoint -q "$T/small-disk" 2> /dev/null && umount "$T/small-disk" || true
  rm -rf "$T"
}
trap cleanup EXIT

# --- small: setup is prepare, byte for byte -------------------------------
"$BIN" make-model --preset small --out "$T/small" --seed 5 > /dev/null
mkdir -p "$T/small/figures" && echo "not part of the checkpoint" > "$T/small/figures/readme.txt"
mkdir -p "$T/ref-d" "$T/d1"
"$BIN" prepare --quiet --model "$T/small" --out "$T/ref" --drive "$T/ref-d:1000"
"$BIN" run --store "$T/ref" "${P[@]}" --dump-logits "$T/small.bin" > /dev/null
start_server "$T/small" --page-size 7
"$BIN" setup --repo "$REPO" --endpoint "$URL" --out "$T/s1" --drive "$T/d1:1000" --chunk-mb 4 --connections 4 \
  2> "$T/s1.err" || { cat "$T/s1.err"; fail "setup of small"; }
grep -q "1 files in subfolders are not part of the checkpoint: skipped" "$T/s1.err" || fail "subfolder not skipped"
grep -q "disk .*needed" "$T/s1.err" || fail "no disk-space plan printed"
same_logits "$T/s1" "$T/small.bin"
[[ ! -e "$T/s1/.setup" ]] || fail ".setup left behind after a finished setup"
grep -q "\"dir\": *\"$URL/$REPO@" "$T/s1/manifest.json" || grep -q "\"dir\":\"$URL/$REPO@" "$T/s1/manifest.json" \
  || fail "manifest does not name the source repository"
"$BIN" doctor --full --store "$T/s1" > /dev/null
# A rerun on the complete store does nothing.
"$BIN" setup --repo "$REPO" --endpoint "$URL" --out "$T/s1" --drive "$T/d1:1000" 2>&1 | grep -q "already complete" \
  || fail "rerun on a complete store"
echo "ok - small: setup's store gives prepare's logits"

# --- tiny: faults ---------------------------------------------------------
"$BIN" make-model --preset tiny --out "$T/tiny" --seed 9 > /dev/null
mkdir -p "$T/tref-d"
"$BIN" prepare --quiet --model "$T/tiny" --out "$T/tref" --drive "$T/tref-d:1000"
"$BIN" run --store "$T/tref" "${P[@]}" --dump-logits "$T/tiny.bin" > /dev/null
shard=$(cd "$T/tiny" && ls *.safetensors | sort | tail -1)
size=$(stat -c %s "$T/tiny/$shard")

# A connection dropped mid-shard and a flipped byte: resumed, re-fetched, identical.
start_server "$T/tiny" --drop "$shard:$((size / 3))" --flip "$shard:$((size / 2))"
mkdir -p "$T/d2"
"$BIN" setup --repo "$REPO" --endpoint "$URL" --out "$T/s2" --drive "$T/d2:1000" --chunk-mb 64 --connections 1 \
  --retry-backoff-ms 50 2> "$T/s2.err" || { cat "$T/s2.err"; fail "setup with a dropped connection and a flipped byte"; }
grep -q "$shard: .*; retry 1 of 5 in 0.1 s from byte" "$T/s2.err" || { cat "$T/s2.err"; fail "no resume logged"; }
grep -q "$shard: checksum mismatch (SHA-256 .* in the listing, .* downloaded); fetching the file again" "$T/s2.err" \
  || { cat "$T/s2.err"; fail "flipped byte not caught"; }
same_logits "$T/s2" "$T/tiny.bin"
echo "ok - dropped connection resumed, flipped byte re-fetched, logits identical"

# 404 (no such revision, no such repository) and 500, with the URL and status.
start_server "$T/tiny" --status config.json:500
mkdir -p "$T/d3"
expect_error() {  # expect_error PATTERN setup-args...
  local pat=$1; shift
  if "$BIN" setup --endpoint "$URL" --drive "$T/d3" --retry-backoff-ms 20 "$@" > "$T/e.out" 2> "$T/e.err"; then
    fail "setup $* succeeded"
  fi
  grep -q -- "$pat" "$T/e.err" || { cat "$T/e.err"; fail "expected '$pat'"; }
}
expect_error "revision 'no-such-branch' does not exist in $REPO" --repo "$REPO@no-such-branch" --out "$T/e1"
expect_error "HTTP 404 (RepoNotFound" --repo deltafin-test/other --out "$T/e2"
expect_error "GET $URL/$REPO/resolve/[0-9a-f]*/config.json: HTTP 500 (Injected: injected failure 500)" \
  --repo "$REPO" --out "$T/e3"
expect_error "expected ORG/NAME" --repo "not-a-repo" --out "$T/e4"
echo "ok - 404 and 500 name the URL and the reason"

# A token required: refused without it, served with it.
start_server "$T/tiny" --token sekret
expect_error "authentication required" --repo "$REPO" --out "$T/e5"
echo sekret > "$T/token"
mkdir -p "$T/d5"
"$BIN" setup --quiet --repo "$REPO" --endpoint "$URL" --token-file "$T/token" --out "$T/s5" --drive "$T/d5:1000"
same_logits "$T/s5" "$T/tiny.bin"
echo "ok - token required and used"

# Streamed (the default): a shard is downloaded when the store first needs it
# and its space freed after the last unit that reads it, so the download
# never holds all three shards of `tiny` at once. Sampled while a slowed
# setup runs: the blocks allocated under .setup/checkpoint.
start_server "$T/tiny" --rate 4000000
mkdir -p "$T/d7"
"$BIN" setup --repo "$REPO" --endpoint "$URL" --out "$T/s7" --drive "$T/d7:1000" --pause-ms 100 2> "$T/s7.err" & pid=$!
peak_kb=0
while kill -0 "$pid" 2> /dev/null; do
  kb=$(du -sk "$T/s7/.setup/checkpoint" 2> /dev/null | cut -f1 || echo 0)
  (( ${kb:-0} > peak_kb )) && peak_kb=$kb
  sleep 0.02
done
wait "$pid" || { cat "$T/s7.err"; fail "streamed setup"; }
shards_kb=$(( $(cat "$T/tiny"/*.safetensors | wc -c) / 1024 ))
echo "streamed: at most ${peak_kb} KiB under .setup/checkpoint; the three shards are ${shards_kb} KiB"
(( peak_kb > shards_kb / 3 )) || fail "the sampler never saw a downloaded shard (${peak_kb} KiB)"
(( peak_kb < shards_kb * 3 / 4 )) || fail "streamed setup held ${peak_kb} KiB of ${shards_kb} KiB of shards at once"
grep -q "model-00001-of-00003.safetensors: .* downloaded and verified" "$T/s7.err" || fail "no per-shard line"
same_logits "$T/s7" "$T/tiny.bin"
# --keep-checkpoint: the whole checkpoint first, kept byte for byte.
"$BIN" setup --quiet --repo "$REPO" --endpoint "$URL" --out "$T/s8" --drive "$T/d7:1000" --keep-checkpoint
for f in "$T/tiny"/*; do cmp "$f" "$T/s8/.setup/checkpoint/$(basename "$f")"; done
same_logits "$T/s8" "$T/tiny.bin"
echo "ok - streamed setup holds at most two shards at once; --keep-checkpoint keeps the checkpoint"

# --keep-checkpoint checks each file's digest while the next one downloads: a
# byte flipped in the first shard (caught during the second's download) and
# one in the last (caught at the end) are both fetched again.
first=$(cd "$T/tiny" && ls *.safetensors | sort | head -1)
start_server "$T/tiny" --flip "$first:$(( $(stat -c %s "$T/tiny/$first") / 2 ))" --flip "$shard:$((size / 3))"
mkdir -p "$T/d8f"
"$BIN" setup --repo "$REPO" --endpoint "$URL" --out "$T/s8f" --drive "$T/d8f:1000" --keep-checkpoint 2> "$T/s8f.err" \
  || { cat "$T/s8f.err"; fail "--keep-checkpoint with flipped bytes"; }
for f in "$first" "$shard"; do
  grep -q "$f: checksum mismatch (SHA-256 .* in the listing, .* downloaded); fetching the file again" "$T/s8f.err" \
    || { cat "$T/s8f.err"; fail "flipped byte in $f not caught"; }
done
for f in "$T/tiny"/*; do cmp "$f" "$T/s8f/.setup/checkpoint/$(basename "$f")"; done
same_logits "$T/s8f" "$T/tiny.bin"
echo "ok - --keep-checkpoint: flipped bytes in the first and the last shard caught and re-fetched"

# SIGKILL at random points (downloads slowed so kills land in them, then in
# prepare), rerun each time; the finished store passes doctor --full.
start_server "$T/tiny" --rate 2000000
mkdir -p "$T/d6"
ARGS=(setup --quiet --repo "$REPO" --endpoint "$URL" --out "$T/s6" --drive "$T/d6:1000" --chunk-mb 1 --connections 2
      --pause-ms 40)
# Files and records setup and prepare leave as they go: a kill lands once two
# to four more appeared (on a fast or a slow machine alike), or at a random
# early moment in the first round.
events() { { ls "$T/s6/.setup/state" "$T/s6/.setup/checkpoint" "$T/s6/.prepare/done" 2> /dev/null || true; } | wc -l; }
kills=0
for round in $(seq 1 20); do
  [[ $kills -ge 5 ]] && break
  target=$(( $(events) + 2 + RANDOM % 3 ))
  early=$(( round == 1 ? 1 + RANDOM % 30 : 0 ))
  "$BIN" "${ARGS[@]}" & pid=$!
  for _ in $(seq 1 3000); do
    sleep 0.01
    kill -0 "$pid" 2> /dev/null || break
    if (( early > 0 )); then early=$((early - 1)); (( early == 0 )) && break; continue; fi
    (( $(events) >= target )) && break
  done
  kill -9 "$pid" 2> /dev/null || true
  wait "$pid" 2> /dev/null || true
  [[ -f "$T/s6/manifest.json" ]] && { echo "round $round: finished before the kill"; break; }
  kills=$((kills + 1))
  echo "round $round: SIGKILL ($(ls "$T/s6/.setup/state" 2> /dev/null | grep -c verified) shards verified," \
       "$( { ls "$T/s6/.prepare/done" 2> /dev/null || true; } | wc -l) prepare records)"
  if "$BIN" run --store "$T/s6" --prompt-ids 1,2 --max-new 1 > /dev/null 2>&1; then fail "run accepted an incomplete store"; fi
done
[[ $kills -ge 5 ]] || fail "fewer than 5 kills landed mid-setup"
"$BIN" "${ARGS[@]}"
"$BIN" doctor --full --store "$T/s6" > /dev/null
same_logits "$T/s6" "$T/tiny.bin"
echo "ok - killed $kills times, resumed, doctor --full passes, logits identical"

# --- --stream: run before the experts are local ---------------------------
# setup installs the spine, the manifest and sparse packs only; `run` fetches
# each routed expert on first use (the store then holds exactly those, none of
# prefetch's guesses); the server gone mid-run is a clear error and a rerun
# with it back completes; `setup --resume` completes the store in place.
start_server "$T/tiny"
PORT=$(cat "$T/port")
mkdir -p "$T/d9"
"$BIN" setup --stream --repo "$REPO" --endpoint "$URL" --out "$T/s9" --drive "$T/d9:1000" 2> "$T/s9.err" \
  || { cat "$T/s9.err"; fail "setup --stream"; }
grep -q "ready to run; each expert is fetched from $URL on its first use" "$T/s9.err" || { cat "$T/s9.err"; fail "no ready line"; }
(( $(du -sk "$T/d9" | cut -f1) < 64 )) || fail "setup --stream wrote expert bytes ($(du -sk "$T/d9"))"
"$BIN" doctor --full --store "$T/s9" > "$T/doc9.txt" || { cat "$T/doc9.txt"; fail "doctor on a fresh streamed store"; }
grep -q "store: streamed .* 0 of [0-9]* experts local" "$T/doc9.txt" || { cat "$T/doc9.txt"; fail "doctor: not 0 local"; }
"$BIN" run --store "$T/s9" "${P[@]}" --dump-logits "$T/got.bin" --route-trace "$T/s9.trace" > /dev/null 2> "$T/r9.err" \
  || { cat "$T/r9.err"; fail "run on a streamed store"; }
grep -q "store: streamed, 0 of [0-9]* experts local" "$T/r9.err" || { cat "$T/r9.err"; fail "run did not say it starts with none local"; }
cmp "$T/got.bin" "$T/tiny.bin" || fail "logits of the streamed store differ from prepare's"
# fetched.log: 64-byte records, MoE index and expert at bytes 4 and 8.
python3 - "$T/s9" "$T/s9.trace" << 'PY' || fail "the streamed store does not hold exactly the routed experts"
import json, struct, sys
store, trace = sys.argv[1], sys.argv[2]
moe = json.load(open(store + "/manifest.json"))["model"]["moe_layers"]
routed = set()
for line in open(trace):
    r = json.loads(line)
    for e in r.get("experts", []):
        routed.add((moe.index(r["layer"]), e))
log = open(store + "/.stream/fetched.log", "rb").read()
local = {struct.unpack_from("<II", log, i + 4) for i in range(0, len(log), 64)}
print(f"streamed: {len(routed)} experts routed, {len(local)} fetched")
sys.exit(0 if routed == local and routed else 1)
PY
same_logits "$T/s9" "$T/tiny.bin"  # all local now: nothing fetched, same bytes
# The server killed while a run fetches (slowed so the kill lands mid-fetch).
P2=(--prompt-ids 11,12,13,14,15,16,17,18,19,20,21,22 --max-new 8 --print-ids --threads 2)
"$BIN" run --store "$T/tref" "${P2[@]}" --dump-logits "$T/tiny2.bin" > /dev/null
start_server "$T/tiny" --port "$PORT" --rate 100000
( sleep 1.5; kill "$SERVER_PID" ) &
if DELTAFIN_FETCH_RETRY_BACKOFF_MS=50 "$BIN" run --store "$T/s9" "${P2[@]}" > /dev/null 2> "$T/r10.err"; then
  fail "run succeeded with the server killed"
fi
wait
grep -q "error: layer [0-9]* expert [0-9]*: not local, and fetching it from $URL/$REPO@[0-9a-f]* failed: .*$URL/$REPO/resolve/" \
  "$T/r10.err" || { cat "$T/r10.err"; fail "no clear error naming the expert and the URL"; }
start_server "$T/tiny" --port "$PORT"
"$BIN" run --store "$T/s9" "${P2[@]}" --dump-logits "$T/got.bin" --stats --no-probe > /dev/null 2> "$T/r11.err" \
  || { cat "$T/r11.err"; fail "rerun"; }
cmp "$T/got.bin" "$T/tiny2.bin" || fail "logits after the interrupted run differ"
grep -q "store: streamed: [1-9][0-9]* experts fetched on first use in" "$T/r11.err" || { cat "$T/r11.err"; fail "no streamed stats"; }
"$BIN" setup --stream --repo "$REPO" --endpoint "$URL" --out "$T/s9" --drive "$T/d9:1000" 2>&1 | grep -q "is a streamed store" \
  || fail "setup again on a streamed store"
# setup --resume: every shard downloaded and verified, the rest written in place.
"$BIN" setup --resume --out "$T/s9" 2> "$T/s12.err" || { cat "$T/s12.err"; fail "setup --resume"; }
! grep -q '"stream"' "$T/s9/manifest.json" || fail "the completed manifest still has a stream section"
[[ ! -e "$T/s9/.setup" && ! -e "$T/s9/.stream" ]] || fail ".setup or .stream left behind"
"$BIN" doctor --full --store "$T/s9" > "$T/doc12.txt" || { cat "$T/doc12.txt"; fail "doctor --full after --resume"; }
same_logits "$T/s9" "$T/tiny.bin"
"$BIN" setup --resume --out "$T/s9" 2>&1 | grep -q "already complete" || fail "--resume on a complete store"
# Replicas: a fetched expert is written into every placement (doctor --full reads each copy).
mkdir -p "$T/d10a" "$T/d10b"
"$BIN" setup --quiet --stream --repo "$REPO" --endpoint "$URL" --out "$T/s10" --drive "$T/d10a:1000" \
  --drive "$T/d10b:1000" --replicate-hot all 2> /dev/null
same_logits "$T/s10" "$T/tiny.bin"
"$BIN" doctor --full --store "$T/s10" > "$T/doc10.txt" || { cat "$T/doc10.txt"; fail "doctor on a replicated streamed store"; }
[[ $(grep -cE "drive [01] expert checksums +PASS +[1-9][0-9]* spans match" "$T/doc10.txt") == 2 ]] \
  || { cat "$T/doc10.txt"; fail "a fetched expert is missing from a replica"; }
echo "ok - --stream: logits identical, exactly the routed experts fetched, server loss named, --resume completes"

# Too little disk: refused up front, nothing downloaded.
mkdir -p "$T/small-disk"
if mount -t tmpfs -o size=2m tmpfs "$T/small-disk" 2> /dev/null; then
  start_server "$T/tiny"
  expect_error "not enough disk space: $T/small-disk" --repo "$REPO" --out "$T/small-disk/store"
  [[ -z "$(find "$T/small-disk" -name '*.part' -o -name '*.safetensors')" ]] || fail "bytes downloaded before the refusal"
  umount "$T/small-disk"
  echo "ok - too little disk refused up front"
else
  echo "note: cannot mount a tmpfs here (not root): the disk-space refusal was not exercised"
fi
echo "PASS: setup_hub"
