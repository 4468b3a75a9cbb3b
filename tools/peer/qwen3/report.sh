#!/bin/bash
# Per prompt: greedy ids equal for how many tokens, and logit differences over the steps whose
# contexts are still the same (up to and including the first differing step).
# Usage: report.sh TAG (peer-TAG-pN.{ids,f32} against ours-q3m-pN and the float64 reference ref-pN)
cd /work/peer/out
tag=$1
for i in 0 1 2 3 4 5; do
  n=$(wc -l < ours-q3m-p$i.ids)
  same=$(paste -d' ' ours-q3m-p$i.ids peer-$tag-p$i.ids | awk '$1!=$2{print NR-1; f=1; exit} END{if(!f) print NR}')
  upto=$(( same < n ? same + 1 : n ))
  plen=$(sed -n "$((i+1))p" /work/notes/peer-qwen3/prompts.txt | tr ',' '\n' | wc -l)
  echo "p$i (prompt $plen ids): ids equal $same/$n"
  echo -n "  peer vs ours: "; /usr/bin/python3 /work/peer/tools/cmp_logits.py ours-q3m-p$i.f32 peer-$tag-p$i.f32 $upto
  echo -n "  peer vs ref : "; /usr/bin/python3 /work/peer/tools/cmp_logits.py ref-p$i.f32 peer-$tag-p$i.f32 $upto
  echo -n "  ours vs ref : "; /usr/bin/python3 /work/peer/tools/cmp_logits.py ref-p$i.f32 ours-q3m-p$i.f32 $upto
done
