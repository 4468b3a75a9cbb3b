"""An independent PyTorch implementation of DSpark's runtime (K3's block drafter).

Written from the runtime src/model/dspark.h describes and the numerics docs/guide/drafting.md states,
for the test that the C++ runtime (src/model/dspark.cpp) proposes the same ids; it shares
no code with it. Arithmetic is float32 tensors with an explicit round to BF16 (`bf`) after
every operation a BF16 PyTorch module would round: products accumulate in float32 and
round once; RMSNorm takes float32 statistics, rounds the normalised row, multiplies by the
BF16 weight and rounds again; attention scores and the softmax stay float32 and the
attention weights are rounded; the rotary angle and cos/sin are float32 and each rotated
element is rounded once.

    ref = DSpark.load("/tmp/dspark")                     # config.json + model.safetensors
    ref.ingest(rows)                                     # rows: [n, layers, H] target hidden rows
    ids, hidden, logits = ref.propose(anchor, k, embed, lm_head)
"""
import json
import math
import os

import numpy as np
import torch

from checkpoint import bf16_to_f32, read_safetensors


def bf(x):
    return x.to(torch.bfloat16).to(torch.float32)


def rmsnorm_bf16(x, w, eps):
    var = x.pow(2).mean(-1, keepdim=True)
    return bf(w * bf(x * torch.rsqrt(var + eps)))


def lin(w, x):
    """x [..., in] @ w[out, in]^T, float32 accumulation, rounded."""
    return bf(x @ w.t())


def yarn_mscale(factor, m):
    return 1.0 if factor <= 1 else 0.1 * m * math.log(factor) + 1.0


def yarn_inv_freq(dim, theta, factor, orig_max, beta_fast, beta_slow):
    half = dim // 2
    extra = np.array([theta ** (-2.0 * i / dim) for i in range(half)], dtype=np.float64)
    if factor <= 1:
        return torch.from_numpy(extra.astype(np.float32))

    def corr(rot):
        return dim * math.log(orig_max / (rot * 2 * math.pi)) / (2 * math.log(theta))

    low = max(math.floor(corr(beta_fast)), 0)
    high = min(math.ceil(corr(beta_slow)), dim - 1)
    if high == low:
        high += 0.001
    ramp = np.clip((np.arange(half, dtype=np.float64) - low) / (high - low), 0.0, 1.0)
    inv = extra * (1 - ramp) + (extra / factor) * ramp
    return torch.from_numpy(inv.astype(np.float32))


class DSpark:
    def __init__(self, cfg, w):
        self.cfg, self.w = cfg, w
        dfl = cfg.get("dflash_config", {})
        self.target_layers = cfg.get("target_layer_ids", dfl.get("target_layer_ids"))
        self.mask = cfg.get("mask_token_id", dfl.get("mask_token_id"))
        self.block = cfg.get("block_size", dfl.get("block_size", 7))
        self.eps = cfg["rms_norm_eps"]
        self.nh, self.R, self.P = cfg["num_attention_heads"], cfg["kv_lora_rank"], cfg["qk_rope_head_dim"]
        self.nope, self.vd = cfg["qk_nope_head_dim"], cfg["v_head_dim"]
        rs = cfg["rope_scaling"]
        f = rs["factor"]
        self.inv = yarn_inv_freq(self.P, cfg["rope_theta"], f, rs["original_max_position_embeddings"],
                                 rs.get("beta_fast", 32), rs.get("beta_slow", 1))
        m_all = yarn_mscale(f, rs["mscale_all_dim"]) if rs.get("mscale_all_dim", 0) > 0 else 1.0
        self.scale = float(np.float32((self.nope + self.P) ** -0.5 * m_all * m_all))
        self.rope_m = float(np.float32(yarn_mscale(f, rs.get("mscale", 1)) / m_all))
        self.lat = [torch.zeros(0, self.R) for _ in range(cfg["num_hidden_layers"])]
        self.kr = [torch.zeros(0, self.P) for _ in range(cfg["num_hidden_layers"])]

    @staticmethod
    def load(d):
        with open(os.path.join(d, "config.json")) as f:
            cfg = json.load(f)
        raw = read_safetensors(os.path.join(d, "model.safetensors"))
        w = {}
        for name, (dt, a) in raw.items():
            assert dt == "BF16", f"{name}: {dt}"
            w[name] = bf16_to_f32(a).reshape(a.shape)
        return DSpark(cfg, w)

    def rope(self, x, pos):
        """x [..., P] at positions pos [...] (float32 angles); interleaved pairs."""
        ang = pos.to(torch.float32).unsqueeze(-1) * self.inv           # [..., P/2]
        c, s = torch.cos(ang) * self.rope_m, torch.sin(ang) * self.rope_m
        a, b = x[..., 0::2], x[..., 1::2]
        out = torch.empty_like(x)
        out[..., 0::2] = bf(a * c - b * s)
        out[..., 1::2] = bf(a * s + b * c)
        return out

    def ingest(self, rows):
        """rows: [n, len(target_layers), H] hidden rows of the next n target positions."""
        n = rows.shape[0]
        L = self.lat[0].shape[0]
        hcat = bf(rows.to(torch.float32)).reshape(n, -1)
        ctx = rmsnorm_bf16(lin(self.w["context_proj.weight"], hcat), self.w["context_norm.weight"], self.eps)
        pos = torch.arange(L, L + n)
        for j in range(len(self.lat)):
            z = lin(self.w[f"layers.{j}.self_attn.kv_a_proj_with_mqa.weight"], ctx)
            lat = rmsnorm_bf16(z[:, :self.R], self.w[f"layers.{j}.self_attn.kv_a_layernorm.weight"], self.eps)
            kr = self.rope(z[:, self.R:], pos)
            self.lat[j] = torch.cat([self.lat[j], lat])
            self.kr[j] = torch.cat([self.kr[j], kr])

    def attention(self, j, n, pos):
        w, p = self.w, f"layers.{j}.self_attn."
        B, NH, R, P, NOPE, V = n.shape[0], self.nh, self.R, self.P, self.nope, self.vd
        cq = rmsnorm_bf16(lin(w[p + "q_a_proj.weight"], n), w[p + "q_a_layernorm.weight"], self.eps)
        q = lin(w[p + "q_b_proj.weight"], cq).reshape(B, NH, NOPE + P)
        qn, qr = q[..., :NOPE], self.rope(q[..., NOPE:], pos.unsqueeze(1).expand(B, NH))
        z = lin(w[p + "kv_a_proj_with_mqa.weight"], n)
        lat = rmsnorm_bf16(z[:, :R], w[p + "kv_a_layernorm.weight"], self.eps)
        kr = self.rope(z[:, R:], pos)
        keys_lat = torch.cat([self.lat[j], lat])                          # [S, R]: no causal mask
        keys_rope = torch.cat([self.kr[j], kr])                            # [S, P]
        kvb = w[p + "kv_b_proj.weight"].reshape(NH, NOPE + V, R)
        wk, wv = kvb[:, :NOPE, :], kvb[:, NOPE:, :]                        # [NH, NOPE, R], [NH, V, R]
        qlat = bf(torch.einsum("bhd,hdr->bhr", qn, wk))                    # absorbed query
        scores = (qlat @ keys_lat.t() + qr @ keys_rope.t()) * self.scale   # [B, NH, S] float32
        attn = bf(torch.softmax(scores, dim=-1))
        att = bf(attn @ keys_lat)                                          # [B, NH, R]
        o = bf(torch.einsum("bhr,hvr->bhv", att, wv)).reshape(B, NH * V)
        return lin(w[p + "o_proj.weight"], o)

    def propose(self, anchor, k, embed, lm_head):
        """embed, lm_head: the target's [vocab, H] tensors (BF16 values as float32)."""
        w, B = self.w, self.block
        L = self.lat[0].shape[0]
        pos = torch.arange(L, L + B)
        h = embed[torch.tensor([anchor] + [self.mask] * (B - 1))].to(torch.float32)
        res = None
        for j in range(len(self.lat)):
            p = f"layers.{j}."
            acc = h if res is None else bf(res + h)
            a = self.attention(j, rmsnorm_bf16(acc, w[p + "input_layernorm.weight"], self.eps), pos)
            acc = bf(acc + a)
            m = rmsnorm_bf16(acc, w[p + "post_attention_layernorm.weight"], self.eps)
            g, u = lin(w[p + "mlp.gate_proj.weight"], m), lin(w[p + "mlp.up_proj.weight"], m)
            h = lin(w[p + "mlp.down_proj.weight"], bf(bf(torch.nn.functional.silu(g)) * u))
            res = acc
        hid = rmsnorm_bf16(bf(res + h), w["final_norm.weight"], self.eps)
        logits = hid[:k].to(torch.float64) @ lm_head.to(torch.float64).t()
        ids, out_logits, prev = [], [], anchor
        for r in range(k):
            bias = bf(w["markov_head.markov_w2.weight"] @ w["markov_head.markov_w1.weight"][prev])
            lr = logits[r] + bias.to(torch.float64)
            m = lr.max()
            d = int((lr == m).nonzero()[0, 0])   # ties to the lowest id
            ids.append(d)
            out_logits.append(lr)
            prev = d
        return ids, hid, torch.stack(out_logits) if out_logits else torch.zeros(0)
