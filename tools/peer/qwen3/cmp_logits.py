#!/usr/bin/python3
"""Compare two raw fp32 logit dumps [steps][vocab] (A, B) of the same contexts.
Prints one line: steps compared, max|A-B| (step, id), max|A|, that relative, argmax-equal steps,
smallest top1-top2 gap of A. With -v: one line per step."""
import sys, numpy as np
V = 151936
args = [x for x in sys.argv[1:] if x != "-v"]
a = np.fromfile(args[0], dtype="<f4").reshape(-1, V).astype(np.float64)
b = np.fromfile(args[1], dtype="<f4").reshape(-1, V).astype(np.float64)
n = int(args[2]) if len(args) > 2 else min(len(a), len(b))
a, b = a[:n], b[:n]
d = np.abs(a - b)
s, j = np.unravel_index(int(d.argmax()), d.shape)
srt = np.sort(a, axis=1)
gaps = srt[:, -1] - srt[:, -2]
eq = (a.argmax(1) == b.argmax(1))
if "-v" in sys.argv:
    for t in range(n):
        print("step %2d max|d| %.3e argmax %6d/%6d gap %.5f" % (t, d[t].max(), a[t].argmax(), b[t].argmax(), gaps[t]))
print("steps %d  max|dlogit| %.3e (step %d, id %d)  max|logit| %.2f  rel %.2e  argmax equal %d/%d  min gap %.2e"
      % (n, d.max(), s, j, np.abs(a).max(), d.max() / np.abs(a).max(), eq.sum(), n, gaps.min()))
