"""Trains the demo target or drafter on the Python stdlib + docs corpus.

  /usr/bin/python3 tools/train/train.py --model target --out /tmp/k3train/target.pt
  /usr/bin/python3 tools/train/train.py --model draft  --out /tmp/k3train/draft.pt

Deterministic: fixed seed, one intra-op thread, step-count (not time) schedule.
The tokenizer must exist first (tools/train/bpe.py train --out models/demo ...).
Routed experts train in fp32, then the last `--qat-frac` of the steps run with
MXFP4 fake-quantised experts (straight-through), so the exported MXFP4 experts
are the weights the model was last trained with.
"""
import argparse
import json
import math
import os
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import corpus  # noqa: E402
from bpe import Tokenizer  # noqa: E402
from k3_torch import K3Config, K3Model, n_params  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def target_config(n_ranks):
    return K3Config(hidden_size=192, num_hidden_layers=6, vocab_size=n_ranks + 256, intermediate_size=512,
                    attn_res_block_size=2, num_experts=64, num_experts_per_token=8, num_shared_experts=2,
                    moe_intermediate_size=64, routed_expert_hidden_size=96, num_attention_heads=3,
                    q_lora_rank=96, kv_lora_rank=64, qk_nope_head_dim=32, qk_rope_head_dim=32, v_head_dim=32,
                    kda_heads=6, kda_head_dim=32, bos_token_id=n_ranks, eos_token_id=n_ranks + 2,
                    pad_token_id=n_ranks + 255)


def draft_config(n_ranks):
    return K3Config(hidden_size=128, num_hidden_layers=2, vocab_size=n_ranks + 256, intermediate_size=384,
                    attn_res_block_size=2, num_experts=16, num_experts_per_token=4, num_shared_experts=2,
                    moe_intermediate_size=64, routed_expert_hidden_size=64, num_attention_heads=2,
                    q_lora_rank=64, kv_lora_rank=32, qk_nope_head_dim=32, qk_rope_head_dim=32, v_head_dim=32,
                    kda_heads=4, kda_head_dim=32, bos_token_id=n_ranks, eos_token_id=n_ranks + 2,
                    pad_token_id=n_ranks + 255)


CONFIGS = {"target": target_config, "draft": draft_config}
# The recipes the committed checkpoints were trained with (defaults of the flags below).
RECIPES = {"target": {"steps": 360, "bias_rate": 2e-3, "eval_every": 90},
           "draft": {"steps": 300, "bias_rate": 1e-3, "eval_every": 100}}


def token_arrays(tok_dir, cache_dir="/tmp/k3train"):
    """Encodes the corpus (documents joined by the EOS id); cached as .npy."""
    os.makedirs(cache_dir, exist_ok=True)
    tok = Tokenizer.load(tok_dir)
    out = []
    for name, paths in zip(("train", "heldout"), corpus.split()):
        path = os.path.join(cache_dir, f"tokens_{name}_{tok.n}.npy")
        if not os.path.exists(path):
            ids = []
            for p in paths:
                ids.extend(tok.encode(corpus.read(p)))
                ids.append(tok.n + 2)
            np.save(path, np.array(ids, dtype=np.int32))
        out.append(np.load(path))
    return tok, out[0], out[1]


def heldout_batches(held, seq, n_seq):
    """Deterministic non-overlapping held-out windows (first n_seq of them)."""
    n = min(n_seq, (len(held) - 1) // seq)
    x = np.stack([held[i * seq:(i + 1) * seq] for i in range(n)])
    y = np.stack([held[i * seq + 1:(i + 1) * seq + 1] for i in range(n)])
    return torch.from_numpy(x).long(), torch.from_numpy(y).long()


@torch.no_grad()
def eval_loss(model, x, y, bs=8, exact=False):
    model.eval()
    tot, n = 0.0, 0
    for i in range(0, len(x), bs):
        logits = model(x[i:i + bs], exact=exact)
        tot += torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]).double(),
                                                 y[i:i + bs].reshape(-1), reduction="sum").item()
        n += y[i:i + bs].numel()
    model.train()
    return tot / n


def adamw(model, lr):
    """AdamW (betas 0.9/0.95), weight decay 0.1 on matrices except the AttnRes pseudo-queries."""
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        (decay if p.dim() >= 2 and "res_proj" not in name else no_decay).append(p)
    return torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                             lr=lr, betas=(0.9, 0.95), eps=1e-8)


def lr_at(step, steps, peak, warmup):
    """Linear warm-up, then cosine decay to 10% of the peak."""
    return peak * min(1.0, (step + 1) / warmup) * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * step / steps)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", choices=CONFIGS, required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--tokenizer", default=os.path.join(ROOT, "models", "demo"))
    ap.add_argument("--steps", type=int)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--seq", type=int, default=64)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--warmup", type=int, default=30)
    ap.add_argument("--qat-frac", type=float, default=0.15)
    ap.add_argument("--bias-rate", type=float, help="correction-bias step (aux-loss-free balance)")
    ap.add_argument("--seed", type=int, default=20261130)
    ap.add_argument("--eval-every", type=int)
    ap.add_argument("--bench", type=int, default=0, help="time this many steps and exit")
    a = ap.parse_args()
    for k, v in RECIPES[a.model].items():
        if getattr(a, k) is None:
            setattr(a, k, v)

    torch.set_num_threads(1)
    torch.manual_seed(a.seed)
    tok, train, held = token_arrays(a.tokenizer)
    cfg = CONFIGS[a.model](tok.n)
    model = K3Model(cfg)
    print(f"{a.model}: {n_params(model)/1e6:.2f}M params; train {len(train)} tokens, held-out {len(held)}", flush=True)
    hx, hy = heldout_batches(held, a.seq, 48)

    opt = adamw(model, a.lr)
    rng = np.random.default_rng(a.seed)
    qat_start = int(a.steps * (1 - a.qat_frac))
    log = []
    t0 = time.time()
    steps = a.bench or a.steps
    for step in range(steps):
        if step == qat_start and not a.bench:
            # fp32 checkpoint before QAT: for the PTQ-vs-QAT measurement
            torch.save({"config": cfg.to_dict(), "state": model.state_dict()}, a.out.replace(".pt", "_preqat.pt"))
            for m in model.moes():
                m.qat = True
        lr = lr_at(step, steps, a.lr, a.warmup)
        for g in opt.param_groups:
            g["lr"] = lr
        off = rng.integers(0, len(train) - a.seq - 1, size=a.batch)
        x = torch.from_numpy(np.stack([train[o:o + a.seq] for o in off])).long()
        y = torch.from_numpy(np.stack([train[o + 1:o + a.seq + 1] for o in off])).long()
        logits = model(x)
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, cfg.vocab_size), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        # aux-loss-free balance: push the selection bias toward under-used experts
        with torch.no_grad():
            skew = []
            for m in model.moes():
                load = m._loads
                m.e_score_correction_bias += a.bias_rate * torch.sign(load.mean() - load)
                skew.append((load.max() / load.mean()).item())
        if step % 10 == 0 or step == steps - 1:
            el = time.time() - t0
            rec = {"step": step, "loss": round(loss.item(), 4), "lr": round(lr, 6), "sec": round(el, 1),
                   "max_over_mean_load": round(max(skew), 2)}
            if (step % a.eval_every == 0 or step == steps - 1) and not a.bench:
                rec["heldout"] = round(eval_loss(model, hx, hy), 4)
            log.append(rec)
            print(json.dumps(rec), flush=True)
    el = time.time() - t0
    print(f"done: {steps} steps in {el:.0f}s ({steps * a.batch * a.seq / el:.0f} tok/s)", flush=True)
    if a.bench:
        return
    torch.save({"config": cfg.to_dict(), "state": model.state_dict(), "log": log, "args": vars(a)}, a.out)


if __name__ == "__main__":
    main()
