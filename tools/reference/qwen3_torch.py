"""An independent float64 reference of Hugging Face's Qwen3-MoE and Qwen3 forward pass.

Follows transformers' modeling_qwen3_moe.py / modeling_qwen3.py (eager attention, no
sliding window) on a checkpoint in the Hub's layout, read with struct + json only:

  x = embed_tokens[ids]
  per layer:  h = RMSNorm(x) * input_layernorm
              q = RMSNorm_hd(q_proj(h) per head) * q_norm, k likewise with k_norm, v = v_proj(h)
              RoPE on q, k (rotate_half; inv_freq[i] = theta^(-2i/hd); YaRN if rope_scaling says so)
              GQA (kv head = q head // (heads / kv_heads)), scores * hd^-0.5, causal softmax, o_proj
              x = x + attn
              h = RMSNorm(x) * post_attention_layernorm
              FFN: dense down(silu(gate(h)) * up(h)) when the layer is in mlp_only_layers, off the
                   decoder_sparse_step, or the model has no experts (and always for "qwen3");
                   else p = softmax(router(h)), top-k (descending, ties to the lower id),
                   w = p_topk / sum(p_topk) if norm_topk_prob, out = sum_i w_i * expert_i(h)
              x = x + ffn
  logits = lm_head(RMSNorm(x) * norm)   (embed_tokens when tie_word_embeddings)

RMSNorm(x) = x * rsqrt(mean(x^2) + eps). Everything runs in float64 with the weights widened
exactly: BF16 -> fp32 exact; FP8 (the Hub's block format) -> w = fp32(e4m3(code)) * fp32(scale_inv),
one fp32 multiply rounded to nearest (what the engine defines the weight to be), then float64.
"""
import hashlib
import json
import math
import os
import struct

import numpy as np
import torch

F64 = torch.float64


def _e4m3_table():
    t = np.zeros(256, dtype=np.float32)
    for c in range(256):
        sign = -1.0 if c & 0x80 else 1.0
        e, m = (c >> 3) & 0xF, c & 0x7
        if e == 0xF and m == 0x7:
            t[c] = np.nan
        elif e == 0:
            t[c] = sign * m * 2.0 ** -9
        else:
            t[c] = sign * (8 + m) * 2.0 ** (e - 10)
    return t


E4M3 = _e4m3_table()


def read_safetensors(path):
    """{name: (dtype, shape, raw bytes)} of one shard."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        a, b = info["data_offsets"]
        out[name] = (info["dtype"], info["shape"], data[a:b])
    return out


def shard_names(d):
    idx = os.path.join(d, "model.safetensors.index.json")
    if os.path.exists(idx):
        with open(idx) as f:
            return sorted(set(json.load(f)["weight_map"].values()))
    return ["model.safetensors"]


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _to_f32(dtype, shape, raw):
    if dtype == "BF16":
        bits = np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16
        return bits.view(np.float32).reshape(shape)
    if dtype == "F32":
        return np.frombuffer(raw, dtype="<f4").reshape(shape).astype(np.float32)
    if dtype == "F8_E4M3":
        return E4M3[np.frombuffer(raw, dtype=np.uint8)].reshape(shape)
    raise ValueError(f"unsupported dtype {dtype}")


def load_weights(d):
    """{name: float64 tensor} with FP8 linears dequantised as the module docstring says."""
    raw = {}
    for s in shard_names(d):
        raw.update(read_safetensors(os.path.join(d, s)))
    out = {}
    for name, (dt, shape, data) in raw.items():
        if name.endswith(".weight_scale_inv"):
            continue
        w = _to_f32(dt, shape, data)
        if dt == "F8_E4M3":
            sdt, sshape, sdata = raw[name + "_scale_inv"]
            s = _to_f32(sdt, sshape, sdata)
            rows, cols = shape
            full = np.repeat(np.repeat(s, 128, axis=0), 128, axis=1)[:rows, :cols]
            w = (w * full).astype(np.float32)  # one fp32 multiply, round to nearest
        out[name] = torch.from_numpy(np.ascontiguousarray(w)).to(F64)
    return out


class Qwen3Reference:
    def __init__(self, d):
        with open(os.path.join(d, "config.json")) as f:
            self.cfg = json.load(f)
        c = self.cfg
        self.moe = c["model_type"] == "qwen3_moe"
        if c["model_type"] not in ("qwen3_moe", "qwen3"):
            raise ValueError(f"model_type {c['model_type']}: not a Qwen3 model")
        self.w = load_weights(d)
        self.H = c["hidden_size"]
        self.L = c["num_hidden_layers"]
        self.heads = c["num_attention_heads"]
        self.kv = c["num_key_value_heads"]
        self.hd = c.get("head_dim") or self.H // self.heads
        self.eps = c["rms_norm_eps"]
        self.vocab = c["vocab_size"]
        self.tied = c.get("tie_word_embeddings", False)
        self.inv_freq, self.attn_factor = self._rope(c)
        self.route_gaps = []  # per routing decision: p[k-1] - p[k] (the margin of the top-k set)

    def _rope(self, c):
        theta, dim = float(c["rope_theta"]), self.hd
        i = torch.arange(0, dim, 2, dtype=F64)
        base_inv = 1.0 / theta ** (i / dim)
        rs = c.get("rope_scaling")
        kind = (rs or {}).get("rope_type", (rs or {}).get("type"))
        if not rs or kind == "default":
            return base_inv, 1.0
        if kind != "yarn":
            raise ValueError(f"rope_scaling type {kind}: not supported by the reference")
        # transformers' _compute_yarn_parameters
        factor = float(rs["factor"])
        orig = rs.get("original_max_position_embeddings") or c["max_position_embeddings"]
        mscale, mscale_all = rs.get("mscale"), rs.get("mscale_all_dim")

        def get_mscale(scale, m=1.0):
            return 1.0 if scale <= 1 else 0.1 * m * math.log(scale) + 1.0

        att = rs.get("attention_factor")
        if att is None:
            att = get_mscale(factor, mscale) / get_mscale(factor, mscale_all) if mscale and mscale_all \
                else get_mscale(factor)
        beta_fast, beta_slow = rs.get("beta_fast") or 32, rs.get("beta_slow") or 1

        def corr_dim(rot):
            return (dim * math.log(orig / (rot * 2 * math.pi))) / (2 * math.log(theta))

        low, high = corr_dim(beta_fast), corr_dim(beta_slow)
        if rs.get("truncate", True):
            low, high = math.floor(low), math.ceil(high)
        low, high = max(low, 0), min(high, dim - 1)
        if low == high:
            high += 0.001
        ramp = ((torch.arange(dim // 2, dtype=F64) - low) / (high - low)).clamp(0, 1)
        extra = 1 - ramp
        inv = (base_inv / factor) * (1 - extra) + base_inv * extra
        return inv, float(att)

    def rms(self, x, w):
        return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + self.eps) * w

    def rope(self, x, pos):
        # x [T, n, hd]; HF: emb = cat(freqs, freqs), x*cos + rotate_half(x)*sin
        freqs = pos[:, None].to(F64) * self.inv_freq[None, :]
        emb = torch.cat([freqs, freqs], dim=-1)
        cos, sin = (emb.cos() * self.attn_factor)[:, None, :], (emb.sin() * self.attn_factor)[:, None, :]
        h = self.hd // 2
        rot = torch.cat([-x[..., h:], x[..., :h]], dim=-1)
        return x * cos + rot * sin

    def attention(self, l, h):
        W, pre = self.w, f"model.layers.{l}.self_attn."
        T = h.shape[0]
        q = (h @ W[pre + "q_proj.weight"].T).view(T, self.heads, self.hd)
        k = (h @ W[pre + "k_proj.weight"].T).view(T, self.kv, self.hd)
        v = (h @ W[pre + "v_proj.weight"].T).view(T, self.kv, self.hd)
        q = self.rms(q, W[pre + "q_norm.weight"])
        k = self.rms(k, W[pre + "k_norm.weight"])
        pos = torch.arange(T)
        q, k = self.rope(q, pos), self.rope(k, pos)
        group = self.heads // self.kv
        k = k.repeat_interleave(group, dim=1)  # q head j reads kv head j // group
        v = v.repeat_interleave(group, dim=1)
        s = torch.einsum("qnd,knd->nqk", q, k) * self.hd ** -0.5
        mask = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
        s = s.masked_fill(mask[None], float("-inf"))
        p = torch.softmax(s, dim=-1)
        o = torch.einsum("nqk,knd->qnd", p, v).reshape(T, self.heads * self.hd)
        return o @ W[pre + "o_proj.weight"].T

    def mlp(self, pre, h):
        W = self.w
        g = h @ W[pre + "gate_proj.weight"].T
        u = h @ W[pre + "up_proj.weight"].T
        return (torch.nn.functional.silu(g) * u) @ W[pre + "down_proj.weight"].T

    def is_moe_layer(self, l):
        c = self.cfg
        if not self.moe or c.get("num_experts", 0) == 0 or l in c.get("mlp_only_layers", []):
            return False
        return (l + 1) % c.get("decoder_sparse_step", 1) == 0

    def moe_block(self, l, h):
        c, W, pre = self.cfg, self.w, f"model.layers.{l}.mlp."
        k = c["num_experts_per_tok"]
        p = torch.softmax(h @ W[pre + "gate.weight"].T, dim=-1)  # [T, E]
        order = torch.sort(p, dim=-1, descending=True, stable=True).indices  # ties: lower id first
        out = torch.zeros_like(h)
        for t in range(h.shape[0]):
            ids = order[t, :k].tolist()
            pt = p[t, ids]
            if k < p.shape[1]:
                self.route_gaps.append(float(p[t, order[t, k - 1]] - p[t, order[t, k]]))
            w = pt / pt.sum() if c.get("norm_topk_prob", False) else pt
            for wi, e in zip(w.tolist(), ids):
                out[t] += wi * self.mlp(f"{pre}experts.{e}.", h[t:t + 1])[0]
        return out

    def forward(self, ids):
        """float64 logits [T, vocab] for the token ids at positions 0..T-1."""
        W = self.w
        x = W["model.embed_tokens.weight"][torch.tensor(ids)]
        for l in range(self.L):
            pre = f"model.layers.{l}."
            x = x + self.attention(l, self.rms(x, W[pre + "input_layernorm.weight"]))
            h = self.rms(x, W[pre + "post_attention_layernorm.weight"])
            x = x + (self.moe_block(l, h) if self.is_moe_layer(l) else self.mlp(pre + "mlp.", h))
        x = self.rms(x, W["model.norm.weight"])
        head = W["model.embed_tokens.weight"] if self.tied else W["lm_head.weight"]
        return x @ head.T
