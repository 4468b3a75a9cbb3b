// BPE merge order (lowest rank first, leftmost on ties) and the heap version
// agreeing with tiktoken's quadratic scan.
#include <gtest/gtest.h>

#include <random>
#include <set>

#include "tokenizer/bpe.h"
#include "tokenizer_test_util.h"

namespace deltafin::tokenizer {
namespace {

using testing::byte_vocab;

std::vector<uint32_t> run(const RankTable& t, const std::string& piece) {
  std::vector<uint32_t> out;
  bpe_encode(t, piece, out);
  return out;
}

TEST(TokenizerBpe, MergesLowestRankFirst) {
  const RankTable t(byte_vocab({"ab", "bc", "abc"}));  // ranks 256, 257, 258
  EXPECT_EQ(run(t, "abc"), (std::vector<uint32_t>{258}));   // whole piece is a rank
  EXPECT_EQ(run(t, "abcd"), (std::vector<uint32_t>{258, 'd'}));  // ab, then ab+c
  EXPECT_EQ(run(t, "bcd"), (std::vector<uint32_t>{257, 'd'}));
  EXPECT_EQ(run(t, "x"), (std::vector<uint32_t>{'x'}));
}

TEST(TokenizerBpe, TiesGoToTheLeftmostPair) {
  const RankTable t(byte_vocab({"aa"}));
  // aaaaa: merge at 0, then the next free pair at 2; the last a stays.
  EXPECT_EQ(run(t, "aaaaa"), (std::vector<uint32_t>{256, 256, 'a'}));
  const RankTable u(byte_vocab({"bc", "ab"}));  // bc has the lower rank
  EXPECT_EQ(run(u, "abc"), (std::vector<uint32_t>{'a', 256}));
}

TEST(TokenizerBpe, HeapAgreesWithLinearScan) {
  std::mt19937 rng(7);
  const std::string alphabet = "abcd";
  std::set<std::string> extra;
  while (extra.size() < 300) {
    std::string s;
    const int len = 2 + static_cast<int>(rng() % 5);
    for (int i = 0; i < len; ++i) s += alphabet[rng() % alphabet.size()];
    extra.insert(s);
  }
  std::vector<std::string> shuffled(extra.begin(), extra.end());
  std::shuffle(shuffled.begin(), shuffled.end(), rng);
  const RankTable t(byte_vocab(shuffled));
  for (int n = 0; n < 2000; ++n) {
    std::string piece;
    const int len = 1 + static_cast<int>(rng() % 300);
    for (int i = 0; i < len; ++i) piece += alphabet[rng() % alphabet.size()];
    std::vector<uint32_t> a, b;
    bpe_encode_linear(t, piece, a);
    bpe_encode_heap(t, piece, b);
    ASSERT_EQ(a, b) << piece;
    std::string joined;
    for (uint32_t id : a) joined += t.bytes(id);
    ASSERT_EQ(joined, piece);
  }
}

}  // namespace
}  // namespace deltafin::tokenizer
