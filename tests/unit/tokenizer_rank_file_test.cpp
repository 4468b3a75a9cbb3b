// Rank file parsing: strict base64, ranks 0..n-1 in order, distinct bytes,
// and errors that name the offending line.
#include <gtest/gtest.h>

#include "tokenizer/rank_file.h"
#include "tokenizer_test_util.h"

namespace deltafin::tokenizer {
namespace {

using testing::byte_vocab;
using testing::rank_file_text;

TEST(TokenizerBase64, DecodesCanonicalAndRejectsMalformed) {
  EXPECT_EQ(decode_base64("IQ==").value(), "!");
  EXPECT_EQ(decode_base64("aGk=").value(), "hi");
  EXPECT_EQ(decode_base64("aGV5").value(), "hey");
  EXPECT_FALSE(decode_base64("").has_value());
  EXPECT_FALSE(decode_base64("IQ=").has_value());     // length not a multiple of 4
  EXPECT_FALSE(decode_base64("I===").has_value());    // too much padding
  EXPECT_FALSE(decode_base64("IQ==IQ==").has_value());  // padding in the middle
  EXPECT_FALSE(decode_base64("I*==").has_value());    // not in the alphabet
  EXPECT_FALSE(decode_base64("IR==").has_value());    // non-zero padding bits
  for (int n = 0; n < 300; ++n) {
    std::string s;
    for (int i = 0; i < n % 7 + 1; ++i) s += static_cast<char>((n * 31 + i * 17) & 0xFF);
    EXPECT_EQ(decode_base64(encode_base64(s)).value(), s);
  }
}

TEST(TokenizerRankFile, ParsesAValidFile) {
  auto tokens = byte_vocab({"ab", "abc"});
  auto r = parse_rank_file(rank_file_text(tokens), "t.model");
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(r.value(), tokens);
}

// Replaces line `n` (1-based) of a valid file's text.
std::string with_line(int n, const std::string& line) {
  std::string text = rank_file_text(byte_vocab({"ab", "abc"}));
  size_t start = 0;
  for (int i = 1; i < n; ++i) start = text.find('\n', start) + 1;
  const size_t end = text.find('\n', start);
  return text.substr(0, start) + line + text.substr(end);
}

TEST(TokenizerRankFile, CorruptFilesNameTheLine) {
  struct Case {
    std::string text, expect;
  } cases[] = {
      {with_line(5, "A*== 4"), "t.model:5: bad base64"},
      {with_line(258, "YWI= 256"), "t.model:258: duplicate or out-of-order rank 256"},
      {with_line(258, "YWJj 258"), "t.model:258: rank gap: got 258, expected 257"},
      {with_line(258, "YQ== 257"), "t.model:258: duplicate token bytes (same as line 98)"},
      {with_line(10, "CQ==9"), "t.model:10: expected '<base64> <rank>'"},
      {with_line(10, "CQ== nine"), "t.model:10: bad rank 'nine'"},
      {with_line(10, ""), "t.model:10: empty line"},
  };
  for (const auto& c : cases) {
    auto r = parse_rank_file(c.text, "t.model");
    ASSERT_FALSE(r.ok()) << c.expect;
    EXPECT_NE(r.message().find(c.expect), std::string::npos) << r.message();
  }
}

TEST(TokenizerRankFile, RequiresAllSingleBytes) {
  auto tokens = byte_vocab();
  tokens[65] = "AA";  // byte 'A' now has no rank
  auto r = parse_rank_file(rank_file_text(tokens), "t.model");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("byte 0x41 has no rank"), std::string::npos) << r.message();
  EXPECT_FALSE(parse_rank_file("", "t.model").ok());
}

TEST(TokenizerRankFile, MissingFileIsAnError) {
  auto r = read_rank_file("/nonexistent/tiktoken.model");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("/nonexistent/tiktoken.model"), std::string::npos);
}

}  // namespace
}  // namespace deltafin::tokenizer
