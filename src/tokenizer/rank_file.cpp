#include "tokenizer/rank_file.h"

#include "core/files.h"

#include <array>
#include <charconv>
#include <fstream>
#include <sstream>
#include <unordered_map>

#include "tokenizer/utf8.h"

namespace deltafin::tokenizer {

namespace {

constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

constexpr std::array<int8_t, 256> make_decode_table() {
  std::array<int8_t, 256> t{};
  for (auto& v : t) v = -1;
  for (int i = 0; i < 64; ++i) t[static_cast<unsigned char>(kAlphabet[i])] = static_cast<int8_t>(i);
  return t;
}
constexpr auto kDecode = make_decode_table();

// A printable rendering of a line for error messages (first 40 bytes).
std::string quote(std::string_view line) {
  std::string out;
  for (char c : line.substr(0, 40)) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u < 0x7F) out += c;
    else out += fmt::format("\\x{:02x}", u);
  }
  if (line.size() > 40) out += "...";
  return out;
}

}  // namespace

std::optional<std::string> decode_base64(std::string_view text) {
  if (text.empty() || text.size() % 4 != 0) return std::nullopt;
  std::string out;
  out.reserve(text.size() / 4 * 3);
  for (size_t i = 0; i < text.size(); i += 4) {
    const bool last = i + 4 == text.size();
    int v[4];
    int pad = 0;
    for (int k = 0; k < 4; ++k) {
      const char c = text[i + k];
      if (c == '=') {
        if (!last || k < 2) return std::nullopt;
        ++pad;
        v[k] = 0;
        continue;
      }
      if (pad > 0) return std::nullopt;  // data after padding
      v[k] = kDecode[static_cast<unsigned char>(c)];
      if (v[k] < 0) return std::nullopt;
    }
    const uint32_t w = (uint32_t(v[0]) << 18) | (uint32_t(v[1]) << 12) | (uint32_t(v[2]) << 6) | uint32_t(v[3]);
    out += static_cast<char>(w >> 16);
    if (pad < 2) out += static_cast<char>((w >> 8) & 0xFF);
    if (pad < 1) out += static_cast<char>(w & 0xFF);
    // Canonical encodings only: the bits dropped by padding must be zero.
    if ((pad == 1 && (v[2] & 0x3)) || (pad == 2 && (v[1] & 0xF))) return std::nullopt;
  }
  return out;
}

std::string encode_base64(std::string_view bytes) {
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (size_t i = 0; i < bytes.size(); i += 3) {
    const size_t n = std::min<size_t>(3, bytes.size() - i);
    uint32_t w = 0;
    for (size_t k = 0; k < 3; ++k)
      w = (w << 8) | (k < n ? static_cast<unsigned char>(bytes[i + k]) : 0);
    out += kAlphabet[(w >> 18) & 63];
    out += kAlphabet[(w >> 12) & 63];
    out += n > 1 ? kAlphabet[(w >> 6) & 63] : '=';
    out += n > 2 ? kAlphabet[w & 63] : '=';
  }
  return out;
}

Result<std::vector<std::string>> parse_rank_file(std::string_view contents, const std::string& name) {
  std::vector<std::string> tokens;
  std::unordered_map<std::string, size_t> seen;  // bytes -> line number
  size_t pos = 0, line_no = 0;
  while (pos < contents.size()) {
    size_t end = contents.find('\n', pos);
    if (end == std::string_view::npos) end = contents.size();
    std::string_view line = contents.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) {
      // Only a trailing newline may leave an empty line.
      if (pos >= contents.size()) break;
      return error("{}:{}: empty line", name, line_no);
    }
    const size_t space = line.find(' ');
    if (space == std::string_view::npos || line.find(' ', space + 1) != std::string_view::npos)
      return error("{}:{}: expected '<base64> <rank>', got '{}'", name, line_no, quote(line));
    const std::string_view b64 = line.substr(0, space), rank_text = line.substr(space + 1);
    auto bytes = decode_base64(b64);
    if (!bytes) return error("{}:{}: bad base64 '{}'", name, line_no, quote(b64));
    uint64_t rank = 0;
    const auto [ptr, ec] = std::from_chars(rank_text.data(), rank_text.data() + rank_text.size(), rank);
    if (ec != std::errc() || ptr != rank_text.data() + rank_text.size() || rank_text.empty())
      return error("{}:{}: bad rank '{}'", name, line_no, quote(rank_text));
    if (rank != tokens.size()) {
      if (rank < tokens.size())
        return error("{}:{}: duplicate or out-of-order rank {} (expected {})", name, line_no, rank, tokens.size());
      return error("{}:{}: rank gap: got {}, expected {}", name, line_no, rank, tokens.size());
    }
    if (rank >= 0x7FFFFFFFu) return error("{}:{}: rank {} too large", name, line_no, rank);
    auto [it, inserted] = seen.emplace(*bytes, line_no);
    if (!inserted)
      return error("{}:{}: duplicate token bytes (same as line {})", name, line_no, it->second);
    tokens.push_back(std::move(*bytes));
  }
  if (tokens.empty()) return error("{}: no ranks", name);
  // BPE starts from single bytes, so every byte must have a rank.
  for (int b = 0; b < 256; ++b)
    if (!seen.count(std::string(1, static_cast<char>(b))))
      return error("{}: byte 0x{:02x} has no rank (all 256 single bytes are required)", name, b);
  return tokens;
}

Result<std::vector<std::string>> read_rank_file(const std::string& path) {
  DF_ASSIGN(std::string contents, read_file(path));
  return parse_rank_file(contents, path);
}

}  // namespace deltafin::tokenizer
