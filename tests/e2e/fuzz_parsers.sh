#!/usr/bin/env bash
# Coverage-guided fuzzing (libFuzzer, ASan + UBSan) of the two parsers that read
# untrusted files: tokenizer.json (src/tokenizer/tokenizer_json.cpp) and chat
# templates (src/template/). Builds both targets once, then fuzzes each for
# DELTAFIN_FUZZ_SECONDS (default 30; side by side where there are 2 cores) from the committed seeds in tests/fuzz/*_corpus.
# Fails on any crash, sanitizer report, leak, timeout or out-of-memory input,
# printing the reproducer. Exit 77 (skipped) without clang or libFuzzer.
# Usage: bash tests/e2e/fuzz_parsers.sh <deltafin-binary (unused)> <source-dir>
set -euo pipefail
SRC=$(cd "${2:-$(dirname "$0")/../..}" && pwd)
SECONDS_EACH=${DELTAFIN_FUZZ_SECONDS:-30}
# shellcheck source=../fuzz/fuzz_lib.sh
source "$SRC/tests/fuzz/fuzz_lib.sh"
fuzz_check_toolchain || exit $?

# One run at a time on a machine: each fuzzer wants a core of its own for its budget.
exec 9>"${TMPDIR:-/tmp}/deltafin-fuzz-parsers.lock"
flock 9

OUT=$(mktemp -d "${TMPDIR:-/tmp}/deltafin-fuzz-parsers.XXXXXX")
keep=0  # set on failure: the reproducers stay
trap '((keep)) || rm -rf "$OUT"' EXIT

start=$SECONDS
fuzz_build "$OUT" tokenizer_json template
echo "built both fuzz targets in $((SECONDS - start)) s"

# The two fuzzers side by side (one core each), each printing its summary when done.
t0=$SECONDS
parallel=$(($(nproc) >= 2))
run() { fuzz_run "$OUT" "$1" "$SECONDS_EACH" >"$OUT/$1.summary" 2>&1 || touch "$OUT/$1.failed"; }
for t in tokenizer_json template; do
  if ((parallel)); then run "$t" & else run "$t"; fi
done
wait
cat "$OUT/tokenizer_json.summary" "$OUT/template.summary"
echo "fuzzed for $((SECONDS - t0)) s; total $((SECONDS - start)) s"
if compgen -G "$OUT/*.failed" >/dev/null; then
  # shellcheck disable=SC2034  # read by the EXIT trap
  keep=1
  echo "FAIL: a fuzzer found an input that crashes, leaks or hangs (kept $OUT)"
  exit 1
fi
echo "fuzz_parsers: no crash, leak or timeout found"
