#!/usr/bin/python3
"""float64 reference logits (Deltafin's tools/reference/qwen3_torch.py) teacher-forced along given ids.
Usage: ref_logits.py DELTAFIN_SRC MODEL_DIR PROMPT_IDS(a,b,c) GEN_IDS_FILE OUT.f32
Writes [len(gen)][vocab] little-endian fp32: the logits that predict each generated id."""
import os, sys
import numpy as np, torch
sys.path.insert(0, os.path.join(sys.argv[1], "tools", "reference"))
from qwen3_torch import Qwen3Reference
torch.set_num_threads(1)
ref = Qwen3Reference(sys.argv[2])
prompt = [int(x) for x in sys.argv[3].split(",")]
gen = [int(x) for x in open(sys.argv[4]).read().split()]
with torch.no_grad():
    z = ref.forward(prompt + gen[:-1]).numpy()[len(prompt) - 1:]
assert z.shape[0] == len(gen)
z.astype("<f4").tofile(sys.argv[5])
top = z.argmax(axis=1)
print(f"{sys.argv[5]}: {len(gen)} rows, reference argmax == given id in {(top == np.array(gen)).sum()} of {len(gen)}")
