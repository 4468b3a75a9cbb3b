"""An independent PyTorch implementation of the Kimi K3 architecture.

Follows docs/design/checkpoint.md and docs/design/engine.md (A_log per head;
KDA q/k normalised with x*rsqrt(sum x^2 + 1e-6); AttnRes score with
c = norm_w * proj; route order = descending corrected score, ties to the lower
id; weights = unbiased sigmoid scores renormalised). Parameter names are the
published checkpoint names without the "language_model.model." prefix, so
export is a rename plus a dtype conversion.

The same forward serves training and evaluation: the KDA recurrence is the
exact per-token loop (batched over sequences only), the short convolution is
an explicit 4-tap sum, and with `exact=True` the MoE sorts routes stably
and accumulates experts in route order.
"""
import math
from dataclasses import dataclass, field, asdict

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass
class K3Config:
    hidden_size: int = 256
    num_hidden_layers: int = 6
    vocab_size: int = 4352
    intermediate_size: int = 768          # dense FFN (layer 0)
    rms_norm_eps: float = 1e-5
    situ_beta: float = 4.0
    situ_linear_beta: float = 25.0
    attn_res_block_size: int = 2
    first_k_dense_replace: int = 1
    # MoE
    num_experts: int = 64
    num_experts_per_token: int = 8
    num_shared_experts: int = 2
    moe_intermediate_size: int = 96
    routed_expert_hidden_size: int = 128
    # MLA
    num_attention_heads: int = 4
    q_lora_rank: int = 128
    kv_lora_rank: int = 64
    qk_nope_head_dim: int = 64
    qk_rope_head_dim: int = 32
    v_head_dim: int = 64
    # KDA
    kda_heads: int = 4
    kda_head_dim: int = 64
    short_conv_kernel_size: int = 4
    gate_lower_bound: float = -5.0
    # tokens
    bos_token_id: int = 4096
    eos_token_id: int = 4098
    pad_token_id: int = 4351

    def is_mla(self, l):
        return (l + 1) % 4 == 0 or l == self.num_hidden_layers - 1

    def to_dict(self):
        return asdict(self)


def rmsnorm(x, w, eps):
    # weight times normalised, as K3 defines it (docs/design/engine.md)
    r = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
    return r if w is None else w * r


def l2n(x):
    return x * torch.rsqrt(x.pow(2).sum(-1, keepdim=True) + 1e-6)


def situ(g, u, beta, beta_lin):
    t = torch.tanh(g / beta) * beta
    t = t * torch.sigmoid(g)
    w = torch.tanh(u / beta_lin) * beta_lin
    return t * w


def depth_mix(values, norm_w, proj, eps):
    """values: list of [..., H]; norm_w: [H]; proj: [1, H]."""
    c = norm_w * proj[0]
    v = torch.stack(values, 0)                           # [N, ..., H]
    s = (rmsnorm(v, None, eps) * c).sum(-1)              # [N, ...]
    alpha = torch.softmax(s, 0)
    return (alpha.unsqueeze(-1) * v).sum(0)


def linear(n_in, n_out, std=None):
    m = nn.Linear(n_in, n_out, bias=False)
    nn.init.normal_(m.weight, 0.0, std if std is not None else 1.0 / math.sqrt(n_in))
    return m


class KDA(nn.Module):
    def __init__(self, c: K3Config, n_layers):
        super().__init__()
        H, h, D, K = c.hidden_size, c.kda_heads, c.kda_head_dim, c.short_conv_kernel_size
        C = h * D
        self.c = c
        self.q_proj, self.k_proj, self.v_proj, self.g_proj = (linear(H, C) for _ in range(4))
        self.f_a_proj = linear(H, D)
        self.f_b_proj = linear(D, C)
        self.b_proj = linear(H, h)
        self.o_proj = linear(C, H, std=1.0 / math.sqrt(C) / math.sqrt(2 * n_layers))
        self.q_conv1d = nn.Parameter(torch.zeros(C, 1, K))
        self.k_conv1d = nn.Parameter(torch.zeros(C, 1, K))
        self.v_conv1d = nn.Parameter(torch.zeros(C, 1, K))
        for w in (self.q_conv1d, self.k_conv1d, self.v_conv1d):
            nn.init.normal_(w, 0.0, 0.2)
            with torch.no_grad():
                w[:, 0, K - 1] += 1.0                    # start near identity on the current token
        self.A_log = nn.Parameter(torch.zeros(h))        # per head (docs/design/checkpoint.md)
        # initial decay rates spread between long and short memory
        logit = torch.linspace(-6.0, -1.0, C)
        self.dt_bias = nn.Parameter(logit[torch.randperm(C)])
        self.o_norm = nn.Parameter(torch.ones(D))

    @staticmethod
    def _conv(x, w):
        """Causal depthwise conv + SiLU. x: [B, T, C]; w: [C, 1, K]; explicit tap order j = 0..K-1."""
        B, T, C = x.shape
        K = w.shape[-1]
        xp = F.pad(x, (0, 0, K - 1, 0))
        acc = None
        for j in range(K):
            term = w[:, 0, j] * xp[:, j:j + T, :]
            acc = term if acc is None else acc + term
        return F.silu(acc)

    def forward(self, x):
        c = self.c
        B, T, _ = x.shape
        h, D = c.kda_heads, c.kda_head_dim
        q = self._conv(self.q_proj(x), self.q_conv1d).view(B, T, h, D)
        k = self._conv(self.k_proj(x), self.k_conv1d).view(B, T, h, D)
        v = self._conv(self.v_proj(x), self.v_conv1d).view(B, T, h, D)
        q = l2n(q) / math.sqrt(D)
        k = l2n(k)
        a = self.f_b_proj(self.f_a_proj(x)).view(B, T, h, D)
        g = c.gate_lower_bound * torch.sigmoid(torch.exp(self.A_log).view(1, 1, h, 1) *
                                               (a + self.dt_bias.view(1, 1, h, D)))
        decay = torch.exp(g)
        beta = torch.sigmoid(self.b_proj(x))              # [B, T, h]
        S = x.new_zeros(B, h, D, D)                       # [key i][value j]
        ys = []
        for t in range(T):
            S = S * decay[:, t].unsqueeze(-1)
            kt = k[:, t]
            u = (S * kt.unsqueeze(-1)).sum(-2)              # u[j] = sum_i k[i] S[i][j]
            S = S + (beta[:, t].unsqueeze(-1) * kt).unsqueeze(-1) * (v[:, t] - u).unsqueeze(-2)
            ys.append((S * q[:, t].unsqueeze(-1)).sum(-2))
        y = torch.stack(ys, 1)                            # [B, T, h, D]
        y = rmsnorm(y, self.o_norm, c.rms_norm_eps)
        y = y * torch.sigmoid(self.g_proj(x)).view(B, T, h, D)
        return self.o_proj(y.reshape(B, T, h * D))


class MLA(nn.Module):
    def __init__(self, c: K3Config, n_layers):
        super().__init__()
        H, nh = c.hidden_size, c.num_attention_heads
        self.c = c
        dq = c.qk_nope_head_dim + c.qk_rope_head_dim
        self.q_a_proj = linear(H, c.q_lora_rank)
        self.q_a_layernorm = nn.Parameter(torch.ones(c.q_lora_rank))
        self.q_b_proj = linear(c.q_lora_rank, nh * dq)
        self.kv_a_proj_with_mqa = linear(H, c.kv_lora_rank + c.qk_rope_head_dim)
        self.kv_a_layernorm = nn.Parameter(torch.ones(c.kv_lora_rank))
        self.kv_b_proj = linear(c.kv_lora_rank, nh * (c.qk_nope_head_dim + c.v_head_dim))
        self.g_proj = linear(H, nh * c.v_head_dim)
        self.o_proj = linear(nh * c.v_head_dim, H, std=1.0 / math.sqrt(nh * c.v_head_dim) / math.sqrt(2 * n_layers))

    def forward(self, x):
        c = self.c
        B, T, _ = x.shape
        nh, dn, dr, dv = c.num_attention_heads, c.qk_nope_head_dim, c.qk_rope_head_dim, c.v_head_dim
        cq = rmsnorm(self.q_a_proj(x), self.q_a_layernorm, c.rms_norm_eps)
        Q = self.q_b_proj(cq).view(B, T, nh, dn + dr)
        ckv = self.kv_a_proj_with_mqa(x)
        lat = rmsnorm(ckv[..., :c.kv_lora_rank], self.kv_a_layernorm, c.rms_norm_eps)
        kr = ckv[..., c.kv_lora_rank:]
        KV = self.kv_b_proj(lat).view(B, T, nh, dn + dv)
        key = torch.cat([KV[..., :dn], kr.unsqueeze(2).expand(B, T, nh, dr)], -1)
        val = KV[..., dn:]
        scores = torch.einsum("bthd,bshd->bhts", Q, key) * (dn + dr) ** -0.5
        mask = torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1)
        scores = scores.masked_fill(mask, float("-inf"))
        P = torch.softmax(scores, -1)
        o = torch.einsum("bhts,bshd->bthd", P, val).reshape(B, T, nh * dv)
        o = o * torch.sigmoid(self.g_proj(x))
        return self.o_proj(o)


class DenseFFN(nn.Module):
    def __init__(self, c, n_layers):
        super().__init__()
        self.c = c
        self.gate_proj = linear(c.hidden_size, c.intermediate_size)
        self.up_proj = linear(c.hidden_size, c.intermediate_size)
        self.down_proj = linear(c.intermediate_size, c.hidden_size,
                                std=1.0 / math.sqrt(c.intermediate_size) / math.sqrt(2 * n_layers))

    def forward(self, x):
        return self.down_proj(situ(self.gate_proj(x), self.up_proj(x), self.c.situ_beta, self.c.situ_linear_beta))


def mxfp4_fake_quant(w):
    """Straight-through fake quantisation of [E, rows, cols] weights (QAT)."""
    from mxfp4 import quantize_dequantize
    return w + (quantize_dequantize(w.detach()) - w).detach()


class MoE(nn.Module):
    def __init__(self, c: K3Config, n_layers):
        super().__init__()
        self.c = c
        H, E, L, I = c.hidden_size, c.num_experts, c.routed_expert_hidden_size, c.moe_intermediate_size
        S = c.num_shared_experts * I
        self.gate = linear(H, E)
        self.register_buffer("e_score_correction_bias", torch.zeros(E))
        self.routed_expert_down_proj = linear(H, L)
        self.routed_expert_norm = nn.Parameter(torch.ones(L))
        self.routed_expert_up_proj = linear(L, H, std=1.0 / math.sqrt(L) / math.sqrt(2 * n_layers))
        # experts stacked: w1 (gate) [E, I, L], w3 (up) [E, I, L], w2 (down) [E, L, I]
        self.w1 = nn.Parameter(torch.randn(E, I, L) / math.sqrt(L))
        self.w3 = nn.Parameter(torch.randn(E, I, L) / math.sqrt(L))
        self.w2 = nn.Parameter(torch.randn(E, L, I) / math.sqrt(I))
        self.shared_gate = linear(H, S)
        self.shared_up = linear(H, S)
        self.shared_down = linear(S, H, std=1.0 / math.sqrt(S) / math.sqrt(2 * n_layers))
        self.qat = False
        self.last_topi = None        # [N, k] selected experts of the last call (stats)
        self.last_input = None

    def route(self, x, exact):
        """x: [N, H] -> (ids [N, k] in route order, weights [N, k], sigmoid scores [N, E])."""
        k = self.c.num_experts_per_token
        s = torch.sigmoid(x @ self.gate.weight.t())
        choice = (s + self.e_score_correction_bias).detach()
        if exact:
            order = torch.sort(choice, dim=-1, descending=True, stable=True).indices
            topi = order[:, :k]
        else:
            topi = torch.topk(choice, k, dim=-1).indices
        w = s.gather(1, topi)
        w = w / (w.sum(-1, keepdim=True) + 1e-20)
        return topi, w, s

    def forward(self, x, exact=False, keep_stats=False):
        c = self.c
        shp = x.shape
        x2 = x.reshape(-1, shp[-1])
        N, k, E = x2.shape[0], c.num_experts_per_token, c.num_experts
        topi, w, _ = self.route(x2, exact)
        if keep_stats:
            self.last_topi = topi.detach()
            self.last_input = x2.detach()
        r = self.routed_expert_down_proj(x2)                 # [N, L]
        w1, w2, w3 = self.w1, self.w2, self.w3
        if self.qat:
            w1, w2, w3 = mxfp4_fake_quant(w1), mxfp4_fake_quant(w2), mxfp4_fake_quant(w3)
        flat_e = topi.reshape(-1)
        order = torch.argsort(flat_e, stable=True)
        counts = torch.bincount(flat_e, minlength=E).tolist()
        tok = order // k
        outs = []
        for e, rt in enumerate(torch.split(r[tok], counts)):
            if rt.shape[0] == 0:
                continue
            he = situ(rt @ w1[e].t(), rt @ w3[e].t(), c.situ_beta, c.situ_linear_beta) @ w2[e].t()
            outs.append(he)
        inv = torch.empty_like(order)
        inv[order] = torch.arange(order.numel())
        h_all = torch.cat(outs, 0)[inv].view(N, k, -1)
        if exact:
            acc = torch.zeros_like(r)
            for i in range(k):                                # multiply, then add, in route order
                acc = acc + w[:, i:i + 1] * h_all[:, i]
        else:
            acc = (w.unsqueeze(-1) * h_all).sum(1)
        z = rmsnorm(acc, self.routed_expert_norm, c.rms_norm_eps)
        routed = self.routed_expert_up_proj(z)
        shared = self.shared_down(situ(self.shared_gate(x2), self.shared_up(x2), c.situ_beta, c.situ_linear_beta))
        self._loads = torch.tensor(counts, dtype=torch.float32)
        return (routed + shared).view(shp)


class Layer(nn.Module):
    def __init__(self, c: K3Config, l):
        super().__init__()
        H, n = c.hidden_size, c.num_hidden_layers
        self.l = l
        self.input_layernorm = nn.Parameter(torch.ones(H))
        self.post_attention_layernorm = nn.Parameter(torch.ones(H))
        self.self_attention_res_norm = nn.Parameter(torch.ones(H))
        self.self_attention_res_proj = nn.Parameter(torch.zeros(1, H))
        self.mlp_res_norm = nn.Parameter(torch.ones(H))
        self.mlp_res_proj = nn.Parameter(torch.zeros(1, H))
        self.self_attn = MLA(c, n) if c.is_mla(l) else KDA(c, n)
        self.dense = l < c.first_k_dense_replace
        if self.dense:
            self.mlp = DenseFFN(c, n)
        else:
            self.block_sparse_moe = MoE(c, n)


class K3Model(nn.Module):
    def __init__(self, c: K3Config):
        super().__init__()
        self.c = c
        H = c.hidden_size
        self.embed_tokens = nn.Embedding(c.vocab_size, H)
        nn.init.normal_(self.embed_tokens.weight, 0.0, 1.0)
        self.layers = nn.ModuleList(Layer(c, l) for l in range(c.num_hidden_layers))
        self.norm = nn.Parameter(torch.ones(H))
        self.output_attn_res_norm = nn.Parameter(torch.ones(H))
        self.output_attn_res_proj = nn.Parameter(torch.zeros(1, H))
        self.lm_head = linear(H, c.vocab_size, std=1.0 / math.sqrt(H))

    def moes(self):
        return [L.block_sparse_moe for L in self.layers if not L.dense]

    def forward(self, ids, exact=False, keep_stats=False, return_ffn_inputs=False, trace=None):
        """trace: optional list; gets one dict per layer (anchors and partial sum after the layer,
        the FFN input) for the routing statistics."""
        c = self.c
        eps = c.rms_norm_eps
        p = self.embed_tokens(ids)
        A = []
        ffn_inputs = []
        for l, L in enumerate(self.layers):
            a_in = p if not A else depth_mix(A + [p], L.self_attention_res_norm, L.self_attention_res_proj, eps)
            if l % c.attn_res_block_size == 0:
                A = A + [p]
                base = None
            else:
                base = p
            o = L.self_attn(rmsnorm(a_in, L.input_layernorm, eps))
            p_mid = o if base is None else base + o
            m = depth_mix(A + [p_mid], L.mlp_res_norm, L.mlp_res_proj, eps)
            x_ffn = rmsnorm(m, L.post_attention_layernorm, eps)
            if return_ffn_inputs:
                ffn_inputs.append(x_ffn)
            f = L.mlp(x_ffn) if L.dense else L.block_sparse_moe(x_ffn, exact=exact, keep_stats=keep_stats)
            p = p_mid + f
            if trace is not None:
                trace.append({"A": list(A), "p": p, "x_ffn": x_ffn})
        m = depth_mix(A + [p], self.output_attn_res_norm, self.output_attn_res_proj, eps)
        logits = self.lm_head(rmsnorm(m, self.norm, eps))
        return (logits, ffn_inputs) if return_ffn_inputs else logits


def n_params(model):
    return sum(p.numel() for p in model.parameters())
