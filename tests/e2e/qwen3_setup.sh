#!/usr/bin/env bash
# `deltafin setup` of a Qwen3-MoE repository (FP8 experts) from the local Hub
# stand-in (tests/hub/hub_server.py): a full setup and a streamed one (experts
# fetched on first use, named as the qwen3_moe family names them) both give
# the logits of `prepare` from the same checkpoint, byte for byte.
# Usage: qwen3_setup.sh <deltafin-binary> <source-dir>
set -euo pipefail
BIN=$(realpath "$1")
SRC=$(realpath "$2")
T=$(mktemp -d)
REPO=deltafin-test/qwen3-moe-tiny-fp8
# shellcheck source=../hub/hub_test_lib.sh
source "$SRC/tests/hub/hub_test_lib.sh"
trap 'stop_server; rm -rf "$T"' EXIT

"$BIN" make-model --preset qwen3-moe-tiny --expert-format fp8 --seed 8 --out "$T/q" > /dev/null
mkdir -p "$T/ref-d" "$T/d1" "$T/d2"
"$BIN" prepare --quiet --model "$T/q" --out "$T/ref" --drive "$T/ref-d:1000"
"$BIN" run --store "$T/ref" "${P[@]}" --dump-logits "$T/ref.bin" > /dev/null
start_server "$T/q"
"$BIN" setup --repo "$REPO" --endpoint "$URL" --out "$T/s1" --drive "$T/d1:1000" 2> "$T/s1.err" \
  || { cat "$T/s1.err"; fail "setup of a qwen3_moe repository"; }
same_logits "$T/s1" "$T/ref.bin" || fail "setup's store gives other logits than prepare's"
"$BIN" setup --stream --repo "$REPO" --endpoint "$URL" --out "$T/s2" --drive "$T/d2:1000" 2> "$T/s2.err" \
  || { cat "$T/s2.err"; fail "setup --stream of a qwen3_moe repository"; }
same_logits "$T/s2" "$T/ref.bin" || fail "the streamed store gives other logits than prepare's"
grep -q '"expert_format": "fp8_block"' "$T/s2/manifest.json" || fail "the streamed store's manifest has no expert format"
echo "PASS: qwen3_setup"
