#!/usr/bin/python3
"""Check that every tensor of an f32 GGUF equals the BF16 safetensors it came from, bit for bit
(experts stacked in id order). Usage: check_gguf_values.py LLAMA_CPP_DIR HF_DIR FILE.gguf"""
import json, os, struct, sys
import numpy as np
sys.path.insert(0, os.path.join(sys.argv[1], "gguf-py"))
import gguf
hf, path = sys.argv[2], sys.argv[3]
st = {}
for fn in sorted(os.listdir(hf)):
    if fn.endswith(".safetensors"):
        f = open(os.path.join(hf, fn), "rb"); n = struct.unpack("<Q", f.read(8))[0]; h = json.loads(f.read(n))
        for k, t in h.items():
            if k != "__metadata__":
                a, b = t["data_offsets"]; f.seek(8 + n + a)
                st[k] = (np.frombuffer(f.read(b - a), np.uint16).astype(np.uint32) << 16).view(np.float32)
m = {"token_embd": "model.embed_tokens", "output": "lm_head", "output_norm": "model.norm"}
b = {"attn_norm": "input_layernorm", "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
     "attn_output": "self_attn.o_proj", "attn_q_norm": "self_attn.q_norm", "attn_k_norm": "self_attn.k_norm",
     "ffn_norm": "post_attention_layernorm", "ffn_gate_inp": "mlp.gate"}
r = gguf.GGUFReader(path)
n_ok = 0
for t in r.tensors:
    assert t.tensor_type == gguf.GGMLQuantizationType.F32, (t.name, t.tensor_type)
    parts = t.name.split(".")
    if parts[0] == "blk":
        L, what = parts[1], parts[2]
        if what.endswith("_exps"):
            w = what[4:-5]
            E = sum(1 for k in st if k.startswith(f"model.layers.{L}.mlp.experts.") and k.endswith(f".{w}_proj.weight"))
            ref = np.concatenate([st[f"model.layers.{L}.mlp.experts.{e}.{w}_proj.weight"] for e in range(E)])
        else:
            ref = st[f"model.layers.{L}.{b[what]}.weight"]
    else:
        ref = st[m[parts[0]] + ".weight"]
    got = np.asarray(t.data, dtype=np.float32).reshape(-1)
    assert got.shape == ref.shape and np.array_equal(got.view(np.uint32), ref.view(np.uint32)), t.name
    n_ok += 1
print(f"{path}: all {n_ok} tensors equal the BF16 checkpoint bit for bit")
