#include "bench/run_record.h"

#include <numeric>

#include <nlohmann/json.hpp>

namespace deltafin::bench {

using json = nlohmann::ordered_json;

double RunRecord::prefill_read_amplification() const {
  const double distinct = double(prefill_distinct_experts) * double(unit_bytes);
  return distinct > 0 ? double(prefill_read_bytes) / distinct : 0.0;
}

double RunRecord::decode_tokens_per_s() const {
  const double t = std::accumulate(step_s.begin(), step_s.end(), 0.0);
  return t > 0 ? double(step_s.size()) / t : 0.0;
}

double RunRecord::decode_seconds_per_token() const {
  const double r = decode_tokens_per_s();
  return r > 0 ? 1.0 / r : 0.0;
}

double RunRecord::decode_read_bytes_per_token() const {
  return step_s.empty() ? 0.0 : double(decode_read_bytes) / double(step_s.size());
}

std::string RunRecord::to_json() const {
  json j = {{"source", source},
            {"io_mode", io_mode},
            {"cold", cold},
            {"threads", threads},
            {"prefill_chunk", prefill_chunk},
            {"prompt_tokens", prompt_tokens},
            {"ids", ids},
            {"load_s", load_s},
            {"ttft_s", ttft_s},
            {"prefill_s", prefill_s},
            {"step_s", step_s},
            {"prefill_expert_wait_s", prefill_expert_wait_s},
            {"decode_expert_wait_s", decode_expert_wait_s},
            {"prefill_read_s", prefill_read_s},
            {"decode_read_s", decode_read_s},
            {"unit_bytes", unit_bytes},
            {"prefill_read_bytes", prefill_read_bytes},
            {"decode_read_bytes", decode_read_bytes},
            {"prefill_distinct_experts", prefill_distinct_experts},
            {"cold_bytes_per_token", cold_bytes_per_token},
            {"engine_mb_s", engine_mb_s},
            {"prefetch_issued", prefetch_issued},
            {"prefetch_hits", prefetch_hits},
            {"ram_tier_slots", ram_tier_slots},
            {"ram_hits", ram_hits},
            {"ram_misses", ram_misses},
            {"disk_probe_mb_s", disk_probe_mb_s},
            {"draft", draft},
            {"decode_tokens", decode_tokens},
            {"target_passes", target_passes},
            {"draft_proposed", draft_proposed},
            {"draft_accepted", draft_accepted},
            {"draft_switched_off", draft_switched_off}};
  return j.dump();
}

Result<RunRecord> RunRecord::from_json(const std::string& text, const std::string& what) {
  RunRecord r;
  try {
    const json j = json::parse(text);
    r.source = j.at("source").get<std::string>();
    r.io_mode = j.at("io_mode").get<std::string>();
    r.cold = j.at("cold").get<bool>();
    r.threads = j.at("threads").get<int>();
    r.prefill_chunk = j.at("prefill_chunk").get<int>();
    r.prompt_tokens = j.at("prompt_tokens").get<int64_t>();
    r.ids = j.at("ids").get<std::vector<int32_t>>();
    r.load_s = j.at("load_s").get<double>();
    r.ttft_s = j.at("ttft_s").get<double>();
    r.prefill_s = j.at("prefill_s").get<double>();
    r.step_s = j.at("step_s").get<std::vector<double>>();
    r.prefill_expert_wait_s = j.at("prefill_expert_wait_s").get<double>();
    r.decode_expert_wait_s = j.at("decode_expert_wait_s").get<double>();
    r.prefill_read_s = j.at("prefill_read_s").get<double>();
    r.decode_read_s = j.at("decode_read_s").get<double>();
    r.unit_bytes = j.at("unit_bytes").get<uint64_t>();
    r.prefill_read_bytes = j.at("prefill_read_bytes").get<uint64_t>();
    r.decode_read_bytes = j.at("decode_read_bytes").get<uint64_t>();
    r.prefill_distinct_experts = j.at("prefill_distinct_experts").get<uint64_t>();
    r.cold_bytes_per_token = j.at("cold_bytes_per_token").get<uint64_t>();
    r.disk_probe_mb_s = j.value("disk_probe_mb_s", 0.0);
    r.engine_mb_s = j.value("engine_mb_s", 0.0);
    r.prefetch_issued = j.value("prefetch_issued", uint64_t(0));
    r.prefetch_hits = j.value("prefetch_hits", uint64_t(0));
    r.ram_tier_slots = j.value("ram_tier_slots", uint64_t(0));
    r.ram_hits = j.value("ram_hits", uint64_t(0));
    r.ram_misses = j.value("ram_misses", uint64_t(0));
    r.draft = j.value("draft", std::string());
    r.decode_tokens = j.value("decode_tokens", int64_t(0));
    r.target_passes = j.value("target_passes", int64_t(0));
    r.draft_proposed = j.value("draft_proposed", int64_t(0));
    r.draft_accepted = j.value("draft_accepted", int64_t(0));
    r.draft_switched_off = j.value("draft_switched_off", false);
  } catch (const std::exception& e) {
    return error("{}: not a run record: {}", what, e.what());
  }
  return r;
}

}  // namespace deltafin::bench
