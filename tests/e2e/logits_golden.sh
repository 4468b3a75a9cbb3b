#!/usr/bin/env bash
# Golden logits: every decided step's fp32 logits (`run --dump-logits`) of the
# demo model, `tiny` (also at a 4,000-token context) and a small k3-shaped
# model must be byte-identical to the digests in tests/golden/logits/SHA256SUMS.
# The tiny and k3-shaped digests were written by the engine before the compute
# rework of the kernels, attention and thread pool; the demo ones on 2026-12-01
# for the chat-tuned weights (docs/design/demo-model.md), by the engine that matches
# the PyTorch golden tokens on them. All were re-recorded on 2026-12-04 when
# SiTU got its own exp and tanh (docs/results/2026-12-kernels.md, "SiTU's exp and tanh": the
# logits moved by at most 4e-6 on the demo model, every token the same). Each case runs with several thread counts and
# prefill chunk sizes; every variant must give the same bytes.
# Usage: logits_golden.sh BIN SRC [--write]   (--write: record new digests)
set -euo pipefail
bin=$1; src=$2; mode=${3:-check}
golden="$src/tests/golden/logits/SHA256SUMS"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

"$bin" make-model --preset tiny --seed 1 --out "$tmp/tiny" >/dev/null
"$bin" make-model --preset k3-shaped --experts-gb 0.2 --seed 3 --out "$tmp/k3s" >/dev/null
ids_4k=$(awk 'BEGIN { for (i = 0; i < 4000; i++) printf "%s%d", (i ? "," : ""), (i * 37 + 5) % 250 }')
ids_70=$(awk 'BEGIN { for (i = 0; i < 70; i++) printf "%s%d", (i ? "," : ""), (i * 37 + 38) % 256 }')
long_prompt=$(cat "$src/tests/golden/logits/long_prompt.txt")
queue_prompt=$'class Queue:\n    def __init__(self'

# name | model dir | prompt kind | max-new | "threads:chunk" variants
cases=(
  "demo-fib|$src/models/demo|text:def fibonacci(n):|32|1:512 2:512 2:1 1:5"
  "demo-queue|$src/models/demo|queue|32|2:512 1:3"
  "demo-long|$src/models/demo|long|24|2:512 1:512 2:100"
  "tiny-70|$tmp/tiny|ids:$ids_70|16|1:1 2:7 1:64 2:512"
  "tiny-4k|$tmp/tiny|ids:$ids_4k|8|2:512 1:1000"
  "k3s-40|$tmp/k3s|ids:$ids_70|24|2:512 1:9 2:1"
)

declare -A want
if [[ $mode == check ]]; then
  while read -r sum name; do want[$name]=$sum; done <"$golden"
fi
out=()
fail=0
for c in "${cases[@]}"; do
  IFS='|' read -r name model prompt max_new variants <<<"$c"
  first=""
  for v in $variants; do
    threads=${v%%:*}; chunk=${v##*:}
    args=(run --model "$model" --max-new "$max_new" --threads "$threads" --prefill-chunk "$chunk"
          --dump-logits "$tmp/$name.bin")
    case $prompt in
      text:*) args+=(--prompt "${prompt#text:}") ;;
      ids:*) args+=(--prompt-ids "${prompt#ids:}") ;;
      long) args+=(--prompt "$long_prompt") ;;
      queue) args+=(--prompt "$queue_prompt") ;;
    esac
    "$bin" "${args[@]}" >/dev/null
    sum=$(sha256sum "$tmp/$name.bin" | cut -d' ' -f1)
    [[ -z $first ]] && first=$sum
    if [[ $sum != "$first" ]]; then
      echo "FAIL $name: threads $threads, chunk $chunk differ from the case's first variant"; fail=1
    fi
    if [[ $mode == check && $sum != "${want[$name]:-none}" ]]; then
      echo "FAIL $name: threads $threads, chunk $chunk: logits differ from the golden digest"; fail=1
    fi
  done
  out+=("$first $name")
  echo "ok $name ($variants)"
done
if [[ $mode == --write ]]; then
  ((fail == 0)) || { echo "variants disagree: nothing written"; exit 1; }
  printf '%s\n' "${out[@]}" >"$golden"
  echo "wrote $golden"
fi
exit $fail
