#!/usr/bin/env bash
# Two independent implementations agree: the C++ engine's 32 greedy tokens on
# the shipped demo model equal the PyTorch model's (tools/train/golden.py), and
# the C++ tokenizer encodes every golden prompt to the same ids.
set -euo pipefail
bin=$1; src=$2
exec python3 "$src/tools/train/compare_engine.py" "$bin" "$src/tests/golden/demo_pytorch_tokens.json" \
  --model "$src/models/demo"
