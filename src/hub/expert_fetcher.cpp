#include "hub/expert_fetcher.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <thread>

#include "checkpoint/safetensors.h"
#include "core/dtype.h"
#include "hub/http.h"
#include "hub/hub_api.h"
#include "hub/retry.h"
#include "model/expert_layout.h"
#include "model/families/families.h"
#include "model/weights.h"

namespace deltafin::hub {

namespace {

namespace fs = std::filesystem;

// Connections in flight per layer: enough to overlap a few round trips,
// few enough not to starve the reads of the experts already local.
constexpr int kFetchConnections = 4;

// One contiguous byte range of a shard and where it goes in the payload.
struct Piece {
  std::string file;  // shard name
  uint64_t offset = 0, bytes = 0, at = 0;
};

class HubExpertFetcher : public RemoteExperts {
 public:
  HubExpertFetcher(const Manifest& m, std::string store_dir, std::unique_ptr<Checkpoint> headers, std::string token,
                   const RetryPolicy& retry)
      : man_(m), store_(std::move(store_dir)), headers_(std::move(headers)),
        api_(m.stream->endpoint, RepoSpec{m.stream->repo, m.stream->commit}, token), retry_(retry) {
    for (int i = 0; i < kFetchConnections; ++i) {
      clients_.push_back(std::make_unique<HttpClient>(token));
      clients_.back()->set_stall_timeout(retry_.stall_timeout_s);
    }
  }
  ~HubExpertFetcher() override {
    for (auto& [k, fd] : fds_) ::close(fd);
  }

  // The model the headers describe (its family names the expert tensors).
  Status load_config() {
    DF_ASSIGN(cfg_, ModelConfig::from_json(headers_->config()));
    layout_ = expert_layout(cfg_);
    return {};
  }

  // The payload's pieces in the span's record order (model/expert_layout.h),
  // adjacent ones merged.
  Result<std::vector<Piece>> pieces(int mi, int e) const {
    const ExpertTensorNames names = family_of(cfg_).expert_names(cfg_, man_.moe_layers[size_t(mi)], e);
    std::vector<Piece> out;
    uint64_t at = 0;
    for (int k = 0; k < 6; ++k) {
      if (!layout_.bytes[k]) continue;
      const int part = record_name_part(k);
      const std::string& name = k % 2 ? names.scale[part] : names.weight[part];
      const TensorInfo* t = headers_->find(name);
      if (!t) return error("tensor {} is not in the checkpoint's headers ({})", name, headers_->dir());
      if (t->nbytes != layout_.bytes[k])
        return error("tensor {}: {} bytes in the headers, {} from the config", name, t->nbytes, layout_.bytes[k]);
      const std::string file = fs::path(*t->file).filename().string();
      if (!out.empty() && out.back().file == file && out.back().offset + out.back().bytes == t->file_offset)
        out.back().bytes += t->nbytes;
      else
        out.push_back({file, t->file_offset, t->nbytes, at});
      at += t->nbytes;
    }
    if (at != man_.expert_bytes)
      return error("layer {} expert {}: the headers give {} bytes, the manifest {}", man_.moe_layers[size_t(mi)], e, at,
                   man_.expert_bytes);
    return out;
  }

  Status fetch(int mi, std::span<const int> experts, FetchedLog& log) override {
    const int layer = man_.moe_layers[size_t(mi)];
    struct Done {
      Hash128 sum;
      bool ok = false;
    };
    std::vector<Done> done(experts.size());
    std::vector<std::string> errors(experts.size());
    std::atomic<size_t> next{0};
    std::atomic<bool> failed{false};  // one failure ends the layer: the rest would fail the same way
    auto worker = [&](HttpClient& http) {
      std::vector<uint8_t> payload(man_.expert_bytes);
      for (size_t i = next++; i < experts.size() && !failed; i = next++) {
        Status s = fetch_one(http, mi, experts[i], payload);
        if (s.ok()) {
          done[i].sum = xxh3_128(payload);
          done[i].ok = true;
        } else {
          errors[i] = s.message();
          failed = true;
        }
      }
    };
    const size_t n = std::min<size_t>(experts.size(), clients_.size());
    std::vector<std::thread> threads;
    for (size_t t = 1; t < n; ++t) threads.emplace_back(worker, std::ref(*clients_[t]));
    worker(*clients_[0]);
    for (auto& t : threads) t.join();
    // Bytes on disk first, then their records: a record never names bytes a
    // crash could still lose.
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (auto& [key, fd] : fds_)
        if (dirty_.count(key) && ::fdatasync(fd) != 0)
          return error("layer {}: cannot sync {}: {}", layer, man_.pack_path(key.first, size_t(key.second)),
                       std::strerror(errno));
      dirty_.clear();
    }
    for (size_t i = 0; i < experts.size(); ++i)
      if (done[i].ok) DF_TRY(log.append(mi, experts[i], done[i].sum));
    for (size_t i = 0; i < experts.size(); ++i)
      if (!errors[i].empty())
        return error("layer {} expert {}: not local, and fetching it {} failed: {} (the experts fetched so far are "
                     "kept; run again once the repository is reachable)",
                     layer, experts[i], describe(), errors[i]);
    return {};
  }

  std::string describe() const override {
    return fmt::format("from {}/{}@{}", man_.stream->endpoint, man_.stream->repo, man_.stream->commit);
  }

 private:
  Status fetch_one(HttpClient& http, int mi, int e, std::vector<uint8_t>& payload) {
    DF_ASSIGN(std::vector<Piece> ps, pieces(mi, e));
    for (const Piece& p : ps) {
      const std::string url = api_.file_url(man_.stream->commit, p.file);
      uint64_t got = 0;  // bytes of the piece in the payload: a retry asks for the rest
      int used = 0;
      Status st = run_with_retries(
          retry_,
          [&]() -> Attempt {
            Status s = http.get_range(url, p.offset, p.bytes, payload.data() + p.at, &got);
            return {s, http.last_retryable(), http.last_retry_after()};
          },
          [&](int n, const Status& why, int64_t wait) {
            std::lock_guard<std::mutex> lock(log_mu_);
            std::fprintf(stderr, "fetch: layer %d expert %d: %s; %s from byte %llu\n", man_.moe_layers[size_t(mi)], e,
                         why.message().c_str(), retry_note(retry_, n, wait).c_str(),
                         static_cast<unsigned long long>(p.offset + got));
          },
          nullptr, &used);
      if (!st.ok() && http.last_retryable())
        return error("{}{}; {} of the piece's {} bytes arrived", st.message(), gave_up_note(used), got, p.bytes);
      DF_TRY(st);
    }
    if (Status bad = check_expert_payload(cfg_, layout_, payload.data(), man_.moe_layers[size_t(mi)], e); !bad.ok())
      return error("{} in the fetched payload; nothing was written", bad.message());
    const ExpertEntry& x = man_.experts[size_t(mi) * man_.num_experts + e];
    for (const Placement& pl : x.at) {
      DF_ASSIGN(int fd, pack_fd(pl.drive, pl.file));
      uint64_t put = 0;
      while (put < payload.size()) {
        const ssize_t w = ::pwrite(fd, payload.data() + put, payload.size() - put, off_t(pl.offset + put));
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0)
          return error("cannot write {} at offset {}: {}", man_.pack_path(pl.drive, size_t(pl.file)), pl.offset,
                       w < 0 ? std::strerror(errno) : "no progress");
        put += uint64_t(w);
      }
    }
    return {};
  }

  Result<int> pack_fd(int drive, int file) {
    std::lock_guard<std::mutex> lock(mu_);
    const auto key = std::make_pair(drive, file);
    dirty_[key] = true;
    if (auto it = fds_.find(key); it != fds_.end()) return it->second;
    const std::string path = man_.pack_path(drive, size_t(file));
    const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) return error("{}: cannot open for writing: {}", path, std::strerror(errno));
    fds_[key] = fd;
    return fd;
  }

  Manifest man_;
  std::string store_;
  std::unique_ptr<Checkpoint> headers_;
  ModelConfig cfg_;
  ExpertLayout layout_;
  HubApi api_;
  RetryPolicy retry_;
  std::mutex log_mu_;  // one retry line at a time
  std::vector<std::unique_ptr<HttpClient>> clients_;
  std::mutex mu_;  // fds_ and dirty_ (never held across a fetch)
  std::map<std::pair<int, int>, int> fds_;
  std::map<std::pair<int, int>, bool> dirty_;
};

}  // namespace

Result<std::shared_ptr<RemoteExperts>> open_expert_fetcher(const Manifest& m, const std::string& store_dir) {
  if (!m.stream) return error("{}: not a streamed store", store_dir);
  const std::string dir = (fs::path(store_dir) / ".setup" / "checkpoint").string();
  auto ck = Checkpoint::open(dir);
  if (!ck.ok())
    return error("{}: a streamed store needs the checkpoint's shard headers kept there ({}); install it again with "
                 "`deltafin setup --stream`",
                 dir, ck.message());
  std::string token;
  if (!m.stream->token_file.empty()) {
    auto t = read_token_file(m.stream->token_file);
    if (!t.ok()) return t.status().with_context("the streamed store's token file (from setup --token-file)");
    token = *t;
  }
  auto retry = retry_policy_from_env(RetryPolicy{});
  if (!retry.ok()) return retry.status().with_context("a streamed store's fetch settings");
  auto f = std::make_shared<HubExpertFetcher>(m, store_dir, std::move(*ck), token, *retry);
  DF_TRY(f->load_config().with_context("a streamed store's checkpoint headers"));
  // Every expert must be located before the first token, not at its first use.
  for (size_t mi = 0; mi < m.moe_layers.size(); ++mi)
    for (int e = 0; e < m.num_experts; ++e) DF_TRY(f->pieces(int(mi), e).status());
  return std::shared_ptr<RemoteExperts>(std::move(f));
}

}  // namespace deltafin::hub
