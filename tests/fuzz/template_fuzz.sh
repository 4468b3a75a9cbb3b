#!/usr/bin/env bash
# Coverage-guided fuzzing of the chat-template engine (src/template/) with
# libFuzzer (Debian's clang, ASan + UBSan), by hand; CI runs it briefly as
# tests/e2e/fuzz_parsers.sh.
# Usage: bash tests/fuzz/template_fuzz.sh [SECONDS=60] [OUT_DIR=/tmp/deltafin-fuzz-template]
# Fuzzes from the committed seeds in tests/fuzz/template_corpus (new finds go to
# OUT_DIR/corpus/template, crashes to OUT_DIR/artifacts/template-*).
# Needs clang and libclang-rt-dev.
set -euo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${2:-/tmp/deltafin-fuzz-template}
source "$SRC/tests/fuzz/fuzz_lib.sh"
fuzz_check_toolchain || exit 1
fuzz_build "$OUT" template
fuzz_run "$OUT" template "${1:-60}"
