#!/usr/bin/env bash
# `deltafin render-chat` reproduces K3's chat template: for every conversation
# in tests/chat/cases.json the rendered text equals what Debian's
# python3-jinja2 renders from tests/chat/Kimi-K3.chat-template.jinja, the
# segments follow docs/design/tokenizer.md, and the ids are the segments encoded one by one.
# Usage: bash chat_template.sh <deltafin-binary> <source-dir>
set -euo pipefail
bin=$1; src=$2
/usr/bin/python3 -c 'import jinja2' 2>/dev/null || { echo "error: python3-jinja2 is not installed (scripts/bootstrap.sh)"; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
exec /usr/bin/python3 "$src/tests/chat/check_render.py" "$bin" "$src/models/demo" "$work"
