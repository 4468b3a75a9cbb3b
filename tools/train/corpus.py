"""The training corpus: Python's standard library sources and documentation.

Both come from Debian packages (python3.11 for /usr/lib/python3.11/**/*.py,
python3.11-doc for the reST sources of the docs). Files are listed in sorted
order and every 40th file (by that order, separately per kind) is held out
for evaluation, so the split is deterministic on any machine with the same
package versions.
"""
import glob
import os

PY_ROOT = "/usr/lib/python3.11"
DOC_ROOT = "/usr/share/doc/python3.11/html/_sources"
HOLDOUT_EVERY = 40


def code_only():
    """Drops the reST docs from the corpus (as on a machine without python3.11-doc,
    where the first chat tuning ran); returns the token cache directory for that stream."""
    global DOC_ROOT
    DOC_ROOT = "/nonexistent"
    return "/tmp/k3train/no-docs"


def _files():
    py = sorted(p for p in glob.glob(os.path.join(PY_ROOT, "**", "*.py"), recursive=True)
                if "site-packages" not in p and "dist-packages" not in p)
    docs = sorted(glob.glob(os.path.join(DOC_ROOT, "**", "*.txt"), recursive=True))
    return py, docs


def split():
    """Returns (train_paths, heldout_paths)."""
    train, held = [], []
    for group in _files():
        for i, p in enumerate(group):
            (held if i % HOLDOUT_EVERY == HOLDOUT_EVERY // 2 else train).append(p)
    return train, held


def read(path):
    with open(path, "rb") as f:
        return f.read().decode("utf-8", errors="replace")


def texts(paths):
    return [read(p) for p in paths]
