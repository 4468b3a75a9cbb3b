// Streaming decode: every chunk is valid UTF-8, and the chunks concatenate
// to the one-shot decode (U+FFFD for bytes that never complete).
#include <gtest/gtest.h>

#include <random>

#include "tokenizer/stream_decoder.h"
#include "tokenizer/utf8.h"
#include "tokenizer_test_util.h"

namespace deltafin::tokenizer {
namespace {

using Ids = std::vector<uint32_t>;

class TokenizerStream : public ::testing::Test {
 protected:
  testing::TempDir dir;
  // Multi-byte tokens that end in the middle of a character, e.g. "a" + the
  // first byte of "é", so characters are split across tokens.
  Tokenizer tok = testing::checkpoint_tokenizer(dir, testing::byte_vocab({"a\xc3", "\xa9" "b", "\xe4\xbd"}));

  std::string stream(const Ids& ids) {
    StreamDecoder d(tok);
    std::string all;
    for (uint32_t id : ids) {
      auto chunk = d.push(id);
      EXPECT_TRUE(chunk.ok()) << chunk.message();
      EXPECT_EQ(first_invalid_utf8(chunk.value()), kUtf8Valid);
      all += chunk.value();
    }
    const std::string rest = d.finish();
    EXPECT_EQ(first_invalid_utf8(rest), kUtf8Valid);
    return all + rest;
  }
};

TEST_F(TokenizerStream, HoldsBackSplitCharacters) {
  StreamDecoder d(tok);
  EXPECT_EQ(d.push(256).value(), "a");          // "a" + first byte of é
  EXPECT_EQ(d.push(257).value(), "\xc3\xa9" "b");  // completes é
  EXPECT_EQ(d.push(258).value(), "");           // two of three bytes of 你
  EXPECT_EQ(d.push(0xA0).value(), "\xe4\xbd\xa0");
  EXPECT_EQ(d.push(0xF0).value(), "");
  EXPECT_EQ(d.finish(), "\xef\xbf\xbd");        // never completed
  EXPECT_FALSE(d.push(99999).ok());
}

TEST_F(TokenizerStream, MatchesOneShotDecodeOnRandomIds) {
  std::mt19937 rng(11);
  for (int n = 0; n < 3000; ++n) {
    Ids ids;
    const int len = 1 + static_cast<int>(rng() % 12);
    for (int i = 0; i < len; ++i) {
      // Bias towards UTF-8 lead/continuation bytes and the split tokens.
      const uint32_t r = rng() % 6;
      ids.push_back(r == 0 ? 256 + rng() % 3 : r == 1 ? 0x80 + rng() % 0x40 : r == 2 ? 0xC0 + rng() % 0x40 : rng() % 256);
    }
    const std::string expect = tok.decode(ids).value();
    ASSERT_EQ(stream(ids), expect);
  }
}

TEST_F(TokenizerStream, DecodeReplacesInvalidBytes) {
  EXPECT_EQ(tok.decode(Ids{'a', 0xFF, 'b'}).value(), "a\xef\xbf\xbd" "b");
  EXPECT_EQ(tok.decode_bytes(Ids{'a', 0xFF}).value(), "a\xff");
  EXPECT_EQ(tok.decode(Ids{tok.special_id("[BOS]").value()}).value(), "[BOS]");
  auto bad = tok.decode(Ids{99999});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("unknown token id 99999"), std::string::npos);
}

}  // namespace
}  // namespace deltafin::tokenizer
