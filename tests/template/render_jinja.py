#!/usr/bin/python3
"""Test oracle for src/template/: renders a chat template with Debian's
python3-jinja2 set up exactly as transformers' apply_chat_template sets it up
(its _compile_jinja_template):

- ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True) with the
  loopcontrols extension (and transformers' `generation` tag, which renders
  its body);
- tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False)
  is json.dumps with those arguments;
- raise_exception(message) raises; strftime_now(format) formats the time
  given with --now (seconds since the epoch) in local time;
- the special tokens of a tokenizer_config.json (bos_token, eos_token, ...)
  are variables, under the case's own.

With --k3-reference, the environment is tests/chat/render_template.py's
(K3's reference: dictsort compares keys case-sensitively).

Input: TEMPLATE (a .jinja file or a tokenizer_config.json) and CASES, a JSON
array of {"name", "vars"}. Output: a JSON array of {"name", "text"} or
{"name", "error"} (any exception the render raises).

Usage: /usr/bin/python3 render_jinja.py TEMPLATE CASES.json [--k3-reference] [--now SECONDS]
"""
import datetime
import json
import os
import sys

import jinja2
from jinja2 import nodes
from jinja2.ext import Extension, loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "chat"))

SPECIAL = ["bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"]


class Generation(Extension):
    """transformers' AssistantTracker without the mask: {% generation %} renders its body."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return nodes.Scope(body, lineno=lineno)


def environment(now):
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(format):
        return datetime.datetime.fromtimestamp(now).strftime(format)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[Generation, loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def load(path):
    """The template source and the special tokens, as transformers reads them."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    if not path.endswith(".json"):
        return text, {}
    config = json.loads(text)
    tokens = {}
    for name in SPECIAL:
        value = config.get(name)
        if isinstance(value, dict):
            value = value.get("content")
        if isinstance(value, str):
            tokens[name] = value
    if isinstance(config.get("additional_special_tokens"), list):
        tokens["additional_special_tokens"] = config["additional_special_tokens"]
    template = config["chat_template"]
    if isinstance(template, list):
        template = next(t["template"] for t in template if t.get("name") == "default")
    return template, tokens


def render_all(template_path, cases, k3_reference=False, now=0):
    source, tokens = load(template_path)
    if k3_reference:
        import render_template  # tests/chat: the K3 oracle's environment
        env = render_template.environment()
    else:
        env = environment(now)
    template = env.from_string(source)
    results = []
    for case in cases:
        try:
            results.append({"name": case["name"], "text": template.render(**{**tokens, **case["vars"]})})
        except Exception as e:  # the template raised, or Python did (a TypeError, an UndefinedError)
            results.append({"name": case["name"], "error": f"{type(e).__name__}: {e}"})
    return results


def main():
    args = sys.argv[1:]
    k3 = "--k3-reference" in args
    now = 0
    if "--now" in args:
        now = int(args[args.index("--now") + 1])
    paths = [a for a in args if not a.startswith("--") and not a.isdigit()]
    with open(paths[1], encoding="utf-8") as f:
        cases = json.load(f)
    json.dump(render_all(paths[0], cases, k3, now), sys.stdout, ensure_ascii=False, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
