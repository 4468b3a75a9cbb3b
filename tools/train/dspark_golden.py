"""DSpark proposals of the PyTorch reference (dspark_torch.py) on a synthetic checkpoint.

The target's hidden rows come from the independent K3 implementation (k3_torch.py, float64,
the partial sum after each listed layer); DSpark ingests them and proposes 7 ids after an
anchor for contexts of several lengths. The C++ test (tests/unit/draft_dspark_reference_test.cpp)
rebuilds both checkpoints with `deltafin make-model`, checks their SHA-256 against this file,
and must propose the same ids; on the synthetic context rows (the same BF16 inputs on both sides)
its hidden rows must agree within the stated tolerance.

    deltafin make-model --preset tiny --seed 5 --out /tmp/dsp/target
    deltafin make-model --preset dspark --target /tmp/dsp/target --seed 7 --out /tmp/dsp/dspark
    /usr/bin/python3 tools/train/dspark_golden.py /tmp/dsp/target /tmp/dsp/dspark tests/golden/dspark_pytorch.json
"""
import argparse
import json
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from checkpoint import bf16_bits, load_published, sha256_file  # noqa: E402
from dspark_torch import DSpark  # noqa: E402

LENGTHS = [1, 2, 7, 20, 63, 150, 333]
SEED = 20261201


def synthetic_rows(n, layers, hidden):
    """Context rows both sides can make exactly: a formula in float64, rounded to BF16."""
    p = np.arange(n, dtype=np.float64)[:, None, None]
    l = np.arange(layers, dtype=np.float64)[None, :, None]
    d = np.arange(hidden, dtype=np.float64)[None, None, :]
    v = 2.0 * np.sin(0.37 * p + 1.3 * l + 0.011 * d) + 0.5 * np.cos(0.05 * d * (l + 1))
    return torch.from_numpy(v.astype(np.float32)).to(torch.bfloat16).to(torch.float32)


def target_rows(model, ids, layers):
    trace = []
    with torch.no_grad():
        model(torch.tensor([ids]), exact=True, trace=trace)
    return torch.stack([trace[l]["p"][0] for l in layers], dim=1)   # [T, layers, H]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("target")
    ap.add_argument("dspark")
    ap.add_argument("out")
    a = ap.parse_args()
    torch.set_num_threads(1)
    target, cfg = load_published(a.target, torch.float64)
    embed = target.embed_tokens.weight.detach().to(torch.float32)
    lm_head = target.lm_head.weight.detach().to(torch.float32)
    rng = np.random.RandomState(SEED)
    cases = []
    for L in LENGTHS:
        ids = [int(x) for x in rng.randint(0, 256, size=L + 1)]
        for source in ("target", "synthetic"):
            ref = DSpark.load(a.dspark)
            if source == "target":
                rows = target_rows(target, ids[:L], ref.target_layers)
            else:
                rows = synthetic_rows(L, len(ref.target_layers), cfg.hidden_size)
            ref.ingest(rows)
            got, hid, logits = ref.propose(ids[L], 7, embed, lm_head)
            top2 = torch.topk(logits, 2, dim=-1).values
            case = {"rows": source, "context": ids[:L], "anchor": ids[L], "ids": got,
                    "gaps": [round(float(g), 6) for g in (top2[:, 0] - top2[:, 1])],
                    "hidden_bf16": "".join(f"{int(b):04x}" for b in bf16_bits(hid).reshape(-1))}
            if source == "target":   # the last position's target rows, to check the C++ capture
                case["last_rows_bf16"] = "".join(f"{int(b):04x}" for b in bf16_bits(rows[-1]).reshape(-1))
            cases.append(case)
    files = {os.path.join("target", f): sha256_file(os.path.join(a.target, f))
             for f in sorted(os.listdir(a.target)) if f.endswith(".safetensors") or f == "config.json"}
    files.update({os.path.join("dspark", f): sha256_file(os.path.join(a.dspark, f))
                  for f in ("config.json", "model.safetensors")})
    out = {"about": "DSpark proposals (7 ids after the anchor) and final-normed hidden rows [7][H] of the PyTorch "
                    "reference tools/train/dspark_torch.py. Context rows: 'target' = the partial sums of "
                    "tools/train/k3_torch.py (float64) on the context; 'synthetic' = a BF16 formula both sides "
                    "compute exactly (synthetic_rows). gaps = top-1 minus top-2 of the biased logits per drafted row.",
           "commands": ["deltafin make-model --preset tiny --seed 5 --out T",
                        "deltafin make-model --preset dspark --target T --seed 7 --out D",
                        "/usr/bin/python3 tools/train/dspark_golden.py T D tests/golden/dspark_pytorch.json"],
           "target_seed": 5, "dspark_seed": 7, "sha256": files, "cases": cases}
    with open(a.out, "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    print(f"{len(cases)} cases; smallest gap {min(min(c['gaps']) for c in cases):.4g}")


if __name__ == "__main__":
    main()
