"""Golden greedy decodes of the Qwen3 reference (qwen3_torch.py) on a make-model checkpoint.

    deltafin make-model --preset qwen3-moe-tiny --seed 1 --out /tmp/q
    /usr/bin/python3 tools/reference/qwen3_golden.py /tmp/q tests/golden/qwen3/qwen3-moe-tiny-bf16-s1 --seed 1

Writes OUT_PREFIX.json: {"model_type", "preset", "expert_format", "seed", "sha256" (per shard),
"vocab", "steps", "cases": [{"prompt", "ids" (greedy, argmax ties to the lowest id), "gaps"
(top1 - top2 of each step's logits), "min_route_gap"}]} and OUT_PREFIX.logits.f32: little-endian
float32 [cases][steps][vocab], the float64 logits predicting each step's token (step 0: after the
prompt), rounded to fp32. The C++ side is tests/unit/qwen3_reference_test.cpp; regenerate all of
them with tests/golden/qwen3/regenerate.sh.
"""
import argparse
import json
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from qwen3_torch import Qwen3Reference, sha256_file, shard_names  # noqa: E402

LENGTHS = [5, 12, 23, 40]
STEPS = 16


def prompt(case, length, vocab):
    """A fixed token list: a quadratic walk over the ids, so every case differs."""
    return [(13 + 97 * case + 31 * i + 7 * i * i) % vocab for i in range(length)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("out_prefix")
    ap.add_argument("--seed", type=int, default=None, help="the make-model seed, recorded in the json")
    a = ap.parse_args()
    torch.set_num_threads(1)
    ref = Qwen3Reference(a.dir)
    cfg = ref.cfg
    cases, logits_out = [], []
    with torch.no_grad():
        for c, L in enumerate(LENGTHS):
            ctx = prompt(c, L, ref.vocab)
            ref.route_gaps = []
            ids, gaps = [], []
            for _ in range(STEPS):
                z = ref.forward(ctx + ids)[-1].numpy()  # full recompute: every row exact
                top2 = np.sort(z)[-2:]
                nxt = int(np.argmax(z))  # first maximum: ties to the lowest id
                ids.append(nxt)
                gaps.append(float(top2[1] - top2[0]))
                logits_out.append(z.astype("<f4"))
            cases.append({"prompt": ctx, "ids": ids, "gaps": gaps,
                          "min_route_gap": min(ref.route_gaps) if ref.route_gaps else None})
    doc = {"model_type": cfg["model_type"],
           "preset": cfg.get("deltafin_preset"),
           "expert_format": "fp8" if "quantization_config" in cfg else "bf16",
           "seed": a.seed,
           "sha256": {s: sha256_file(os.path.join(a.dir, s)) for s in shard_names(a.dir)},
           "vocab": ref.vocab,
           "steps": STEPS,
           "cases": cases}
    with open(a.out_prefix + ".json", "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    with open(a.out_prefix + ".logits.f32", "wb") as f:
        f.write(np.stack(logits_out).astype("<f4").tobytes())
    print(f"{a.out_prefix}: {len(cases)} cases, min gap {min(min(c['gaps']) for c in cases):.3g}")


if __name__ == "__main__":
    main()
