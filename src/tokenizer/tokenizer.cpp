#include "tokenizer/tokenizer.h"

#include "core/files.h"

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "core/thread_pool.h"
#include "tokenizer/bpe.h"
#include "tokenizer/rank_file.h"
#include "tokenizer/tokenizer_json.h"
#include "tokenizer/utf8.h"

namespace deltafin::tokenizer {

namespace {

constexpr size_t kKimiSliceChars = 400000;
constexpr size_t kKimiMaxRun = 25000;
constexpr uint32_t kReservedSpecials = 256;


// Kimi's _split_whitespaces_or_nonwhitespaces over one slice: cut whenever a
// run of same-class characters would exceed kKimiMaxRun. Offsets are bytes.
void split_long_runs(std::string_view text, size_t base, std::vector<std::pair<size_t, size_t>>& out) {
  if (text.empty()) {
    out.push_back({base, base});
    return;
  }
  size_t i = 0, start = 0, run = 0;
  bool run_space = false;
  bool first = true;
  while (i < text.size()) {
    const size_t at = i;
    const bool space = is_python_space(next_code_point(text, i));
    if (first) {
      run_space = space;
      first = false;
    }
    if (space != run_space) {
      run = 1;
      run_space = space;
    } else if (++run > kKimiMaxRun) {
      out.push_back({base + start, base + at});
      start = at;
      run = 1;
    }
  }
  out.push_back({base + start, base + text.size()});
}

// True if a parallel cut right before text[p] is safe: text[p-1] is '\n' and
// the character at p is an ASCII letter or digit, or a non-ASCII character
// that is not whitespace. No built-in pattern can extend a match that
// contains the '\n' over such a character (ASCII punctuation is excluded:
// o200k's `[\r\n/]*` swallows "/" after "\n"). See docs/design/tokenizer.md.
bool safe_cut(std::string_view text, size_t p) {
  if (p == 0 || p >= text.size() || text[p - 1] != '\n') return false;
  const unsigned char c = static_cast<unsigned char>(text[p]);
  if (c < 0x80) return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z');
  size_t i = p;
  const uint32_t cp = next_code_point(text, i);
  return !is_python_space(cp) && cp != 0x180E;
}

}  // namespace

Result<Tokenizer> Tokenizer::create(std::vector<std::string> ranks, const std::string& pattern,
                                    SpecialTokens specials, TokenizerOptions options) {
  DF_ASSIGN(auto compiled, Pattern::compile(pattern));
  for (const auto& [id, text] : specials.by_id())
    if (id < ranks.size()) return error("special token '{}' has id {} which is an ordinary rank", text, id);
  auto st = std::make_shared<State>();
  st->table = RankTable(ranks);
  st->pattern = std::move(compiled);
  st->specials = std::move(specials);
  st->options = options;
  Tokenizer t;
  t.state_ = std::move(st);
  return t;
}

Result<Tokenizer> Tokenizer::load(const std::string& rank_file, const std::string& pattern,
                                  const std::string& specials_json_path, TokenizerOptions options) {
  DF_ASSIGN(auto ranks, read_rank_file(rank_file));
  SpecialTokens specials;
  if (!specials_json_path.empty()) {
    DF_ASSIGN(std::string json, read_file(specials_json_path));
    DF_ASSIGN(specials, SpecialTokens::from_json(json, specials_json_path));
  }
  return create(std::move(ranks), pattern.empty() ? std::string(kK3Pattern) : pattern, std::move(specials),
                options);
}

Result<Tokenizer> Tokenizer::from_tokenizer_json(std::string_view json, const std::string& name) {
  DF_ASSIGN(auto spec, parse_tokenizer_json(json, name));
  auto model = JsonBpeModel::create(spec);
  if (!model.ok()) return model.status().with_context(name);
  std::map<uint32_t, std::string> special;
  for (const auto& a : spec.added)
    if (a.special) special[a.id] = a.content;
  auto specials = SpecialTokens::create_lookup_only(std::move(special));
  if (!specials.ok()) return specials.status().with_context(name + ": special added tokens");
  auto st = std::make_shared<State>();
  st->table = RankTable(spec.bytes);
  st->pattern = model.value()->main_pattern();
  st->specials = std::move(specials.value());
  st->json_model = std::move(model.value());
  Tokenizer t;
  t.state_ = std::move(st);
  return t;
}

Result<Tokenizer> Tokenizer::load_tokenizer_json(const std::string& path) {
  DF_ASSIGN(std::string json, read_file(path));
  return from_tokenizer_json(json, path);
}

Result<Tokenizer> Tokenizer::load_from_checkpoint_dir(const std::string& dir) {
  if (std::ifstream(dir + "/tokenizer.json").good()) return load_tokenizer_json(dir + "/tokenizer.json");
  const std::string rank_path = dir + "/tiktoken.model";
  const std::string config_path = dir + "/tokenizer_config.json";
  DF_ASSIGN(auto ranks, read_rank_file(rank_path));
  std::string config;
  if (std::ifstream(config_path).good()) {
    DF_ASSIGN(config, read_file(config_path));
  }
  std::string pattern = kK3Pattern;
  if (!config.empty()) {
    const auto j = nlohmann::json::parse(config, nullptr, false);
    if (j.is_object() && j.contains("pat_str")) {
      if (!j["pat_str"].is_string()) return error("{}: pat_str is not a string", config_path);
      pattern = j["pat_str"].get<std::string>();
    }
  }
  DF_ASSIGN(auto specials, SpecialTokens::from_tokenizer_config(config, static_cast<uint32_t>(ranks.size()),
                                                                 kReservedSpecials, config_path));
  TokenizerOptions options;
  options.kimi_chunking = true;
  auto t = create(std::move(ranks), pattern, std::move(specials), options);
  if (!t.ok()) return t.status().with_context(dir);
  return t;
}

uint32_t Tokenizer::vocab_size() const {
  uint32_t n = rank_count();
  if (!specials().empty()) n = std::max(n, specials().by_id().rbegin()->first + 1);
  return n;
}

Result<uint32_t> Tokenizer::special_id(std::string_view spelling) const {
  const int64_t id = specials().id_of(spelling);
  if (id < 0) return error("tokenizer: no special token '{}'", spelling);
  return static_cast<uint32_t>(id);
}

std::vector<Tokenizer::Unit> Tokenizer::units(std::string_view text, bool allow_special) const {
  // Pieces are independent encoding units (Kimi chunking), then specials cut
  // each piece further.
  std::vector<std::pair<size_t, size_t>> pieces;
  if (state_->options.kimi_chunking) {
    size_t i = 0;
    while (i < text.size() || pieces.empty()) {
      const size_t start = i;
      for (size_t n = 0; n < kKimiSliceChars && i < text.size(); ++n) i += utf8_len(static_cast<unsigned char>(text[i]));
      split_long_runs(text.substr(start, i - start), start, pieces);
      if (i >= text.size()) break;
    }
  } else {
    pieces.push_back({0, text.size()});
  }
  std::vector<Unit> out;
  for (const auto& [b, e] : pieces) {
    size_t pos = b;
    SpecialTokens::Hit hit{};
    const std::string_view piece = text.substr(0, e);
    while (allow_special && specials().find(piece, pos, hit)) {
      if (hit.pos > pos) out.push_back({pos, hit.pos, -1});
      out.push_back({hit.pos, hit.pos + hit.len, hit.id});
      pos = hit.pos + hit.len;
    }
    if (e > pos) out.push_back({pos, e, -1});
  }
  return out;
}

Status Tokenizer::encode_ordinary(std::string_view text, std::vector<uint32_t>& out) const {
  const RankTable& table = state_->table;
  return state_->pattern->for_each_match(
      text, [&](size_t b, size_t e) { bpe_encode(table, text.substr(b, e - b), out); });
}

Result<std::vector<uint32_t>> Tokenizer::encode_impl(std::string_view text, bool allow_special,
                                                     bool parallel) const {
  if (const size_t bad = first_invalid_utf8(text); bad != kUtf8Valid)
    return error("encode: invalid UTF-8 at byte {}", bad);
  if (state_->json_model) {
    std::vector<uint32_t> ids;
    DF_TRY(state_->json_model->encode(text, allow_special, ids));
    return ids;
  }
  std::vector<Unit> us = units(text, allow_special);
  const auto& opt = state_->options;
  parallel = parallel && text.size() > opt.parallel_threshold;
  // Asked only for large inputs: glibc reads /sys on every call, which made
  // chats of many short segments spend most of their time in syscalls.
  const int threads = !parallel ? 1 : opt.threads > 0 ? opt.threads : static_cast<int>(std::thread::hardware_concurrency());
  parallel = parallel && threads > 1;
  std::vector<uint32_t> ids;
  if (!parallel) {
    ids.reserve(text.size() / 3);
    for (const Unit& u : us) {
      if (u.special >= 0) ids.push_back(static_cast<uint32_t>(u.special));
      else DF_TRY(encode_ordinary(text.substr(u.begin, u.end - u.begin), ids));
    }
    return ids;
  }
  // Cut long ordinary units at safe points so work spreads over threads.
  std::vector<Unit> work;
  const bool can_cut = state_->pattern->newline_split_safe();
  for (const Unit& u : us) {
    size_t b = u.begin;
    while (u.special < 0 && can_cut && u.end - b > opt.parallel_chunk) {
      size_t p = b + opt.parallel_chunk;
      while (p < u.end && !safe_cut(text, p)) ++p;
      if (p >= u.end) break;
      work.push_back({b, p, -1});
      b = p;
    }
    work.push_back({b, u.end, u.special});
  }
  std::vector<std::vector<uint32_t>> parts(work.size());
  std::vector<Status> status(work.size());
  ThreadPool pool(std::min<int>(threads, static_cast<int>(work.size())));
  pool.parallel_for(work.size(), 1, [&](size_t begin, size_t end) {
    for (size_t k = begin; k < end; ++k) {
      const Unit& u = work[k];
      if (u.special >= 0) parts[k].push_back(static_cast<uint32_t>(u.special));
      else status[k] = encode_ordinary(text.substr(u.begin, u.end - u.begin), parts[k]);
    }
  });
  size_t total = 0;
  for (size_t k = 0; k < work.size(); ++k) {
    DF_TRY(status[k]);
    total += parts[k].size();
  }
  ids.reserve(total);
  for (const auto& p : parts) ids.insert(ids.end(), p.begin(), p.end());
  return ids;
}

Result<std::vector<uint32_t>> Tokenizer::encode(std::string_view text, bool allow_special) const {
  return encode_impl(text, allow_special, true);
}

Result<std::vector<uint32_t>> Tokenizer::encode_sequential(std::string_view text, bool allow_special) const {
  return encode_impl(text, allow_special, false);
}

Result<std::string_view> Tokenizer::token_bytes(uint32_t id) const {
  if (id < rank_count()) return state_->table.bytes(id);
  if (const std::string* s = specials().spelling(id)) return std::string_view(*s);
  return error("decode: unknown token id {}", id);
}

Result<std::string> Tokenizer::decode_bytes(const std::vector<uint32_t>& ids) const {
  std::string out;
  for (uint32_t id : ids) {
    DF_ASSIGN(std::string_view b, token_bytes(id));
    out += b;
  }
  return out;
}

Result<std::string> Tokenizer::decode(const std::vector<uint32_t>& ids) const {
  DF_ASSIGN(std::string bytes, decode_bytes(ids));
  if (first_invalid_utf8(bytes) == kUtf8Valid) return bytes;
  return to_valid_utf8(bytes);
}

Result<std::vector<std::string>> Tokenizer::pretokenize(std::string_view text) const {
  if (const size_t bad = first_invalid_utf8(text); bad != kUtf8Valid)
    return error("pretokenize: invalid UTF-8 at byte {}", bad);
  if (state_->json_model) return state_->json_model->pretokenize(text);
  std::vector<std::string> out;
  DF_TRY(state_->pattern->for_each_match(text, [&](size_t b, size_t e) { out.emplace_back(text.substr(b, e - b)); }));
  return out;
}

}  // namespace deltafin::tokenizer
