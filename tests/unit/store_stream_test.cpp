// A streamed store's records (`setup --stream`): the manifest's `stream`
// section and its experts without checksums, and STORE/.stream/fetched.log.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "store/fetched_log.h"
#include "store/manifest.h"

namespace deltafin {
namespace {

namespace fs = std::filesystem;

Manifest streamed_sample() {
  Manifest m;
  m.store_id = "abc123";
  m.source_dir = "http://hub/org/m@c0ffee";
  m.spine_files = {{"spine-embed.safetensors", 100, {1, 2}}};
  m.num_layers = 3;
  m.num_experts = 2;
  m.expert_bytes = 5000;
  m.span_bytes = 8192;
  m.moe_layers = {1, 2};
  m.drives = {{"/d0", 1000, {{"layer-001.pack", 8192 * 2, {}}, {"layer-002.pack", 8192 * 2, {}}}}};
  m.experts = {{{1, 1}, {{0, 0, 0}}, false}, {{2, 2}, {{0, 0, 8192}}, true},
               {{}, {{0, 1, 0}}, false}, {{}, {{0, 1, 8192}}, false}};
  m.stream = StreamSource{"http://hub", "org/m", "c0ffee", "/tok"};
  return m;
}

TEST(StoreStream, ManifestRoundTripKeepsStreamAndMissingChecksums) {
  const Manifest m = streamed_sample();
  const std::string text = m.to_json();
  EXPECT_NE(text.find("null"), std::string::npos);
  auto p = Manifest::parse(text, "t");
  ASSERT_TRUE(p.ok()) << p.message();
  ASSERT_TRUE(p->stream.has_value());
  EXPECT_EQ(*p->stream, *m.stream);
  EXPECT_FALSE(p->expert(1, 0)->has_sum);
  EXPECT_TRUE(p->expert(1, 1)->has_sum);
  EXPECT_EQ(p->expert(1, 1)->xxh3, (Hash128{2, 2}));
  EXPECT_EQ(p->to_json(), text);
}

TEST(StoreStream, MissingChecksumOnlyInAStreamedStore) {
  Manifest m = streamed_sample();
  m.stream.reset();
  auto p = Manifest::parse(m.to_json(), "t");
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.message().find("experts[0].xxh3[0] (layer 1 expert 0): null, and the store is not streamed"),
            std::string::npos)
      << p.message();
  Manifest e = streamed_sample();
  e.stream->commit.clear();
  auto q = Manifest::parse(e.to_json(), "t");
  ASSERT_FALSE(q.ok());
  EXPECT_NE(q.message().find("stream: endpoint, repo and commit must not be empty"), std::string::npos) << q.message();
}

struct TempStore {
  std::string dir;
  TempStore() {
    char tmpl[] = "/tmp/deltafin-stream-XXXXXX";
    dir = ::mkdtemp(tmpl);
  }
  ~TempStore() { fs::remove_all(dir); }
  std::string log() const { return (fs::path(dir) / kStreamDirName / kFetchedLogName).string(); }
};

TEST(StoreStream, FetchedLogAppendsAndReopens) {
  TempStore t;
  {
    auto log = FetchedLog::open(t.dir, 2, 3);
    ASSERT_TRUE(log.ok()) << log.message();
    EXPECT_EQ((*log)->local_count(), 0u);
    EXPECT_FALSE((*log)->lookup(1, 2).has_value());
    ASSERT_TRUE((*log)->append(1, 2, {7, 8}).ok());
    ASSERT_TRUE((*log)->append(0, 0, {9, 10}).ok());
    ASSERT_TRUE((*log)->append(1, 2, {7, 8}).ok());  // fetched twice (two processes): counted once
    EXPECT_EQ((*log)->local_count(), 2u);
    EXPECT_EQ(*(*log)->lookup(1, 2), (Hash128{7, 8}));
    EXPECT_FALSE((*log)->lookup(2, 0).has_value());  // out of range: not local
  }
  EXPECT_EQ(fs::file_size(t.log()), 3 * kFetchedRecordBytes);
  auto again = FetchedLog::open(t.dir, 2, 3);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ((*again)->local_count(), 2u);
  EXPECT_EQ(*(*again)->lookup(0, 0), (Hash128{9, 10}));
  EXPECT_EQ((*again)->skipped(), 0u);
}

TEST(StoreStream, FetchedLogSeesOtherWritersAndIgnoresDamage) {
  TempStore t;
  auto a = FetchedLog::open(t.dir, 2, 3);
  auto b = FetchedLog::open(t.dir, 2, 3);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_TRUE((*a)->append(0, 1, {1, 1}).ok());
  EXPECT_FALSE((*b)->lookup(0, 1).has_value());  // until refreshed
  ASSERT_TRUE((*b)->refresh().ok());
  EXPECT_EQ(*(*b)->lookup(0, 1), (Hash128{1, 1}));

  // A damaged record (one byte of its checksum field) and a torn tail (a
  // kill mid-append) are not taken as local experts.
  {
    auto rec = FetchedLog::encode(1, 1, {5, 5});
    rec[20] ^= 1;
    std::ofstream f(t.log(), std::ios::app | std::ios::binary);
    f.write(reinterpret_cast<const char*>(rec.data()), std::streamsize(rec.size()));
    auto torn = FetchedLog::encode(1, 0, {6, 6});
    f.write(reinterpret_cast<const char*>(torn.data()), 20);
  }
  auto c = FetchedLog::open(t.dir, 2, 3);
  ASSERT_TRUE(c.ok());
  EXPECT_FALSE((*c)->lookup(1, 1).has_value());
  EXPECT_FALSE((*c)->lookup(1, 0).has_value());
  EXPECT_EQ((*c)->skipped(), 1u);
  EXPECT_EQ((*c)->local_count(), 1u);
  // The next append pads the torn tail out, so it and later records stay aligned.
  ASSERT_TRUE((*c)->append(1, 2, {3, 4}).ok());
  EXPECT_EQ(fs::file_size(t.log()) % kFetchedRecordBytes, 0u);
  auto d = FetchedLog::open(t.dir, 2, 3);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(*(*d)->lookup(1, 2), (Hash128{3, 4}));
  EXPECT_EQ((*d)->local_count(), 2u);
  // A record naming an expert outside the store is ignored too.
  ASSERT_TRUE((*d)->append(0, 2, {1, 2}).ok());
  auto small = FetchedLog::open(t.dir, 2, 2);
  ASSERT_TRUE(small.ok());
  EXPECT_FALSE((*small)->lookup(0, 2).has_value());
}

}  // namespace
}  // namespace deltafin
