"""The published K3 checkpoint layout (docs/design/checkpoint.md): names, dtypes, safetensors I/O.

`to_published(model)` yields (name, dtype, numpy array) in file order;
`load_published(dir)` reads a checkpoint back into a K3Model, BF16 widened
exactly and MXFP4 experts dequantised exactly (e2m1(code) * 2^(scale-127)).
Safetensors is written and read with struct + json only.
"""
import hashlib
import json
import os
import struct

import numpy as np
import torch

import mxfp4
from k3_torch import K3Config, K3Model

P = "language_model.model."


def bf16_bits(t):
    """fp32 -> bf16 bit patterns, round to nearest even (no NaN/Inf in weights)."""
    a = t.detach().to(torch.float32).contiguous().numpy().view(np.uint32).astype(np.uint64)
    assert np.all((a & 0x7F800000) != 0x7F800000), "non-finite weight"
    r = (a + 0x7FFF + ((a >> 16) & 1)) >> 16
    return r.astype(np.uint16)


def bf16_to_f32(bits):
    return torch.from_numpy((bits.astype(np.uint32) << 16).view(np.float32).copy())


class Padded:
    """A 1-D tensor stored zero-padded to length n (K3's A_log: per head, padded)."""
    def __init__(self, t, n):
        self.t, self.n = t, n

    def padded(self):
        out = torch.zeros(self.n, dtype=torch.float32)
        out[:self.t.numel()] = self.t.detach().to(torch.float32)
        return out


def _kda_names(pre, m, heads_pad):
    pad = Padded(m.A_log, heads_pad)
    out = []
    for n in ("q_proj", "k_proj", "v_proj", "g_proj", "f_a_proj", "f_b_proj", "b_proj", "o_proj"):
        out.append((pre + n + ".weight", "BF16", getattr(m, n).weight))
    for n in ("q_conv1d", "k_conv1d", "v_conv1d"):
        out.append((pre + n + ".weight", "F32", getattr(m, n)))
    out += [(pre + "A_log", "F32", pad), (pre + "dt_bias", "F32", m.dt_bias), (pre + "o_norm.weight", "F32", m.o_norm)]
    return out


def _mla_names(pre, m):
    return [(pre + "q_a_proj.weight", "BF16", m.q_a_proj.weight),
            (pre + "q_a_layernorm.weight", "BF16", m.q_a_layernorm),
            (pre + "q_b_proj.weight", "BF16", m.q_b_proj.weight),
            (pre + "kv_a_proj_with_mqa.weight", "BF16", m.kv_a_proj_with_mqa.weight),
            (pre + "kv_a_layernorm.weight", "BF16", m.kv_a_layernorm),
            (pre + "kv_b_proj.weight", "BF16", m.kv_b_proj.weight),
            (pre + "g_proj.weight", "BF16", m.g_proj.weight),
            (pre + "o_proj.weight", "BF16", m.o_proj.weight)]


def published_tensors(model):
    """Returns (spine, experts): lists of (name, dtype, tensor-or-uint8-array). Experts are
    MXFP4-encoded, six records per expert in the order the engine requires."""
    c = model.c
    spine, experts = [], []
    spine.append((P + "embed_tokens.weight", "BF16", model.embed_tokens.weight))
    for l, L in enumerate(model.layers):
        pre = P + f"layers.{l}."
        for n in ("input_layernorm", "post_attention_layernorm", "self_attention_res_norm",
                  "self_attention_res_proj", "mlp_res_norm", "mlp_res_proj"):
            spine.append((pre + n + ".weight", "BF16", getattr(L, n)))
        if c.is_mla(l):
            spine += _mla_names(pre + "self_attn.", L.self_attn)
        else:
            spine += _kda_names(pre + "self_attn.", L.self_attn, max(c.kda_heads, c.kda_head_dim))
        if L.dense:
            for n in ("gate_proj", "up_proj", "down_proj"):
                spine.append((pre + f"mlp.{n}.weight", "BF16", getattr(L.mlp, n).weight))
            continue
        m = L.block_sparse_moe
        s = pre + "block_sparse_moe."
        spine += [(s + "gate.weight", "BF16", m.gate.weight),
                  (s + "gate.e_score_correction_bias", "F32", m.e_score_correction_bias),
                  (s + "routed_expert_down_proj.weight", "BF16", m.routed_expert_down_proj.weight),
                  (s + "routed_expert_norm.weight", "BF16", m.routed_expert_norm),
                  (s + "routed_expert_up_proj.weight", "BF16", m.routed_expert_up_proj.weight),
                  (s + "shared_experts.gate_proj.weight", "BF16", m.shared_gate.weight),
                  (s + "shared_experts.up_proj.weight", "BF16", m.shared_up.weight),
                  (s + "shared_experts.down_proj.weight", "BF16", m.shared_down.weight)]
        enc = {}
        for part in ("w1", "w2", "w3"):
            codes, scales = mxfp4.quantize(getattr(m, part).detach())
            enc[part] = (mxfp4.pack(codes).numpy(), scales.numpy())
        for e in range(c.num_experts):
            for part in ("w1", "w2", "w3"):
                experts.append((s + f"experts.{e}.{part}.weight_packed", "U8", enc[part][0][e]))
                experts.append((s + f"experts.{e}.{part}.weight_scale", "U8", enc[part][1][e]))
    spine += [(P + "norm.weight", "BF16", model.norm),
              (P + "output_attn_res_norm.weight", "BF16", model.output_attn_res_norm),
              (P + "output_attn_res_proj.weight", "BF16", model.output_attn_res_proj),
              ("language_model.lm_head.weight", "BF16", model.lm_head.weight)]
    return spine, experts


def _raw(dtype, x):
    if isinstance(x, Padded):
        x = x.padded()
    if dtype == "BF16":
        return bf16_bits(x)
    if dtype == "F32":
        return x.detach().to(torch.float32).contiguous().numpy()
    assert dtype == "U8"
    return np.ascontiguousarray(x, dtype=np.uint8)


def write_safetensors(path, tensors):
    header, blobs, off = {}, [], 0
    for name, dtype, x in tensors:
        a = _raw(dtype, x)
        b = a.tobytes()
        header[name] = {"dtype": dtype, "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    header["__metadata__"] = {"format": "pt"}
    h = json.dumps(header, separators=(",", ":")).encode("ascii")
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)
    return off


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (hlen,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + hlen])
    base = 8 + hlen
    out = {}
    np_dt = {"BF16": np.uint16, "F32": np.float32, "U8": np.uint8}
    for name, v in header.items():
        if name == "__metadata__":
            continue
        b, e = v["data_offsets"]
        a = np.frombuffer(data, dtype=np_dt[v["dtype"]], count=(e - b) // np.dtype(np_dt[v["dtype"]]).itemsize,
                          offset=base + b).reshape(v["shape"])
        out[name] = (v["dtype"], a)
    return out


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def config_from_json(cfg):
    t = cfg["text_config"]
    la = t["linear_attn_config"]
    return K3Config(hidden_size=t["hidden_size"], num_hidden_layers=t["num_hidden_layers"],
                    vocab_size=t["vocab_size"], intermediate_size=t["intermediate_size"],
                    rms_norm_eps=t["rms_norm_eps"], situ_beta=t["activation_situ_beta"],
                    situ_linear_beta=t["activation_situ_linear_beta"], attn_res_block_size=t["attn_res_block_size"],
                    first_k_dense_replace=t["first_k_dense_replace"], num_experts=t["num_experts"],
                    num_experts_per_token=t["num_experts_per_token"], num_shared_experts=t["num_shared_experts"],
                    moe_intermediate_size=t["moe_intermediate_size"],
                    routed_expert_hidden_size=t["routed_expert_hidden_size"],
                    num_attention_heads=t["num_attention_heads"], q_lora_rank=t["q_lora_rank"],
                    kv_lora_rank=t["kv_lora_rank"], qk_nope_head_dim=t["qk_nope_head_dim"],
                    qk_rope_head_dim=t["qk_rope_head_dim"], v_head_dim=t["v_head_dim"],
                    kda_heads=la["num_heads"], kda_head_dim=la["head_dim"],
                    short_conv_kernel_size=la["short_conv_kernel_size"], gate_lower_bound=la["gate_lower_bound"],
                    bos_token_id=t["bos_token_id"], eos_token_id=t["eos_token_id"], pad_token_id=t["pad_token_id"])


def load_published(model_dir, dtype=torch.float64):
    """Reads an exported checkpoint into a K3Model (weights exactly as the engine sees them)."""
    with open(os.path.join(model_dir, "config.json")) as f:
        cfg = config_from_json(json.load(f))
    with open(os.path.join(model_dir, "model.safetensors.index.json")) as f:
        shards = sorted(set(json.load(f)["weight_map"].values()))
    raw = {}
    for s in shards:
        raw.update(read_safetensors(os.path.join(model_dir, s)))
    model = K3Model(cfg)
    spine, experts = published_tensors(model)   # names + destinations (values ignored)
    dest = {}
    for name, want, x in spine:
        dest[name] = (want, x)
    with torch.no_grad():
        for name, (want, x) in dest.items():
            d, a = raw[name]
            assert d == want, f"{name}: dtype {d}, expected {want}"
            v = bf16_to_f32(a) if d == "BF16" else torch.from_numpy(a.copy())
            if isinstance(x, Padded):
                assert torch.all(v[cfg.kda_heads:] == 0), f"{name}: non-zero padding"
                v, x = v[:cfg.kda_heads], x.t
            x.copy_(v.reshape(x.shape))
        for L in model.layers:
            if L.dense:
                continue
            m = L.block_sparse_moe
            s = P + f"layers.{L.l}.block_sparse_moe.experts."
            for part in ("w1", "w2", "w3"):
                w = getattr(m, part)
                for e in range(cfg.num_experts):
                    codes = mxfp4.unpack(torch.from_numpy(raw[s + f"{e}.{part}.weight_packed"][1].copy()))
                    scales = torch.from_numpy(raw[s + f"{e}.{part}.weight_scale"][1].copy())
                    assert int(scales.max()) < 255, "scale 255"
                    w[e].copy_(mxfp4.dequantize(codes, scales, torch.float64).to(w.dtype))
    return model.to(dtype), cfg
