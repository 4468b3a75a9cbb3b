// K3's pre-tokenisation pattern (docs/design/tokenizer.md) translated to PCRE2: it compiles
// and cuts hand-checked examples as Rust's regex does.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "tokenizer/pattern.h"
#include "tokenizer_test_util.h"

namespace deltafin::tokenizer {
namespace {

using Pieces = std::vector<std::string>;

Pieces cut(const std::string& pattern, const std::string& text) {
  auto t = Tokenizer::create(testing::byte_vocab(), pattern, SpecialTokens());
  EXPECT_TRUE(t.ok()) << t.message();
  auto p = t->pretokenize(text);
  EXPECT_TRUE(p.ok()) << p.message();
  return p.value();
}

TEST(TokenizerPattern, K3PatternMatchesTheSpecFile) {
  // tests/tokenizer/k3_pattern.txt feeds the npm oracle; it must be the same text.
  std::ifstream in(std::string(DELTAFIN_SOURCE_DIR) + "/tests/tokenizer/k3_pattern.txt");
  std::stringstream ss;
  ss << in.rdbuf();
  std::string text = ss.str();
  while (!text.empty() && text.back() == '\n') text.pop_back();
  EXPECT_EQ(text, kK3Pattern);
  auto p = Pattern::compile(kK3Pattern);
  ASSERT_TRUE(p.ok()) << p.message();
  EXPECT_EQ(p.value()->translated().find("&&"), std::string::npos);
}

TEST(TokenizerPattern, K3HandCheckedPieces) {
  const std::string k3 = kK3Pattern;
  EXPECT_EQ(cut(k3, "Hello world"), (Pieces{"Hello", " world"}));
  EXPECT_EQ(cut(k3, "I'm HAPPY's"), (Pieces{"I'm", " HAPPY's"}));
  EXPECT_EQ(cut(k3, "you'LL"), (Pieces{"you'LL"}));
  EXPECT_EQ(cut(k3, "你好世界abc"), (Pieces{"你好世界", "abc"}));
  EXPECT_EQ(cut(k3, "abc你好"), (Pieces{"abc", "你好"}));
  // U+3001 is Han only by Script_Extensions; Rust's \p{Han} means Script.
  EXPECT_EQ(cut(k3, "日本、東京"), (Pieces{"日本", "、", "東京"}));
  EXPECT_EQ(cut(k3, "12345"), (Pieces{"123", "45"}));
  EXPECT_EQ(cut(k3, "a  b"), (Pieces{"a", " ", " b"}));
  EXPECT_EQ(cut(k3, "x\n\n  y"), (Pieces{"x", "\n\n", " ", " y"}));
  EXPECT_EQ(cut(k3, "foo!!\n\nbar"), (Pieces{"foo", "!!\n\n", "bar"}));
  EXPECT_EQ(cut(k3, "\xc7\x85ungla"), (Pieces{"\xc7\x85ungla"}));  // Lt then lowercase
  EXPECT_EQ(cut(k3, "\t你"), (Pieces{"\t", "你"}));
  EXPECT_EQ(cut(k3, "e\xcc\x81t\xc3\xa9"), (Pieces{"e\xcc\x81t\xc3\xa9"}));  // combining acute
  EXPECT_EQ(cut(k3, "CamelCase"), (Pieces{"Camel", "Case"}));
  EXPECT_EQ(cut(k3, "end.  "), (Pieces{"end", ".", "  "}));
  EXPECT_EQ(cut(k3, ""), (Pieces{}));
}

TEST(TokenizerPattern, WhitespaceIsUnicodeWhiteSpaceNotPcreUcp) {
  // U+180E is not White_Space (Rust's \s) although PCRE2's UCP \s matches it.
  const std::string k3 = kK3Pattern;
  EXPECT_EQ(cut(k3, "x\xe1\xa0\x8e\xe1\xa0\x8ey"), (Pieces{"x", "\xe1\xa0\x8e\xe1\xa0\x8e", "y"}));
  // U+3000 is: the whitespace run gives its last character to the word.
  EXPECT_EQ(cut(k3, "x\xe3\x80\x80\xe3\x80\x80y"), (Pieces{"x", "\xe3\x80\x80", "\xe3\x80\x80y"}));
}

TEST(TokenizerPattern, TranslationAndErrors) {
  EXPECT_EQ(translate_pattern("[a&&[^b]]+").value(), "(?:(?![b])[a])+");
  EXPECT_EQ(translate_pattern("[x&&[y]]").value(), "(?:(?=[y])[x])");
  EXPECT_EQ(translate_pattern(R"(\p{Han}\p{L})").value(), R"(\p{sc:Han}\p{L})");
  EXPECT_NE(translate_pattern(R"(\s)").value().find(R"(\x{3000})"), std::string::npos);
  EXPECT_FALSE(translate_pattern("[^a&&[b]]").ok());
  EXPECT_FALSE(translate_pattern("[abc").ok());
  EXPECT_FALSE(translate_pattern(R"([\S])").ok());
  auto bad = Pattern::compile("(unclosed");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("PCRE2 compile error"), std::string::npos);
}

}  // namespace
}  // namespace deltafin::tokenizer
