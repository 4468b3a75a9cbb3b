#!/usr/bin/env python3
"""Converts a Deltafin checkpoint (the published K3 layout) to GGUF with llama.cpp's own
converter, unchanged, from a llama.cpp tree OUTSIDE this repository. A benchmark aid only:
llama.cpp is never a dependency of Deltafin (docs/guide/benchmarking.md, "Side by side with llama.cpp").

What this wrapper supplies, so that the converter runs on Debian's python3 (python3-torch,
python3-numpy, python3-tqdm) without the `transformers` package:
  * a stand-in `transformers` module: AutoConfig fails (the converter then reads config.json
    itself), AutoTokenizer reads our tiktoken.model and tokenizer_config.json, and
    convert_slow_tokenizer.bytes_to_unicode is the GPT-2 byte-to-unicode table;
  * the converter's Kimi-K2 pre-tokenizer, chosen directly (its detection hashes the output of
    the real K2 tokenizer, which a small test vocabulary cannot reproduce);
  * the `architectures` key K3's config.json carries and ours omits;
  * float8 dtype names that torch 1.13 lacks (never used by our checkpoints).

Usage: convert_for_llamacpp.py LLAMA_CPP_DIR CHECKPOINT_DIR OUT.gguf [converter args...]
"""
import base64
import json
import sys
import types
from pathlib import Path


def bytes_to_unicode():
    # GPT-2's reversible map of the 256 byte values onto printable unicode characters.
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, [chr(c) for c in cs]))


class _Tokenizer:
    """What the converter's Kimi path reads from a tokenizer: ranks, specials, eos."""

    def __init__(self, model_dir: Path):
        ranks = {}
        for line in (model_dir / "tiktoken.model").read_text().splitlines():
            if line.strip():
                tok, rank = line.split()
                ranks[base64.b64decode(tok)] = int(rank)
        self.model = types.SimpleNamespace(_mergeable_ranks=ranks)
        cfg = json.loads((model_dir / "tokenizer_config.json").read_text())
        self.special_tokens = {v["content"]: int(k) for k, v in cfg.get("added_tokens_decoder", {}).items()}
        root = json.loads((model_dir / "config.json").read_text())
        self.eos_id = root.get("eos_token_id", root.get("text_config", {}).get("eos_token_id"))

    def get_vocab(self):
        return {**{k.decode("latin-1"): v for k, v in self.model._mergeable_ranks.items()}, **self.special_tokens}


def install_stand_ins():
    tf = types.ModuleType("transformers")

    class AutoConfig:
        @staticmethod
        def from_pretrained(*a, **k):
            raise OSError("no transformers here: read config.json")

    class AutoTokenizer:
        @staticmethod
        def from_pretrained(path, **k):
            return _Tokenizer(Path(path))

    tf.AutoConfig = AutoConfig
    tf.AutoTokenizer = AutoTokenizer
    cst = types.ModuleType("transformers.convert_slow_tokenizer")
    cst.bytes_to_unicode = bytes_to_unicode
    tf.convert_slow_tokenizer = cst
    sys.modules["transformers"] = tf
    sys.modules["transformers.convert_slow_tokenizer"] = cst

    import torch

    for name in ("float8_e4m3fn", "float8_e5m2"):
        if not hasattr(torch, name):
            setattr(torch, name, torch.uint8)


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    llama_dir, model_dir, out = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
    install_stand_ins()
    sys.path.insert(0, str(llama_dir))
    sys.path.insert(1, str(llama_dir / "gguf-py"))
    import convert_hf_to_gguf  # noqa: E402  (the converter itself, unchanged)
    from conversion import base  # noqa: E402

    load = base.ModelBase.load_hparams

    def load_hparams(dir_model, is_mistral_format):
        h = load(dir_model, is_mistral_format)
        h.setdefault("architectures", ["KimiK3ForConditionalGeneration"])
        return h

    base.ModelBase.load_hparams = staticmethod(load_hparams)
    base.TextModel.get_vocab_base_pre = lambda self, tokenizer: "kimi-k2"
    sys.argv = ["convert_hf_to_gguf.py", str(model_dir), "--outfile", out] + sys.argv[4:]
    convert_hf_to_gguf.main()


if __name__ == "__main__":
    main()
