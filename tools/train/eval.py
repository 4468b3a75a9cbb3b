"""Held-out measurements for docs/design/demo-model.md.

  /usr/bin/python3 tools/train/eval.py --target models/demo --draft models/demo-draft \
      --trained /tmp/k3train/target.pt --trained-draft /tmp/k3train/draft.pt --out /tmp/k3train/eval.json

All on --windows non-overlapping 64-token windows spread evenly over the
held-out token stream (train.py's split; 400 of its 1,981 windows), float32, exact routing (stable sort, route
order sums):
  * loss (nats/token) of the exported checkpoints (BF16 spine + MXFP4 experts)
    and, given the training checkpoints, of the fp32 weights before the QAT
    phase, those weights with experts quantised post-training (PTQ), and the
    final fp32 weights;
  * the drafter's teacher-forced argmax agreement with the target;
  * per MoE layer: expert load skew (max/mean, min/mean, unused experts,
    normalised entropy of the load distribution);
  * next-layer expert prediction: layer L+1's router applied to a state
    available after layer L, recall of the true top-k set.
"""
import argparse
import json
import math
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import corpus  # noqa: E402
import mxfp4  # noqa: E402
from checkpoint import load_published  # noqa: E402
from export import load_trained  # noqa: E402
from k3_torch import depth_mix, rmsnorm  # noqa: E402
from train import token_arrays  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def windows(held, seq, n):
    """n non-overlapping windows spread evenly over the whole held-out stream."""
    total = (len(held) - 1) // seq
    n = min(n, total)
    starts = [(j * total // n) * seq for j in range(n)]
    x = torch.from_numpy(np.stack([held[s:s + seq] for s in starts])).long()
    y = torch.from_numpy(np.stack([held[s + 1:s + seq + 1] for s in starts])).long()
    return x, y


@torch.no_grad()
def run(model, x, bs, trace_fn=None):
    """Yields (logits, trace) per batch."""
    model.eval()
    for i in range(0, len(x), bs):
        tr = [] if trace_fn else None
        logits = model(x[i:i + bs], exact=True, trace=tr)
        yield i, logits, tr


@torch.no_grad()
def loss_of(model, x, y, bs):
    tot, n = 0.0, 0
    for i, logits, _ in run(model, x, bs):
        tot += F.cross_entropy(logits.reshape(-1, logits.shape[-1]).double(), y[i:i + bs].reshape(-1),
                               reduction="sum").item()
        n += y[i:i + bs].numel()
    return tot / n


def quantise_experts(model):
    with torch.no_grad():
        for m in model.moes():
            for part in ("w1", "w2", "w3"):
                w = getattr(m, part)
                w.copy_(mxfp4.quantize_dequantize(w.detach()))
    return model


def topk_set(model_moe, x):
    topi, _, _ = model_moe.route(x.reshape(-1, x.shape[-1]), exact=True)
    return topi


@torch.no_grad()
def routing_stats(model, x, bs):
    c = model.c
    E, k = c.num_experts, c.num_experts_per_token
    moe_layers = [l for l, L in enumerate(model.layers) if not L.dense]
    loads = {l: torch.zeros(E) for l in moe_layers}
    hits = {(l, v): 0 for l in moe_layers[:-1] for v in ("router_input", "mixed_state")}
    total = 0
    for _, _, tr in run(model, x, bs, trace_fn=True):
        sets = {}
        for l in moe_layers:
            ids = topk_set(model.layers[l].block_sparse_moe, tr[l]["x_ffn"])
            sets[l] = ids
            loads[l] += torch.bincount(ids.reshape(-1), minlength=E).float()
        ntok = sets[moe_layers[0]].shape[0]
        total += ntok
        for l in moe_layers[:-1]:
            nxt = model.layers[l + 1]
            moe = nxt.block_sparse_moe
            true = sets[l + 1]
            # (a) L+1's router on L's own router input
            pa = topk_set(moe, tr[l]["x_ffn"])
            # (b) L+1's FFN-side AttnRes mix + norm + router on the state after layer L
            #     (what L+1's FFN would see if L+1's attention contributed nothing)
            A, p = tr[l]["A"], tr[l]["p"]
            mixed = depth_mix(A + [p], nxt.mlp_res_norm, nxt.mlp_res_proj, c.rms_norm_eps)
            pb = topk_set(moe, rmsnorm(mixed, nxt.post_attention_layernorm, c.rms_norm_eps))
            for v, pred in (("router_input", pa), ("mixed_state", pb)):
                hit = (pred.unsqueeze(-1) == true.unsqueeze(-2)).any(-1).sum().item()
                hits[(l, v)] += hit
    out = {"layers": {}, "next_layer_recall": {}}
    for l in moe_layers:
        ld = loads[l] / loads[l].sum()
        ent = -(ld[ld > 0] * ld[ld > 0].log()).sum().item() / math.log(E)
        out["layers"][l] = {"max_over_mean": round((ld.max() * E).item(), 3),
                            "min_over_mean": round((ld.min() * E).item(), 3),
                            "unused_experts": int((ld == 0).sum()),
                            "load_entropy_normalised": round(ent, 4)}
    for l in moe_layers[:-1]:
        out["next_layer_recall"][f"{l}->{l + 1}"] = {v: round(hits[(l, v)] / (total * k), 4)
                                                     for v in ("router_input", "mixed_state")}
    out["chance_recall"] = round(k / E, 4)
    out["tokens"] = total
    return out


@torch.no_grad()
def agreement(target, draft, x, y, bs):
    agree = t_acc = d_acc = n = 0
    for (i, lt, _), (_, ld, _) in zip(run(target, x, bs), run(draft, x, bs)):
        at, ad = lt.argmax(-1), ld.argmax(-1)
        yy = y[i:i + bs]
        agree += (at == ad).sum().item()
        t_acc += (at == yy).sum().item()
        d_acc += (ad == yy).sum().item()
        n += yy.numel()
    return {"draft_target_argmax_agreement": round(agree / n, 4), "target_top1_accuracy": round(t_acc / n, 4),
            "draft_top1_accuracy": round(d_acc / n, 4), "tokens": n}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--target", default=os.path.join(ROOT, "models", "demo"))
    ap.add_argument("--draft", default=os.path.join(ROOT, "models", "demo-draft"))
    ap.add_argument("--trained")
    ap.add_argument("--trained-draft")
    ap.add_argument("--windows", type=int, default=400)
    ap.add_argument("--seq", type=int, default=64)
    ap.add_argument("--bs", type=int, default=50)
    ap.add_argument("--out")
    ap.add_argument("--no-docs", action="store_true",
                    help="held-out windows of the .py files only (the 'code' measure of docs/design/demo-model.md)")
    a = ap.parse_args()
    torch.set_num_threads(1)
    cache = "/tmp/k3train"
    if a.no_docs:
        cache = corpus.code_only()
    _, _, held = token_arrays(a.target, cache)
    x, y = windows(held, a.seq, a.windows)
    res = {"heldout_tokens": y.numel(), "seq": a.seq, "loss": {}}
    target, _ = load_published(a.target, torch.float32)
    draft, _ = load_published(a.draft, torch.float32)
    res["loss"]["target_exported"] = loss_of(target, x, y, a.bs)
    res["loss"]["draft_exported"] = loss_of(draft, x, y, a.bs)
    print(json.dumps(res), flush=True)
    for name, path in (("target", a.trained), ("draft", a.trained_draft)):
        if not path:
            continue
        res["loss"][f"{name}_final_fp32"] = loss_of(load_trained(path), x, y, a.bs)
        pre = path.replace(".pt", "_preqat.pt")
        if os.path.exists(pre):
            res["loss"][f"{name}_preqat_fp32"] = loss_of(load_trained(pre), x, y, a.bs)
            res["loss"][f"{name}_preqat_ptq_mxfp4"] = loss_of(quantise_experts(load_trained(pre)), x, y, a.bs)
        print(json.dumps(res), flush=True)
    res["agreement"] = agreement(target, draft, x, y, a.bs)
    print(json.dumps(res), flush=True)
    res["routing_target"] = routing_stats(target, x, a.bs)
    res["routing_draft"] = routing_stats(draft, x, a.bs)
    res["loss"] = {k: round(v, 4) for k, v in res["loss"].items()}
    print(json.dumps(res, indent=1))
    if a.out:
        with open(a.out, "w") as f:
            json.dump(res, f, indent=1)
            f.write("\n")


if __name__ == "__main__":
    main()
