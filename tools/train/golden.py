"""Greedy reference tokens from the EXPORTED checkpoint, for the C++ engine to match.

  /usr/bin/python3 tools/train/golden.py models/demo tests/golden/demo_pytorch_tokens.json

Reads the published files back (BF16 widened exactly, MXFP4 experts dequantised
exactly), runs the model in float64 with the per-token KDA recurrence and
route-ordered expert sums, and decodes greedily (argmax, ties to the lowest
id). Prompts are line-aligned snippets of held-out corpus files, encoded with
the checkpoint's own tokenizer (specials disabled). For every step the file
records the gap between the best and second-best logit, so a divergence of an
fp32 engine can be judged against it. The run is repeated in float32 and the
agreement is reported in the file.
"""
import argparse
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import corpus  # noqa: E402
from bpe import Tokenizer  # noqa: E402
from checkpoint import load_published, sha256_file  # noqa: E402

N_NEW = 32


def prompts(tok, n=24, min_tokens=20, max_tokens=40):
    """Line-aligned snippets from held-out files (code and docs interleaved)."""
    _, held = corpus.split()
    code, docs = [], []
    for path in held:
        text = corpus.read(path)
        if len(text) < 3000:
            continue
        for frac in (0.3, 0.7):
            start = text.index("\n", int(len(text) * frac)) + 1
            lines, ids = "", []
            for line in text[start:].splitlines(keepends=True):
                if not line.strip() and not lines:
                    continue
                cand = lines + line
                cid = tok.encode(cand)
                if len(cid) > max_tokens:
                    break
                lines, ids = cand, cid
                if len(ids) >= min_tokens:
                    break
            if len(ids) >= min_tokens // 2:
                rel = os.path.relpath(path, corpus.PY_ROOT if path.endswith(".py") else corpus.DOC_ROOT)
                (code if path.endswith(".py") else docs).append({"source": f"{rel}@{start}", "text": lines, "ids": ids})
    out = []
    for a, b in zip(code, docs):
        out += [a, b]
    out += code[len(docs):] + docs[len(code):]
    return out[:n]


def argmax_lowest(v):
    m = v.max()
    return int((v == m).nonzero()[0, 0])


@torch.no_grad()
def greedy(model, prompt_ids, n_new):
    """All prompts at once, right-padded: causal, so a row's last real position is unaffected."""
    seqs = [list(p) for p in prompt_ids]
    gaps = [[] for _ in seqs]
    for _ in range(n_new):
        T = max(len(s) for s in seqs)
        x = torch.zeros(len(seqs), T, dtype=torch.long)
        for i, s in enumerate(seqs):
            x[i, :len(s)] = torch.tensor(s)
        logits = model(x, exact=True)
        for i, s in enumerate(seqs):
            v = logits[i, len(s) - 1]
            top2 = torch.topk(v, 2).values
            gaps[i].append(float(top2[0] - top2[1]))
            s.append(argmax_lowest(v))
    return [s[len(p):] for s, p in zip(seqs, prompt_ids)], gaps


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model_dir")
    ap.add_argument("out")
    ap.add_argument("--show", type=int, default=6)
    a = ap.parse_args()
    torch.set_num_threads(1)
    tok = Tokenizer.load(a.model_dir)
    ps = prompts(tok)
    model64, cfg = load_published(a.model_dir, torch.float64)
    new64, gaps = greedy(model64, [p["ids"] for p in ps], N_NEW)
    model32, _ = load_published(a.model_dir, torch.float32)
    new32, _ = greedy(model32, [p["ids"] for p in ps], N_NEW)
    same = sum(x == y for x, y in zip(new64, new32))
    shards = sorted(f for f in os.listdir(a.model_dir) if f.endswith(".safetensors"))
    out = {
        "about": "Greedy tokens of the PyTorch reference (tools/train/golden.py) on the exported checkpoint; "
                 "float64 activations, exact BF16/MXFP4 weights, per-token KDA recurrence, experts summed in "
                 "route order. gaps[i] = top-1 minus top-2 logit at step i (float64).",
        "command": f"/usr/bin/python3 tools/train/golden.py {a.model_dir} {a.out}",
        "checkpoint": {"dir": a.model_dir,
                       "config_sha256": sha256_file(os.path.join(a.model_dir, "config.json")),
                       "tiktoken_sha256": sha256_file(os.path.join(a.model_dir, "tiktoken.model")),
                       "shards": {s: sha256_file(os.path.join(a.model_dir, s)) for s in shards}},
        "precision": "float64",
        "new_tokens": N_NEW,
        "float32_rerun_identical_prompts": f"{same}/{len(ps)}",
        "prompts": [],
    }
    for p, g, gp, g32 in zip(ps, new64, gaps, new32):
        rec = {"source": p["source"], "text": p["text"], "ids": p["ids"], "greedy": g,
               "gaps": [round(x, 6) for x in gp], "min_gap": round(min(gp), 6),
               "completion_text": tok.decode(g)}
        if g32 != g:
            rec["float32_greedy"] = g32
        out["prompts"].append(rec)
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    with open(a.out, "w") as f:
        json.dump(out, f, indent=1, ensure_ascii=True)
        f.write("\n")
    print(f"{len(ps)} prompts x {N_NEW} tokens; float32 rerun identical for {same}/{len(ps)}; "
          f"smallest gap {min(min(g) for g in gaps):.3g}")
    for p, g in list(zip(ps, new64))[:a.show]:
        print("=" * 72)
        print(p["text"] + "\u2192" + tok.decode(g))


if __name__ == "__main__":
    main()
