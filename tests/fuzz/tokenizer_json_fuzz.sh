#!/usr/bin/env bash
# Coverage-guided fuzzing of the tokenizer.json reader with libFuzzer (Debian's
# clang, ASan + UBSan). Not a ctest test: run it by hand.
# Usage: bash tests/fuzz/tokenizer_json_fuzz.sh [SECONDS=60] [OUT_DIR=/tmp/deltafin-fuzz-tokenizer-json]
# Builds the target from the tokenizer sources, then fuzzes starting from the
# committed seeds in tests/fuzz/tokenizer_json_corpus (new finds go to
# OUT_DIR/corpus, crashes to OUT_DIR/crash-*). Needs clang and libclang-rt-dev.
set -euo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
SECONDS_TO_RUN=${1:-60}
OUT=${2:-/tmp/deltafin-fuzz-tokenizer-json}
CXX=${CXX:-clang++}
command -v "$CXX" >/dev/null || { echo "error: $CXX not found (apt-get install clang libclang-rt-dev)"; exit 1; }
mkdir -p "$OUT/obj" "$OUT/corpus"
FLAGS=(-std=c++20 -O1 -g -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined
       -I"$SRC/src" $(pkg-config --cflags libpcre2-8 icu-uc))
objs=()
for f in byte_level unicode_normalize tokenizer_json pair_merges added_tokens json_bpe_model tokenizer pattern \
         utf8 rank_table rank_file specials bpe; do
  objs+=("$OUT/obj/$f.o")
  "$CXX" "${FLAGS[@]}" -c "$SRC/src/tokenizer/$f.cpp" -o "$OUT/obj/$f.o" &
done
for f in files thread_pool; do
  objs+=("$OUT/obj/core_$f.o")
  "$CXX" "${FLAGS[@]}" -c "$SRC/src/core/$f.cpp" -o "$OUT/obj/core_$f.o" &
done
wait
"$CXX" "${FLAGS[@]}" -fsanitize=fuzzer "$SRC/tests/fuzz/tokenizer_json_fuzz.cpp" "${objs[@]}" -o "$OUT/fuzz" \
  $(pkg-config --libs libpcre2-8 icu-uc libxxhash fmt) -lpthread
cd "$OUT"
./fuzz -max_total_time="$SECONDS_TO_RUN" -max_len=8192 -timeout=10 -rss_limit_mb=4096 \
  corpus "$SRC/tests/fuzz/tokenizer_json_corpus"
