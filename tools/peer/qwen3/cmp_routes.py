#!/usr/bin/python3
"""Compare expert sets per (layer, position) of two route traces (JSON lines pos/layer/experts).
Usage: cmp_routes.py OURS.jsonl PEER.jsonl N_PROMPT N_LAYERS
The peer's last layer only runs on output rows (llama.cpp drops the other rows before it), so its
positions there are shifted by N_PROMPT-1. Prints the (layer,pos) pairs whose sets differ."""
import json, sys
n_prompt, n_layers = int(sys.argv[3]), int(sys.argv[4])
def load(p, shift_last):
    d = {}
    for line in open(p):
        r = json.loads(line)
        pos = r["pos"] + (n_prompt - 1 if shift_last and r["layer"] == n_layers - 1 else 0)
        d[(r["layer"], pos)] = frozenset(r["experts"])
    return d
a, b = load(sys.argv[1], False), load(sys.argv[2], True)
common = sorted(set(a) & set(b))
diff = [k for k in common if a[k] != b[k]]
print(f"{len(common)} (layer,pos) compared, {len(diff)} differ" + (": " + " ".join(f"L{l}@{p}:{sorted(a[(l,p)])}->{sorted(b[(l,p)])}" for l, p in diff[:6]) if diff else ""))
