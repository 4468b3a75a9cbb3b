#!/usr/bin/env bash
# Installs tests/server's npm packages (package-lock.json) once. Several e2e
# tests call this at the same time under `ctest -j`: a lock keeps two
# `npm ci` runs from writing the same node_modules.
# Usage: bash tests/server/ensure_modules.sh <source-dir>
set -euo pipefail
DIR=$(realpath "$1")/tests/server
have() {
  for m in openai @anthropic-ai/sdk puppeteer-core; do [[ -f "$DIR/node_modules/$m/package.json" ]] || return 1; done
}
have && exit 0
exec 9>"${TMPDIR:-/tmp}/deltafin-tests-server-npm.lock"
flock 9
have || npm ci --prefix "$DIR" --no-audit --no-fund >/dev/null
