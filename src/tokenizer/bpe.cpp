#include "tokenizer/bpe.h"

#include <queue>

namespace deltafin::tokenizer {

namespace {
// Above this length the quadratic scan loses to the heap.
constexpr size_t kHeapThreshold = 96;
}  // namespace

void bpe_encode_linear(const RankTable& table, std::string_view piece, std::vector<uint32_t>& out) {
  const size_t n = piece.size();
  if (n == 1) {
    out.push_back(table.byte_rank(static_cast<unsigned char>(piece[0])));
    return;
  }
  // parts[i] = (start of part i, rank of part i merged with part i+1);
  // one sentinel part at the end. Same layout as tiktoken's byte_pair_merge.
  struct Part {
    uint32_t start, rank;
  };
  thread_local std::vector<Part> parts;
  parts.clear();
  parts.reserve(n + 1);
  for (size_t i = 0; i + 1 < n; ++i)
    parts.push_back({static_cast<uint32_t>(i), table.find(piece.substr(i, 2))});
  parts.push_back({static_cast<uint32_t>(n - 1), kNoRank});
  parts.push_back({static_cast<uint32_t>(n), kNoRank});

  const auto pair_rank = [&](size_t i) -> uint32_t {
    if (i + 3 >= parts.size()) return kNoRank;
    return table.find(piece.substr(parts[i].start, parts[i + 3].start - parts[i].start));
  };
  for (;;) {
    uint32_t best = kNoRank;
    size_t at = 0;
    for (size_t i = 0; i + 1 < parts.size(); ++i) {
      if (parts[i].rank < best) {
        best = parts[i].rank;
        at = i;
      }
    }
    if (best == kNoRank) break;
    parts[at].rank = pair_rank(at);
    if (at > 0) parts[at - 1].rank = pair_rank(at - 1);
    parts.erase(parts.begin() + static_cast<std::ptrdiff_t>(at) + 1);
  }
  for (size_t i = 0; i + 1 < parts.size(); ++i)
    out.push_back(table.find(piece.substr(parts[i].start, parts[i + 1].start - parts[i].start)));
}

void bpe_encode_heap(const RankTable& table, std::string_view piece, std::vector<uint32_t>& out) {
  const size_t n = piece.size();
  // Parts form a linked list over byte positions; a part starting at i ends
  // where next[i] starts. pair[i] is the rank of part i merged with its next.
  std::vector<uint32_t> next(n), prev(n), pair(n, kNoRank);
  for (size_t i = 0; i < n; ++i) {
    next[i] = static_cast<uint32_t>(i + 1);
    prev[i] = static_cast<uint32_t>(i == 0 ? UINT32_MAX : i - 1);
  }
  // Min-heap on (rank, start): lowest rank, then leftmost, as the scan does.
  using Entry = std::pair<uint32_t, uint32_t>;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> heap;
  for (size_t i = 0; i + 1 < n; ++i) {
    pair[i] = table.find(piece.substr(i, 2));
    if (pair[i] != kNoRank) heap.push({pair[i], static_cast<uint32_t>(i)});
  }
  const auto end_of = [&](uint32_t i) { return next[i]; };  // next[i] == n at the end
  const auto rank_with_next = [&](uint32_t i) -> uint32_t {
    const uint32_t j = next[i];
    if (j >= n) return kNoRank;
    return table.find(piece.substr(i, end_of(j) - i));
  };
  while (!heap.empty()) {
    const auto [rank, i] = heap.top();
    heap.pop();
    if (pair[i] != rank || rank == kNoRank) continue;  // stale entry
    // Merge part i with its successor j.
    const uint32_t j = next[i];
    next[i] = next[j];
    if (next[j] < n) prev[next[j]] = i;
    pair[j] = kNoRank;
    next[j] = UINT32_MAX;  // mark dead
    pair[i] = rank_with_next(i);
    if (pair[i] != kNoRank) heap.push({pair[i], i});
    if (prev[i] != UINT32_MAX) {
      const uint32_t p = prev[i];
      pair[p] = rank_with_next(p);
      if (pair[p] != kNoRank) heap.push({pair[p], p});
    }
  }
  for (uint32_t i = 0; i < n; i = next[i]) out.push_back(table.find(piece.substr(i, next[i] - i)));
}

void bpe_encode(const RankTable& table, std::string_view piece, std::vector<uint32_t>& out) {
  if (piece.empty()) return;
  const uint32_t whole = table.find(piece);
  if (whole != kNoRank) {
    out.push_back(whole);
    return;
  }
  if (piece.size() <= kHeapThreshold) bpe_encode_linear(table, piece, out);
  else bpe_encode_heap(table, piece, out);
}

}  // namespace deltafin::tokenizer
