#!/usr/bin/python3
"""The language pieces of src/template/ against python3-jinja2 with
transformers' settings (render_jinja.py): every snippet of snippets.json
(whitespace control, literals, operators, undefined, attributes, slices,
string methods, filters, tests, loops, scoping, namespaces, macros) renders
byte for byte the same through `deltafin render-chat --template`, or both
fail.

Usage: /usr/bin/python3 check_snippets.py DELTAFIN WORK_DIR
"""
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import render_jinja  # noqa: E402


def main():
    binary, work = sys.argv[1:3]
    with open(os.path.join(HERE, "snippets.json"), encoding="utf-8") as f:
        snippets = json.load(f)
    failures, same, refused = [], 0, 0
    for n, s in enumerate(snippets):
        template = os.path.join(work, f"s{n}.jinja")
        with open(template, "w", encoding="utf-8", newline="") as f:
            f.write(s["template"])
        variables = os.path.join(work, f"s{n}.json")
        with open(variables, "w", encoding="utf-8") as f:
            json.dump(s["vars"], f, ensure_ascii=False)
        want = render_jinja.render_all(template, [{"name": s["name"], "vars": s["vars"]}])[0]
        r = subprocess.run([binary, "render-chat", "--template", template, "--vars", variables], capture_output=True)
        if "error" in want:
            if r.returncode == 0:
                failures.append(f"{s['name']}: jinja2 raises ({want['error']}) but we rendered {r.stdout!r}")
            elif not r.stderr.startswith(b"error: "):
                failures.append(f"{s['name']}: failed without an error line: {r.stderr!r}")
            else:
                refused += 1
                print(f"ok: {s['name']}: both refuse ({r.stderr.decode().strip()} | jinja2: {want['error']})")
            continue
        if r.returncode != 0:
            failures.append(f"{s['name']}: we failed: {r.stderr.decode(errors='replace').strip()}")
            continue
        got = r.stdout.decode("utf-8", errors="replace")
        if got != want["text"]:
            failures.append(f"{s['name']}:\n  jinja2: {want['text']!r}\n  ours:   {got!r}")
            continue
        same += 1
        print(f"ok: {s['name']}")
    for f in failures:
        print("FAIL:", f)
    print(f"snippets: {len(snippets)}, {same} equal, {refused} refused by both, {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
