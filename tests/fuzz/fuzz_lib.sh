# shellcheck shell=bash
# Shared by the fuzzing scripts (tests/e2e/fuzz_parsers.sh, tests/fuzz/*_fuzz.sh):
# builds the libFuzzer targets with Debian's clang (ASan + UBSan) and runs one for
# a bounded time. Source it; set SRC (the repository root) first.
#
#   fuzz_check_toolchain             -> 0, or 77 (and a reason on stderr) if clang/libFuzzer is missing
#   fuzz_build OUT TARGET...         -> OUT/TARGET for each TARGET in: tokenizer_json template
#   fuzz_run OUT TARGET SECONDS      -> fuzzes OUT/TARGET; 0, or 1 after printing the reproducer

FUZZ_CXX=${CXX:-clang++}
# shellcheck disable=SC2054  # commas inside -fsanitize=
FUZZ_FLAGS=(-std=c++20 -O1 -g1 -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined
            -I"$SRC/src")

# The sources each target needs, besides tests/fuzz/TARGET_fuzz.cpp.
fuzz_sources() {
  local f
  case "$1" in
    tokenizer_json)
      for f in byte_level unicode_normalize tokenizer_json pair_merges added_tokens json_bpe_model tokenizer \
               pattern utf8 rank_table rank_file specials bpe; do echo "src/tokenizer/$f.cpp"; done
      echo src/core/files.cpp; echo src/core/thread_pool.cpp ;;
    template)
      for f in "$SRC"/src/template/*.cpp; do echo "${f#"$SRC"/}"; done; echo src/core/files.cpp ;;
    *) echo "fuzz_lib: unknown target $1" >&2; return 1 ;;
  esac
}

fuzz_libs() {
  case "$1" in
    tokenizer_json) echo "$(pkg-config --libs libpcre2-8 icu-uc libxxhash fmt) -lpthread" ;;
    template) pkg-config --libs fmt ;;
  esac
}

fuzz_check_toolchain() {
  command -v "$FUZZ_CXX" >/dev/null || { echo "skip: $FUZZ_CXX not found (apt-get install clang libclang-rt-dev)" >&2; return 77; }
  local t; t=$(mktemp -d)
  printf 'extern "C" int LLVMFuzzerTestOneInput(const char*, unsigned long) { return 0; }\n' >"$t/probe.cpp"
  if ! "$FUZZ_CXX" -fsanitize=fuzzer,address,undefined "$t/probe.cpp" -o "$t/probe" 2>"$t/err"; then
    echo "skip: $FUZZ_CXX cannot link libFuzzer with ASan/UBSan (apt-get install libclang-rt-dev):" >&2
    head -3 "$t/err" >&2; rm -rf "$t"; return 77
  fi
  rm -rf "$t"
}

# Compiles every object of the given targets once, in parallel (nproc jobs), then links.
fuzz_build() {
  local out=$1; shift
  mkdir -p "$out/obj"
  local cflags; read -ra cflags < <(pkg-config --cflags libpcre2-8 icu-uc)
  local t f srcs=()
  for t in "$@"; do
    srcs+=("tests/fuzz/${t}_fuzz.cpp")
    while read -r f; do srcs+=("$f"); done < <(fuzz_sources "$t")
  done
  # One object per source file, shared by the targets that use it.
  local jobs running=0 failed=0 unique
  jobs=$(nproc)
  mapfile -t unique < <(printf '%s\n' "${srcs[@]}" | sort -u)
  for f in "${unique[@]}"; do
    if ((running >= jobs)); then wait -n || failed=1; ((running--)); fi
    "$FUZZ_CXX" "${FUZZ_FLAGS[@]}" "${cflags[@]}" -c "$SRC/$f" -o "$out/obj/${f//\//_}.o" &
    ((++running))
  done
  while ((running > 0)); do wait -n || failed=1; ((running--)); done
  ((failed == 0)) || { echo "fuzz_build: compiling failed" >&2; return 1; }
  for t in "$@"; do
    local objs=("$out/obj/tests_fuzz_${t}_fuzz.cpp.o") libs
    while read -r f; do objs+=("$out/obj/${f//\//_}.o"); done < <(fuzz_sources "$t")
    read -ra libs < <(fuzz_libs "$t")
    "$FUZZ_CXX" "${FUZZ_FLAGS[@]}" -fsanitize=fuzzer "${objs[@]}" -o "$out/$t" "${libs[@]}" || return 1
  done
}

# Fuzzes for SECONDS from the committed seeds (tests/fuzz/TARGET_corpus, never written
# to); new inputs go to OUT/corpus/TARGET, a crash, leak, timeout or out-of-memory input
# to OUT/artifacts/TARGET-*, the log to OUT/TARGET.log.
fuzz_run() {
  local out=$1 t=$2 secs=$3 max_len=8192 dict=()
  [[ $t == template ]] && max_len=16384
  [[ -f "$SRC/tests/fuzz/$t.dict" ]] && dict=(-dict="$SRC/tests/fuzz/$t.dict")
  mkdir -p "$out/corpus/$t" "$out/artifacts"
  local rc=0
  # libFuzzer's own failure codes (77 for a crash) would read as "skipped" to ctest.
  "$out/$t" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -max_len="$max_len" \
    -error_exitcode=1 -timeout_exitcode=1 -print_final_stats=1 "${dict[@]}" \
    -artifact_prefix="$out/artifacts/$t-" "$out/corpus/$t" "$SRC/tests/fuzz/${t}_corpus" >"$out/$t.log" 2>&1 || rc=$?
  grep -E '^(stat::number_of_executed_units|stat::peak_rss_mb|INFO: Loaded|Done )|(INITED|DONE) +cov:' "$out/$t.log" | \
    sed "s/^/  $t: /"
  if ((rc != 0)); then
    echo "FAIL: fuzzing $t (exit $rc); the end of its log ($out/$t.log):"
    tail -60 "$out/$t.log"
    local a
    for a in "$out/artifacts/$t-"*; do
      [[ -e $a ]] || continue
      echo "reproducer: $a ($(stat -c %s "$a") bytes); rerun: $out/$t $a"
      echo "  as base64: $(base64 -w0 "$a" | head -c 4000)"
    done
    return 1
  fi
}
