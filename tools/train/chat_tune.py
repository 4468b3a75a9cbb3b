"""Continues the demo target's training so that it answers in chat.

  /usr/bin/python3 tools/train/chat_tune.py --out /tmp/k3train/chat.pt
  /usr/bin/python3 tools/train/export.py /tmp/k3train/chat.pt models/demo

Starts from the published weights in models/demo (BF16 spine widened, MXFP4
experts decoded: exactly what the engine runs). Every step trains on two
batches: random 64-token windows of the code and docs stream, as train.py
does, and chat examples from chat_data.py, with the loss only on the
assistant's part: a short think, the response (or a tool call), and the
closing markers through `<|end_of_msg|>` (each example's last --chat-window
ids). --tool-share mixes in tool conversations (chat_data.py). The routed experts stay MXFP4 fake-quantised for
the whole run (straight-through), so the export is the weights it trained
with. Deterministic for a given thread count (--threads): fixed seed, step-count schedule.
"""
import argparse
import json
import os
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import chat_data  # noqa: E402
import corpus  # noqa: E402
from checkpoint import load_published  # noqa: E402
from train import ROOT, adamw, eval_loss, heldout_batches, lr_at, token_arrays  # noqa: E402

IGNORE = -100


def chat_batch(examples, idx, pad, window):
    """Right-padded rows of each example's last `window` ids (the question, the
    think and the response; the fixed system text before them is cut, as the
    code windows cut files)."""
    rows = []
    for i in idx:
        ids, start = examples[i]
        cut = max(0, len(ids) - window)
        rows.append((ids[cut:], max(1, start - cut)))
    n = max(len(ids) for ids, _ in rows)
    x = torch.full((len(idx), n), pad, dtype=torch.long)
    y = torch.full((len(idx), n), IGNORE, dtype=torch.long)
    for r, (ids, start) in enumerate(rows):
        x[r, :len(ids)] = torch.tensor(ids)
        # position t predicts ids[t + 1]: targets from the first generated id on
        y[r, start - 1:len(ids) - 1] = torch.tensor(ids[start:])
    return x, y


@torch.no_grad()
def chat_loss(model, examples, pad, bs=8, window=1 << 30):
    """Loss on the assistant's ids of whole examples (nothing cut)."""
    model.eval()
    tot, n = 0.0, 0
    for i in range(0, len(examples), bs):
        x, y = chat_batch(examples, list(range(i, min(i + bs, len(examples)))), pad, window)
        logits = model(x)
        tot += torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]).double(), y.reshape(-1),
                                                 ignore_index=IGNORE, reduction="sum").item()
        n += int((y != IGNORE).sum())
    model.train()
    return tot / n


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--start", default=os.path.join(ROOT, "models", "demo"))
    ap.add_argument("--steps", type=int, default=80)
    ap.add_argument("--code-batch", type=int, default=16)
    ap.add_argument("--chat-batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=64)
    ap.add_argument("--chat-window", type=int, default=96)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--chat-examples", type=int, default=3000)
    ap.add_argument("--tool-share", type=float, default=0.0,
                    help="share of the chat examples that are tool conversations (chat_data.tool_conversation)")
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--bias-rate", type=float, default=1e-3)
    ap.add_argument("--seed", type=int, default=20261201)
    ap.add_argument("--eval-every", type=int, default=20)
    ap.add_argument("--bench", type=int, default=0, help="time this many steps and exit")
    ap.add_argument("--no-docs", action="store_true",
                    help="code stream from the .py files only (as when python3.11-doc is not installed)")
    a = ap.parse_args()
    cache = "/tmp/k3train"
    if a.no_docs:
        cache = corpus.code_only()

    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    tok, train, held = token_arrays(a.start, cache)
    train_paths, held_paths = corpus.split()
    chats = chat_data.build(tok, train_paths, a.chat_examples, a.seed, tool_share=a.tool_share)
    held_chats = chat_data.build(tok, held_paths, 64, a.seed + 1)
    held_tools = chat_data.build(tok, held_paths, 64, a.seed + 1, tool_share=1.0) if a.tool_share else []
    model, cfg = load_published(a.start, torch.float32)
    pad = cfg.pad_token_id
    for m in model.moes():
        m.qat = True
    hx, hy = heldout_batches(held, a.seq, 48)
    print(f"{len(chats)} chat examples ({sum(len(c[0]) for c in chats)} ids), {len(held_chats)} held-out; "
          f"start: held-out code {eval_loss(model, hx, hy):.4f}, chat {chat_loss(model, held_chats, pad):.4f}"
          + (f", tools {chat_loss(model, held_tools, pad):.4f}" if held_tools else ""), flush=True)

    opt = adamw(model, a.lr)
    rng = np.random.default_rng(a.seed)
    log = []
    t0 = time.time()
    steps = a.bench or a.steps
    ce = torch.nn.functional.cross_entropy
    for step in range(steps):
        lr = lr_at(step, steps, a.lr, a.warmup)
        for g in opt.param_groups:
            g["lr"] = lr
        off = rng.integers(0, len(train) - a.seq - 1, size=a.code_batch)
        x = torch.from_numpy(np.stack([train[o:o + a.seq] for o in off])).long()
        y = torch.from_numpy(np.stack([train[o + 1:o + a.seq + 1] for o in off])).long()
        code = ce(model(x).reshape(-1, cfg.vocab_size), y.reshape(-1))
        loads = [m._loads.clone() for m in model.moes()]
        cx, cy = chat_batch(chats, rng.integers(0, len(chats), size=a.chat_batch).tolist(), pad, a.chat_window)
        chat = ce(model(cx).reshape(-1, cfg.vocab_size), cy.reshape(-1), ignore_index=IGNORE)
        loss = code + chat
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        with torch.no_grad():  # aux-loss-free balance, as in train.py, over both batches
            for m, l0 in zip(model.moes(), loads):
                load = l0 + m._loads
                m.e_score_correction_bias += a.bias_rate * torch.sign(load.mean() - load)
        if step % 10 == 0 or step == steps - 1:
            rec = {"step": step, "code": round(code.item(), 4), "chat": round(chat.item(), 4), "lr": round(lr, 6),
                   "sec": round(time.time() - t0, 1)}
            if (step % a.eval_every == 0 or step == steps - 1) and not a.bench:
                rec["heldout_code"] = round(eval_loss(model, hx, hy), 4)
                rec["heldout_chat"] = round(chat_loss(model, held_chats, pad), 4)
                if held_tools:
                    rec["heldout_tools"] = round(chat_loss(model, held_tools, pad), 4)
            log.append(rec)
            print(json.dumps(rec), flush=True)
    el = time.time() - t0
    print(f"done: {steps} steps in {el:.0f}s", flush=True)
    if a.bench:
        return
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    torch.save({"config": cfg.to_dict(), "state": model.state_dict(), "log": log, "args": vars(a)}, a.out)


if __name__ == "__main__":
    main()
