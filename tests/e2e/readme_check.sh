#!/usr/bin/env bash
# The README check: README.md has at most 150 lines; every relative link in
# README.md and docs/**/*.md resolves to a file of the repository (and a
# #anchor, where given, to a heading of that Markdown file); and every command
# in README.md's code blocks either runs here, on the demo model, or is marked
# as not runnable here.
#
# Commands are the lines of ```sh / ```bash / ```console blocks (a trailing
# backslash continues a line; blank and comment lines are not commands). A
# command is marked as not runnable here by a trailing comment that starts
# with "# needs a real model" or "# needs root" (scripts/demo.sh and
# scripts/test.sh install Debian packages). Every other command runs, in a
# scratch directory where build/deltafin, ./build/deltafin and deltafin are
# this binary and models/ is the source tree's, with a line of text on stdin
# (so `chat` reads one turn and meets end of input), and must exit 0. A
# `deltafin serve` command is started in the background on a free port in
# place of the one written, and the README's ```js blocks (the official
# `openai` client, tests/server's npm package) then run against it and must
# print an answer. Any other block language is an error, so nothing in a
# code block goes unchecked.
# Usage: bash readme_check.sh <deltafin-binary> <source-dir>
set -euo pipefail
BIN=$(realpath "$1")
SRC=$(realpath "$2")
README="$SRC/README.md"
W=$(mktemp -d)
SERVER_PID=""
cleanup() {
  if [[ -n "$SERVER_PID" ]]; then kill "$SERVER_PID" 2>/dev/null || true; wait "$SERVER_PID" 2>/dev/null || true; fi
  rm -rf "$W"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }

# 1. Length.
lines=$(wc -l <"$README")
[[ $lines -le 150 ]] || fail "README.md has $lines lines (at most 150)"
echo "README.md: $lines lines"

# 2. Links (README.md and docs/**/*.md) and 3. the README's code blocks,
# split into $W/cmd.N (one command each), $W/skip.N (marked) and $W/js.N.
python3 - "$SRC" "$W" <<'PY'
import os, re, sys, glob
src, work = sys.argv[1], sys.argv[2]

def slug(heading):
    # GitHub's anchor for a heading: lower case, markup and punctuation
    # dropped (hyphens and underscores kept), spaces to hyphens.
    h = re.sub(r'[`*]|!?\[([^\]]*)\]\([^)]*\)', lambda m: m.group(1) or '', heading).strip().lower()
    h = re.sub(r'[^\w\- ]', '', h, flags=re.UNICODE)
    return h.replace(' ', '-')

def anchors(path):
    seen, out = {}, set()
    fenced = False
    for line in open(path, encoding='utf-8'):
        if line.lstrip().startswith('```'):
            fenced = not fenced
            continue
        m = None if fenced else re.match(r'#{1,6}\s+(.*?)\s*#*\s*$', line)
        if m:
            s = slug(m.group(1))
            n = seen.get(s, 0)
            seen[s] = n + 1
            out.add(s if n == 0 else f'{s}-{n}')
    return out

errors = []
files = [os.path.join(src, 'README.md')] + sorted(glob.glob(os.path.join(src, 'docs', '**', '*.md'), recursive=True))
links = 0
for f in files:
    text = open(f, encoding='utf-8').read()
    text = re.sub(r'^\s*```.*?^\s*```', '', text, flags=re.S | re.M)   # fenced code
    text = re.sub(r'`[^`\n]*`', '', text)                               # inline code
    for m in re.finditer(r'!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)', text):
        target = m.group(1)
        if re.match(r'[a-z][a-z0-9+.-]*:', target, re.I):   # http:, https:, mailto:
            continue
        links += 1
        path, _, anchor = target.partition('#')
        where = os.path.relpath(f, src)
        full = os.path.normpath(os.path.join(os.path.dirname(f), path)) if path else f
        if not full.startswith(src + os.sep) and full != src:
            errors.append(f'{where}: link {target} leaves the repository')
        elif not os.path.exists(full):
            errors.append(f'{where}: link {target}: {os.path.relpath(full, src)} does not exist')
        elif anchor and full.endswith('.md') and anchor not in anchors(full):
            errors.append(f'{where}: link {target}: no heading with anchor #{anchor} in {os.path.relpath(full, src)}')
print(f'{links} relative links in {len(files)} Markdown files')

marker = re.compile(r'\s#\s*needs (a real model|root)\b.*$')
n = 0
lines = open(os.path.join(src, 'README.md'), encoding='utf-8').read().split('\n')
i = 0
while i < len(lines):
    m = re.match(r'\s*```\s*([\w+-]*)', lines[i])
    if not m:
        i += 1
        continue
    lang, start = m.group(1).lower(), i + 1
    i += 1
    body = []
    while i < len(lines) and not re.match(r'\s*```\s*$', lines[i]):
        body.append(lines[i])
        i += 1
    i += 1
    if lang in ('sh', 'bash', 'console', 'shell'):
        cmd = ''
        for line in body:
            line = re.sub(r'^\$\s+', '', line) if lang == 'console' else line
            if cmd:
                cmd += '\n' + line
            elif line.strip() and not line.lstrip().startswith('#'):
                cmd = line
            if cmd and not cmd.endswith('\\'):
                n += 1
                kind = 'skip' if marker.search(cmd) else 'cmd'
                open(os.path.join(work, f'{kind}.{n:03d}'), 'w').write(cmd + '\n')
                cmd = ''
        if cmd:
            errors.append(f'README.md:{start}: a command ends in a backslash')
    elif lang in ('js', 'javascript', 'mjs'):
        n += 1
        open(os.path.join(work, f'js.{n:03d}'), 'w').write('\n'.join(body) + '\n')
    else:
        errors.append(f'README.md:{start}: a ```{lang or "(no language)"} block: the check runs only sh/bash/console and js blocks')
for e in errors:
    print('FAIL:', e)
sys.exit(1 if errors else 0)
PY

# The scratch tree the commands run in.
mkdir -p "$W/tree/build" "$W/bin"
ln -s "$BIN" "$W/tree/build/deltafin"
ln -s "$BIN" "$W/bin/deltafin"
ln -s "$SRC/models" "$W/tree/models"
export PATH="$W/bin:$PATH"

shopt -s nullglob
ran=0 skipped=0
for f in "$W"/skip.*; do
  skipped=$((skipped + 1))
  echo "marked, not run: $(head -c 120 "$f")"
done

serve_cmd=""
for f in "$W"/cmd.*; do
  cmd=$(cat "$f")
  if [[ $cmd =~ (^|[[:space:]/])deltafin[[:space:]]+serve([[:space:]]|$) ]]; then
    [[ -z $serve_cmd ]] || fail "more than one serve command in README.md"
    serve_cmd=$cmd
    continue
  fi
  echo "run: $cmd"
  if ! out=$(cd "$W/tree" && printf 'Write a Python function that adds two numbers.\n' |
      timeout 120 bash -c "$cmd" 2>&1); then
    echo "$out" | tail -20
    fail "README command failed: $cmd"
  fi
  [[ -n $out ]] || fail "README command printed nothing: $cmd"
  ran=$((ran + 1))
done

js=("$W"/js.*)
if [[ ${#js[@]} -gt 0 ]]; then
  [[ -n $serve_cmd ]] || fail "README.md has a js client example but no serve command to run it against"
  bash "$SRC/tests/server/ensure_modules.sh" "$SRC"
  port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  written=$(sed -n 's/.*--port[[:space:]]\+\([0-9]\+\).*/\1/p' <<<"$serve_cmd")
  [[ -n $written ]] || fail "the README's serve command names no --port: $serve_cmd"
  echo "serve (port $written -> $port): $serve_cmd"
  (cd "$W/tree" && exec bash -c "exec ${serve_cmd/--port $written/--port $port}") >"$W/server.log" 2>&1 </dev/null &
  SERVER_PID=$!
  for _ in $(seq 1 300); do
    grep -q "listening on" "$W/server.log" && break
    kill -0 "$SERVER_PID" 2>/dev/null || { cat "$W/server.log"; fail "the README's serve command exited early"; }
    sleep 0.1
  done
  grep -q "listening on" "$W/server.log" || { cat "$W/server.log"; fail "the README's serve command did not start"; }
  ln -s "$SRC/tests/server/node_modules" "$W/node_modules"
  for f in "${js[@]}"; do
    grep -q "127.0.0.1:$written" "$f" || fail "a js example does not talk to the serve command's port $written"
    sed "s/127\.0\.0\.1:$written/127.0.0.1:$port/g" "$f" >"$f.mjs"
    echo "node: $(basename "$f")"
    out=$(cd "$W" && timeout 120 node "$f.mjs" 2>&1) || { echo "$out"; fail "the README's js example failed"; }
    [[ -n ${out//[[:space:]]/} ]] || fail "the README's js example printed no answer"
    echo "  -> $(head -c 200 <<<"$out" | tr '\n' ' ')"
    ran=$((ran + 1))
  done
elif [[ -n $serve_cmd ]]; then
  fail "README.md's serve command is not exercised by a client example: $serve_cmd"
fi
echo "ok: $ran commands and examples ran on the demo model, $skipped marked as needing a real model or root"
