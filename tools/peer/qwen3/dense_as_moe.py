#!/usr/bin/python3
"""Re-express a Qwen3-MoE checkpoint's dense `mlp_only_layers` as MoE layers, exactly, for
llama.cpp (whose qwen3moe graph has an MoE FFN in every layer and no dense-layer path).

Dense layer (intermediate I = 4*c <= 4*moe_intermediate_size) -> 16 experts:
  router weight all zero   -> every logit is exactly 0, softmax exactly 1/E, top-k ties keep the
                              lowest ids (ggml CPU: std::partial_sort / insertion sort), so experts
                              0..k-1 are chosen, each with normalised weight exactly 1/k;
  expert j < k             -> rows [j*c,(j+1)*c) of gate/up (zero-padded to moe_intermediate_size),
                              columns of down_proj likewise, multiplied by k (a power of two: exact);
  experts k..E-1           -> zero.
So the layer computes sum_j k*(1/k)*down_j(silu(gate_j x)*up_j x) = the dense MLP, up to the order
of the f32 accumulation (k partial sums of width c instead of one of width I).
BF16 only. Usage: dense_as_moe.py SRC_DIR DST_DIR
"""
import json, os, shutil, struct, sys
import numpy as np

src, dst = sys.argv[1], sys.argv[2]
cfg = json.load(open(os.path.join(src, "config.json")))
E, k = cfg["num_experts"], cfg["num_experts_per_tok"]
H, I, Im = cfg["hidden_size"], cfg["intermediate_size"], cfg["moe_intermediate_size"]
dense = cfg.get("mlp_only_layers", [])
assert cfg["norm_topk_prob"] and cfg.get("decoder_sparse_step", 1) == 1
assert I % k == 0 and I // k <= Im and k & (k - 1) == 0, "need I = k*c, c <= moe width, k a power of two"
c = I // k

def read_shard(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        hdr = json.loads(f.read(n))
        base = 8 + n
        out = {}
        for name, t in hdr.items():
            if name == "__metadata__":
                continue
            a, b = t["data_offsets"]
            f.seek(base + a)
            assert t["dtype"] == "BF16", (name, t["dtype"])
            out[name] = np.frombuffer(f.read(b - a), dtype=np.uint16).reshape(t["shape"]).copy()
        return out

tensors = {}
for fn in sorted(os.listdir(src)):
    if fn.endswith(".safetensors"):
        tensors.update(read_shard(os.path.join(src, fn)))

def bf16_times_pow2(u16, k):
    # multiply BF16 bit patterns by k (power of two) via float32: exact (no overflow at these scales)
    f = (u16.astype(np.uint32) << 16).view(np.float32) * np.float32(k)
    r = f.view(np.uint32)
    assert np.all((r & 0xFFFF) == 0)
    return (r >> 16).astype(np.uint16)

for L in dense:
    p = f"model.layers.{L}.mlp."
    g, u, d = (tensors.pop(p + n + "_proj.weight") for n in ("gate", "up", "down"))
    assert g.shape == (I, H) and u.shape == (I, H) and d.shape == (H, I)
    tensors[p + "gate.weight"] = np.zeros((E, H), np.uint16)
    for e in range(E):
        ge = np.zeros((Im, H), np.uint16); ue = np.zeros((Im, H), np.uint16); de = np.zeros((H, Im), np.uint16)
        if e < k:
            ge[:c] = g[e * c:(e + 1) * c]; ue[:c] = u[e * c:(e + 1) * c]
            de[:, :c] = bf16_times_pow2(d[:, e * c:(e + 1) * c], k)
        tensors[p + f"experts.{e}.gate_proj.weight"] = ge
        tensors[p + f"experts.{e}.up_proj.weight"] = ue
        tensors[p + f"experts.{e}.down_proj.weight"] = de

os.makedirs(dst, exist_ok=True)
hdr, off, names = {}, 0, sorted(tensors)
for n in names:
    nb = tensors[n].nbytes
    hdr[n] = {"dtype": "BF16", "shape": list(tensors[n].shape), "data_offsets": [off, off + nb]}
    off += nb
hb = json.dumps(hdr).encode()
hb += b" " * (-len(hb) % 8)
with open(os.path.join(dst, "model.safetensors"), "wb") as f:
    f.write(struct.pack("<Q", len(hb))); f.write(hb)
    for n in names:
        f.write(np.ascontiguousarray(tensors[n]).tobytes())
cfg["mlp_only_layers"] = []
cfg["deltafin_note"] = f"dense layers {dense} re-expressed as MoE by dense_as_moe.py"
json.dump(cfg, open(os.path.join(dst, "config.json"), "w"), indent=2)
for fn in ("generation_config.json", "tokenizer.json", "tokenizer_config.json"):
    if os.path.exists(os.path.join(src, fn)):
        shutil.copy(os.path.join(src, fn), dst)
print(f"wrote {dst}: dense layers {dense} -> {E} experts (k={k}, chunk {c} of {Im})")
