#!/usr/bin/env bash
# The committed Qwen3 golden files (tests/golden/qwen3/) are what the float64
# PyTorch reference (tools/reference/qwen3_torch.py) computes today: rebuild
# every checkpoint, rerun the generator into a temp dir (regenerate.sh) and
# compare checkpoints (SHA-256), greedy ids and logits (max abs difference
# <= 1e-9 x max|logit|). Needs PyTorch (Debian python3-torch); without it the
# test is skipped (exit 77). The engine is checked against the committed files
# by Qwen3Reference.* (tests/unit/qwen3_reference_test.cpp).
# Usage: qwen3_torch_live.sh <deltafin-binary> <source-dir>
set -euo pipefail
BIN=$1; SRC=$2
/usr/bin/python3 -c "import torch, numpy" 2>/dev/null || { echo "SKIP: no PyTorch for /usr/bin/python3"; exit 77; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
bash "$SRC/tests/golden/qwen3/regenerate.sh" "$BIN" "$T" > /dev/null
/usr/bin/python3 - "$SRC/tests/golden/qwen3" "$T" <<'PY'
import glob, json, os, sys
import numpy as np
committed, fresh = sys.argv[1:3]
names = sorted(os.path.basename(p)[:-5] for p in glob.glob(os.path.join(committed, "*.json")))
made = sorted(os.path.basename(p)[:-5] for p in glob.glob(os.path.join(fresh, "*.json")))
# 3 presets x 3 seeds, plus the YaRN case: every committed file is one regenerate.sh makes.
assert len(names) == 10 and names == made, f"committed {names}, regenerated {made}"
for n in names:
    a, b = (json.load(open(os.path.join(d, n + ".json"))) for d in (committed, fresh))
    assert a["sha256"] == b["sha256"], f"{n}: the checkpoint differs from the one the golden file was made from"
    bad = [i for i, (x, y) in enumerate(zip(a["cases"], b["cases"])) if x["prompt"] != y["prompt"] or x["ids"] != y["ids"]]
    assert len(a["cases"]) == len(b["cases"]) and not bad, f"{n}: cases {bad} decode other ids"
    za, zb = (np.fromfile(os.path.join(d, n + ".logits.f32"), dtype="<f4").astype(np.float64) for d in (committed, fresh))
    assert za.shape == zb.shape, f"{n}: {za.shape} logits against {zb.shape}"
    diff, scale = np.max(np.abs(za - zb)), np.max(np.abs(za))
    assert diff <= 1e-9 * scale, f"{n}: logits differ by {diff} (max |logit| {scale})"
print(f"PASS: qwen3_torch_live ({len(names)} golden files)")
PY
