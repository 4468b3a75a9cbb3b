#include "store/spine_verify.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <mutex>
#include <set>
#include <thread>

#include "io/checksum.h"

namespace deltafin {

namespace fs = std::filesystem;

SpineCheck check_spine_files(const Manifest& m, const std::string& store_dir, bool hashes, int threads) {
  SpineCheck out;
  const fs::path dir = fs::path(store_dir) / kSpineDirName;
  std::vector<std::string> problem(m.spine_files.size());
  std::vector<size_t> to_hash;
  for (size_t i = 0; i < m.spine_files.size(); ++i) {
    const StoreFile& f = m.spine_files[i];
    const std::string path = (dir / f.name).string();
    std::error_code ec;
    const uint64_t size = fs::file_size(path, ec);
    if (ec) problem[i] = fmt::format("{}: missing ({})", path, ec.message());
    else if (size != f.size)
      problem[i] = fmt::format("{}: {} bytes, but spine.files[{}].size in the manifest says {} ({})", path, size, i,
                               f.size, size < f.size ? "truncated?" : "grown or replaced?");
    else if (hashes) to_hash.push_back(i);
  }
  out.files = m.spine_files.size();
  // Largest first, so the big embedding and head files do not come last.
  std::sort(to_hash.begin(), to_hash.end(),
            [&](size_t a, size_t b) { return m.spine_files[a].size > m.spine_files[b].size; });
  out.threads = std::max(1, std::min<int>(threads, int(to_hash.size())));
  std::atomic<size_t> next{0};
  std::atomic<uint64_t> bytes{0};
  auto worker = [&] {
    for (size_t k; (k = next++) < to_hash.size();) {
      const size_t i = to_hash[k];
      const StoreFile& f = m.spine_files[i];
      const std::string path = (dir / f.name).string();
      auto h = xxh3_128_file(path);
      if (!h.ok()) problem[i] = h.message();
      else if (!(*h == f.xxh3))
        problem[i] = fmt::format("{}: checksum mismatch (xxh3-128 {}, spine.files[{}].xxh3 in the manifest {}): the "
                                 "file is damaged",
                                 path, h->hex(), i, f.xxh3.hex());
      bytes += f.size;
    }
  };
  const auto t0 = std::chrono::steady_clock::now();
  if (!to_hash.empty()) {
    std::vector<std::thread> pool;
    for (int t = 1; t < out.threads; ++t) pool.emplace_back(worker);
    worker();
    for (auto& t : pool) t.join();
  }
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  out.bytes = bytes;
  for (auto& p : problem)
    if (!p.empty()) out.problems.push_back(std::move(p));
  // A file the manifest does not list would be read unverified (a tokenizer
  // file, a shard named by an index): refuse it.
  std::set<std::string> listed;
  for (const auto& f : m.spine_files) listed.insert(f.name);
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    std::error_code e2;
    if (!e.is_regular_file(e2)) continue;
    if (!listed.count(e.path().filename().string()))
      out.problems.push_back(fmt::format("{}: not listed in the manifest's spine.files (the store's spine holds only "
                                         "files prepare wrote; remove it)",
                                         e.path().string()));
  }
  if (ec) out.problems.push_back(fmt::format("{}: cannot list: {}", dir.string(), ec.message()));
  return out;
}

}  // namespace deltafin
