// Hugging Face tokenizer.json (byte-level BPE): hand-checkable vocabularies
// for pair-priority merging, added tokens, NFC and the JavaScript-dialect
// Split regex, and a clear error for each kind of bad file. The Qwen3 file
// itself is checked against transformers.js by tests/e2e/tokenizer_json_oracle.sh.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>

#include "tokenizer/byte_level.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer_test_util.h"

namespace deltafin::tokenizer {
namespace {

using nlohmann::json;
using testing::TempDir;

// Qwen2/3's Split regex, as its tokenizer.json spells it.
const char* const kQwenRegex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

std::string bl(std::string_view bytes) { return byte_level_encode(bytes); }

// Ids 0..255 are the single bytes (id == byte value), then `extra` tokens
// (given as bytes), merges given as byte pairs, Qwen's pipeline.
json make_json(const std::vector<std::string>& extra, const std::vector<std::pair<std::string, std::string>>& merges) {
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab[bl(std::string(1, char(b)))] = b;
  uint32_t id = 256;
  for (const auto& e : extra) vocab[bl(e)] = id++;
  json m = json::array();
  for (const auto& [l, r] : merges) m.push_back(json::array({bl(l), bl(r)}));
  return json{
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens", json::array()},
      {"normalizer", {{"type", "NFC"}}},
      {"pre_tokenizer",
       {{"type", "Sequence"},
        {"pretokenizers",
         json::array({{{"type", "Split"}, {"pattern", {{"Regex", kQwenRegex}}}, {"behavior", "Isolated"},
                       {"invert", false}},
                      {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false},
                       {"use_regex", false}}})}}},
      {"post_processor", {{"type", "ByteLevel"}}},
      {"decoder", {{"type", "ByteLevel"}}},
      {"model",
       {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", nullptr}, {"continuing_subword_prefix", ""},
        {"end_of_word_suffix", ""}, {"fuse_unk", false}, {"byte_fallback", false}, {"ignore_merges", false},
        {"vocab", vocab}, {"merges", m}}},
  };
}

void add_token(json& j, uint32_t id, const std::string& content, bool special) {
  j["added_tokens"].push_back({{"id", id}, {"content", content}, {"single_word", false}, {"lstrip", false},
                               {"rstrip", false}, {"normalized", false}, {"special", special}});
}

Tokenizer load(const json& j) {
  auto t = Tokenizer::from_tokenizer_json(j.dump(), "tokenizer.json");
  EXPECT_TRUE(t.ok()) << t.message();
  return std::move(t).value();
}

std::vector<uint32_t> enc(const Tokenizer& t, std::string_view s, bool allow_special = true) {
  auto ids = t.encode(s, allow_special);
  EXPECT_TRUE(ids.ok()) << ids.message();
  return ids.ok() ? ids.value() : std::vector<uint32_t>{};
}

std::string load_error_text(const std::string& text) {
  auto t = Tokenizer::from_tokenizer_json(text, "tokenizer.json");
  EXPECT_FALSE(t.ok());
  return t.ok() ? "" : t.message();
}

std::string load_error(const json& j) { return load_error_text(j.dump()); }

TEST(TokenizerJson, ByteLevelAlphabet) {
  EXPECT_EQ(byte_level_char(' '), 0x120u);  // "Ġ"
  EXPECT_EQ(byte_level_char('\n'), 0x10Au);  // "Ċ"
  EXPECT_EQ(byte_level_char('!'), uint32_t('!'));
  EXPECT_EQ(byte_level_char(0xAD), 0x143u);
  std::string all;
  for (int b = 0; b < 256; ++b) all += char(b);
  EXPECT_EQ(byte_level_decode(byte_level_encode(all)), all);
  EXPECT_EQ(byte_level_decode("\xE2\x82\xAC"), std::nullopt);  // "€" is not in the alphabet
}

TEST(TokenizerJson, MergesByPairPriorityNotByMergedRank) {
  // merges: (b,c) first, then (a,b), then (ab,c). HF merges "abc" as
  // a + bc and stops, since (a, bc) is no merge; tiktoken's rule would take
  // ab (id 256 < 257) and then abc.
  const json j = make_json({"ab", "bc", "abc"}, {{"b", "c"}, {"a", "b"}, {"ab", "c"}});
  const Tokenizer t = load(j);
  EXPECT_EQ(enc(t, "abc"), (std::vector<uint32_t>{'a', 257}));
  EXPECT_EQ(enc(t, "abx"), (std::vector<uint32_t>{256, 'x'}));
  EXPECT_EQ(enc(t, "xabc"), (std::vector<uint32_t>{'x', 'a', 257}));
  // ignore_merges: a piece that is a vocab token is taken whole.
  json whole = j;
  whole["model"]["ignore_merges"] = true;
  EXPECT_EQ(enc(load(whole), "abc"), (std::vector<uint32_t>{258}));
  // Legacy "left right" strings mean the same merges.
  json legacy = j;
  legacy["model"]["merges"] = json::array({"b c", "a b", "ab c"});
  EXPECT_EQ(enc(load(legacy), "abc"), (std::vector<uint32_t>{'a', 257}));
}

TEST(TokenizerJson, EqualRanksMergeLeftmostFirstAndLongPiecesAgree) {
  const Tokenizer t = load(make_json({"aa", "aaaa"}, {{"a", "a"}, {"aa", "aa"}}));
  EXPECT_EQ(enc(t, "aaa"), (std::vector<uint32_t>{256, 'a'}));
  EXPECT_EQ(enc(t, "aaaaa"), (std::vector<uint32_t>{257, 'a'}));
  const auto ids = enc(t, std::string(5003, 'a'));
  ASSERT_EQ(ids.size(), 1252u);
  for (size_t i = 0; i < 1250; ++i) ASSERT_EQ(ids[i], 257u);
  EXPECT_EQ(ids[1250], 256u);
  EXPECT_EQ(ids[1251], 'a');
}

TEST(TokenizerJson, AddedTokensLeftmostLongestAndSpecialOnlyWhenAllowed) {
  json j = make_json({}, {});
  add_token(j, 256, "<|s|>", true);
  add_token(j, 257, "<t>", false);
  add_token(j, 258, "<t>x", false);
  const Tokenizer t = load(j);
  EXPECT_EQ(enc(t, "hi<|s|><t>x<t>"), (std::vector<uint32_t>{'h', 'i', 256, 258, 257}));
  // Without specials, "<|s|>" is text (split by the regex), "<t>" still matches.
  EXPECT_EQ(enc(t, "<|s|><t>", false), (std::vector<uint32_t>{'<', '|', 's', '|', '>', 257}));
  EXPECT_TRUE(t.is_special(256));
  EXPECT_FALSE(t.is_special(257));
  EXPECT_EQ(t.special_id("<|s|>").value(), 256u);
  EXPECT_EQ(t.vocab_size(), 259u);
  EXPECT_EQ(t.decode({'a', 256, 258}).value(), "a<|s|><t>x");
  // Special spellings need not be ASCII nor prefix-free here (DeepSeek's are
  // not): the added-token matcher, not SpecialTokens::find, cuts them.
  json k = make_json({}, {});
  const std::string bos = "<\xEF\xBD\x9C" "bos\xEF\xBD\x9C>";  // "<｜bos｜>"
  add_token(k, 256, bos, true);
  add_token(k, 257, bos + "x", true);
  const Tokenizer u = load(k);
  EXPECT_EQ(enc(u, "a" + bos + "x" + bos), (std::vector<uint32_t>{'a', 257, 256}));
  EXPECT_TRUE(u.is_special(256));
}

TEST(TokenizerJson, NormalizesToNfcBetweenAddedTokens) {
  json j = make_json({}, {});
  add_token(j, 256, "<t>", false);
  const Tokenizer t = load(j);
  EXPECT_EQ(enc(t, "e\xCC\x81"), (std::vector<uint32_t>{0xC3, 0xA9}));  // e + U+0301 -> é
  EXPECT_EQ(enc(t, "e\xCC\x81"), enc(t, "\xC3\xA9"));
  // ">" + U+0338 is "≯" in NFC, but the text after an added token is
  // normalized on its own, so the mark stays a mark.
  EXPECT_EQ(enc(t, "<t>\xCC\xB8"), (std::vector<uint32_t>{256, 0xCC, 0xB8}));
  // Without the normalizer, the decomposed bytes stay.
  json raw = j;
  raw["normalizer"] = nullptr;
  EXPECT_EQ(enc(load(raw), "e\xCC\x81"), (std::vector<uint32_t>{'e', 0xCC, 0x81}));
}

TEST(TokenizerJson, SplitReadsTheRegexAsJavaScriptDoes) {
  const Tokenizer t = load(make_json({}, {}));
  using V = std::vector<std::string>;
  EXPECT_EQ(t.pretokenize("Hello  world\n").value(), (V{"Hello", " ", " world", "\n"}));
  EXPECT_EQ(t.pretokenize("I'm 123").value(), (V{"I", "'m", " ", "1", "2", "3"}));
  // JavaScript's \s has U+FEFF and not U+0085 (Rust's and Oniguruma's the reverse).
  EXPECT_EQ(t.pretokenize("a \xEF\xBB\xBF" "b").value(), (V{"a", " ", "\xEF\xBB\xBF" "b"}));
  EXPECT_EQ(t.pretokenize("a \xC2\x85" "b").value(), (V{"a", " \xC2\x85", "b"}));
  // The contraction group is ASCII-only, as transformers.js rewrites it:
  // "'ſ" (U+017F) is no contraction, "'S" is.
  EXPECT_EQ(t.pretokenize("'\xC5\xBFt").value(), (V{"'\xC5\xBFt"}));
  EXPECT_EQ(t.pretokenize("'St").value(), (V{"'S", "t"}));
}

TEST(TokenizerJson, SplitIsolatedKeepsGaps) {
  json j = make_json({}, {});
  j["pre_tokenizer"]["pretokenizers"][0]["pattern"] = {{"Regex", "[0-9]+"}};
  const Tokenizer t = load(j);
  using V = std::vector<std::string>;
  EXPECT_EQ(t.pretokenize("ab12cd3").value(), (V{"ab", "12", "cd", "3"}));
  j["pre_tokenizer"]["pretokenizers"][0]["pattern"] = {{"String", "."}};
  EXPECT_EQ(load(j).pretokenize("a.b").value(), (V{"a", ".", "b"}));
}

TEST(TokenizerJson, DecodeRoundTripsAndReplacesBrokenUtf8) {
  const Tokenizer t = load(make_json({"ab"}, {{"a", "b"}}));
  for (const std::string s : {"", "ab cab\n\n  x", "日本語 😀 👩‍👩‍👧", "tab\there \r\n"}) {
    EXPECT_EQ(t.decode(enc(t, s)).value(), s);
  }
  EXPECT_EQ(t.decode({0xE6}).value(), "\xEF\xBF\xBD");
  EXPECT_FALSE(t.decode({300}).ok());
  EXPECT_FALSE(t.encode("a\xFF").ok());
}

TEST(TokenizerJson, CheckpointDirectoryPrefersTokenizerJson) {
  TempDir dir;
  dir.write("tiktoken.model", testing::rank_file_text(testing::byte_vocab()));
  auto tik = Tokenizer::load_from_checkpoint_dir(dir.path.string());
  ASSERT_TRUE(tik.ok()) << tik.message();
  EXPECT_FALSE(tik->is_tokenizer_json());
  json j = make_json({"ab"}, {{"a", "b"}});
  dir.write("tokenizer.json", j.dump());
  auto hf = Tokenizer::load_from_checkpoint_dir(dir.path.string());
  ASSERT_TRUE(hf.ok()) << hf.message();
  EXPECT_TRUE(hf->is_tokenizer_json());
  EXPECT_EQ(hf->encode("ab").value(), (std::vector<uint32_t>{256}));
  dir.write("tokenizer.json", "{");
  auto bad = Tokenizer::load_from_checkpoint_dir(dir.path.string());
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("malformed JSON"), std::string::npos) << bad.message();
}

TEST(TokenizerJson, BadFilesAreClearErrors) {
  const json good = make_json({"ab"}, {{"a", "b"}});
  const auto expect = [](const std::string& message, const std::string& part) {
    EXPECT_NE(message.find(part), std::string::npos) << "message: " << message << "\nexpected: " << part;
  };
  expect(load_error_text("{\"model\": "), "malformed JSON");
  expect(load_error_text("[]"), "not a JSON object");
  expect(load_error_text(std::string(100, '[') + std::string(100, ']')), "nested deeper");
  json j = good;
  j.erase("model");
  expect(load_error(j), "\"model\" is missing");
  j = good;
  j["model"]["type"] = "WordPiece";
  expect(load_error(j), "model type 'WordPiece' is not supported (only BPE)");
  j = good;
  j["model"].erase("vocab");
  expect(load_error(j), "model.vocab is missing");
  j = good;
  j["model"].erase("merges");
  expect(load_error(j), "model.merges is missing");
  j = good;
  j["model"]["merges"].push_back(json::array({"a", "zz"}));
  expect(load_error(j), "model.merges[1]: unknown token 'zz'");
  j = good;
  j["model"]["merges"].push_back(json::array({"b", "a"}));
  expect(load_error(j), "model.merges[1]: the merged token 'ba' is not in the vocab");
  j = good;
  j["model"]["merges"] = json::array({"a b c"});
  expect(load_error(j), "not two tokens separated by one space");
  j = good;
  j["model"]["merges"] = json::array({42});
  expect(load_error(j), "model.merges[0]: expected");
  j = good;
  j["model"]["vocab"]["x"] = -1;
  expect(load_error(j), "model.vocab['x']: id must be an integer");
  j = good;
  j["model"]["vocab"][bl("zz")] = 300;
  expect(load_error(j), "id 257 is neither in the vocab nor an added token");
  j = good;
  j["model"]["vocab"].erase(bl("\x41"));
  j["model"]["vocab"][bl("zz")] = 0x41;
  expect(load_error(j), "byte 0x41 has no vocab entry");
  j = good;
  j["pre_tokenizer"]["pretokenizers"][0] = {{"type", "Foo"}};
  expect(load_error(j), "unknown or unsupported pre_tokenizer type 'Foo'");
  j = good;
  j["pre_tokenizer"] = {{"type", "Metaspace"}};
  expect(load_error(j), "pre_tokenizer type 'Metaspace'");
  j = good;
  j["pre_tokenizer"]["pretokenizers"][0]["behavior"] = "Removed";
  expect(load_error(j), "Split behavior 'Removed' is not supported");
  j = good;
  j["pre_tokenizer"]["pretokenizers"][0]["pattern"] = {{"Regex", "(unclosed"}};
  expect(load_error(j), "PCRE2 compile error");
  j = good;
  j["pre_tokenizer"]["pretokenizers"][1]["add_prefix_space"] = true;
  expect(load_error(j), "add_prefix_space true is not supported");
  j = good;
  j["pre_tokenizer"] = j["pre_tokenizer"]["pretokenizers"][0];
  expect(load_error(j), "no ByteLevel step");
  j = good;
  j["normalizer"] = {{"type", "NFKC"}};
  expect(load_error(j), "normalizer type 'NFKC' is not supported");
  j = good;
  j["decoder"] = nullptr;
  expect(load_error(j), "decoder must be ByteLevel");
  j = good;
  j["truncation"] = {{"max_length", 8}};
  expect(load_error(j), "truncation is not supported");
  j = good;
  add_token(j, 257, "<x>", true);
  j["added_tokens"][0]["lstrip"] = true;
  expect(load_error(j), "lstrip true is not supported");
  j = good;
  j["model"]["byte_fallback"] = true;
  expect(load_error(j), "byte_fallback");
}

TEST(TokenizerJson, DamagedFilesNeverCrash) {
  json j = make_json({"ab", "abc"}, {{"a", "b"}, {"ab", "c"}});
  add_token(j, 258, "<|s|>", true);
  const std::string text = j.dump();
  // Every prefix, then random byte changes: an error or a tokenizer, never a crash.
  for (size_t n = 0; n < text.size(); n += 7) (void)Tokenizer::from_tokenizer_json(text.substr(0, n), "t");
  std::mt19937 rng(7);
  const std::string alphabet = "{}[]\":,0123456789-.abnrtuelsfBPEIDQ\\ ";
  for (int round = 0; round < 400; ++round) {
    std::string s = text;
    for (int k = 0; k < 3; ++k) s[rng() % s.size()] = alphabet[rng() % alphabet.size()];
    auto t = Tokenizer::from_tokenizer_json(s, "t");
    if (t.ok()) (void)t->encode("abc <|s|> x", true);
  }
}

}  // namespace
}  // namespace deltafin::tokenizer
