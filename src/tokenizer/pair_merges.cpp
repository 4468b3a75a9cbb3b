#include "tokenizer/pair_merges.h"

#include <queue>

namespace deltafin::tokenizer {

namespace {
uint64_t mix(uint64_t k) {  // splitmix64 finaliser
  k ^= k >> 30;
  k *= 0xbf58476d1ce4e5b9ULL;
  k ^= k >> 27;
  k *= 0x94d049bb133111ebULL;
  return k ^ (k >> 31);
}
}  // namespace

PairMerges::PairMerges(const std::vector<Merge>& merges) {
  size_t cap = 16;
  while (cap < merges.size() * 2) cap <<= 1;
  slots_.assign(cap, Slot{});
  mask_ = cap - 1;
  for (uint32_t r = 0; r < merges.size(); ++r) {
    const uint64_t key = (uint64_t(merges[r].left) << 32) | merges[r].right;
    uint64_t i = mix(key) & mask_;
    while (slots_[i].key != kEmpty && slots_[i].key != key) i = (i + 1) & mask_;
    if (slots_[i].key == kEmpty) ++count_;
    slots_[i] = Slot{key, r, merges[r].result};
  }
}

bool PairMerges::find(uint32_t left, uint32_t right, uint32_t& rank, uint32_t& result) const {
  if (slots_.empty()) return false;
  const uint64_t key = (uint64_t(left) << 32) | right;
  for (uint64_t i = mix(key) & mask_;; i = (i + 1) & mask_) {
    const Slot& s = slots_[i];
    if (s.key == kEmpty) return false;
    if (s.key == key) {
      rank = s.rank;
      result = s.result;
      return true;
    }
  }
}

void PairMerges::apply(std::vector<uint32_t>& symbols) const {
  const size_t n = symbols.size();
  if (n < 2) return;
  // Symbols form a linked list over their original positions; a merge keeps
  // the left position. Heap entries are (rank, position of the left symbol):
  // lowest rank first, then leftmost, as HF's Word::merge_all orders them.
  constexpr uint32_t kNone = UINT32_MAX;
  std::vector<uint32_t> next(n), prev(n);
  for (size_t i = 0; i < n; ++i) {
    next[i] = i + 1 < n ? uint32_t(i + 1) : kNone;
    prev[i] = i > 0 ? uint32_t(i - 1) : kNone;
  }
  struct Entry {
    uint32_t rank, pos, left, right;  // left/right ids when pushed, to spot stale entries
    bool operator>(const Entry& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> heap;
  std::vector<bool> dead(n, false);
  const auto push = [&](uint32_t pos) {
    const uint32_t j = next[pos];
    if (j == kNone) return;
    uint32_t rank = 0, result = 0;
    if (find(symbols[pos], symbols[j], rank, result)) heap.push({rank, pos, symbols[pos], symbols[j]});
  };
  for (uint32_t i = 0; i + 1 < n; ++i) push(i);
  while (!heap.empty()) {
    const Entry e = heap.top();
    heap.pop();
    const uint32_t j = next[e.pos];
    if (dead[e.pos] || j == kNone || symbols[e.pos] != e.left || symbols[j] != e.right) continue;  // stale
    uint32_t rank = 0, result = 0;
    find(e.left, e.right, rank, result);
    symbols[e.pos] = result;
    dead[j] = true;
    next[e.pos] = next[j];
    if (next[j] != kNone) prev[next[j]] = e.pos;
    if (prev[e.pos] != kNone) push(prev[e.pos]);
    push(e.pos);
  }
  size_t w = 0;
  for (uint32_t i = 0; i != kNone; i = next[i]) symbols[w++] = symbols[i];
  symbols.resize(w);
}

}  // namespace deltafin::tokenizer
