// A tiny model through `prepare` and `run --store`: bit-identical logits to
// `run --model`, and the faults: flipped bytes (retried on a replica, else an
// error naming expert, drive and file), a deleted drive root, a truncated pack.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include "checkpoint/safetensors.h"
#include "core/thread_pool.h"
#include "model/config.h"
#include "model/expert_source.h"
#include "store/manifest.h"
#include "store/store_source.h"
#include "test_models.h"

namespace deltafin {
namespace {

namespace fs = std::filesystem;
using testing::run_command;
using testing::slurp;
using testing::tiny_model;

const std::string kBin = DELTAFIN_BINARY;
const std::string kPrompt = "--prompt-ids 5,17,300,2,99,41,7,260,12 --max-new 6 --print-ids --threads 2";

class StoreFaults : public ::testing::Test {
 protected:
  std::string dir;
  void SetUp() override {
    dir = (fs::temp_directory_path() / fmt::format("deltafin-store-test-{}-{}", ::getpid(),
                                                   ::testing::UnitTest::GetInstance()->current_test_info()->name()))
              .string();
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  void TearDown() override { fs::remove_all(dir); }

  // Prepares the tiny model (seed 11) onto `drives` drive dirs; returns the store path.
  std::string prepare(int drives, const std::string& extra) {
    std::string cmd = kBin + " prepare --quiet --model " + tiny_model(11) + " --out " + dir + "/store";
    for (int d = 0; d < drives; ++d) {
      fs::create_directories(fmt::format("{}/drive{}", dir, d));  // prepare never creates a drive root
      cmd += fmt::format(" --drive {}/drive{}:{}", dir, d, 800 + 100 * d);
    }
    cmd += " " + extra;
    EXPECT_EQ(run_command(cmd), 0) << cmd;
    return dir + "/store";
  }
  // Runs and returns exit status; logits in dir/<tag>.bin, ids in .txt, stderr in .err.
  int run(const std::string& source, const std::string& tag, const std::string& extra = "") {
    return run_command(fmt::format("{} run {} {} --dump-logits {}/{}.bin {} > {}/{}.txt 2> {}/{}.err", kBin, source, kPrompt,
                                   dir, tag, extra, dir, tag, dir, tag));
  }
  void expect_identical_to_model(const std::string& tag) {
    ASSERT_EQ(run("--model " + tiny_model(11), "ref"), 0);
    const std::string a = slurp(dir + "/ref.bin"), b = slurp(dir + "/" + tag + ".bin");
    ASSERT_EQ(a.size(), b.size());
    ASSERT_GT(a.size(), 0u);
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size()), 0) << "logits differ";
    EXPECT_EQ(slurp(dir + "/ref.txt"), slurp(dir + "/" + tag + ".txt"));
  }
  std::string err(const std::string& tag) { return slurp(dir + "/" + tag + ".err"); }

  static void flip_byte(const std::string& path, uint64_t offset) {
    int fd = ::open(path.c_str(), O_RDWR);
    ASSERT_GE(fd, 0) << path;
    uint8_t b = 0;
    ASSERT_EQ(::pread(fd, &b, 1, off_t(offset)), 1);
    b ^= 0x10;
    ASSERT_EQ(::pwrite(fd, &b, 1, off_t(offset)), 1);
    ::close(fd);
  }
  // Flips one byte inside the first copy of every expert of every MoE layer
  // (a packed byte, so only the checksum can notice).
  static void flip_every_primary(const Manifest& m) {
    for (size_t mi = 0; mi < m.moe_layers.size(); ++mi)
      for (int e = 0; e < m.num_experts; ++e) {
        const Placement& p = m.experts[mi * m.num_experts + e].at[0];
        flip_byte((fs::path(m.pack_dir(p.drive)) / m.drives[p.drive].packs[p.file].name).string(), p.offset + 100 + e);
      }
  }
};

// The tiny(11) checkpoint's own experts next to a store made from it.
struct Reference {
  std::unique_ptr<Checkpoint> ck;
  ModelConfig cfg;
  std::unique_ptr<CheckpointExpertSource> experts;
  Manifest man;
};

void open_reference(const std::string& store, Reference& r) {
  auto ck = Checkpoint::open(tiny_model(11));
  ASSERT_TRUE(ck.ok()) << ck.message();
  r.ck = std::move(ck.value());
  auto cfg = ModelConfig::from_json(r.ck->config());
  ASSERT_TRUE(cfg.ok()) << cfg.message();
  r.cfg = *cfg;
  auto experts = CheckpointExpertSource::create(*r.ck, r.cfg);
  ASSERT_TRUE(experts.ok()) << experts.message();
  r.experts = std::move(experts.value());
  auto man = Manifest::load(store);
  ASSERT_TRUE(man.ok()) << man.message();
  r.man = std::move(man.value());
}

TEST_F(StoreFaults, RunFromStoreIsBitIdenticalOnEveryIoMode) {
  const std::string store = prepare(3, "--replicate-hot 40");
  // --arena-mib 0.1 holds 3 of tiny's experts: each layer's union of the
  // 9-row prompt block is read in tiles.
  for (const char* mode : {"", "--io pread", "--io pread --direct off", "--verify off", "--prefetch 4", "--prefetch 0",
                           "--prefetch 16 --prefetch-depth 3 --queue-depth 4", "--arena-mib 0.1"}) {
    ASSERT_EQ(run("--store " + store, "s", mode), 0) << mode << ": " << err("s");
    expect_identical_to_model("s");
  }
  // The guesses were used (so the identical logits above were not a run with no prefetch at all).
  ASSERT_EQ(run("--store " + store, "p", "--prefetch 8 --stats --no-probe"), 0) << err("p");
  // "... prefetch 8 guesses per row ...: N reads issued, M used (...)"
  const std::string e = err("p");
  const size_t line = e.find("prefetch 8 guesses per row"), issued = e.find(" reads issued, ", line);
  ASSERT_NE(line, std::string::npos) << e;
  ASSERT_NE(issued, std::string::npos) << e;
  EXPECT_GT(std::stoul(e.substr(issued + std::strlen(" reads issued, "))), 0u) << e;
  // The default, auto: the count it learned, and reads it issued.
  ASSERT_EQ(run("--store " + store, "a", "--stats --no-probe"), 0) << err("a");
  const std::string ea = err("a");
  const size_t la = ea.find("prefetch auto ("), ia = ea.find(" reads issued, ", la);
  ASSERT_NE(la, std::string::npos) << ea;
  ASSERT_NE(ia, std::string::npos) << ea;
  EXPECT_GT(std::stod(ea.substr(la + std::strlen("prefetch auto ("))), 0.0) << ea;
  EXPECT_GT(std::stoul(ea.substr(ia + std::strlen(" reads issued, "))), 0u) << ea;
  // Tiles read each expert of a block's union once, as one begin() does.
  for (const char* arena : {"8192", "0.1"}) {
    ASSERT_EQ(run("--store " + store, arena, fmt::format("--prefetch 0 --arena-mib {} --stats-json {}/{}.json", arena, dir, arena)), 0)
        << err(arena);
  }
  const auto big = nlohmann::json::parse(slurp(dir + "/8192.json")), small = nlohmann::json::parse(slurp(dir + "/0.1.json"));
  EXPECT_GT(big.at("prefill_read_bytes").get<uint64_t>(), 0u);
  EXPECT_EQ(big.at("prefill_read_bytes"), small.at("prefill_read_bytes"));
  EXPECT_EQ(big.at("decode_read_bytes"), small.at("decode_read_bytes"));
  EXPECT_EQ(run_command(kBin + " doctor --full --store " + store + " > " + dir + "/doc.txt"), 0) << slurp(dir + "/doc.txt");
}

TEST_F(StoreFaults, StoreSourceBytesMatchCheckpoint) {
  const std::string store = prepare(2, "--replicate-hot all");
  Reference rf;
  ASSERT_NO_FATAL_FAILURE(open_reference(store, rf));
  const ModelConfig* cfg = &rf.cfg;
  const Manifest* man = &rf.man;
  CheckpointExpertSource* ref = rf.experts.get();
  for (io::Backend b : {io::Backend::Auto, io::Backend::Pread}) {
    StoreReadOptions ro;
    ro.engine.backend = b;
    ro.engine.split_min = 4096;  // exercise split reads over the two copies too
    auto src = StoreExpertSource::open(*man, *cfg, ro, nullptr);
    ASSERT_TRUE(src.ok()) << src.message();
    const int E = cfg->moe.num_experts, I = cfg->moe.expert_inter, Lt = cfg->moe.latent;
    std::vector<int> ids(E);
    for (int e = 0; e < E; ++e) ids[e] = e;
    std::vector<ExpertWeights> a(E), r(E);
    for (int layer : man->moe_layers) {
      ASSERT_TRUE((*src)->acquire(layer, ids, a).ok());
      ASSERT_TRUE(ref->acquire(layer, ids, r).ok());
      for (int e = 0; e < E; ++e) {
        EXPECT_EQ(std::memcmp(a[e].w1.packed, r[e].w1.packed, size_t(I) * Lt / 2), 0);
        EXPECT_EQ(std::memcmp(a[e].w1.scales, r[e].w1.scales, size_t(I) * Lt / 32), 0);
        EXPECT_EQ(std::memcmp(a[e].w2.packed, r[e].w2.packed, size_t(I) * Lt / 2), 0);
        EXPECT_EQ(std::memcmp(a[e].w2.scales, r[e].w2.scales, size_t(I) * Lt / 32), 0);
        EXPECT_EQ(std::memcmp(a[e].w3.packed, r[e].w3.packed, size_t(I) * Lt / 2), 0);
        EXPECT_EQ(std::memcmp(a[e].w3.scales, r[e].w3.scales, size_t(I) * Lt / 32), 0);
      }
    }
    EXPECT_GT((*src)->engine().stats().split_reads, 0u);
  }
}

// The streaming interface: begin() a layer's union, then several threads wait
// for distinct experts at once (as the MoE does when it gives threads whole
// experts); a begin() that abandons unwaited reads must leave no stale
// buffer behind. Runs under TSan in CI.
TEST_F(StoreFaults, StreamingWaitsFromSeveralThreads) {
  const std::string store = prepare(2, "--replicate-hot 20");
  Reference rf;
  ASSERT_NO_FATAL_FAILURE(open_reference(store, rf));
  const ModelConfig* cfg = &rf.cfg;
  const Manifest* man = &rf.man;
  CheckpointExpertSource* ref = rf.experts.get();
  auto src = StoreExpertSource::open(*man, *cfg, StoreReadOptions{}, nullptr);
  ASSERT_TRUE(src.ok()) << src.message();
  const int E = cfg->moe.num_experts;
  const size_t packed = size_t(cfg->moe.expert_inter) * cfg->moe.latent / 2;
  std::vector<int> ids;
  for (int e = E - 1; e >= 0; e -= 3) ids.push_back(e);
  std::vector<ExpertWeights> a(ids.size()), r(ids.size());
  ThreadPool pool(4);
  for (int round = 0; round < 3; ++round)
    for (int layer : man->moe_layers) {
      // An abandoned begin(): none of its reads is waited for.
      ASSERT_TRUE((*src)->begin(layer, ids, a).ok());
      ASSERT_TRUE((*src)->begin(layer, ids, a).ok());
      ASSERT_TRUE(ref->acquire(layer, ids, r).ok());
      std::atomic<int> bad{0};
      pool.parallel_for(ids.size(), 1, [&](size_t u0, size_t u1) {
        for (size_t u = u0; u < u1; ++u) {
          if (!(*src)->wait(u).ok()) bad++;
          else if (std::memcmp(a[u].w2.packed, r[u].w2.packed, packed) != 0 ||
                   std::memcmp(a[u].w3.packed, r[u].w3.packed, packed) != 0)
            bad++;
        }
      });
      EXPECT_EQ(bad.load(), 0) << "layer " << layer;
    }
  const ExpertSourceStats st = (*src)->stats();
  EXPECT_EQ(st.experts_acquired, 3 * man->moe_layers.size() * ids.size());
  EXPECT_GT(st.read_seconds, 0.0);
  EXPECT_FALSE((*src)->wait(ids.size()).ok());  // a slot that was never requested
}

// Speculative reads as the MoE issues them: begin() a layer, prefetch() a
// guess for the next one while its reads are in flight, wait from several
// threads (or abandon the layer). The next begin() must hand out exactly the
// requested experts' bytes whether each came from a guess or not, count each
// claimed guess once, and return every dropped guess's slot: with an arena
// of 32 slots, half kept for demand, a leaked slot would soon stop the
// guesses from being issued. Runs under TSan in CI.
TEST_F(StoreFaults, PrefetchedReadsAreClaimedOrDropped) {
  const std::string store = prepare(2, "--replicate-hot 20");
  Reference rf;
  ASSERT_NO_FATAL_FAILURE(open_reference(store, rf));
  StoreReadOptions ro;
  ro.engine.queue_depth = 2;
  ro.engine.prefetch_depth = 1;
  auto src = StoreExpertSource::open(rf.man, rf.cfg, ro, nullptr);
  ASSERT_TRUE(src.ok()) << src.message();
  const int E = rf.cfg.moe.num_experts;
  ASSERT_EQ(E, 32);
  const size_t packed = size_t(rf.cfg.moe.expert_inter) * rf.cfg.moe.latent / 2;
  const std::vector<int>& moe = rf.man.moe_layers;
  std::mt19937 rng(99);
  auto distinct = [&](size_t n, std::vector<int> from) {
    std::shuffle(from.begin(), from.end(), rng);
    from.resize(std::min(n, from.size()));
    return from;
  };
  std::vector<int> all(E);
  for (int e = 0; e < E; ++e) all[e] = e;
  std::vector<int> guess;
  int guess_layer = -1;
  uint64_t issued = 0, hits = 0;
  ThreadPool pool(3);
  for (int round = 0; round < 60; ++round) {
    const int layer = moe[size_t(round) % moe.size()];
    // Half from the last guess (when it was for this layer), the rest anywhere.
    std::vector<int> ids = guess_layer == layer ? distinct(3, guess) : std::vector<int>{};
    for (int e : distinct(E, all))
      if (ids.size() < 6 && std::find(ids.begin(), ids.end(), e) == ids.end()) ids.push_back(e);
    if (guess_layer == layer)
      for (int e : ids) hits += std::count(guess.begin(), guess.end(), e);
    std::vector<ExpertWeights> a(ids.size()), r(ids.size());
    ASSERT_TRUE((*src)->begin(layer, ids, a).ok()) << "round " << round;
    // Every fifth guess is for a layer that is not begun next: all dropped.
    guess_layer = moe[size_t(round + (round % 5 == 4 ? 2 : 1)) % moe.size()];
    guess = distinct(4, all);
    (*src)->prefetch(guess_layer, guess);
    issued += guess.size();
    if (round % 3 == 2) continue;  // abandoned: none of its reads is waited for
    ASSERT_TRUE(rf.experts->acquire(layer, ids, r).ok());
    std::atomic<int> bad{0};
    pool.parallel_for(ids.size(), 1, [&](size_t u0, size_t u1) {
      for (size_t u = u0; u < u1; ++u)
        // ready() of every request while other threads wait (the MoE asks it so): a hint, never a race.
        if (std::count_if(ids.begin(), ids.end(), [&, k = size_t(0)](int) mutable { return (*src)->ready(k++); }) < 0 ||
            !(*src)->wait(u).ok() || std::memcmp(a[u].w1.packed, r[u].w1.packed, packed) != 0 ||
            std::memcmp(a[u].w2.packed, r[u].w2.packed, packed) != 0 ||
            std::memcmp(a[u].w3.packed, r[u].w3.packed, packed) != 0)
          bad++;
    });
    ASSERT_EQ(bad.load(), 0) << "round " << round;
  }
  const ExpertSourceStats st = (*src)->stats();
  EXPECT_EQ(st.prefetch_issued, issued);  // no slot leaked
  EXPECT_EQ(st.prefetch_hits, hits);
  EXPECT_GT(hits, 0u);
}

TEST_F(StoreFaults, FlippedByteIsRetriedOnReplica) {
  const std::string store = prepare(2, "--replicate-hot all");
  auto man = Manifest::load(store);
  ASSERT_TRUE(man.ok());
  flip_every_primary(*man);
  ASSERT_EQ(run("--store " + store, "s", "--stats --no-probe"), 0) << err("s");
  expect_identical_to_model("s");
  EXPECT_EQ(err("s").find(" 0 retried"), std::string::npos) << err("s");  // retries happened
  EXPECT_NE(err("s").find("retried on a replica"), std::string::npos) << err("s");
  // doctor --full sees the damage.
  EXPECT_NE(run_command(kBin + " doctor --full --store " + store + " > " + dir + "/doc.txt"), 0);
  EXPECT_NE(slurp(dir + "/doc.txt").find("checksum mismatch"), std::string::npos) << slurp(dir + "/doc.txt");
}

TEST_F(StoreFaults, FlippedByteWithoutReplicaNamesExpertDriveAndFile) {
  const std::string store = prepare(2, "");
  auto man = Manifest::load(store);
  ASSERT_TRUE(man.ok());
  flip_every_primary(*man);
  ASSERT_NE(run("--store " + store, "s"), 0);
  const std::string e = err("s");
  EXPECT_NE(e.find("error: layer 1 expert "), std::string::npos) << e;
  EXPECT_NE(e.find("checksum mismatch"), std::string::npos) << e;
  EXPECT_NE(e.find("deltafin-" + man->store_id + "/layer-001.pack"), std::string::npos) << e;
  EXPECT_NE(e.find("drive "), std::string::npos) << e;
  // --verify off reads the corrupt bytes without noticing: only the checksum guards them.
  ASSERT_EQ(run("--store " + store, "nv", "--verify off"), 0) << err("nv");
}

TEST_F(StoreFaults, DeletedDriveRoot) {
  {
    const std::string store = prepare(2, "--replicate-hot all");
    fs::remove_all(dir + "/drive1");
    ASSERT_EQ(run("--store " + store, "s"), 0) << err("s");
    expect_identical_to_model("s");
    EXPECT_NE(err("s").find("root is missing"), std::string::npos) << err("s");
    EXPECT_NE(run_command(kBin + " doctor --store " + store + " > " + dir + "/doc.txt"), 0);
  }
  fs::remove_all(dir + "/store");
  fs::remove_all(dir + "/drive0");
  {
    const std::string store = prepare(2, "");
    fs::remove_all(dir + "/drive1");
    ASSERT_NE(run("--store " + store, "s"), 0);
    EXPECT_TRUE(slurp(dir + "/s.txt").empty()) << "generated before failing";
    const std::string e = err("s");
    EXPECT_NE(e.find("no readable copy"), std::string::npos) << e;
    EXPECT_NE(e.find(dir + "/drive1"), std::string::npos) << e;
    EXPECT_NE(e.find("expert"), std::string::npos) << e;
  }
}

TEST_F(StoreFaults, TruncatedPackIsReportedByDoctorAndRun) {
  const std::string store = prepare(2, "");
  auto man = Manifest::load(store);
  ASSERT_TRUE(man.ok());
  const std::string pack = (fs::path(man->pack_dir(0)) / man->drives[0].packs[0].name).string();
  ASSERT_EQ(::truncate(pack.c_str(), off_t(man->drives[0].packs[0].size - 4096)), 0);
  EXPECT_NE(run_command(kBin + " doctor --store " + store + " > " + dir + "/doc.txt"), 0);
  const std::string doc = slurp(dir + "/doc.txt");
  EXPECT_NE(doc.find("truncated"), std::string::npos) << doc;
  EXPECT_NE(doc.find(pack), std::string::npos) << doc;
  ASSERT_NE(run("--store " + store, "s"), 0);
  EXPECT_NE(err("s").find(pack), std::string::npos) << err("s");
  EXPECT_NE(err("s").find("truncated"), std::string::npos) << err("s");
  EXPECT_TRUE(slurp(dir + "/s.txt").empty());
}

TEST_F(StoreFaults, IncompleteStoreIsRefused) {
  const std::string store = prepare(2, "");
  fs::remove(store + "/manifest.json");
  fs::create_directories(store + "/.prepare");
  ASSERT_NE(run("--store " + store, "s"), 0);
  EXPECT_NE(err("s").find("incomplete"), std::string::npos) << err("s");
  EXPECT_NE(run_command(kBin + " doctor --store " + store + " > /dev/null"), 0);
}

}  // namespace
}  // namespace deltafin

namespace deltafin {
namespace {

// The bytes of `ids` of `layer` through `src` (begin, then waits from a
// pool) against the checkpoint's; returns the number that differ or failed.
int mismatches(StoreExpertSource& src, Reference& rf, int layer, const std::vector<int>& ids, ThreadPool* pool) {
  const size_t packed = size_t(rf.cfg.moe.expert_inter) * rf.cfg.moe.latent / 2;
  const size_t scales = packed / 16;
  std::vector<ExpertWeights> a(ids.size()), r(ids.size());
  if (!src.begin(layer, ids, a).ok() || !rf.experts->acquire(layer, ids, r).ok()) return int(ids.size());
  std::atomic<int> bad{0};
  auto check = [&](size_t u0, size_t u1) {
    for (size_t u = u0; u < u1; ++u)
      if (!src.wait(u).ok() || std::memcmp(a[u].w1.packed, r[u].w1.packed, packed) != 0 ||
          std::memcmp(a[u].w2.packed, r[u].w2.packed, packed) != 0 ||
          std::memcmp(a[u].w3.packed, r[u].w3.packed, packed) != 0 ||
          std::memcmp(a[u].w1.scales, r[u].w1.scales, scales) != 0 ||
          std::memcmp(a[u].w3.scales, r[u].w3.scales, scales) != 0)
        bad++;
  };
  if (pool) pool->parallel_for(ids.size(), 1, check);
  else check(0, ids.size());
  return bad.load();
}

// The RAM tier changes where bytes come from, never a bit of output: on
// (everything fits), off, and too small for one layer's experts (3 slots
// for tiny's 4 per token), with prefetch, tiles and the io modes.
TEST_F(StoreFaults, RamTierKeepsLogitsIdentical) {
  const std::string store = prepare(3, "--replicate-hot 40");
  auto man = Manifest::load(store);
  ASSERT_TRUE(man.ok());
  const std::string three = fmt::format("{:.9f}", 3.5 * double(man->span_bytes) / 1e9);
  for (const std::string& tier : std::vector<std::string>{"1", three, "auto"})
    for (const char* mode : {"", "--prefetch 0", "--prefetch 16 --prefetch-depth 3", "--arena-mib 0.1", "--io pread"}) {
      const std::string extra = "--ram-experts-gb " + tier + " " + mode + " --stats --no-probe";
      ASSERT_EQ(run("--store " + store, "t", extra), 0) << extra << ": " << err("t");
      expect_identical_to_model("t");
      const std::string e = err("t");
      // "store: ram tier N slots: H of R expert requests from RAM ..."
      const size_t at = e.find(" slots: ");
      ASSERT_NE(at, std::string::npos) << e;
      const size_t line = e.rfind("store: ram tier ", at);
      ASSERT_NE(line, std::string::npos) << e;
      unsigned long slots = 0, hits = 0;
      ASSERT_EQ(std::sscanf(e.c_str() + line, "store: ram tier %lu slots: %lu of", &slots, &hits), 2) << e;
      EXPECT_EQ(slots, tier == three ? 3u : 160u) << e;
      if (tier != three) {
        EXPECT_GT(hits, 0u) << extra << ": " << e;  // experts used again came from RAM
      }
    }
}

// Eviction under a byte budget of five spans: residents are replaced by
// experts requested more often, every request is a hit or a miss, and every
// byte handed out (from RAM or a drive) is the checkpoint's.
TEST_F(StoreFaults, RamTierEvictsUnderItsBudget) {
  const std::string store = prepare(2, "");
  Reference rf;
  ASSERT_NO_FATAL_FAILURE(open_reference(store, rf));
  StoreReadOptions ro;
  ro.ram_tier_bytes = 5 * rf.man.span_bytes + rf.man.span_bytes / 2;
  ro.ram_tier_age_every = 40;  // scores halve every 10 rounds, so the second phase's experts take over
  auto src = StoreExpertSource::open(rf.man, rf.cfg, ro, nullptr);
  ASSERT_TRUE(src.ok()) << src.message();
  ASSERT_NE((*src)->tier(), nullptr);
  EXPECT_EQ((*src)->tier()->slots(), 5u);
  EXPECT_LE((*src)->tier()->bytes(), ro.ram_tier_bytes);
  std::mt19937 rng(5);
  uint64_t requests = 0;
  const int layer = rf.man.moe_layers[1];
  for (int round = 0; round < 80; ++round) {
    // Experts 0-2 in most rounds, then a phase where 20-22 take over.
    std::vector<int> ids;
    const int hot = round < 40 ? 0 : 20;
    for (int e = hot; e < hot + 3; ++e)
      if (rng() % 4) ids.push_back(e);
    while (ids.size() < 4) {
      const int e = 3 + int(rng() % 16);
      if (std::find(ids.begin(), ids.end(), e) == ids.end()) ids.push_back(e);
    }
    requests += ids.size();
    ASSERT_EQ(mismatches(**src, rf, layer, ids, nullptr), 0) << "round " << round;
  }
  ASSERT_TRUE((*src)->begin(layer, {}, {}).ok());  // publishes the last round's fills
  const ExpertSourceStats st = (*src)->stats();
  EXPECT_EQ(st.ram_hits + st.ram_misses, requests);
  EXPECT_GT(st.ram_evictions, 0u);
  EXPECT_GT(st.ram_bypassed, 0u);
  EXPECT_GT(st.ram_hits, requests / 3) << "the hot experts were not kept";
  for (int e = 20; e < 23; ++e) EXPECT_TRUE((*src)->tier()->resident(rf.man.moe_index(layer) * 32 + e)) << e;
  for (int e = 0; e < 3; ++e) EXPECT_FALSE((*src)->tier()->resident(rf.man.moe_index(layer) * 32 + e)) << e;
}

// A prefetch guess is read into the arena, never a tier slot; once begin()
// asks for it, the tier admits it as the miss it has become, and what it
// keeps is the checkpoint's bytes.
TEST_F(StoreFaults, RamTierAdmitsAClaimedGuessLikeAMiss) {
  const std::string store = prepare(2, "");
  Reference rf;
  ASSERT_NO_FATAL_FAILURE(open_reference(store, rf));
  StoreReadOptions ro;
  ro.ram_tier_bytes = 5 * rf.man.span_bytes;
  auto src = StoreExpertSource::open(rf.man, rf.cfg, ro, nullptr);
  ASSERT_TRUE(src.ok()) << src.message();
  const int layer = rf.man.moe_layers[0];
  const int base = rf.man.moe_index(layer) * rf.man.num_experts;
  const RamTier* t = (*src)->tier();
  (*src)->prefetch(layer, std::vector<int>{3, 4, 9});
  EXPECT_EQ(t->policy().free_slots(), 5u);  // guesses take no tier slot
  ThreadPool pool(2);
  ASSERT_EQ(mismatches(**src, rf, layer, {3, 4, 7}, &pool), 0);  // claims 3 and 4, drops 9
  ASSERT_TRUE((*src)->begin(layer, {}, {}).ok());                // publishes the fills
  ExpertSourceStats st = (*src)->stats();
  EXPECT_EQ(st.prefetch_issued, 3u);
  EXPECT_EQ(st.prefetch_hits, 2u);
  EXPECT_EQ(st.ram_misses, 3u);
  EXPECT_EQ(st.ram_fills, 3u);
  for (int e : {3, 4, 7}) EXPECT_TRUE(t->resident(base + e)) << e;
  EXPECT_FALSE(t->resident(base + 9));  // the unclaimed guess never entered
  // Served from RAM now, byte for byte the checkpoint's.
  ASSERT_EQ(mismatches(**src, rf, layer, {3, 4, 7}, &pool), 0);
  st = (*src)->stats();
  EXPECT_EQ(st.ram_hits, 3u);
  EXPECT_EQ(st.ram_misses, 3u);
}

// A claimed guess enters the tier without a copy: its arena buffer becomes
// the tier slot (and the slot's memory goes to the arena), so the bytes the
// tier serves next are at the address the guess's read wrote, and they are
// the checkpoint's.
TEST_F(StoreFaults, RamTierAdoptsAClaimedGuessInPlace) {
  const std::string store = prepare(2, "");
  Reference rf;
  ASSERT_NO_FATAL_FAILURE(open_reference(store, rf));
  StoreReadOptions ro;
  ro.ram_tier_bytes = 3 * rf.man.span_bytes;
  auto src = StoreExpertSource::open(rf.man, rf.cfg, ro, nullptr);
  ASSERT_TRUE(src.ok()) << src.message();
  const int layer = rf.man.moe_layers[0];
  const int base = rf.man.moe_index(layer) * rf.man.num_experts;
  (*src)->prefetch(layer, std::vector<int>{5});
  std::vector<ExpertWeights> a(1);
  ASSERT_TRUE((*src)->begin(layer, std::vector<int>{5}, a).ok());
  ASSERT_TRUE((*src)->wait(0).ok());
  const uint8_t* read_into = a[0].w1.packed;
  ASSERT_TRUE((*src)->begin(layer, {}, {}).ok());  // publishes the claimed guess
  EXPECT_TRUE((*src)->tier()->resident(base + 5));
  EXPECT_EQ((*src)->tier()->stats().adopted, 1u);
  std::vector<ExpertWeights> b(1), r(1);
  ASSERT_TRUE((*src)->begin(layer, std::vector<int>{5}, b).ok());
  ASSERT_TRUE((*src)->wait(0).ok());
  EXPECT_EQ(b[0].w1.packed, read_into);
  ASSERT_TRUE(rf.experts->acquire(layer, std::vector<int>{5}, r).ok());
  const size_t packed = size_t(rf.cfg.moe.expert_inter) * rf.cfg.moe.latent / 2;
  EXPECT_EQ(std::memcmp(b[0].w1.packed, r[0].w1.packed, packed), 0);
  EXPECT_EQ(std::memcmp(b[0].w2.packed, r[0].w2.packed, packed), 0);
  EXPECT_EQ(std::memcmp(b[0].w3.packed, r[0].w3.packed, packed), 0);
  const ExpertSourceStats st = (*src)->stats();
  EXPECT_EQ(st.ram_hits, 1u);
  EXPECT_EQ(st.ram_fills, 1u);
  // The slot's old memory serves reads now: more misses than slots, all exact.
  ThreadPool pool(2);
  ASSERT_EQ(mismatches(**src, rf, layer, {0, 1, 2, 3, 4, 6, 7}, &pool), 0);
  ASSERT_EQ(mismatches(**src, rf, layer, {5, 0, 1}, &pool), 0);
}

// Fills (the I/O threads writing tier slots) and use (compute threads reading
// resident ones) at once, with claimed guesses taken into tier slots, abandoned
// begins and evictions; at the end no slot is lost (every one resident or
// free). Runs under TSan in CI.
TEST_F(StoreFaults, RamTierConcurrentFillAndUse) {
  const std::string store = prepare(2, "--replicate-hot 20");
  Reference rf;
  ASSERT_NO_FATAL_FAILURE(open_reference(store, rf));
  StoreReadOptions ro;
  ro.engine.queue_depth = 2;
  ro.engine.prefetch_depth = 1;
  ro.ram_tier_bytes = 8 * rf.man.span_bytes;
  auto src = StoreExpertSource::open(rf.man, rf.cfg, ro, nullptr);
  ASSERT_TRUE(src.ok()) << src.message();
  const std::vector<int>& moe = rf.man.moe_layers;
  std::mt19937 rng(7);
  auto pick = [&](size_t n) {
    std::vector<int> ids;
    while (ids.size() < n) {
      const int e = rng() % 3 ? int(rng() % 6) : int(rng() % 32);  // skewed: 0-5 are hot
      if (std::find(ids.begin(), ids.end(), e) == ids.end()) ids.push_back(e);
    }
    return ids;
  };
  ThreadPool pool(3);
  for (int round = 0; round < 60; ++round) {
    const int layer = moe[size_t(round) % 2];  // two layers, so residents are hit again
    const std::vector<int> ids = pick(5);
    if (round % 4 == 3) {
      std::vector<ExpertWeights> a(ids.size());
      ASSERT_TRUE((*src)->begin(layer, ids, a).ok());
      (*src)->prefetch(moe[size_t(round + 1) % 2], pick(3));
      continue;  // abandoned: none of its reads is waited for
    }
    std::vector<ExpertWeights> a(ids.size()), r(ids.size());
    ASSERT_TRUE((*src)->begin(layer, ids, a).ok());
    (*src)->prefetch(moe[size_t(round + 1) % 2], pick(3));
    ASSERT_TRUE(rf.experts->acquire(layer, ids, r).ok());
    const size_t packed = size_t(rf.cfg.moe.expert_inter) * rf.cfg.moe.latent / 2;
    std::atomic<int> bad{0};
    pool.parallel_for(ids.size(), 1, [&](size_t u0, size_t u1) {
      for (size_t u = u0; u < u1; ++u) {
        // The MoE asks ready() of any request while other threads wait (TSan: no race).
        for (size_t k = 0; k < ids.size(); ++k) (void)(*src)->ready(k);
        if (!(*src)->wait(u).ok() || !(*src)->ready(u) || std::memcmp(a[u].w1.packed, r[u].w1.packed, packed) != 0 ||
            std::memcmp(a[u].w2.packed, r[u].w2.packed, packed) != 0)
          bad++;
      }
    });
    ASSERT_EQ(bad.load(), 0) << "round " << round;
  }
  const ExpertSourceStats st = (*src)->stats();
  EXPECT_GT(st.ram_hits, 0u);
  EXPECT_GT(st.ram_evictions, 0u);
  // Dropped guesses give their slots back once their reads are over.
  const RamTier* t = (*src)->tier();
  for (int i = 0; i < 200 && t->policy().resident() + t->policy().free_slots() != t->slots(); ++i) {
    ASSERT_TRUE((*src)->begin(moe[0], {}, {}).ok());
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(t->policy().resident() + t->policy().free_slots(), t->slots()) << "a tier slot leaked";
}

// A read that arrives corrupted never fills a slot: without a replica it
// fails, and fails again the next time (not a hit); with replicas it is
// healed, and the healed bytes are what the tier then serves.
TEST_F(StoreFaults, RamTierNeverKeepsACorruptedRead) {
  {
    const std::string store = prepare(2, "");
    Reference rf;
    ASSERT_NO_FATAL_FAILURE(open_reference(store, rf));
    const int layer = rf.man.moe_layers[0], bad_e = 5;
    const Placement& p = rf.man.expert(layer, bad_e)->at[0];
    flip_byte((fs::path(rf.man.pack_dir(p.drive)) / rf.man.drives[p.drive].packs[p.file].name).string(), p.offset + 777);
    StoreReadOptions ro;
    ro.ram_tier_bytes = 64 * rf.man.span_bytes;
    auto src = StoreExpertSource::open(rf.man, rf.cfg, ro, nullptr);
    ASSERT_TRUE(src.ok()) << src.message();
    const std::vector<int> ids = {3, 4, 5, 6};
    for (int pass = 0; pass < 2; ++pass) {
      std::vector<ExpertWeights> a(ids.size());
      ASSERT_TRUE((*src)->begin(layer, ids, a).ok());
      for (size_t u = 0; u < ids.size(); ++u) {
        const Status s = (*src)->wait(u);
        if (ids[u] == bad_e) {
          ASSERT_FALSE(s.ok()) << "pass " << pass;
          EXPECT_NE(s.message().find("checksum mismatch"), std::string::npos) << s.message();
        } else {
          EXPECT_TRUE(s.ok()) << s.message();
        }
      }
    }
    ASSERT_TRUE((*src)->begin(layer, {}, {}).ok());
    const ExpertSourceStats st = (*src)->stats();
    EXPECT_EQ(st.ram_hits, 3u);    // the good three, on the second pass
    EXPECT_EQ(st.ram_misses, 5u);  // four, then the corrupt one again
    EXPECT_EQ(st.ram_fills, 3u);
    EXPECT_FALSE((*src)->tier()->resident(rf.man.moe_index(layer) * 32 + bad_e));
  }
  fs::remove_all(dir + "/store");
  for (int d = 0; d < 2; ++d) fs::remove_all(fmt::format("{}/drive{}", dir, d));
  {
    const std::string store = prepare(2, "--replicate-hot all");
    Reference rf;
    ASSERT_NO_FATAL_FAILURE(open_reference(store, rf));
    flip_every_primary(rf.man);
    StoreReadOptions ro;
    ro.ram_tier_bytes = 200 * rf.man.span_bytes;
    auto src = StoreExpertSource::open(rf.man, rf.cfg, ro, nullptr);
    ASSERT_TRUE(src.ok()) << src.message();
    std::vector<int> all(32);
    for (int e = 0; e < 32; ++e) all[e] = e;
    for (int pass = 0; pass < 2; ++pass)
      for (int layer : rf.man.moe_layers) ASSERT_EQ(mismatches(**src, rf, layer, all, nullptr), 0) << pass;
    const ExpertSourceStats st = (*src)->stats();
    EXPECT_EQ(st.ram_hits, 32 * rf.man.moe_layers.size());
    EXPECT_GT((*src)->engine().stats().retries, 0u);
  }
}

}  // namespace
}  // namespace deltafin

namespace deltafin {
namespace {

// The heat file: each run adds its counts; the next run's tier starts warm
// from it with logits still identical; a damaged file is a warning (doctor)
// and a cold start (run), then rewritten; --no-heat neither reads nor
// writes it; prepare --replicas-from takes it.
TEST_F(StoreFaults, HeatFileIsWrittenReadAndAdvisory) {
  const std::string store = prepare(2, "");
  const std::string heat = store + "/heat.json";
  ASSERT_EQ(run("--store " + store, "a", "--ram-experts-gb 0.001"), 0) << err("a");
  EXPECT_NE(err("a").find("cold start"), std::string::npos) << err("a");
  auto h1 = nlohmann::json::parse(slurp(heat));
  EXPECT_EQ(h1.at("runs"), 1);
  double total = 0;
  for (double c : h1.at("counts").get<std::vector<double>>()) total += c;
  EXPECT_GT(total, 0.0);
  ASSERT_EQ(run("--store " + store, "b", "--ram-experts-gb 0.001"), 0) << err("b");
  EXPECT_NE(err("b").find("warm start from heat.json (1 runs)"), std::string::npos) << err("b");
  expect_identical_to_model("b");
  auto h2 = nlohmann::json::parse(slurp(heat));
  EXPECT_EQ(h2.at("runs"), 2);
  EXPECT_DOUBLE_EQ(h2.at("weight").get<double>(), 1.75);  // 0.75 x 1 + 1
  double total2 = 0;
  for (double c : h2.at("counts").get<std::vector<double>>()) total2 += c;
  EXPECT_NEAR(total2, 1.75 * total, 0.01);  // the same prompt requests the same experts
  ASSERT_EQ(run_command(kBin + " doctor --store " + store + " > " + dir + "/doc.txt"), 0) << slurp(dir + "/doc.txt");
  EXPECT_NE(slurp(dir + "/doc.txt").find("2 runs"), std::string::npos) << slurp(dir + "/doc.txt");
  // --no-heat: not read, not written.
  ASSERT_EQ(run("--store " + store, "c", "--ram-experts-gb 0.001 --no-heat"), 0) << err("c");
  EXPECT_EQ(err("c").find("start"), std::string::npos) << err("c");
  EXPECT_EQ(nlohmann::json::parse(slurp(heat)).at("runs"), 2);
  // prepare ranks replicas by it.
  fs::create_directories(dir + "/r0"), fs::create_directories(dir + "/r1");
  EXPECT_EQ(run_command(fmt::format("{} prepare --quiet --model {} --out {}/s2 --drive {}/r0 --drive {}/r1 --replicate-hot 8 "
                                    "--replicas-from {} 2> {}/p.err",
                                    kBin, tiny_model(11), dir, dir, dir, heat, dir)),
            0)
      << slurp(dir + "/p.err");
  // Damaged: a warning, a cold start with the same logits, then a fresh file.
  { std::ofstream(heat) << "{\"format\":\"deltafin-heat-1\",\"counts\":[-1"; }
  EXPECT_EQ(run_command(kBin + " doctor --store " + store + " > " + dir + "/doc.txt"), 0);  // a warning, not a failure
  EXPECT_NE(slurp(dir + "/doc.txt").find("WARN"), std::string::npos) << slurp(dir + "/doc.txt");
  ASSERT_EQ(run("--store " + store, "d", "--ram-experts-gb 0.001"), 0) << err("d");
  EXPECT_NE(err("d").find("cold start (" + heat + ": not valid JSON)"), std::string::npos) << err("d");
  expect_identical_to_model("d");
  EXPECT_EQ(nlohmann::json::parse(slurp(heat)).at("runs"), 1);
  for (const auto& e : fs::directory_iterator(store))
    EXPECT_EQ(e.path().filename().string().find(".tmp"), std::string::npos) << e.path();
}

}  // namespace
}  // namespace deltafin
