// Shared helpers for tokenizer tests: small vocabularies that can be checked
// by hand, written to temp files where a loader needs a path.
#pragma once
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tokenizer/rank_file.h"
#include "tokenizer/tokenizer.h"

namespace deltafin::tokenizer::testing {

// Ranks 0..255 are the single bytes in byte order, then `extra` tokens.
inline std::vector<std::string> byte_vocab(const std::vector<std::string>& extra = {}) {
  std::vector<std::string> v;
  for (int b = 0; b < 256; ++b) v.push_back(std::string(1, static_cast<char>(b)));
  for (const auto& e : extra) v.push_back(e);
  return v;
}

inline std::string rank_file_text(const std::vector<std::string>& tokens) {
  std::string out;
  for (size_t r = 0; r < tokens.size(); ++r) out += encode_base64(tokens[r]) + " " + std::to_string(r) + "\n";
  return out;
}

// A fresh temp directory removed at scope exit.
struct TempDir {
  std::filesystem::path path;
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "df_tok_XXXXXX").string();
    path = mkdtemp(tmpl.data());
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  std::string write(const std::string& name, const std::string& contents) const {
    const auto p = path / name;
    std::ofstream(p, std::ios::binary) << contents;
    return p.string();
  }
};

// K3 spellings at their K3 offsets from the first special id (docs/design/tokenizer.md).
inline std::string k3_tokenizer_config(uint32_t first_id) {
  const std::pair<uint32_t, const char*> names[] = {
      {0, "[BOS]"}, {1, "[EOS]"}, {2, "<|end_of_msg|>"}, {3, "<|open|>"}, {4, "<|close|>"}, {5, "<|sep|>"},
      {6, "[start_header_id]"}, {7, "[end_header_id]"}, {9, "[EOT]"}, {18, "<|media_begin|>"},
      {19, "<|media_content|>"}, {20, "<|media_end|>"}, {21, "<|media_pad|>"}, {65, "<osagent_mode>"},
      {254, "[UNK]"}, {255, "[PAD]"}};
  std::string j = "{\"added_tokens_decoder\": {";
  bool first = true;
  for (const auto& [off, name] : names) {
    if (!first) j += ",";
    first = false;
    j.append("\"").append(std::to_string(first_id + off)).append("\": {\"content\": \"");
    j.append(name).append("\", \"special\": true}");
  }
  return j + "}}";
}

// A checkpoint-style tokenizer: `tokens` as tiktoken.model plus K3 specials.
inline Tokenizer checkpoint_tokenizer(const TempDir& dir, const std::vector<std::string>& tokens) {
  dir.write("tiktoken.model", rank_file_text(tokens));
  dir.write("tokenizer_config.json", k3_tokenizer_config(static_cast<uint32_t>(tokens.size())));
  auto t = Tokenizer::load_from_checkpoint_dir(dir.path.string());
  EXPECT_TRUE(t.ok()) << t.message();
  return std::move(t).value();
}

inline std::vector<uint32_t> bytes_of(const std::string& s) {
  std::vector<uint32_t> v;
  for (unsigned char c : s) v.push_back(c);
  return v;
}

}  // namespace deltafin::tokenizer::testing
