"""Compares the C++ engine's greedy tokens (and tokenizer) with a golden file.

  python3 tools/train/compare_engine.py build/deltafin tests/golden/demo_pytorch_tokens.json [--model DIR]

Needs no PyTorch. For every prompt: `deltafin run --prompt-ids ... --max-new N
--print-ids` must reproduce the golden ids; a divergence is reported with the
golden top-1/top-2 logit gap at that step (a near-tie explains it). Also checks
that `deltafin tokenize` encodes each prompt's text to the golden prompt ids.
Exit status 0 only if everything matches.
"""
import argparse
import json
import subprocess
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("deltafin")
    ap.add_argument("golden")
    ap.add_argument("--model", help="checkpoint dir (default: the one named in the golden file)")
    ap.add_argument("--near-tie", type=float, default=1e-3)
    a = ap.parse_args()
    with open(a.golden) as f:
        g = json.load(f)
    model = a.model or g["checkpoint"]["dir"]
    n_new = g["new_tokens"]
    bad = explained = tok_bad = 0
    for i, p in enumerate(g["prompts"]):
        enc = subprocess.run([a.deltafin, "tokenize", "--tokenizer", model, "--text", p["text"]],
                             capture_output=True, text=True)
        ids = json.loads(enc.stdout) if enc.returncode == 0 else None
        if ids != p["ids"]:
            tok_bad += 1
            print(f"prompt {i}: tokenizer differs: engine {ids} golden {p['ids']} ({enc.stderr.strip()})")
        run = subprocess.run([a.deltafin, "run", "--model", model, "--prompt-ids", ",".join(map(str, p["ids"])),
                              "--max-new", str(n_new), "--print-ids"], capture_output=True, text=True)
        if run.returncode != 0:
            bad += 1
            print(f"prompt {i}: engine failed: {run.stderr.strip()}")
            continue
        got = [int(x) for x in run.stdout.split()]
        if got == p["greedy"]:
            continue
        k = next((j for j, (x, y) in enumerate(zip(got, p["greedy"])) if x != y), min(len(got), len(p["greedy"])))
        gap = p["gaps"][k] if k < len(p["gaps"]) else None
        tie = gap is not None and gap < a.near_tie
        explained += tie
        bad += not tie
        print(f"prompt {i}: diverges at step {k}: engine {got[k:k + 4]} golden {p['greedy'][k:k + 4]}; "
              f"golden top1-top2 gap there {gap} ({'near-tie' if tie else 'NOT a near-tie'})")
    n = len(g["prompts"])
    print(f"{n - bad - explained}/{n} prompts identical, {explained} diverge at a near-tie (< {a.near_tie}), "
          f"{bad} unexplained; tokenizer mismatches: {tok_bad}")
    sys.exit(1 if bad or tok_bad else 0)


if __name__ == "__main__":
    main()
