// The parallel path cuts large inputs right after a newline that precedes a
// non-whitespace character. These tests force tiny thresholds so texts with
// many hostile newline contexts get cut, and require the sequential ids.
#include <gtest/gtest.h>

#include <random>
#include <set>

#include "tokenizer/chat.h"
#include "tokenizer_test_util.h"

namespace deltafin::tokenizer {
namespace {

using Ids = std::vector<uint32_t>;

// Fragments chosen to sit around newlines in every way the patterns care
// about: CR/LF runs, spaces before/after, contractions, punctuation, digits,
// Han, marks, U+180E, U+3000, NBSP.
const char* const kFragments[] = {
    "\n", "\n", "\n\n", "\r\n", "\r", " \n", "\n ", "\t\n", "  ", " ", "a", "Bc", "the", "'s", "'LL", "!",
    "?!", "...", "//", "/", "12", "3456", "你好", "、", "e\xcc\x81", "\xcc\x81", "\xe1\xa0\x8e", "\xe3\x80\x80",
    "\xc2\xa0", "\xc2\x85", "\xe2\x80\xa8", "x", "Q", "-", "#", "(", ")", "\"", "'", "ǅ", "😀", "\xef\xbb\xbf",
    "<|open|>", "<|sep|>"};

std::string random_text(std::mt19937& rng, size_t bytes) {
  std::string s;
  while (s.size() < bytes) s += kFragments[rng() % (sizeof(kFragments) / sizeof(kFragments[0]))];
  return s;
}

std::vector<std::string> merge_vocab() {
  // Every 2- and 3-byte string over the ASCII bytes of the fragments, plus a
  // few multi-byte ones: then almost any change of piece boundaries changes
  // the BPE ids, so the comparison below sees it.
  std::set<char> ascii;
  for (const char* f : kFragments)
    for (const char* c = f; *c; ++c)
      if (static_cast<unsigned char>(*c) < 0x80) ascii.insert(*c);
  std::vector<std::string> extra;
  for (char a : ascii)
    for (char b : ascii) {
      extra.push_back(std::string{a, b});
      for (char c : ascii) extra.push_back(std::string{a, b, c});
    }
  for (const char* m : {"\xe4\xbd", "\xe4\xbd\xa0", "\xe3\x80", "\xe3\x80\x80", "\xc2\xa0", "\xcc\x81"})
    extra.push_back(m);
  return testing::byte_vocab(extra);
}

TEST(TokenizerParallel, EqualsSequentialForBuiltInPatterns) {
  std::mt19937 rng(2024);
  for (const char* pattern : {kK3Pattern, kCl100kPattern, kO200kPattern}) {
    TokenizerOptions opt;
    opt.parallel_threshold = 256;
    opt.parallel_chunk = 64;
    opt.threads = 3;
    auto ranks = merge_vocab();
    std::map<uint32_t, std::string> sp{{static_cast<uint32_t>(ranks.size()), "<|open|>"},
                                       {static_cast<uint32_t>(ranks.size() + 1), "<|sep|>"}};
    auto tok = Tokenizer::create(ranks, pattern, SpecialTokens::create(sp).value(), opt);
    ASSERT_TRUE(tok.ok()) << tok.message();
    ASSERT_TRUE(tok->pattern().newline_split_safe());
    for (int n = 0; n < 60; ++n) {
      const std::string text = random_text(rng, 500 + rng() % 6000);
      for (bool special : {false, true}) {
        auto par = tok->encode(text, special), seq = tok->encode_sequential(text, special);
        ASSERT_TRUE(par.ok() && seq.ok());
        ASSERT_EQ(par.value(), seq.value()) << "pattern " << pattern << " special " << special;
        ASSERT_EQ(tok->decode_bytes(par.value()).value(), text);
      }
    }
  }
}

TEST(TokenizerParallel, LargeInputWithDefaultThresholds) {
  std::mt19937 rng(99);
  TokenizerOptions opt;
  opt.threads = 4;
  auto tok = Tokenizer::create(merge_vocab(), kK3Pattern, SpecialTokens(), opt);
  ASSERT_TRUE(tok.ok());
  const std::string text = random_text(rng, 600 * 1024);
  EXPECT_EQ(tok->encode(text).value(), tok->encode_sequential(text).value());
}

TEST(TokenizerParallel, KimiChunkingCutsLongRuns) {
  // "c" + "ab"x15000 is one 30,001-character non-space run: K3 cuts it after
  // 25,000 characters (docs/design/tokenizer.md), which changes the BPE of "ab" pairs.
  testing::TempDir dir;
  const auto tok = testing::checkpoint_tokenizer(dir, testing::byte_vocab({"ab"}));
  std::string text = "c";
  for (int i = 0; i < 15000; ++i) text += "ab";
  Ids expect{'c'};
  for (int i = 0; i < 12499; ++i) expect.push_back(256);
  expect.push_back('a');  // end of the first 25,000 characters
  expect.push_back('b');
  for (int i = 0; i < 2500; ++i) expect.push_back(256);
  EXPECT_EQ(tok.encode(text).value(), expect);
  // A plain tiktoken tokenizer does not cut.
  auto plain = Tokenizer::create(testing::byte_vocab({"ab"}), kK3Pattern, SpecialTokens());
  Ids uncut{'c'};
  for (int i = 0; i < 15000; ++i) uncut.push_back(256);
  EXPECT_EQ(plain->encode(text).value(), uncut);
}

}  // namespace
}  // namespace deltafin::tokenizer

namespace deltafin::tokenizer {
namespace {

TEST(TokenizerParallel, LargeChatEqualsSequentialSegments) {
  testing::TempDir dir;
  auto tok = testing::checkpoint_tokenizer(dir, merge_vocab());
  std::mt19937 rng(3);
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  for (int i = 0; i < 200; ++i)
    messages.push_back({{"role", i % 2 ? "assistant" : "user"}, {"content", random_text(rng, 1000 + rng() % 3000)}});
  messages.push_back({{"role", "user"}, {"content", random_text(rng, 300 * 1024)}});  // one huge segment
  auto segs = render_chat(messages, ChatOptions{});
  ASSERT_TRUE(segs.ok()) << segs.message();
  auto par = encode_segments(tok, segs.value(), true), seq = encode_segments(tok, segs.value(), false);
  ASSERT_TRUE(par.ok() && seq.ok());
  EXPECT_EQ(par.value(), seq.value());
  Ids joined;
  for (const auto& s : segs.value()) {
    auto ids = tok.encode_sequential(s.text, s.control);
    joined.insert(joined.end(), ids->begin(), ids->end());
  }
  EXPECT_EQ(seq.value(), joined);
}

}  // namespace
}  // namespace deltafin::tokenizer
