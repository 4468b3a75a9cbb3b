#!/usr/bin/python3
"""Run llama.cpp's convert_hf_to_gguf.py unchanged on Debian's python3 (torch 1.13, no transformers).
Usage: convert_wrapper.py LLAMA_CPP_DIR [converter args...]
 1. `transformers` -> the stub in ./stub (config.json is read directly; vocab from tokenizer.json);
 2. torch 1.13 has no float8 dtypes: distinct placeholder objects (no FP8 tensor is converted here);
 3. the BPE pre-tokenizer name: the converter hashes tokenizer.encode(chktxt), which needs a real
    tokenizer; the real Qwen3 tokenizer hashes to "qwen2" (its table names Qwen3-Embedding), so
    that name is returned directly. It only affects llama.cpp's text tokenizer, unused on ids."""
import os, runpy, sys
here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "stub"))
import torch
for n in ("float8_e4m3fn", "float8_e5m2"):
    if not hasattr(torch, n):
        setattr(torch, n, type(n, (), {})())
lc = os.path.abspath(sys.argv[1])
sys.path.insert(0, lc)
sys.path.insert(1, os.path.join(lc, "gguf-py"))
import conversion.base as base
base.TextModel.get_vocab_base_pre = lambda self, tokenizer: "qwen2"
sys.argv = [os.path.join(lc, "convert_hf_to_gguf.py")] + sys.argv[2:]
runpy.run_path(sys.argv[0], run_name="__main__")
