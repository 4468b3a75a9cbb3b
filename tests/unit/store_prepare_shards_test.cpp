// prepare with a shard source (a streamed `setup`): every shard starts as a
// placeholder whose data is zeros; the fake source writes the real bytes in
// when prepare asks for the shard and zeros them again when prepare gives it
// back. The store must come out identical to a plain prepare's, which proves
// that every byte prepare used was read between the ask and the give-back;
// and the shards must be live only while the layer at hand needs them.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "store/prepare.h"
#include "test_models.h"

namespace deltafin {
namespace {

namespace fs = std::filesystem;

uint64_t data_start(const std::string& path) {
  const std::string b = testing::slurp(path);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(b[size_t(i)]);
  return 8 + n;
}

class ZeroingShards : public ShardSource {
 public:
  explicit ZeroingShards(std::string original_dir) : original_(std::move(original_dir)) {}
  Status ensure(const std::string& path) override {
    if (live_.count(path)) return {};
    const std::string bytes = testing::slurp((fs::path(original_) / fs::path(path).filename()).string());
    EXPECT_FALSE(bytes.empty()) << path;
    write(path, bytes);
    live_.insert(path);
    ++filled_[path];
    max_live_ = std::max(max_live_, live_.size());
    return {};
  }
  Status release(const std::string& path) override {
    EXPECT_TRUE(live_.count(path)) << "given back without being asked for: " << path;
    zero(path);
    live_.erase(path);
    ++released_[path];
    return {};
  }
  static void zero(const std::string& path) {
    const uint64_t start = data_start(path), size = fs::file_size(path);
    write(path, testing::slurp(path).substr(0, start) + std::string(size - start, '\0'));
  }
  std::map<std::string, int> filled_, released_;
  size_t max_live_ = 0;

 private:
  // In place (never replaced): prepare has the shard mapped.
  static void write(const std::string& path, const std::string& bytes) {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::pwrite(fd, bytes.data(), bytes.size(), 0), ssize_t(bytes.size()));
    ::close(fd);
  }
  std::string original_;
  std::set<std::string> live_;
};

nlohmann::json checksums(const std::string& store) {
  const auto m = nlohmann::json::parse(testing::slurp(store + "/manifest.json"));
  nlohmann::json out = {{"spine", nlohmann::json::array()}, {"experts", nlohmann::json::array()}};
  for (const auto& f : m["spine"]["files"]) out["spine"].push_back({f["name"], f["xxh3"]});
  for (const auto& l : m["experts"]) out["experts"].push_back(l["xxh3"]);
  return out;
}

TEST(StorePrepareShards, EveryShardIsReadOnlyBetweenAskAndGiveBack) {
  const std::string src = testing::tiny_model(33), d = testing::temp_dir("prepare_shards");
  const std::string ck = d + "/ck";
  fs::copy(src, ck);
  std::vector<std::string> shards;
  for (const auto& e : fs::directory_iterator(ck))
    if (e.path().extension() == ".safetensors") shards.push_back(e.path().string());
  ASSERT_EQ(shards.size(), 3u);
  for (const auto& s : shards) ZeroingShards::zero(s);
  fs::create_directories(d + "/d0");
  fs::create_directories(d + "/d1");

  PrepareOptions plain;
  plain.quiet = true;
  plain.model_dir = src, plain.out_dir = d + "/plain", plain.drives = {d + "/d0:500", d + "/d1:300"};
  plain.replicate_hot = "20";
  ASSERT_TRUE(prepare_store(plain).ok());

  ZeroingShards source(src);
  PrepareOptions streamed = plain;
  streamed.model_dir = ck, streamed.out_dir = d + "/streamed", streamed.shards = &source;
  Status s = prepare_store(streamed);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(checksums(d + "/plain"), checksums(d + "/streamed"));
  for (const auto& sh : shards) {
    EXPECT_EQ(source.filled_[sh], 1) << sh;
    EXPECT_EQ(source.released_[sh], 1) << sh;
  }
  // tiny's layers run across its three shards in order: never all at once.
  EXPECT_LE(source.max_live_, 2u);
}

}  // namespace
}  // namespace deltafin
