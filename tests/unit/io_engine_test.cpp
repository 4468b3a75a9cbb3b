// The read engine: contents, replica retry, split reads, both backends, and a
// concurrent stress test (demand + prefetch + cancellations) that checks no
// read is lost, duplicated or corrupted. Runs under TSan (scripts/test_tsan.sh).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <random>
#include <thread>

#include "io/aligned_arena.h"
#include "io/io_buffer.h"
#include "io/read_engine.h"

namespace deltafin::io {
namespace {

namespace fs = std::filesystem;
constexpr uint64_t kSpan = 16384;
constexpr int kSpans = 64;

uint8_t pattern(int span, uint64_t i) { return uint8_t((span * 131 + i * 7 + (i >> 8)) & 0xff); }

struct Fixture {
  std::string root;
  std::vector<std::string> files;  // one per drive, identical contents
  std::vector<Hash128> sums;
  Fixture(int drives, const char* name) {
    root = (fs::temp_directory_path() / fmt::format("deltafin-io-{}-{}", name, ::getpid())).string();
    fs::remove_all(root);
    std::vector<uint8_t> data(kSpan * kSpans);
    for (int s = 0; s < kSpans; ++s)
      for (uint64_t i = 0; i < kSpan; ++i) data[s * kSpan + i] = pattern(s, i);
    for (int s = 0; s < kSpans; ++s) sums.push_back(xxh3_128({data.data() + s * kSpan, kSpan - 100}));
    for (int d = 0; d < drives; ++d) {
      fs::create_directories(fmt::format("{}/d{}", root, d));
      files.push_back(fmt::format("{}/d{}/pack", root, d));
      std::ofstream(files.back(), std::ios::binary).write(reinterpret_cast<const char*>(data.data()), std::streamsize(data.size()));
    }
  }
  ~Fixture() { fs::remove_all(root); }
  void corrupt(int drive, int span) {
    int fd = ::open(files[drive].c_str(), O_RDWR);
    uint8_t b = uint8_t(pattern(span, 10) ^ 0x5a);
    ASSERT_EQ(::pwrite(fd, &b, 1, off_t(span * kSpan + 10)), 1);
    ::close(fd);
  }
  std::unique_ptr<ReadEngine> engine(EngineOptions o, std::vector<int>* ids) {
    std::vector<DriveSpec> specs;
    for (size_t d = 0; d < files.size(); ++d) specs.push_back({fmt::format("{}/d{}", root, d), 500.0 + 100 * d});
    auto e = ReadEngine::create(specs, o);
    EXPECT_TRUE(e.ok()) << e.message();
    for (size_t d = 0; d < files.size(); ++d) {
      auto id = (*e)->add_file(int(d), files[d], kSpan * kSpans);
      EXPECT_TRUE(id.ok()) << id.message();
      ids->push_back(*id);
    }
    return std::move(e).value();
  }
  ReadRequest request(const std::vector<int>& ids, int span, uint8_t* dest, Purpose p) const {
    ReadRequest r;
    for (int id : ids) r.replicas.push_back({id, uint64_t(span) * kSpan});
    r.length = kSpan - 100;
    r.span = kSpan;
    r.dest = dest;
    r.purpose = p;
    r.has_checksum = true;
    r.checksum = sums[span];
    r.label = fmt::format("span {}", span);
    return r;
  }
};

// Every span submitted at once, each into its own arena buffer; `replicas`
// and `purpose` say where from and as what.
std::vector<std::pair<ReadHandle, uint8_t*>> submit_all(const Fixture& fx, ReadEngine& e, AlignedArena& arena,
                                                        const std::vector<int>& replicas,
                                                        const std::function<Purpose(int)>& purpose) {
  std::vector<std::pair<ReadHandle, uint8_t*>> hs;
  for (int s = 0; s < kSpans; ++s) {
    uint8_t* buf = arena.take(Purpose::Demand);
    hs.push_back({e.submit(fx.request(replicas, s, buf, purpose(s))), buf});
  }
  return hs;
}

bool matches(const uint8_t* buf, int span) {
  for (uint64_t i = 0; i < kSpan; ++i)
    if (buf[i] != pattern(span, i)) return false;
  return true;
}

std::vector<EngineOptions> backends() {
  std::vector<EngineOptions> v;
  for (Backend b : {Backend::Auto, Backend::Pread})
    for (bool direct : {true, false}) {
      EngineOptions o;
      o.backend = b;
      o.direct = direct;
      o.queue_depth = 8;
      o.pread_threads = 4;
      o.prefetch_depth = 2;
      v.push_back(o);
    }
  return v;
}

TEST(IoEngine, ReadsEverySpanOnEveryBackend) {
  Fixture fx(2, "basic");
  for (const auto& o : backends()) {
    std::vector<int> ids;
    auto e = fx.engine(o, &ids);
    AlignedArena arena(kSpan, kSpans);
    auto hs = submit_all(fx, *e, arena, ids, [](int s) { return s % 3 ? Purpose::Demand : Purpose::Prefetch; });
    for (int s = 0; s < kSpans; ++s) {
      ASSERT_TRUE(e->wait(hs[s].first).ok());
      EXPECT_TRUE(matches(hs[s].second, s)) << "span " << s << " mode " << e->drive_mode(0);
      arena.release(hs[s].second);
    }
    auto st = e->stats();
    EXPECT_EQ(st.reads_ok, uint64_t(kSpans));
    EXPECT_EQ(st.drives[0].bytes[0] + st.drives[1].bytes[0] + st.drives[0].bytes[1] + st.drives[1].bytes[1], kSpan * kSpans);
    EXPECT_GT(st.drives[0].bytes[1] + st.drives[1].bytes[1], 0u);  // prefetch counted separately
    if (!o.direct) {
      EXPECT_NE(e->drive_mode(0).find("buffered"), std::string::npos);
    }
    if (o.backend == Backend::Pread) {
      EXPECT_NE(e->drive_mode(0).find("pread"), std::string::npos);
    }
  }
}

// The drive's reads-in-flight integral (the stats line's mean queue): exactly
// the busy time at queue depth 1, and between it and depth x busy time above.
TEST(IoEngine, InflightSecondsAreBoundedByBusyTimeAndQueueDepth) {
  Fixture fx(2, "inflight");
  for (int depth : {1, 4}) {
    for (const auto& base : backends()) {
      EngineOptions o = base;
      o.queue_depth = depth;
      o.prefetch_depth = depth;
      std::vector<int> ids;
      auto e = fx.engine(o, &ids);
      AlignedArena arena(kSpan, kSpans);
      auto hs = submit_all(fx, *e, arena, {ids[0]}, [](int) { return Purpose::Demand; });
      for (auto& [h, buf] : hs) {
        ASSERT_TRUE(e->wait(h).ok());
        arena.release(buf);
      }
      const DriveStats d = e->stats().drives[0];
      ASSERT_GT(d.busy_seconds, 0.0);
      if (depth == 1) {
        EXPECT_NEAR(d.inflight_seconds, d.busy_seconds, 1e-6 * d.busy_seconds + 1e-9) << e->drive_mode(0);
      } else {
        EXPECT_GE(d.inflight_seconds, d.busy_seconds * (1 - 1e-9)) << e->drive_mode(0);
        EXPECT_LE(d.inflight_seconds, depth * d.busy_seconds * (1 + 1e-9)) << e->drive_mode(0);
      }
    }
  }
}

TEST(IoEngine, ChecksumMismatchRetriesOnReplicaElseNamesDriveAndFile) {
  Fixture fx(2, "retry");
  fx.corrupt(1, 5);  // drive 1 is the faster one (600 vs 500 MB/s), so it is tried first
  AlignedArena arena(kSpan, 2);
  uint8_t* buf = arena.take(Purpose::Demand);
  // The engine's log lines (stderr unless redirected).
  std::mutex mu;
  std::vector<std::string> log;
  EngineOptions o = backends()[0];
  o.log = [&](const std::string& line) {
    std::lock_guard<std::mutex> lock(mu);
    log.push_back(line);
  };
  {
    std::vector<int> ids;
    auto e = fx.engine(o, &ids);
    ASSERT_TRUE(e->wait(e->submit(fx.request(ids, 5, buf, Purpose::Demand))).ok());
    EXPECT_TRUE(matches(buf, 5));
    auto st = e->stats();
    EXPECT_EQ(st.retries, 1u);
    EXPECT_EQ(st.drives[1].checksum_errors, 1u);
    EXPECT_EQ(st.drives[0].bytes[0], kSpan);
    // One line for the retry (the bad copy, why, the copy tried next), one for the heal.
    ASSERT_EQ(log.size(), 2u);
    EXPECT_NE(log[0].find("span 5: drive 1"), std::string::npos) << log[0];
    EXPECT_NE(log[0].find(fx.files[1] + ": checksum mismatch at offset"), std::string::npos) << log[0];
    EXPECT_NE(log[0].find("; retrying on drive 0"), std::string::npos) << log[0];
    EXPECT_NE(log[1].find("span 5: healed: read from drive 0"), std::string::npos) << log[1];
    EXPECT_NE(log[1].find("after 1 failed attempt"), std::string::npos) << log[1];
  }
  log.clear();
  {
    std::vector<int> ids;
    auto e = fx.engine(o, &ids);
    e->disable_drive(0);  // only the corrupt copy is left
    Status s = e->wait(e->submit(fx.request(ids, 5, buf, Purpose::Demand)));
    ASSERT_FALSE(s.ok());
    EXPECT_TRUE(log.empty()) << log[0];  // no copy left to retry on: the error says it all
    EXPECT_NE(s.message().find("span 5"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("checksum mismatch"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find(fx.files[1]), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("drive 1"), std::string::npos) << s.message();
  }
  arena.release(buf);
}

TEST(IoEngine, SplitReadAcrossReplicas) {
  Fixture fx(3, "split");
  EngineOptions o = backends()[0];
  o.split_min = 8192;  // every span is split over the three copies
  std::vector<int> ids;
  auto e = fx.engine(o, &ids);
  AlignedArena arena(kSpan, 1);
  uint8_t* buf = arena.take(Purpose::Demand);
  for (int s = 0; s < kSpans; ++s) {
    std::memset(buf, 0, kSpan);
    ASSERT_TRUE(e->wait(e->submit(fx.request(ids, s, buf, Purpose::Demand))).ok());
    ASSERT_TRUE(matches(buf, s));
  }
  auto st = e->stats();
  EXPECT_EQ(st.split_reads, uint64_t(kSpans));
  for (const auto& d : st.drives) EXPECT_GT(d.bytes[0], 0u) << d.root;
  // A corrupt copy inside a split read: the checksum fails, whole-span retries find a good copy.
  fx.corrupt(1, 9);
  ASSERT_TRUE(e->wait(e->submit(fx.request(ids, 9, buf, Purpose::Demand))).ok());
  EXPECT_TRUE(matches(buf, 9));
  arena.release(buf);
}

TEST(IoEngine, TruncatedFileIsRefusedAtOpen) {
  Fixture fx(1, "trunc");
  ASSERT_EQ(::truncate(fx.files[0].c_str(), off_t(kSpan * kSpans - 4096)), 0);
  auto e = ReadEngine::create({{fx.root + "/d0", 100}}, EngineOptions{});
  ASSERT_TRUE(e.ok());
  auto id = (*e)->add_file(0, fx.files[0], kSpan * kSpans);
  ASSERT_FALSE(id.ok());
  EXPECT_NE(id.message().find("truncated"), std::string::npos) << id.message();
  EXPECT_NE(id.message().find(fx.files[0]), std::string::npos) << id.message();
}

TEST(IoArena, PrefetchNeverTakesDemandReserve) {
  AlignedArena a(4096, 3, 1);
  uint8_t* p1 = a.try_take(Purpose::Prefetch);
  uint8_t* p2 = a.try_take(Purpose::Prefetch);
  EXPECT_NE(p1, nullptr);
  EXPECT_NE(p2, nullptr);
  EXPECT_EQ(a.try_take(Purpose::Prefetch), nullptr);  // the last slot is demand's
  uint8_t* d = a.try_take(Purpose::Demand);
  EXPECT_NE(d, nullptr);
  EXPECT_EQ(a.try_take(Purpose::Demand), nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(d) % 4096, 0u);
  a.release(p1);
  a.release(p2);
  a.release(d);
  EXPECT_EQ(a.in_use(), 0u);
  EXPECT_EQ(a.allocated(), 3u);
}

// Slots are carved from huge-page-sized chunks: distinct, 4 KiB-aligned, never
// overlapping, never more than max_slots; large buffers are 2 MiB-aligned.
TEST(IoArena, ChunkedSlotsAreDistinctAlignedAndBounded) {
  for (uint64_t slot : {uint64_t(4096), uint64_t(3133440), uint64_t(100000)}) {
    AlignedArena a(slot, 11, 0);
    std::vector<uint8_t*> got;
    while (uint8_t* p = a.try_take(Purpose::Demand)) got.push_back(p);
    ASSERT_EQ(got.size(), 11u) << slot;
    EXPECT_EQ(a.allocated(), 11u);
    std::sort(got.begin(), got.end());
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_EQ(reinterpret_cast<uintptr_t>(got[i]) % 4096, 0u);
      if (i) {
        EXPECT_GE(uint64_t(got[i] - got[i - 1]), a.slot_bytes()) << "overlap";
      }
      std::memset(got[i], int(i), a.slot_bytes());  // the whole slot is writable (ASan checks)
    }
    for (auto* p : got) a.release(p);
    EXPECT_EQ(a.in_use(), 0u);
  }
  uint8_t* big = alloc_io_buffer(3133440);
  ASSERT_NE(big, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(big) % kHugePage, 0u);
  free_io_buffer(big);
}

// A prefetch that became needed: with no prefetch budget at all a prefetch
// read can never start, so it finishes only because promote() moved it to
// the demand queue; the other one is cancelled unread.
TEST(IoEngine, PromotedPrefetchRunsAsDemand) {
  Fixture fx(1, "promote");
  for (const auto& base : {backends()[0], backends()[3]}) {
    EngineOptions o = base;
    o.prefetch_depth = 0;
    std::vector<int> ids;
    auto e = fx.engine(o, &ids);
    AlignedArena arena(kSpan, 2);
    uint8_t* a = arena.take(Purpose::Prefetch);
    uint8_t* b = arena.take(Purpose::Prefetch);
    ReadHandle ha = e->submit(fx.request(ids, 5, a, Purpose::Prefetch));
    ReadHandle hb = e->submit(fx.request(ids, 9, b, Purpose::Prefetch));
    // A demand read behind them is not held up by them.
    uint8_t* c = static_cast<uint8_t*>(std::aligned_alloc(4096, kSpan));
    ReadHandle hc = e->submit(fx.request(ids, 7, c, Purpose::Demand));
    ASSERT_TRUE(e->wait(hc).ok());
    EXPECT_TRUE(matches(c, 7));
    EXPECT_FALSE(e->finished(ha));
    EXPECT_FALSE(e->finished(hb));
    e->promote(ha);
    ASSERT_TRUE(e->wait(ha).ok());
    EXPECT_TRUE(e->finished(ha));
    EXPECT_TRUE(matches(a, 5));
    e->cancel(hb);
    EXPECT_TRUE(e->finished(hb));
    EXPECT_NE(e->wait(hb).message().find("cancelled"), std::string::npos);
    const auto st = e->stats();
    EXPECT_EQ(st.drives[0].reads[0], 2u);  // the demand read and the promoted one
    EXPECT_EQ(st.drives[0].reads[1], 0u);
    EXPECT_EQ(st.reads_cancelled, 1u);
    std::free(c);
    arena.release(a);
    arena.release(b);
  }
}

// io_uring reads start in the thread that submits them (no hand-off to the
// ring thread); a submitting thread may exit at once, before its reads are
// done, and they still complete with their bytes. bytes_in_at() lies between
// the submission and the return of wait(), and stays unset for a read
// cancelled before it started.
TEST(IoEngine, ReadsOutliveTheThreadsThatSubmitThem) {
  Fixture fx(1, "outlive");
  for (const auto& o : backends()) {
    std::vector<int> ids;
    auto e = fx.engine(o, &ids);
    AlignedArena arena(kSpan, kSpans);
    std::vector<uint8_t*> bufs(kSpans);
    std::vector<ReadHandle> hs(kSpans);
    for (int s = 0; s < kSpans; ++s) bufs[s] = arena.take(Purpose::Demand);
    const auto t0 = std::chrono::steady_clock::now();
    for (int t = 0; t < 8; ++t)  // each short-lived thread submits 8 spans and exits
      std::thread([&, t] {
        for (int s = t * 8; s < t * 8 + 8; ++s) hs[s] = e->submit(fx.request(ids, s, bufs[s], Purpose::Demand));
      }).join();
    for (int s = 0; s < kSpans; ++s) {
      ASSERT_TRUE(e->wait(hs[s]).ok()) << "span " << s << " mode " << e->drive_mode(0);
      EXPECT_TRUE(matches(bufs[s], s)) << "span " << s << " mode " << e->drive_mode(0);
      const auto in = e->bytes_in_at(hs[s]);
      EXPECT_GE(in, t0);
      EXPECT_LE(in, std::chrono::steady_clock::now());
    }
    EXPECT_EQ(e->stats().reads_ok, uint64_t(kSpans));
    // A prefetch with no prefetch budget never starts: cancelled, it has no arrival time.
    EngineOptions none = o;
    none.prefetch_depth = 0;
    std::vector<int> ids2;
    auto e2 = fx.engine(none, &ids2);
    ReadHandle h = e2->submit(fx.request(ids2, 3, bufs[0], Purpose::Prefetch));
    e2->cancel(h);
    EXPECT_FALSE(e2->wait(h).ok());
    EXPECT_EQ(e2->bytes_in_at(h), std::chrono::steady_clock::time_point{});
    for (uint8_t* b : bufs) arena.release(b);
  }
}

// Many threads submit demand and prefetch reads into arena slots, cancel or
// promote some at random, and wait for all: every handle completes exactly once, every
// completed read holds exactly its span, cancelled ones leave no read in
// flight (the slot is reused at once), and the counters add up.
TEST(IoEngine, ConcurrentStressWithCancellation) {
  Fixture fx(2, "stress");
  fx.corrupt(0, 3);  // some retries in the mix
  for (int variant = 0; variant < 3; ++variant) {
    EngineOptions o = backends()[variant == 2 ? 3 : 0];  // io_uring (or its fallback) / pread+buffered
    if (variant == 1) o.split_min = kSpan;            // every read split over both copies
    std::atomic<uint64_t> retry_lines{0};
    o.log = [&](const std::string& line) { retry_lines += line.find("; retrying on ") != std::string::npos; };
    std::vector<int> ids;
    auto e = fx.engine(o, &ids);
    AlignedArena arena(kSpan, 24, 4);
    constexpr int kThreads = 4, kPerThread = 150;
    std::atomic<int> ok{0}, cancelled{0}, bad{0}, failed{0};
    std::vector<std::thread> th;
    for (int t = 0; t < kThreads; ++t)
      th.emplace_back([&, t] {
        std::mt19937 rng(1234 + t);
        struct Pending {
          ReadHandle h;
          uint8_t* buf;
          int span;
          bool cancel;
        };
        std::vector<Pending> pend;
        for (int i = 0; i < kPerThread; ++i) {
          const Purpose p = rng() % 3 == 0 ? Purpose::Prefetch : Purpose::Demand;
          uint8_t* buf = p == Purpose::Prefetch ? arena.try_take(p) : arena.take(p);
          if (!buf) buf = arena.take(Purpose::Demand);
          const int s = int(rng() % kSpans);
          std::vector<int> order = ids;
          if (rng() % 2) std::swap(order[0], order[1]);
          ReadRequest r = fx.request(order, s, buf, p);
          pend.push_back({e->submit(std::move(r)), buf, s, rng() % 4 == 0});
          if (pend.back().cancel) e->cancel(pend.back().h);
          else if (p == Purpose::Prefetch && rng() % 2) e->promote(pend.back().h);  // queued or already in flight
          if (pend.size() >= 4 || i + 1 == kPerThread) {
            for (auto& x : pend) {
              Status st = e->wait(x.h);
              if (st.ok()) {
                ok++;
                if (!matches(x.buf, x.span)) bad++;
              } else if (st.message().find("cancelled") != std::string::npos) {
                cancelled++;
              } else {
                failed++;
              }
              std::memset(x.buf, 0xEE, kSpan);  // would corrupt a read still in flight into this slot
              arena.release(x.buf);
            }
            pend.clear();
          }
        }
      });
    for (auto& x : th) x.join();
    EXPECT_EQ(bad.load(), 0);
    EXPECT_EQ(failed.load(), 0);
    EXPECT_EQ(ok + cancelled, kThreads * kPerThread);
    auto st = e->stats();
    EXPECT_EQ(st.reads_ok, uint64_t(ok.load()));
    EXPECT_EQ(st.reads_cancelled, uint64_t(cancelled.load()));
    EXPECT_EQ(retry_lines.load(), st.retries);  // every retry logged
    EXPECT_EQ(arena.in_use(), 0u);
    EXPECT_LE(arena.allocated(), 24u);
  }
}

}  // namespace
}  // namespace deltafin::io
