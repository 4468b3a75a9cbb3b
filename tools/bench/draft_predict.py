#!/usr/bin/env python3
"""Speed-up that drafting would give, predicted from a measured verification
cost curve (the table `deltafin bench-verify` prints).

usage: draft_predict.py BENCH_VERIFY_OUTPUT [--experts 896] [--active 16]
                        [--persistence 0.39] [--acceptance 0.5,0.7,0.9]

A drafted step with k drafts, each right with probability a once the ones
before it were, emits 1 + a + ... + a^k tokens and costs time(k)/time(plain)
plain steps. Two routings:
  measured  the curve as measured (the store's own routing; on the synthetic
            k3-shaped stores it is close to random: a block of k+1 rows reads
            nearly k+1 rows' experts)
  persist   the measured cost re-scaled to the bytes a block would read if a
            share p of each token's experts repeated from the previous token:
            union ~ active * (1 + (1 - p) * k) experts instead of the
            measured union. The rest of the block's time (compute) is kept
            as measured: time(k) = compute(k) + read(k), read(k) scaled.
The best k per acceptance is reported; below 1.00 drafting loses.
"""
import argparse
import re
import sys


def parse(path):
    plain_s = plain_mb = None
    rows = {}
    for line in open(path):
        m = re.match(r"plain step: ([\d.]+) s, ([\d.]+) MB", line)
        if m:
            plain_s, plain_mb = float(m.group(1)), float(m.group(2))
            continue
        m = re.match(r"\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s", line)
        if m:
            k = int(m.group(1))
            rows[k] = dict(time=float(m.group(3)), bytes=float(m.group(5)))
    if plain_s is None or not rows:
        sys.exit(f"{path}: no bench-verify table found")
    return plain_s, plain_mb, rows


def emitted(a, k):
    return sum(a ** i for i in range(k + 1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("table")
    ap.add_argument("--experts", type=int, default=896)
    ap.add_argument("--active", type=int, default=16)
    ap.add_argument("--persistence", type=float, default=0.39)
    ap.add_argument("--acceptance", default="0.5,0.7,0.9")
    ap.add_argument("--read-share", type=float, default=None,
                    help="share of a plain step's time spent waiting for reads (default: estimated from the curve)")
    o = ap.parse_args()
    plain_s, plain_mb, rows = parse(o.table)
    accs = [float(x) for x in o.acceptance.split(",")]
    # Read share: fit time(k) = c + r * bytes(k) over the curve (least squares),
    # in plain-step units; r is the read-bound share of a plain step.
    ks = sorted(rows)
    xs = [rows[k]["bytes"] for k in ks]
    ys = [rows[k]["time"] for k in ks]
    n = len(ks)
    mx, my = sum(xs) / n, sum(ys) / n
    var = sum((x - mx) ** 2 for x in xs)
    r = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / var if var > 0 else 1.0
    if o.read_share is not None:
        r = o.read_share
    r = max(0.0, min(1.0, r))
    print(f"plain step {plain_s:.4f} s, {plain_mb:.1f} MB; time per plain-step of bytes fitted: {r:.3f}")

    def persist_bytes(k):  # a block's union in plain steps' bytes
        union = o.active * (1 + (1 - o.persistence) * k)
        return min(union, o.experts) / o.active

    print(f"{'k':>3} {'cost meas':>10} {'cost p=' + str(o.persistence):>12}  " +
          "  ".join(f"a={a:.1f} meas/persist" for a in accs))
    best = {("meas", a): (0, 1.0) for a in accs} | {("persist", a): (0, 1.0) for a in accs}
    for k in ks:
        meas = rows[k]["time"]
        pers = meas - r * rows[k]["bytes"] + r * persist_bytes(k)
        cells = []
        for a in accs:
            e = emitted(a, k)
            sm, sp = e / meas, e / pers
            cells.append(f"{sm:>10.2f}/{sp:<9.2f}")
            if sm > best[("meas", a)][1]:
                best[("meas", a)] = (k, sm)
            if sp > best[("persist", a)][1]:
                best[("persist", a)] = (k, sp)
        print(f"{k:>3} {meas:>10.3f} {pers:>12.3f}  " + "  ".join(cells))
    for kind in ("meas", "persist"):
        label = "measured routing" if kind == "meas" else f"{o.persistence:.0%} of experts repeating"
        parts = []
        for a in accs:
            k, s = best[(kind, a)]
            parts.append(f"a={a:.1f}: " + (f"{s:.2f}x at k={k}" if k else "no k pays (1.00x: drafting off)"))
        print(f"best, {label}: " + "; ".join(parts))


if __name__ == "__main__":
    main()
