"""Stand-in for the `transformers` package, just enough for llama.cpp's convert_hf_to_gguf.py on a
Qwen3 checkpoint with a tokenizer.json (Debian packages no transformers). Not a tokenizer: encode()
only knows whole added tokens, which is all get_vocab_base() asks of it."""
import json, os


class AutoConfig:
    @staticmethod
    def from_pretrained(*args, **kwargs):
        raise OSError("stub transformers: no AutoConfig; the converter falls back to config.json")


class _Added:
    def __init__(self, d):
        self.content = d["content"]
        self.special = bool(d.get("special", False))
        self.normalized = bool(d.get("normalized", True))


class _Tokenizer:
    is_fast = True

    def __init__(self, path):
        tj = json.load(open(os.path.join(path, "tokenizer.json"), encoding="utf-8"))
        self.vocab = dict(tj["model"]["vocab"])
        self.added_tokens_decoder = {}
        self._added = {}
        for a in tj.get("added_tokens", []):
            self.vocab[a["content"]] = a["id"]
            self.added_tokens_decoder[a["id"]] = _Added(a)
            self._added[a["content"]] = a["id"]
        self._rev = {i: t for t, i in self.vocab.items()}

    def get_vocab(self):
        return dict(self.vocab)

    def get_added_vocab(self):
        return dict(self._added)

    def encode(self, text, add_special_tokens=True):
        if text in self._added:
            return [self._added[text]]
        raise NotImplementedError("stub transformers: encode() knows only added tokens")

    def decode(self, ids, **kwargs):
        return "".join(self._rev[i] for i in ids)


class AutoTokenizer:
    @staticmethod
    def from_pretrained(path, *args, **kwargs):
        return _Tokenizer(str(path))
