#!/usr/bin/env python3
"""Drafting on a set of prompts: one `deltafin bench` session per prompt with
the arms `off` (--draft off) and `on` (--draft MODE), each checked against the
token oracle; prints per prompt the decode tok/s of both (median of the
reps), their ratio and the emitted tokens per target pass.

usage: draft_prompts.py DELTAFIN (--model DIR | --store S) PROMPTS.json
           [--indices 0,1,...] [--draft auto] [--reps 6] [--warmup 1]
           [--max-new 256] [--threads 2] [--out DIR]

PROMPTS.json: tests/golden/demo_pytorch_tokens.json (its "prompts", each
with "ids" and "source").
"""
import argparse
import json
import os
import subprocess
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("deltafin")
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--model")
    src.add_argument("--store")
    ap.add_argument("prompts")
    ap.add_argument("--indices", default="0,1,2,3,4,5,6,7,8,9")
    ap.add_argument("--draft", default="auto")
    ap.add_argument("--reps", type=int, default=6)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--max-new", type=int, default=256)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", default="bench-results/draft-prompts")
    o = ap.parse_args()
    prompts = json.load(open(o.prompts))["prompts"]
    rows = []
    for i in (int(x) for x in o.indices.split(",")):
        p = prompts[i]
        out = os.path.join(o.out, f"prompt-{i}")
        cmd = [o.deltafin, "bench", "--model" if o.model else "--store", o.model or o.store,
               "--prompt-ids", ",".join(map(str, p["ids"])), "--max-new", str(o.max_new),
               "--reps", str(o.reps), "--warmup", str(o.warmup), "--threads", str(o.threads),
               "--arm", "off=--draft off", "--arm", f"on=--draft {o.draft}", "--out", out,
               "--probe-seconds", "0.2"]
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if r.returncode != 0:
            sys.stdout.write(r.stdout)
            sys.exit(f"prompt {i}: deltafin bench exited {r.returncode}")
        arms = {a["name"]: a for a in json.load(open(os.path.join(out, "summary.json")))["arms"]}
        off, on = arms["off"], arms["on"]
        ratio = on["decode_tok_s"][0] / off["decode_tok_s"][0]
        rows.append(dict(index=i, source=p["source"], off=off["decode_tok_s"][0], on=on["decode_tok_s"][0],
                         ratio=ratio, tokens_per_pass=on["tokens_per_pass"],
                         oracle="ok" if not on["rejected"] else on["rejection"]))
        print(f"prompt {i:>2} {p['source'][:40]:<40} off {off['decode_tok_s'][0]:8.1f} tok/s  "
              f"{o.draft} {on['decode_tok_s'][0]:8.1f} tok/s  x{ratio:.3f}  {on['tokens_per_pass']:.2f} tok/pass",
              flush=True)
    ratios = [r["ratio"] for r in rows]
    geo = 1.0
    for x in ratios:
        geo *= x
    geo **= 1.0 / len(ratios)
    print(f"{len(rows)} prompts: ratio min {min(ratios):.3f}, geometric mean {geo:.3f}, max {max(ratios):.3f}; "
          f"tokens per pass mean {sum(r['tokens_per_pass'] for r in rows) / len(rows):.2f}")
    json.dump(rows, open(os.path.join(o.out, "prompts.json"), "w"), indent=1)


if __name__ == "__main__":
    main()
