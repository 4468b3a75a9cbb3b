#!/usr/bin/env python3
"""Time to first token and decode tok/s: `deltafin serve` vs `deltafin run`.

The same model, prompt, thread count and token budget, in alternating pairs
(run then server, then server then run, ...), medians reported: of each side,
and of the per-pair ratios, which a slow drift of the host's speed cancels
out of. `run` times from before
tokenisation (its --stats-json `ttft_s`, decode from `step_s`); the server is
timed as a client sees it: from sending the request to the arrival of the
first streamed text, and decode as (completion_tokens - 1) / (arrival of the
finish chunk - arrival of the first text).
Both decode greedily and must produce the same text (checked). Python's
standard library only.

Usage: server_vs_run.py BIN --model DIR [--prompt TEXT] [--max-tokens N] [--threads N] [--repeats N]
                        [--server-arg=ARG ...]   (e.g. --server-arg=--stream-interval-ms=0)
"""
import argparse
import http.client
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

DEFAULT_PROMPT = "    def __init__(self, value):\n        self.value = value\n\n    def __repr__(self):\n"


def run_once(args, tmp):
    stats = os.path.join(tmp, "run.json")
    out = subprocess.run([args.bin, "run", "--model", args.model, "--prompt", args.prompt, "--max-new",
                          str(args.max_tokens), "--threads", str(args.threads), "--stats-json", stats],
                         check=True, capture_output=True)
    rec = json.load(open(stats))
    steps = rec["step_s"]
    text = out.stdout.decode("utf-8", "replace")
    return rec["ttft_s"], len(steps) / sum(steps), text[:-1] if text.endswith("\n") else text  # run ends the line


def start_server(args):
    p = subprocess.Popen([args.bin, "serve", "--model", args.model, "--port", "0", "--threads", str(args.threads),
                          "--memo-entries", "0", "--max-tokens", str(max(args.max_tokens, 16))] + args.server_arg,
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    for line in p.stdout:
        m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", line)
        if m:
            return p, int(m.group(1))
    raise SystemExit("the server did not start")


def server_once(args, port):
    """The client reads whatever has arrived in large reads and stamps each read; the
    events are parsed afterwards, so the client's own work stays small (it shares the
    machine with the server, as `run`'s reader does)."""
    conn = http.client.HTTPConnection("127.0.0.1", port)
    body = json.dumps({"prompt": args.prompt, "max_tokens": args.max_tokens, "stream": True,
                       "stream_options": {"include_usage": True}})
    t0 = time.perf_counter()
    conn.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
    resp = conn.getresponse()
    reads = []  # (end offset in the body, arrival time)
    data = b""
    while True:
        piece = resp.read1(1 << 16)
        if not piece:
            break
        data += piece
        reads.append((len(data), time.perf_counter()))
    conn.close()
    arrived = lambda offset: next(t for end, t in reads if end >= offset)
    first = finish = None
    text, tokens, pos = "", 0, 0
    for line in data.split(b"\n"):
        pos += len(line) + 1
        if not line.startswith(b"data: ") or line == b"data: [DONE]":
            continue
        j = json.loads(line[6:])
        if j.get("usage"):
            tokens = j["usage"]["completion_tokens"]
        for c in j.get("choices", []):
            if c.get("text") and first is None:
                first = arrived(pos - 1)
            text += c.get("text") or ""
            if c.get("finish_reason"):
                finish = arrived(pos - 1)
    return first - t0, (tokens - 1) / (finish - first), text


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("bin")
    ap.add_argument("--model", required=True)
    ap.add_argument("--prompt", default=DEFAULT_PROMPT)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--server-arg", action="append", default=[], help="passed to `deltafin serve`")
    args = ap.parse_args()
    server, port = start_server(args)
    runs, served = [], []
    try:
        server_once(args, port)  # warm-up (page cache, first allocation)
        with tempfile.TemporaryDirectory() as tmp:
            for i in range(args.repeats):
                if i % 2 == 0:
                    r = run_once(args, tmp)
                    s = server_once(args, port)
                else:
                    s = server_once(args, port)
                    r = run_once(args, tmp)
                if r[2] != s[2]:
                    raise SystemExit(f"the server's text differs from run's:\n{s[2]!r}\n{r[2]!r}")
                runs.append(r[:2])
                served.append(s[:2])
                print(f"{i}: run ttft {r[0]*1e3:.1f} ms, {r[1]:.1f} tok/s | server ttft {s[0]*1e3:.1f} ms, "
                      f"{s[1]:.1f} tok/s", flush=True)
    finally:
        server.terminate()
        server.wait()
    med = lambda xs: statistics.median(xs)
    rt, rd = med([x[0] for x in runs]), med([x[1] for x in runs])
    st, sd = med([x[0] for x in served]), med([x[1] for x in served])
    print(f"median over {args.repeats}: run ttft {rt*1e3:.1f} ms, decode {rd:.1f} tok/s; "
          f"server ttft {st*1e3:.1f} ms, decode {sd:.1f} tok/s")
    print(f"server / run: ttft {st/rt:.3f}x, decode {sd/rd:.3f}x (text identical in every pair)")
    q = lambda xs: statistics.quantiles(xs, n=4) if len(xs) >= 2 else [xs[0]] * 3
    tq = q([s[0] / r[0] for r, s in zip(runs, served)])
    dq = q([s[1] / r[1] for r, s in zip(runs, served)])
    print(f"per-pair server / run, median [quartiles]: ttft {tq[1]:.3f}x [{tq[0]:.3f}, {tq[2]:.3f}], "
          f"decode {dq[1]:.3f}x [{dq[0]:.3f}, {dq[2]:.3f}]")


if __name__ == "__main__":
    sys.exit(main())
