#!/usr/bin/python3
"""Test oracle: renders chat-completions requests with K3's published Jinja
template (Kimi-K3.chat-template.jinja, next to this file) using Debian's
python3-jinja2, the way Hugging Face-style engines apply chat templates.

Input: a JSON array of cases, each {"name": ..., "request": {...}}, where the
request is a chat-completions body (messages, tools, tool_choice,
response_format, chat_template_kwargs). Output: a JSON array, per case
{"name": ..., "text": rendered string} or {"name": ..., "error": message}.

The template environment, as engines set it up for chat templates:
- the `loopcontrols` extension (the template uses `break`);
- `raise_exception(message)` raises;
- `tojson` is json.dumps with its keyword arguments (ensure_ascii, indent,
  separators, sort_keys=False), not Jinja's HTML-escaping built-in, which
  takes none of them;
- `dictsort` sorts keys case-sensitively, as json.dumps(sort_keys=True) in
  K3's reference encoder does (the template's json_sorted comment says that
  is the order it means; Jinja's built-in ignores case by default);
- chat_template_kwargs become template variables (the vLLM convention), and
  a top-level `reasoning_effort` is the template's `thinking_effort`;
- assistant tool-call `arguments` strings that parse as a JSON object are
  passed as that object (vLLM does the same before templating; here for the
  call's `function`, or the call itself when it has none, as the template
  reads it); any other string is passed as-is, which the template renders as
  a raw JSON block.

Usage: /usr/bin/python3 render_template.py CASES.json > RENDERED.json
"""
import json
import os
import sys

import jinja2
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

HERE = os.path.dirname(os.path.abspath(__file__))
TEMPLATE = os.path.join(HERE, "Kimi-K3.chat-template.jinja")


def tojson(value, ensure_ascii=True, indent=None, separators=None, sort_keys=False):
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def environment():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    env.filters["dictsort"] = lambda value: sorted(value.items(), key=lambda kv: kv[0])
    env.globals["raise_exception"] = raise_exception
    return env


def parse_object(text):
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def prepare_messages(messages):
    out = []
    for m in messages:
        if isinstance(m, dict) and m.get("role") == "assistant" and isinstance(m.get("tool_calls"), list):
            m = dict(m)
            calls = []
            for call in m["tool_calls"]:
                # The template's function: `function` when it is a mapping, else the call itself.
                if isinstance(call, dict):
                    nested = isinstance(call.get("function"), dict)
                    fn = dict(call["function"] if nested else call)
                    if isinstance(fn.get("arguments"), str):
                        parsed = parse_object(fn["arguments"])
                        if parsed is not None:
                            fn["arguments"] = parsed
                    call = dict(call, function=fn) if nested else fn
                calls.append(call)
            m["tool_calls"] = calls
        out.append(m)
    return out


def render(template, request):
    variables = {"messages": prepare_messages(request.get("messages", [])), "add_generation_prompt": True}
    for key in ("tools", "tool_choice", "response_format"):
        if request.get(key) is not None:
            variables[key] = request[key]
    if request.get("reasoning_effort") is not None:
        variables["thinking_effort"] = request["reasoning_effort"]
    variables.update(request.get("chat_template_kwargs") or {})
    return template.render(**variables)


def main():
    with open(TEMPLATE, encoding="utf-8") as f:
        template = environment().from_string(f.read())
    with open(sys.argv[1], encoding="utf-8") as f:
        cases = json.load(f)
    results = []
    for case in cases:
        try:
            results.append({"name": case["name"], "text": render(template, case["request"])})
        except jinja2.exceptions.TemplateError as e:
            results.append({"name": case["name"], "error": str(e)})
    json.dump(results, sys.stdout, ensure_ascii=False, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
