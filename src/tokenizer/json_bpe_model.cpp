#include "tokenizer/json_bpe_model.h"

#include "tokenizer/byte_level.h"
#include "tokenizer/unicode_normalize.h"

namespace deltafin::tokenizer {

Result<std::shared_ptr<const JsonBpeModel>> JsonBpeModel::create(const TokenizerJsonSpec& spec) {
  std::shared_ptr<JsonBpeModel> m(new JsonBpeModel());
  m->nfc_ = spec.nfc;
  for (const auto& s : spec.splits) {
    auto p = Pattern::compile(s, RegexDialect::kJavaScript);
    if (!p.ok()) return p.status().with_context("pre_tokenizer Split");
    m->splits_.push_back(std::move(p.value()));
  }
  if (!m->splits_.empty()) {
    m->main_pattern_ = m->splits_.front();
  } else {
    DF_ASSIGN(m->main_pattern_, Pattern::compile(R"((?s:.+))", RegexDialect::kRust));
  }
  std::vector<AddedTokenMatcher::Entry> raw, normalized;
  for (const auto& a : spec.added) (a.normalized ? normalized : raw).push_back({a.content, a.id, a.special});
  m->raw_added_ = AddedTokenMatcher(std::move(raw));
  m->normalized_added_ = AddedTokenMatcher(std::move(normalized));
  std::vector<PairMerges::Merge> merges;
  merges.reserve(spec.merges.size());
  for (const auto& mg : spec.merges) merges.push_back({mg.left, mg.right, mg.result});
  m->merges_ = PairMerges(merges);
  // Initial symbols: the vocab id of each byte's one-character token.
  std::vector<std::string> whole;
  for (uint32_t id = 0; id < spec.bytes.size(); ++id) {
    if (!spec.byte_level[id]) continue;
    if (spec.bytes[id].size() == 1) m->byte_id_[static_cast<unsigned char>(spec.bytes[id][0])] = id;
    if (spec.ignore_merges) {
      whole.push_back(spec.bytes[id]);
      m->whole_ids_.push_back(id);
    }
  }
  m->ignore_merges_ = spec.ignore_merges;
  if (spec.ignore_merges) m->whole_ = RankTable(whole);
  return std::shared_ptr<const JsonBpeModel>(std::move(m));
}

Status JsonBpeModel::split(std::string_view text, std::vector<std::pair<size_t, size_t>>& pieces) const {
  pieces.assign(1, {0, text.size()});
  for (const auto& pattern : splits_) {
    std::vector<std::pair<size_t, size_t>> refined;
    refined.reserve(pieces.size() * 2);
    for (const auto& piece : pieces) {
      const size_t base = piece.first;  // not a structured binding: clang 14 cannot capture those
      DF_TRY(pattern->for_each_isolated(text.substr(base, piece.second - base), [&](size_t pb, size_t pe) {
        refined.push_back({base + pb, base + pe});
      }));
    }
    pieces = std::move(refined);
  }
  return Status();
}

void JsonBpeModel::encode_piece(std::string_view piece, std::vector<uint32_t>& out) const {
  if (ignore_merges_) {
    const uint32_t r = whole_.find(piece);
    if (r != kNoRank) {
      out.push_back(whole_ids_[r]);
      return;
    }
  }
  thread_local std::vector<uint32_t> symbols;
  symbols.clear();
  for (char c : piece) symbols.push_back(byte_id_[static_cast<unsigned char>(c)]);
  merges_.apply(symbols);
  out.insert(out.end(), symbols.begin(), symbols.end());
}

Status JsonBpeModel::encode_normalized(std::string_view text, std::vector<uint32_t>& out) const {
  std::vector<std::pair<size_t, size_t>> pieces;
  DF_TRY(split(text, pieces));
  for (const auto& [b, e] : pieces) encode_piece(text.substr(b, e - b), out);
  return Status();
}

Status JsonBpeModel::encode_section(std::string_view raw, bool allow_special, std::vector<uint32_t>& out) const {
  if (raw.empty()) return Status();
  std::string normalized;
  if (nfc_) {
    DF_ASSIGN(normalized, nfc(raw));
  } else {
    normalized.assign(raw);
  }
  const std::string_view text = normalized;
  size_t pos = 0;
  AddedTokenMatcher::Hit hit{};
  while (normalized_added_.find(text, pos, allow_special, hit)) {
    DF_TRY(encode_normalized(text.substr(pos, hit.pos - pos), out));
    out.push_back(hit.id);
    pos = hit.pos + hit.len;
  }
  return encode_normalized(text.substr(pos), out);
}

Status JsonBpeModel::encode(std::string_view text, bool allow_special, std::vector<uint32_t>& out) const {
  size_t pos = 0;
  AddedTokenMatcher::Hit hit{};
  // Added tokens with normalized=false are cut from the raw text first; each
  // stretch between them is normalized on its own, as HF does.
  while (raw_added_.find(text, pos, allow_special, hit)) {
    DF_TRY(encode_section(text.substr(pos, hit.pos - pos), allow_special, out));
    out.push_back(hit.id);
    pos = hit.pos + hit.len;
  }
  return encode_section(text.substr(pos), allow_special, out);
}

Result<std::vector<std::string>> JsonBpeModel::pretokenize(std::string_view text) const {
  std::string normalized;
  if (nfc_) {
    DF_ASSIGN(normalized, nfc(text));
  } else {
    normalized.assign(text);
  }
  std::vector<std::pair<size_t, size_t>> pieces;
  DF_TRY(split(normalized, pieces));
  std::vector<std::string> out;
  for (const auto& [b, e] : pieces) out.push_back(normalized.substr(b, e - b));
  return out;
}

}  // namespace deltafin::tokenizer
