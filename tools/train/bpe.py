"""Byte-level BPE with K3's pre-tokenisation, tiktoken encoding semantics.

Training: classic merge loop over pre-token counts (most frequent adjacent
pair first; ties to the lexicographically smallest (left id, right id)). The
n-th merge gets rank 256 + n; ranks 0..255 are the single bytes in byte order.
Encoding (tiktoken rules, docs/design/tokenizer.md): a pre-token that is itself a rank is one
token; otherwise merge the adjacent pair whose concatenation has the lowest
rank, leftmost on ties, until no pair is a rank.

  /usr/bin/python3 tools/train/bpe.py train --ranks 4096 --out models/demo
"""
import argparse
import base64
import heapq
import json
import os
import sys
from collections import Counter

import regex

PATTERN = "|".join([
    r"[\p{Han}]+",
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    r"\p{N}{1,3}",
    r" ?[^\s\p{L}\p{N}]+[\r\n]*",
    r"\s*[\r\n]+",
    r"\s+(?!\S)",
    r"\s+",
])
_RE = regex.compile(PATTERN, flags=regex.V1)

MAX_SLICE = 400_000
MAX_RUN = 25_000

# K3's special-token spellings by offset from the first special id (docs/design/tokenizer.md).
SPECIAL_NAMES = {0: "[BOS]", 1: "[EOS]", 2: "<|end_of_msg|>", 3: "<|open|>", 4: "<|close|>", 5: "<|sep|>",
                 6: "[start_header_id]", 7: "[end_header_id]", 9: "[EOT]", 18: "<|media_begin|>",
                 19: "<|media_content|>", 20: "<|media_end|>", 21: "<|media_pad|>", 65: "<osagent_mode>",
                 254: "[UNK]", 255: "[PAD]"}


def _isspace(ch):
    return ch.isspace()


def _split_runs(s):
    """Cuts s wherever a run of same-class (space / non-space) characters exceeds MAX_RUN."""
    if not s:
        return
    cur_space = _isspace(s[0])
    run = 0
    start = 0
    for i, ch in enumerate(s):
        sp = _isspace(ch)
        if sp != cur_space:
            cur_space = sp
            run = 1
        else:
            run += 1
            if run > MAX_RUN:
                yield s[start:i]
                start = i
                run = 1
    yield s[start:]


def pretokenize(text):
    for i in range(0, len(text), MAX_SLICE):
        for piece in _split_runs(text[i:i + MAX_SLICE]):
            yield from _RE.findall(piece)


# ---------------------------------------------------------------- training

def train(texts, n_ranks, log=print):
    counts = Counter()
    for t in texts:
        counts.update(pretokenize(t))
    log(f"bpe: {len(counts)} distinct pre-tokens")
    words = []   # [list of ids, freq]
    for piece, n in counts.items():
        b = piece.encode("utf-8")
        if len(b) > 1:
            words.append([list(b), n])
    vocab = [bytes([i]) for i in range(256)]
    pair_count = Counter()
    where = {}
    for wi, (ids, n) in enumerate(words):
        for a, b in zip(ids, ids[1:]):
            pair_count[(a, b)] += n
            where.setdefault((a, b), set()).add(wi)
    heap = [(-c, p) for p, c in pair_count.items()]
    heapq.heapify(heap)
    while len(vocab) < n_ranks and heap:
        negc, pair = heapq.heappop(heap)
        if pair_count.get(pair, 0) != -negc or negc == 0:
            continue  # stale entry
        new_id = len(vocab)
        vocab.append(vocab[pair[0]] + vocab[pair[1]])
        touched = Counter()
        for wi in where.pop(pair, ()):
            ids, n = words[wi]
            # remove this word's old pairs
            for a, b in zip(ids, ids[1:]):
                pair_count[(a, b)] -= n
                touched[(a, b)] += 0
            out = []
            i = 0
            while i < len(ids):
                if i + 1 < len(ids) and ids[i] == pair[0] and ids[i + 1] == pair[1]:
                    out.append(new_id)
                    i += 2
                else:
                    out.append(ids[i])
                    i += 1
            words[wi][0] = out
            for a, b in zip(out, out[1:]):
                pair_count[(a, b)] += n
                where.setdefault((a, b), set()).add(wi)
                touched[(a, b)] += 0
        pair_count.pop(pair, None)
        for p in touched:
            c = pair_count.get(p, 0)
            if c > 0:
                heapq.heappush(heap, (-c, p))
            else:
                pair_count.pop(p, None)
        if len(vocab) % 512 == 0:
            log(f"bpe: {len(vocab)} ranks, last {vocab[-1]!r} x{-negc}")
    return vocab


# ---------------------------------------------------------------- encoding

class Tokenizer:
    def __init__(self, vocab, specials):
        self.vocab = list(vocab)                      # rank -> bytes
        self.rank = {b: i for i, b in enumerate(self.vocab)}
        self.specials = dict(specials)                # id -> spelling
        self.n = len(self.vocab)
        self._cache = {}

    @classmethod
    def load(cls, model_dir):
        vocab = []
        with open(os.path.join(model_dir, "tiktoken.model"), "rb") as f:
            for n, line in enumerate(f):
                tok, r = line.split()
                assert int(r) == n, "ranks must be 0..N-1 in file order"
                vocab.append(base64.b64decode(tok))
        with open(os.path.join(model_dir, "tokenizer_config.json")) as f:
            cfg = json.load(f)
        specials = {int(k): v["content"] for k, v in cfg["added_tokens_decoder"].items()}
        return cls(vocab, specials)

    def _bpe(self, b):
        r = self.rank.get(b)
        if r is not None:
            return [r]
        parts = [bytes([x]) for x in b]
        while len(parts) > 1:
            best, best_i = None, -1
            for i in range(len(parts) - 1):
                r = self.rank.get(parts[i] + parts[i + 1])
                if r is not None and (best is None or r < best):
                    best, best_i = r, i
            if best is None:
                break
            parts[best_i:best_i + 2] = [parts[best_i] + parts[best_i + 1]]
        return [self.rank[p] for p in parts]

    def encode(self, text):
        """Ordinary text (specials disabled, as for raw completion prompts)."""
        out = []
        cache = self._cache
        for piece in pretokenize(text):
            ids = cache.get(piece)
            if ids is None:
                ids = self._bpe(piece.encode("utf-8"))
                if len(cache) < 2_000_000:
                    cache[piece] = ids
            out.extend(ids)
        return out

    def decode_bytes(self, ids):
        return b"".join(self.vocab[i] if i < self.n else self.specials.get(i, "").encode() for i in ids)

    def decode(self, ids):
        return self.decode_bytes(ids).decode("utf-8", errors="replace")


def special_table(n_ranks):
    return {n_ranks + k: SPECIAL_NAMES.get(k, f"<|reserved_token_{n_ranks + k}|>") for k in range(256)}


def write(vocab, out_dir):
    os.makedirs(out_dir, exist_ok=True)
    n = len(vocab)
    with open(os.path.join(out_dir, "tiktoken.model"), "w", newline="\n") as f:
        for i, b in enumerate(vocab):
            f.write(f"{base64.b64encode(b).decode('ascii')} {i}\n")
    specials = special_table(n)
    cfg = {
        "added_tokens_decoder": {str(i): {"content": s, "lstrip": False, "normalized": False, "rstrip": False,
                                          "single_word": False, "special": True} for i, s in specials.items()},
        "bos_token": "[BOS]",
        "eos_token": "<|end_of_msg|>",
        "pad_token": "[PAD]",
        "unk_token": "[UNK]",
        "model_max_length": 1048576,
        "tokenizer_class": "TikTokenTokenizer",
    }
    with open(os.path.join(out_dir, "tokenizer_config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
        f.write("\n")


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("train")
    t.add_argument("--ranks", type=int, default=4096)
    t.add_argument("--out", nargs="+", required=True)
    e = sub.add_parser("encode")
    e.add_argument("--model", required=True)
    e.add_argument("text")
    a = ap.parse_args()
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    if a.cmd == "train":
        import corpus
        train_paths, _ = corpus.split()
        vocab = train(corpus.texts(train_paths), a.ranks)
        for d in a.out:
            write(vocab, d)
    else:
        tok = Tokenizer.load(a.model)
        ids = tok.encode(a.text)
        print(ids)
        print([tok.vocab[i] for i in ids])


if __name__ == "__main__":
    main()
