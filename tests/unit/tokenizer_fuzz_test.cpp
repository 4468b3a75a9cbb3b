// Random-input test (>= 100,000 small inputs; run under ASan in CI): encode
// never crashes, invalid UTF-8 is an error naming the byte, valid UTF-8
// round-trips through decode, and corrupt rank files are errors.
#include <gtest/gtest.h>

#include <random>
#include <set>

#include "tokenizer/rank_file.h"
#include "tokenizer/stream_decoder.h"
#include "tokenizer/utf8.h"
#include "tokenizer_test_util.h"

namespace deltafin::tokenizer {
namespace {

// A vocabulary with many merges: every substring of some multilingual words.
std::vector<std::string> fuzz_vocab() {
  const char* words[] = {"the", "hello", "world", " token", "ing", "你好世界", "日本語", "Привет", "مرحبا",
                         "😀👍", "e\xcc\x81", "  ", "\n\n", "123", "'s", "...", "<|open|>"};
  std::set<std::string> extra;
  for (const char* w : words) {
    const std::string s = w;
    for (size_t i = 0; i < s.size(); ++i)
      for (size_t n = 2; i + n <= s.size(); ++n) extra.insert(s.substr(i, n));
  }
  return testing::byte_vocab(std::vector<std::string>(extra.begin(), extra.end()));
}

void append_utf8(std::string& s, uint32_t cp) {
  const auto put = [&](uint32_t v) { s.push_back(static_cast<char>(v)); };
  if (cp < 0x80) {
    put(cp);
  } else if (cp < 0x800) {
    put(0xC0 | cp >> 6);
    put(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    put(0xE0 | cp >> 12);
    put(0x80 | ((cp >> 6) & 0x3F));
    put(0x80 | (cp & 0x3F));
  } else {
    put(0xF0 | cp >> 18);
    put(0x80 | ((cp >> 12) & 0x3F));
    put(0x80 | ((cp >> 6) & 0x3F));
    put(0x80 | (cp & 0x3F));
  }
}

std::string random_input(std::mt19937& rng) {
  static const char* pieces[] = {"a", "Z", " ", "\n", "\t", "'s", "你", "好", "é", "e\xcc\x81", "😀", "\xe2\x80\x8d",
                                 "1", "22", "!", "<|open|>", "<|sep|>", "\xc2\xa0", "\xe1\xa0\x8e", "\r\n",
                                 "\xd8\xa7", "\xf0\x9f\x87\xaf"};
  std::string s;
  const int n = static_cast<int>(rng() % 12);
  for (int i = 0; i < n; ++i) {
    const uint32_t r = rng() % 10;
    if (r < 6) {
      s.append(pieces[rng() % (sizeof(pieces) / sizeof(pieces[0]))]);
    } else if (r < 9) {
      s += static_cast<char>(rng() % 256);  // any byte: often invalid UTF-8
    } else {
      // A random scalar value, encoded by hand (never a surrogate).
      uint32_t cp = rng() % 0x110000;
      if (cp >= 0xD800 && cp < 0xE000) cp = 0x41;
      append_utf8(s, cp);
    }
  }
  return s;
}

TEST(TokenizerFuzz, RandomInputsRoundTripOrFailCleanly) {
  std::map<uint32_t, std::string> sp;
  const auto vocab = fuzz_vocab();
  sp[static_cast<uint32_t>(vocab.size())] = "<|open|>";
  sp[static_cast<uint32_t>(vocab.size() + 1)] = "<|sep|>";
  auto tok = Tokenizer::create(vocab, kK3Pattern, SpecialTokens::create(sp).value());
  ASSERT_TRUE(tok.ok()) << tok.message();
  std::mt19937 rng(12345);
  int valid = 0, invalid = 0;
  for (int n = 0; n < 100000; ++n) {
    const std::string x = random_input(rng);
    const bool special = (n & 1) != 0;
    auto ids = tok->encode(x, special);
    const size_t bad = first_invalid_utf8(x);
    if (bad != kUtf8Valid) {
      ASSERT_FALSE(ids.ok());
      ASSERT_EQ(ids.message(), fmt::format("encode: invalid UTF-8 at byte {}", bad));
      ++invalid;
      continue;
    }
    ASSERT_TRUE(ids.ok()) << ids.message();
    ++valid;
    ASSERT_EQ(tok->decode(ids.value()).value(), x);
    if (!special) {
      for (uint32_t id : ids.value()) ASSERT_LT(id, tok->rank_count());
    }
    if (n % 16 == 0) {
      StreamDecoder d(*tok);
      std::string streamed;
      for (uint32_t id : ids.value()) streamed += d.push(id).value();
      streamed += d.finish();
      ASSERT_EQ(streamed, x);
    }
  }
  // Both branches must have been exercised substantially.
  EXPECT_GT(valid, 20000);
  EXPECT_GT(invalid, 20000);
}

TEST(TokenizerFuzz, InvalidUtf8Examples) {
  auto tok = Tokenizer::create(testing::byte_vocab(), kK3Pattern, SpecialTokens());
  const std::pair<std::string, size_t> cases[] = {
      {"ab\xff", 2}, {"\xc0\x80", 0}, {"x\xed\xa0\x80", 1}, {"\xf4\x90\x80\x80", 0}, {"ok\xe4\xbd", 2},
      {"\x80", 0},   {"\xe0\x9f\xbf", 0}};
  for (const auto& [text, at] : cases) {
    auto r = tok->encode(text);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.message(), fmt::format("encode: invalid UTF-8 at byte {}", at));
  }
}

TEST(TokenizerFuzz, MutatedRankFilesNeverCrash) {
  const std::string good = testing::rank_file_text(testing::byte_vocab({"ab", "abc"}));
  ASSERT_TRUE(parse_rank_file(good, "f").ok());
  std::mt19937 rng(5);
  int errors = 0;
  for (int n = 0; n < 3000; ++n) {
    std::string s = good;
    const int edits = 1 + static_cast<int>(rng() % 3);
    for (int e = 0; e < edits; ++e) s[rng() % s.size()] = "A=/ \n9\x00\xff"[rng() % 8];
    auto r = parse_rank_file(s, "f");
    if (!r.ok()) {
      ++errors;
      EXPECT_EQ(r.message().rfind("f", 0), 0u) << r.message();
    }
  }
  EXPECT_GT(errors, 1000);
}

}  // namespace
}  // namespace deltafin::tokenizer
