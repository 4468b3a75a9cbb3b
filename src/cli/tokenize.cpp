// `deltafin tokenize`: encode text to ids (a JSON array) or decode ids to
// text with a tiktoken rank file, a Hugging Face tokenizer.json, or a
// checkpoint directory holding either.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "tokenizer/rank_file.h"
#include "tokenizer/tokenizer.h"

namespace deltafin::cli {

namespace {

struct TokenizeArgs {
  std::string tokenizer, pattern, special_tokens, text;
  bool use_stdin = false, decode = false, allow_special = false, has_text = false, jsonl = false, stats = false;
  int threads = 0;
};

Result<tokenizer::Tokenizer> load(const TokenizeArgs& a) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const bool json = a.tokenizer.size() >= 5 && a.tokenizer.compare(a.tokenizer.size() - 5, 5, ".json") == 0;
  if (fs::is_directory(a.tokenizer, ec) || json) {
    if (!a.pattern.empty() || !a.special_tokens.empty())
      return error(
          "tokenize: --pattern/--special-tokens apply to a rank file, not a checkpoint directory or tokenizer.json");
    if (json) return tokenizer::Tokenizer::load_tokenizer_json(a.tokenizer);
    return tokenizer::Tokenizer::load_from_checkpoint_dir(a.tokenizer);
  }
  DF_ASSIGN(auto ranks, tokenizer::read_rank_file(a.tokenizer));
  tokenizer::SpecialTokens specials;
  if (!a.special_tokens.empty()) {
    // Inline JSON, or a path to a JSON file.
    std::string json = a.special_tokens;
    std::string name = "--special-tokens";
    if (json.front() != '{') {
      std::FILE* f = std::fopen(json.c_str(), "rb");
      if (!f) return error("{}: cannot open", json);
      name = json;
      json.clear();
      char buf[65536];
      size_t n;
      while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) json.append(buf, n);
      std::fclose(f);
    }
    DF_ASSIGN(specials, tokenizer::SpecialTokens::from_json(json, name));
  }
  tokenizer::TokenizerOptions options;
  options.threads = a.threads;
  return tokenizer::Tokenizer::create(std::move(ranks),
                                      a.pattern.empty() ? std::string(tokenizer::kK3Pattern) : a.pattern,
                                      std::move(specials), options);
}

std::string ids_json(const std::vector<uint32_t>& ids) {
  std::string out = "[";
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) out += ',';
    out += std::to_string(ids[i]);
  }
  return out + "]";
}

Result<std::vector<uint32_t>> parse_ids(std::string_view text) {
  const auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_array()) return error("tokenize --decode: input is not a JSON array of ids");
  std::vector<uint32_t> ids;
  for (const auto& v : j) {
    if (!v.is_number_unsigned() || v.get<uint64_t>() > 0xFFFFFFFFu)
      return error("tokenize --decode: every id must be a non-negative integer");
    ids.push_back(v.get<uint32_t>());
  }
  return ids;
}

// Batch mode for tests and tools: one JSON value per input line (a string to
// encode, or an id array to decode), one JSON result per output line.
int run_jsonl(const tokenizer::Tokenizer& tok, const TokenizeArgs& a, const std::string& input) {
  std::string out;
  size_t pos = 0, line_no = 0;
  while (pos < input.size()) {
    size_t end = input.find('\n', pos);
    if (end == std::string::npos) end = input.size();
    const std::string_view line(input.data() + pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (line.empty()) continue;
    if (a.decode) {
      auto ids = parse_ids(line);
      if (!ids.ok()) return fail(fmt::format("line {}: {}", line_no, ids.message()));
      auto text = tok.decode(*ids);
      if (!text.ok()) return fail(fmt::format("line {}: {}", line_no, text.message()));
      out += nlohmann::json(*text).dump(-1, ' ', false) + "\n";
    } else {
      const auto j = nlohmann::json::parse(line, nullptr, false);
      if (j.is_discarded() || !j.is_string()) return fail(fmt::format("line {}: not a JSON string", line_no));
      auto ids = tok.encode(j.get<std::string>(), a.allow_special);
      if (!ids.ok()) return fail(fmt::format("line {}: {}", line_no, ids.message()));
      out += ids_json(*ids) + "\n";
    }
  }
  std::fwrite(out.data(), 1, out.size(), stdout);
  return 0;
}

int run(const TokenizeArgs& a) {
  if (a.use_stdin == a.has_text)
    return fail("tokenize: give exactly one of --text or --stdin");
  auto tok = load(a);
  if (!tok.ok()) return fail(tok.message());
  std::string input = a.text;
  if (a.use_stdin) input.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  if (a.jsonl) return run_jsonl(*tok, a, input);
  if (a.decode) {
    auto ids = parse_ids(input);
    if (!ids.ok()) return fail(ids.message());
    auto text = tok->decode(*ids);
    if (!text.ok()) return fail(text.message());
    std::fwrite(text->data(), 1, text->size(), stdout);
    return 0;
  }
  const auto t0 = std::chrono::steady_clock::now();
  auto ids = tok->encode(input, a.allow_special);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!ids.ok()) return fail(ids.message());
  if (a.stats) {
    // Throughput of encode alone (loading excluded), for tools/bench_tokenizer.sh.
    std::printf("{\"bytes\":%zu,\"tokens\":%zu,\"threads\":%d,\"seconds\":%.6f,\"mb_per_s\":%.3f}\n",
                input.size(), ids->size(), a.threads, seconds, input.size() / 1e6 / seconds);
    return 0;
  }
  const std::string out = ids_json(*ids) + "\n";
  std::fwrite(out.data(), 1, out.size(), stdout);
  return 0;
}

void setup(CLI::App& root) {
  auto* cmd = root.add_subcommand("tokenize", "Encode text to token ids (JSON array) or decode ids to text");
  set_example(cmd, "deltafin tokenize --tokenizer models/demo --text 'def main():'");
  static TokenizeArgs args;
  cmd->add_option("--tokenizer", args.tokenizer,
                  "tiktoken rank file, tokenizer.json, or a directory holding tokenizer.json or tiktoken.model")
      ->required();
  cmd->add_option("--pattern", args.pattern, "pre-tokenisation regex (default: K3's)");
  cmd->add_option("--special-tokens", args.special_tokens,
                  "special tokens: JSON {\"spelling\": id} or added_tokens_decoder form, inline or a file");
  static CLI::Option* text_opt = cmd->add_option("--text", args.text, "input text (or ids JSON with --decode)");
  cmd->add_flag("--stdin", args.use_stdin, "read the input from standard input");
  cmd->add_flag("--decode", args.decode, "decode a JSON array of ids to text");
  cmd->add_flag("--jsonl", args.jsonl, "batch: one JSON string (or id array with --decode) per line");
  cmd->add_flag("--stats", args.stats, "print encode time and throughput (JSON) instead of the ids");
  cmd->add_option("--threads", args.threads, "encode threads for large inputs (0 = all cores, 1 = sequential)");
  cmd->add_flag("--allow-special", args.allow_special, "encode special-token spellings as their ids");
  cmd->callback([] {
    args.has_text = text_opt->count() > 0;
    set_exit_code(run(args));
  });
}

}  // namespace

DF_REGISTER_COMMAND(setup);

}  // namespace deltafin::cli
