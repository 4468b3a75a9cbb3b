"""Exports a trained model (train.py's .pt) in the published K3 layout.

  /usr/bin/python3 tools/train/export.py /tmp/k3train/target.pt models/demo --shards 2
  /usr/bin/python3 tools/train/export.py /tmp/k3train/draft.pt models/demo-draft --shards 1

Writes config.json, generation_config.json, model.safetensors.index.json and
model-0000i-of-00000n.safetensors (spine in the first shard, the MXFP4 routed
experts in the last; each expert's six records are contiguous). The tokenizer
files (tiktoken.model, tokenizer_config.json) are written by bpe.py.
"""
import argparse
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from checkpoint import published_tensors, write_safetensors  # noqa: E402
from k3_torch import K3Config, K3Model  # noqa: E402


def config_json(c: K3Config):
    n = c.num_hidden_layers
    mla = [l + 1 for l in range(n) if c.is_mla(l)]
    kda = [l + 1 for l in range(n) if not c.is_mla(l)]
    ids = {"bos_token_id": c.bos_token_id, "eos_token_id": c.eos_token_id, "pad_token_id": c.pad_token_id}
    text = {
        "model_type": "kimi_linear", "dtype": "bfloat16",
        "hidden_size": c.hidden_size, "num_hidden_layers": n, "vocab_size": c.vocab_size,
        "max_position_embeddings": 1048576, "rms_norm_eps": c.rms_norm_eps, "hidden_act": "situ",
        "activation_situ_beta": c.situ_beta, "activation_situ_linear_beta": c.situ_linear_beta,
        "intermediate_size": c.intermediate_size, "first_k_dense_replace": c.first_k_dense_replace,
        "moe_layer_freq": 1, "num_experts": c.num_experts, "num_experts_per_token": c.num_experts_per_token,
        "num_shared_experts": c.num_shared_experts, "moe_intermediate_size": c.moe_intermediate_size,
        "routed_expert_hidden_size": c.routed_expert_hidden_size, "latent_moe_use_norm": True,
        "moe_router_activation_func": "sigmoid", "topk_method": "noaux_tc", "moe_renormalize": True,
        "routed_scaling_factor": 1.0, "use_grouped_topk": True, "num_expert_group": 1, "topk_group": 1,
        "num_attention_heads": c.num_attention_heads, "num_key_value_heads": c.num_attention_heads,
        "q_lora_rank": c.q_lora_rank, "kv_lora_rank": c.kv_lora_rank, "qk_nope_head_dim": c.qk_nope_head_dim,
        "qk_rope_head_dim": c.qk_rope_head_dim, "v_head_dim": c.v_head_dim, "mla_use_nope": True,
        "mla_use_output_gate": True, "attn_res_block_size": c.attn_res_block_size, "num_nextn_predict_layers": 0,
        "tie_word_embeddings": False, "use_cache": True,
        "linear_attn_config": {"num_heads": c.kda_heads, "head_dim": c.kda_head_dim,
                               "short_conv_kernel_size": c.short_conv_kernel_size, "use_full_rank_gate": True,
                               "gate_lower_bound": c.gate_lower_bound, "kda_layers": kda, "full_attn_layers": mla},
        "quantization_config": {
            "quant_method": "compressed-tensors", "format": "mxfp4-pack-quantized",
            "quantization_status": "compressed",
            "config_groups": {"group_0": {
                "format": "mxfp4-pack-quantized", "targets": ["Linear"],
                "weights": {"num_bits": 4, "type": "float", "strategy": "group", "group_size": 32,
                            "symmetric": True, "dynamic": False, "observer": "minmax",
                            "scale_dtype": "torch.uint8"}}}},
        **ids,
    }
    return {"architectures": ["KimiK3ForConditionalGeneration"], "model_type": "kimi_k3", "dtype": "bfloat16",
            "tie_word_embeddings": False, **ids, "text_config": text}


def export(model: K3Model, out_dir, n_shards):
    c = model.c
    os.makedirs(out_dir, exist_ok=True)
    for f in os.listdir(out_dir):
        if f.endswith(".safetensors"):
            os.remove(os.path.join(out_dir, f))
    spine, experts = published_tensors(model)
    groups = [spine + experts] if n_shards == 1 else [spine, experts]
    weight_map, total = {}, 0
    for i, g in enumerate(groups):
        name = f"model-{i + 1:05d}-of-{len(groups):06d}.safetensors"
        total += write_safetensors(os.path.join(out_dir, name), g)
        for t in g:
            weight_map[t[0]] = name
    with open(os.path.join(out_dir, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2)
        f.write("\n")
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(config_json(c), f, indent=2)
        f.write("\n")
    with open(os.path.join(out_dir, "generation_config.json"), "w") as f:
        json.dump({"bos_token_id": c.bos_token_id, "eos_token_id": c.eos_token_id,
                   "pad_token_id": c.pad_token_id, "do_sample": False}, f, indent=2)
        f.write("\n")


def load_trained(path):
    ck = torch.load(path)
    model = K3Model(K3Config(**ck["config"]))
    model.load_state_dict(ck["state"])
    return model


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("checkpoint")
    ap.add_argument("out_dir")
    ap.add_argument("--shards", type=int, choices=(1, 2), default=2)
    a = ap.parse_args()
    export(load_trained(a.checkpoint), a.out_dir, a.shards)
    for f in sorted(os.listdir(a.out_dir)):
        print(f"{os.path.getsize(os.path.join(a.out_dir, f)):>10}  {f}")


if __name__ == "__main__":
    main()
