#!/usr/bin/env bash
# Coverage-guided fuzzing of the tokenizer.json reader with libFuzzer (Debian's
# clang, ASan + UBSan), by hand; CI runs it briefly as tests/e2e/fuzz_parsers.sh.
# Usage: bash tests/fuzz/tokenizer_json_fuzz.sh [SECONDS=60] [OUT_DIR=/tmp/deltafin-fuzz-tokenizer-json]
# Fuzzes from the committed seeds in tests/fuzz/tokenizer_json_corpus (new finds go
# to OUT_DIR/corpus/tokenizer_json, crashes to OUT_DIR/artifacts/tokenizer_json-*).
# Needs clang and libclang-rt-dev.
set -euo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${2:-/tmp/deltafin-fuzz-tokenizer-json}
source "$SRC/tests/fuzz/fuzz_lib.sh"
fuzz_check_toolchain || exit 1
fuzz_build "$OUT" tokenizer_json
fuzz_run "$OUT" tokenizer_json "${1:-60}"
