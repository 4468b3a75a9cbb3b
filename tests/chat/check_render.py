#!/usr/bin/python3
"""`deltafin render-chat` against K3's chat template rendered by python3-jinja2.

For every case in cases.json:
- the rendered text equals the template's (render_template.py, the oracle);
  where the template raises, render-chat fails too;
- the segments follow docs/design/tokenizer.md: derived independently from the template's
  output (with every "<|" in the request's strings disguised, so that only
  the template's own markers are markers): a special spelling is a control
  segment; after <|open|>, the tag name, then per attribute ` key`, `="`,
  the value and `"`, each an ordinary segment; after <|close|>, the tag name;
  any other text between markers is one ordinary segment;
- the ids equal each segment encoded on its own by `deltafin tokenize`
  (control segments with special tokens on, the rest with them off).

Usage: /usr/bin/python3 check_render.py DELTAFIN TOKENIZER_DIR WORK_DIR
"""
import copy
import json
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import render_template  # noqa: E402

SPECIALS = ["<|open|>", "<|close|>", "<|sep|>", "<|end_of_msg|>"]
SPLIT = re.compile("(" + "|".join(re.escape(s) for s in SPECIALS) + ")")
ATTR = re.compile(r' ([^ ="]+)="([^"]*)"')
DISGUISE = "\ue000|"


def disguise(value):
    if isinstance(value, str):
        return value.replace("<|", DISGUISE)
    if isinstance(value, list):
        return [disguise(v) for v in value]
    if isinstance(value, dict):
        return {disguise(k): disguise(v) for k, v in value.items()}
    return value


def expected_segments(disguised_text):
    segs = []
    after = None  # the last special seen
    for part in SPLIT.split(disguised_text):
        if part == "":
            continue
        if part in SPECIALS:
            segs.append((part, True))
            after = part
            continue
        if after == "<|open|>":
            name, _, rest = part.partition(" ")
            rest = " " + rest if rest else ""
            segs.append((name, False))
            pos = 0
            for m in ATTR.finditer(rest):
                assert m.start() == pos, f"unparsable tag {part!r}"
                segs.append((" " + m.group(1), False))
                segs.append(('="', False))
                if m.group(2):
                    segs.append((m.group(2), False))
                segs.append(('"', False))
                pos = m.end()
            assert pos == len(rest), f"unparsable tag {part!r}"
        else:
            segs.append((part, False))
    return [(t.replace(DISGUISE, "<|"), c) for t, c in segs]


def run(cmd, stdin=None):
    return subprocess.run(cmd, input=stdin, capture_output=True)


def encode_all(binary, tokenizer, texts, allow_special):
    if not texts:
        return []
    lines = "".join(json.dumps(t, ensure_ascii=False) + "\n" for t in texts).encode()
    cmd = [binary, "tokenize", "--tokenizer", tokenizer, "--stdin", "--jsonl"]
    if allow_special:
        cmd.append("--allow-special")
    r = run(cmd, lines)
    assert r.returncode == 0, r.stderr.decode()
    return [json.loads(l) for l in r.stdout.decode().splitlines()]


def main():
    binary, tokenizer, work = sys.argv[1:4]
    with open(os.path.join(HERE, "cases.json"), encoding="utf-8") as f:
        cases = json.load(f)
    with open(render_template.TEMPLATE, encoding="utf-8") as f:
        template = render_template.environment().from_string(f.read())

    failures = []
    rendered = []  # (name, ours) for the id check
    for n, case in enumerate(cases):
        name, request = case["name"], case["request"]
        try:
            want = render_template.render(template, request)
            want_error = None
        except Exception as e:  # the template raised
            want, want_error = None, str(e)
        if bool(case.get("error")) != (want_error is not None):
            failures.append(f"{name}: the case says error={case.get('error', False)}, the template says {want_error!r}")
            continue
        path = os.path.join(work, f"case{n}.json")
        with open(path, "w", encoding="utf-8") as f:
            json.dump(request, f, ensure_ascii=False)
        r = run([binary, "render-chat", "--tokenizer", tokenizer, "--request", path, "--json"])
        if want_error is not None:
            if r.returncode == 0:
                failures.append(f"{name}: the template raises ({want_error}) but render-chat succeeded")
            elif not r.stderr.startswith(b"error: "):
                failures.append(f"{name}: render-chat failed without an error line: {r.stderr!r}")
            else:
                print(f"ok: {name}: both refuse ({r.stderr.decode().strip()})")
            continue
        if r.returncode != 0:
            failures.append(f"{name}: render-chat failed: {r.stderr.decode()}")
            continue
        ours = json.loads(r.stdout)
        if ours["text"] != want:
            failures.append(f"{name}: text differs\n  template: {want!r}\n  ours:     {ours['text']!r}")
            continue
        if "".join(s["text"] for s in ours["segments"]) != ours["text"]:
            failures.append(f"{name}: segments do not concatenate to the text")
        disguised = render_template.render(template, disguise(request))
        segs = expected_segments(disguised)
        if "".join(t for t, _ in segs) != want:
            failures.append(f"{name}: disguising changed the rendering")
        got = [(s["text"], s["control"]) for s in ours["segments"]]
        if got != segs:
            for k, (a, b) in enumerate(zip(got, segs)):
                if a != b:
                    break
            failures.append(f"{name}: segment split differs at {k}: ours {got[k:k+3]!r}, oracle {segs[k:k+3]!r}")
        rendered.append((name, ours))
        print(f"ok: {name} ({len(want)} bytes, {len(ours['segments'])} segments, {len(ours['ids'])} ids)")

    # Ids: every segment encoded on its own, in two batches.
    control = [s["text"] for _, o in rendered for s in o["segments"] if s["control"]]
    ordinary = [s["text"] for _, o in rendered for s in o["segments"] if not s["control"]]
    control_ids = iter(encode_all(binary, tokenizer, control, True))
    ordinary_ids = iter(encode_all(binary, tokenizer, ordinary, False))
    for name, o in rendered:
        ids = []
        for s in o["segments"]:
            part = next(control_ids) if s["control"] else next(ordinary_ids)
            if s["control"] and len(part) != 1:
                failures.append(f"{name}: control segment {s['text']!r} is not one special id: {part}")
            ids += part
        if ids != o["ids"]:
            failures.append(f"{name}: ids differ from the segments encoded one by one")

    # Plain output is the text itself; --messages renders like a request holding only messages.
    first = cases[0]["request"]
    plain = run([binary, "render-chat", "--tokenizer", tokenizer, "--request", os.path.join(work, "case0.json")])
    if plain.returncode != 0 or plain.stdout.decode() != render_template.render(template, first):
        failures.append("render-chat without --json does not print the rendered text")
    inline = run([binary, "render-chat", "--tokenizer", tokenizer, "--messages", json.dumps(first["messages"]), "--json"])
    if inline.returncode != 0 or json.loads(inline.stdout) != rendered[0][1]:
        failures.append("render-chat --messages differs from --request with the same messages")

    for f in failures:
        print("FAIL:", f)
    print(f"render-chat vs the template: {len(cases)} cases, {len(rendered)} rendered, {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
