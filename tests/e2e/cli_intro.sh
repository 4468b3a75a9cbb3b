#!/usr/bin/env bash
# The binary introduces itself: `deltafin` alone lists every command, one line
# each; `--version` prints the version, commit, build type and SIMD target;
# every command's --help ends with an example, and the examples that need no
# real model run as written.
set -euo pipefail
bin=$(realpath "$1"); src=$(realpath "$2")
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# The commands, as CLI11's own --help lists them.
"$bin" --help > "$tmp/help.txt"
mapfile -t cmds < <(awk '/^Subcommands:/{s=1; next} s && /^  [a-z]/{print $1}' "$tmp/help.txt")
((${#cmds[@]} >= 15)) || fail "only ${#cmds[@]} commands in --help"

"$bin" > "$tmp/alone.txt" || fail "deltafin alone exited $?"
for c in "${cmds[@]}"; do
  n=$(grep -c "^  $c  " "$tmp/alone.txt" || true)
  [[ $n == 1 ]] || fail "deltafin alone lists '$c' $n times"
done
grep -q '^Usage: deltafin <command>' "$tmp/alone.txt" || fail "no usage line"

"$bin" --version > "$tmp/version.txt"
grep -Eq '^deltafin [0-9]+\.[0-9]+\.[0-9]+$' "$tmp/version.txt" || fail "no version line: $(cat "$tmp/version.txt")"
grep -Eq '^commit: ([0-9a-f]{12}(-dirty)?|unknown)$' "$tmp/version.txt" || fail "no commit line"
grep -Eq '^build: [A-Za-z]+' "$tmp/version.txt" || fail "no build line"
grep -Eq '^simd target: [A-Z0-9_]+' "$tmp/version.txt" || fail "no simd line"
if git -C "$src" rev-parse --short=12 HEAD > "$tmp/head" 2>/dev/null; then
  grep -q "^commit: $(cat "$tmp/head")" "$tmp/version.txt" || fail "commit is not HEAD $(cat "$tmp/head")"
fi

ran=0
for c in "${cmds[@]}"; do
  "$bin" "$c" --help > "$tmp/h.txt" || fail "$c --help exited $?"
  ex=$(awk 'f{print; exit} /^Examples?:$/{f=1}' "$tmp/h.txt")
  [[ $ex == "  deltafin $c "* ]] || fail "$c --help has no example that starts 'deltafin $c' (got '$ex')"
  # Only the examples (indented lines) follow the heading: it ends the help.
  awk 'f && NF && !/^  /{bad=1} /^Examples?:$/{f=1} END{exit bad}' "$tmp/h.txt" ||
    fail "$c --help: the examples are not at its end"
  # Run the examples that need only the demo model or a scratch directory.
  case "$c" in
    inspect|make-model|run)
      cmd=${ex#  deltafin }
      cmd=${cmd//\/tmp\//$tmp/}
      (cd "$src" && eval "\"$bin\" $cmd") > "$tmp/ex.out" 2> "$tmp/ex.err" || fail "example of $c failed: $(cat "$tmp/ex.err")"
      [[ -s $tmp/ex.out || -s $tmp/ex.err ]] || fail "example of $c printed nothing"
      ran=$((ran + 1))
      ;;
  esac
done
[[ $ran == 3 ]] || fail "ran $ran examples, expected 3"
echo "ok: ${#cmds[@]} commands listed, version printed, every --help ends with an example ($ran run)"
