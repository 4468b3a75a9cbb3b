#!/usr/bin/env bash
# The chat-template interpreter (src/template/) against python3-jinja2 with
# transformers' settings, one language piece at a time: every snippet of
# tests/template/snippets.json renders byte for byte the same, or both fail.
# Usage: bash jinja_language.sh <deltafin-binary> <source-dir>
set -euo pipefail
bin=$1; src=$2
/usr/bin/python3 -c 'import jinja2' 2>/dev/null || { echo "error: python3-jinja2 is not installed (scripts/bootstrap.sh)"; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
exec /usr/bin/python3 "$src/tests/template/check_snippets.py" "$bin" "$work"
