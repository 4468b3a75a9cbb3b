"""Chat examples for the demo target, built from the training corpus.

Each example is one user question and the answer the model should learn, in
K3's exact chat template (tests/chat/Kimi-K3.chat-template.jinja, rendered by
tests/chat/render_template.py with python3-jinja2): the generation prompt,
then a short think, the response, and the closing markers through
`<|end_of_msg|>`. With thinking off, the response directly.

Three kinds, all drawn deterministically from the stdlib sources of the
training split (tools/train/corpus.py), never from held-out files:
  - explain: "What does `name` do?" -> the first sentence(s) of its docstring;
  - write:   "Write a Python function `name(args)`." -> its source, in a fence;
  - complete: "Complete this code:" + a few lines -> the next lines, in a fence.

And, with a share of tool_share, tool conversations (tool_conversation): one to
three declared tools, a request that one of them serves, and either the call
(the tool's name and its one string argument, copied from the request) or,
after that call and the tool's result, an answer that reports the result.
The model's part is taken from the template's own rendering of the turn.
"""
import ast
import json
import os
import re
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "chat"))
import render_template  # noqa: E402

# What the model writes after the generation prompt, around its think and response.
THINK_END = "<|close|>think<|sep|><|open|>response<|sep|>"
RESPONSE_END = "<|close|>response<|sep|><|close|>message<|sep|><|end_of_msg|>"

EXPLAIN_ASK = ["What does `{name}` do?", "Explain `{name}`.", "What is `{name}` for?"]
EXPLAIN_THINK = ["The user asks what `{name}` does. Its docstring says it.",
                 "The user wants `{name}` explained. I will say what it does.",
                 "A question about `{name}`. I will answer briefly."]
WRITE_ASK = ["Write a Python function `{sig}`.", "Write `{sig}` in Python.", "Implement `{sig}`."]
WRITE_THINK = ["The user wants a function `{name}`. I will write it.",
               "I need to write `{name}`. Here it is.",
               "A short function `{name}`. I will write the code."]
COMPLETE_ASK = ["Complete this code:\n```python\n{code}\n```", "Continue this Python code:\n```python\n{code}\n```"]
COMPLETE_THINK = ["The user wants the code continued.", "I will write the next lines."]


def first_sentences(doc, limit=220):
    para = doc.strip().split("\n\n")[0]
    para = re.sub(r"\s+", " ", para).strip()
    if len(para) <= limit:
        return para
    cut = para[:limit]
    dot = cut.rfind(". ")
    return cut[:dot + 1] if dot > 40 else None


def signature(fn):
    args = [a.arg for a in fn.args.posonlyargs + fn.args.args]
    if fn.args.vararg:
        args.append("*" + fn.args.vararg.arg)
    args += [a.arg for a in fn.args.kwonlyargs]
    if fn.args.kwarg:
        args.append("**" + fn.args.kwarg.arg)
    return f"{fn.name}({', '.join(args)})"


def pieces(path, text):
    """(kind, fields) candidates from one source file, in file order."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return []
    lines = text.split("\n")
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.FunctionDef) or node.name.startswith("_"):
            continue
        doc = ast.get_docstring(node)
        if doc:
            s = first_sentences(doc)
            if s and len(s) >= 20:
                out.append(("explain", {"name": node.name, "answer": s}))
        src = lines[node.lineno - 1:node.end_lineno]
        indent = len(src[0]) - len(src[0].lstrip())
        body = "\n".join(l[indent:] for l in src)
        if 3 <= len(src) <= 10 and len(body) <= 360 and not doc:
            out.append(("write", {"name": node.name, "sig": signature(node), "answer": body}))
        if 6 <= len(src) <= 14 and len(body) <= 420:
            code = body.split("\n")
            k = max(2, len(code) // 2)
            out.append(("complete", {"code": "\n".join(code[:k]), "answer": "\n".join(code[k:])}))
    return out


def conversation(kind, f, rng, thinking):
    """(request for the template, the assistant's continuation after the generation prompt)."""
    pick = lambda xs: xs[int(rng.integers(len(xs)))]
    if kind == "explain":
        ask, think, answer = pick(EXPLAIN_ASK).format(**f), pick(EXPLAIN_THINK).format(**f), f["answer"]
    elif kind == "write":
        ask, think, answer = pick(WRITE_ASK).format(**f), pick(WRITE_THINK).format(**f), \
            "```python\n" + f["answer"] + "\n```"
    else:
        ask, think, answer = pick(COMPLETE_ASK).format(**f), pick(COMPLETE_THINK), \
            "```python\n" + f["answer"] + "\n```"
    request = {"messages": [{"role": "user", "content": ask}], "chat_template_kwargs": {"thinking": thinking}}
    tail = (think + THINK_END if thinking else "") + answer + RESPONSE_END
    return request, tail, {"role": "assistant", "content": answer, "reasoning_content": think if thinking else None}


# Tools for the tool conversations: (declaration, ways to ask, argument key).
TOOLS = {
    "python_doc": ("Look up the documentation of a Python function.", "name",
                   ["Look up `{arg}` in the docs.", "What do the docs say about `{arg}`?",
                    "Find the documentation of `{arg}`."]),
    "get_weather": ("Get the current weather for a city.", "city",
                    ["What is the weather in {arg}?", "Is it raining in {arg}?", "How warm is it in {arg} now?"]),
    "read_file": ("Count the lines of a file in the project.", "path",
                  ["How long is `{arg}`?", "How many lines does `{arg}` have?"]),
    "run_python": ("Evaluate a Python expression and return its value.", "expr",
                   ["Compute `{arg}`.", "What is `{arg}`? Run it.", "Evaluate `{arg}`."]),
}
CITIES = ["Paris", "Berlin", "Madrid", "Rome", "Oslo", "Lisbon", "Vienna", "Prague", "Dublin", "Warsaw",
          "Athens", "Helsinki", "Tokyo", "Seoul", "Lima", "Quito", "Cairo", "Nairobi", "Toronto", "Denver",
          "Boston", "Chicago", "Sydney", "Perth", "Delhi", "Mumbai", "Hanoi", "Manila", "Bogota", "Havana"]
WEATHER = ["sunny", "cloudy", "raining", "windy", "snowing", "foggy"]
CALL_THINK = ["The user needs `{tool}`. I will call it.", "I will call `{tool}` for this.",
              "This needs the tool `{tool}`."]
RESULT_THINK = ["The tool returned the answer.", "I have the result of `{tool}`.", "The result is back."]


def declaration(name):
    desc, key, _ = TOOLS[name]
    return {"type": "function", "function": {"name": name, "description": desc, "parameters": {
        "type": "object", "properties": {key: {"type": "string"}}, "required": [key]}}}


def tool_case(name, rng, docs, files):
    """(argument, tool result, final answer) for one request to tool `name`."""
    pick = lambda xs: xs[int(rng.integers(len(xs)))]
    if name == "python_doc":
        f = pick(docs)
        return f["name"], f["answer"], f"The docs say: {f['answer']}"
    if name == "get_weather":
        city, t, w = pick(CITIES), int(rng.integers(-5, 35)), pick(WEATHER)
        return city, f"{t} C, {w}", f"It is {t} C and {w} in {city}."
    if name == "read_file":
        path, n = pick(files)
        return path, f"{n} lines", f"`{path}` has {n} lines."
    a, b, op = int(rng.integers(2, 100)), int(rng.integers(2, 100)), pick(["+", "-", "*"])
    expr = f"{a} {op} {b}"
    return expr, str(eval(expr)), f"`{expr}` is {eval(expr)}."


def tool_conversation(rng, docs, files, thinking):
    """(request without the model's turn, the model's turn as a message) for one tool conversation."""
    pick = lambda xs: xs[int(rng.integers(len(xs)))]
    names = sorted(TOOLS)
    name = pick(names)
    others = [n for n in names if n != name]
    declared = [name] + [others[int(i)] for i in rng.permutation(len(others))[:int(rng.integers(0, 3))]]
    declared = [declared[int(i)] for i in rng.permutation(len(declared))]
    arg, result, answer = tool_case(name, rng, docs, files)
    key = TOOLS[name][1]
    ask = pick(TOOLS[name][2]).format(arg=arg)
    call = {"id": "call_1", "type": "function",
            "function": {"name": name, "arguments": json.dumps({key: arg})}}
    called = {"role": "assistant", "content": "", "tool_calls": [call],
              "reasoning_content": pick(CALL_THINK).format(tool=name) if thinking else None}
    messages = [{"role": "user", "content": ask}]
    request = {"tools": [declaration(n) for n in declared], "chat_template_kwargs": {"thinking": thinking}}
    if rng.random() < 0.5:
        return dict(request, messages=messages), called
    messages += [called, {"role": "tool", "tool_call_id": "call_1", "content": result}]
    reply = {"role": "assistant", "content": answer,
             "reasoning_content": pick(RESULT_THINK).format(tool=name) if thinking else None}
    return dict(request, messages=messages), reply


def model_part(template, request, reply):
    """The template's generation prompt for `request`, and what it renders for the model's `reply`
    after it, through the turn's `<|end_of_msg|>`."""
    prompt = render_template.render(template, request)
    full = render_template.render(template, dict(request, messages=request["messages"] + [reply]))
    assert full.startswith(prompt), "the template renders the history differently with the reply"
    end = full.index("<|end_of_msg|>", len(prompt)) + len("<|end_of_msg|>")
    return prompt, full[len(prompt):end]


def special_splitter(tok):
    by_text = {v: k for k, v in tok.specials.items()}
    pattern = re.compile("|".join(re.escape(s) for s in sorted(by_text, key=len, reverse=True)))
    def encode(text):
        ids, pos = [], 0
        for m in pattern.finditer(text):
            ids += tok.encode(text[pos:m.start()])
            ids.append(by_text[m.group(0)])
            pos = m.end()
        return ids + tok.encode(text[pos:])
    return encode


def build(tok, paths, n, seed, max_len=192, thinking_share=0.75, tool_share=0.0, tool_max_len=320):
    """n examples: (ids, first target position), each at most max_len ids (tool
    conversations: tool_max_len); a share tool_share of them tool conversations."""
    rng = np.random.default_rng(seed)
    cands, files = [], []
    from corpus import read
    for p in paths:
        if p.endswith(".py"):
            text = read(p)
            cands += pieces(p, text)
            files.append((os.path.relpath(p, "/usr/lib/python3.11"), text.count("\n")))
    order = rng.permutation(len(cands))
    template = render_template.environment().from_string(
        open(render_template.TEMPLATE, encoding="utf-8").read())
    encode = special_splitter(tok)
    out, checked = [], False
    n_tools = int(round(n * tool_share))
    if n_tools:
        docs = [f for kind, f in cands if kind == "explain" and len(f["answer"]) <= 120]
        trng = np.random.default_rng(seed + 7)
        while len(out) < n_tools:
            request, reply = tool_conversation(trng, docs, files, bool(trng.random() < thinking_share))
            prompt, tail = model_part(template, request, reply)
            p_ids, t_ids = encode(prompt), encode(tail)
            if len(p_ids) + len(t_ids) <= tool_max_len:
                out.append((p_ids + t_ids, len(p_ids)))
    for i in order:
        if len(out) >= n:  # also when the tool conversations alone fill n (tool_share 1)
            break
        kind, f = cands[i]
        thinking = bool(rng.random() < thinking_share)
        request, tail, reply = conversation(kind, f, rng, thinking)
        prompt = render_template.render(template, request)
        if not checked and thinking:
            # The continuation is what the template writes for that assistant turn.
            full = render_template.render(template, dict(request, messages=request["messages"] + [reply]))
            assert full.startswith(prompt + tail), "the chat continuation differs from the template"
            checked = True
        p_ids, t_ids = encode(prompt), encode(tail)
        if len(p_ids) + len(t_ids) > max_len:
            continue
        out.append((p_ids + t_ids, len(p_ids)))
    return out


if __name__ == "__main__":
    sys.path.insert(0, HERE)
    import corpus
    from bpe import Tokenizer
    tok = Tokenizer.load(os.path.join(ROOT, "models", "demo"))
    ex = build(tok, corpus.split()[0], 6, 1, tool_share=0.5)
    for ids, start in ex:
        print(json.dumps({"len": len(ids), "start": start, "target": tok.decode(ids[start:])}))
