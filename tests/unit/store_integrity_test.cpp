// Integrity of a store (issue 18): every byte the engine uses is verified.
// Flipped spine bytes are refused naming the file; an edited manifest is
// refused and doctor names the field that no longer fits; healed reads and
// retries are logged without --stats; and a fault-injection sweep flips
// random single bytes across every file of a replicated store: each run
// either gives memcmp-identical logits (healed from a replica, logged) or
// refuses naming the file, never a wrong token.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>

#include "generate/greedy.h"
#include "model/model.h"
#include "store/manifest.h"
#include "store/store_run.h"
#include "test_models.h"

namespace deltafin {
namespace {

namespace fs = std::filesystem;
using testing::run_command;
using testing::slurp;
using testing::tiny_model;
using OJson = nlohmann::ordered_json;

const std::string kBin = DELTAFIN_BINARY;
const std::vector<int32_t> kPromptIds = {5, 17, 300, 2, 99, 41, 7, 260, 12};
const std::string kPrompt = "--prompt-ids 5,17,300,2,99,41,7,260,12 --max-new 3 --print-ids --threads 2";

// One flipped byte, put back when it goes out of scope.
class Flip {
 public:
  Flip(std::string path, uint64_t offset, uint8_t mask) : path_(std::move(path)), offset_(offset), mask_(mask) { apply(); }
  ~Flip() { apply(); }
  Flip(const Flip&) = delete;
  Flip& operator=(const Flip&) = delete;

 private:
  void apply() {
    int fd = ::open(path_.c_str(), O_RDWR);
    ASSERT_GE(fd, 0) << path_;
    uint8_t b = 0;
    ASSERT_EQ(::pread(fd, &b, 1, off_t(offset_)), 1) << path_;
    b ^= mask_;
    ASSERT_EQ(::pwrite(fd, &b, 1, off_t(offset_)), 1) << path_;
    ::close(fd);
  }
  std::string path_;
  uint64_t offset_;
  uint8_t mask_;
};

// The doctor table's row for a check ("" if absent).
std::string row(const std::string& table, const std::string& check) {
  for (size_t at = 0; at < table.size();) {
    size_t end = table.find('\n', at);
    if (end == std::string::npos) end = table.size();
    const std::string line = table.substr(at, end - at);
    if (line.rfind(check + " ", 0) == 0) return line;
    at = end + 1;
  }
  return "";
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

class StoreIntegrity : public ::testing::Test {
 protected:
  std::string dir;
  void SetUp() override {
    dir = (fs::temp_directory_path() / fmt::format("deltafin-integrity-{}-{}", ::getpid(),
                                                   ::testing::UnitTest::GetInstance()->current_test_info()->name()))
              .string();
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  void TearDown() override { fs::remove_all(dir); }

  // The tiny model (seed 11) on two drive dirs, every expert replicated.
  std::string prepare(const std::string& extra = "--replicate-hot all") {
    for (int d = 0; d < 2; ++d) fs::create_directories(fmt::format("{}/drive{}", dir, d));
    const std::string cmd = fmt::format("{} prepare --quiet --model {} --out {}/store --drive {}/drive0:900 --drive "
                                        "{}/drive1:800 {} 2> {}/prepare.err",
                                        kBin, tiny_model(11), dir, dir, dir, extra, dir);
    EXPECT_EQ(run_command(cmd), 0) << cmd << ": " << slurp(dir + "/prepare.err");
    return dir + "/store";
  }
  // `run` as a user runs it: exit status; ids in dir/<tag>.txt, stderr in .err.
  int run(const std::string& store, const std::string& tag, const std::string& extra = "") {
    return run_command(fmt::format("{} run --store {} {} {} > {}/{}.txt 2> {}/{}.err", kBin, store, kPrompt, extra, dir,
                                   tag, dir, tag));
  }
  std::string err(const std::string& tag) { return slurp(dir + "/" + tag + ".err"); }
  // `doctor`: exit status, its table in *out.
  int doctor(const std::string& store, const std::string& flags, std::string* out) {
    const int rc = run_command(fmt::format("{} doctor --store {} {} > {}/doc.txt 2>&1", kBin, store, flags, dir));
    *out = slurp(dir + "/doc.txt");
    return rc;
  }
};

TEST_F(StoreIntegrity, SpineBytesFlippedAtRandomOffsetsAreRefusedNamingTheFile) {
  const std::string store = prepare();
  auto man = Manifest::load(store);
  ASSERT_TRUE(man.ok()) << man.message();
  ASSERT_EQ(run(store, "ref"), 0) << err("ref");
  std::vector<std::string> shards;
  for (const auto& f : man->spine_files)
    if (f.name.ends_with(".safetensors")) shards.push_back(f.name);
  ASSERT_GT(shards.size(), 2u);
  std::mt19937_64 rng(18);
  for (int i = 0; i < 5; ++i) {
    const std::string name = shards[rng() % shards.size()];
    const std::string path = store + "/spine/" + name;
    const uint64_t offset = rng() % fs::file_size(path);
    SCOPED_TRACE(fmt::format("{} byte {}", name, offset));
    Flip flip(path, offset, uint8_t(1 + rng() % 255));
    ASSERT_NE(run(store, "s"), 0);
    EXPECT_TRUE(slurp(dir + "/s.txt").empty()) << "generated before refusing";
    EXPECT_NE(err("s").find(path + ": checksum mismatch"), std::string::npos) << err("s");
    // doctor --full sees it too; quick doctor checks sizes and layout only.
    std::string doc;
    EXPECT_EQ(doctor(store, "--full", &doc), 1) << doc;
    EXPECT_NE(doc.find(path + ": checksum mismatch"), std::string::npos) << doc;
  }
  ASSERT_EQ(run(store, "after"), 0) << err("after");  // every flip was put back
  EXPECT_EQ(slurp(dir + "/ref.txt"), slurp(dir + "/after.txt"));
  // A file next to the spine that the manifest does not list is refused too.
  { std::ofstream(store + "/spine/extra.json") << "{}"; }
  ASSERT_NE(run(store, "x"), 0);
  EXPECT_NE(err("x").find(store + "/spine/extra.json: not listed in the manifest"), std::string::npos) << err("x");
}

// One edit of the manifest's JSON per row: run refuses the store (its own
// checksum no longer matches), doctor's quick pass FAILs and names the field
// that no longer fits the files (or, for checksums, --full does).
TEST_F(StoreIntegrity, ManifestEditsAreRefusedAndDoctorNamesTheField) {
  const std::string store = prepare("--replicate-hot 8");
  const std::string path = store + "/manifest.json", pristine = slurp(path);
  ASSERT_EQ(run(store, "ref"), 0) << err("ref");
  struct Edit {
    const char* what;
    std::function<void(OJson&)> edit;
    std::vector<std::string> doctor_says;  // all in the output
    bool full = false;                     // needs --full to be named
  };
  const uint64_t huge = (~0ull) - 4095;  // 18446744073709547520: aligned, and offset + span wraps around
  const std::vector<Edit> edits = {
      {"expert size", [](OJson& j) { j["model"]["expert_bytes"] = j["model"]["expert_bytes"].get<uint64_t>() + 1; },
       {"model.expert_bytes", "config.json"}},
      {"span size", [](OJson& j) { j["model"]["span_bytes"] = j["model"]["span_bytes"].get<uint64_t>() + 4096; },
       {"model.span_bytes"}},
      {"expert count", [](OJson& j) { j["model"]["num_experts"] = 31; }, {"model.num_experts"}},
      {"offset past the end", [&](OJson& j) { j["experts"][0]["at"][3][0][2] = huge; },
       {"experts[0].at[3][0]", "offset 18446744073709547520 + model.span_bytes", "runs past the end"}},
      {"offset moved", [](OJson& j) { j["experts"][1]["at"][2][0][2] = j["experts"][1]["at"][2][0][2].get<uint64_t>() + 4096; },
       {"experts[1].at[2][0]"}},
      {"pack size", [](OJson& j) { j["drives"][0]["packs"][0]["size"] = j["drives"][0]["packs"][0]["size"].get<uint64_t>() + 4096; },
       {"drives[0].packs[0].size"}},
      {"spine file size", [](OJson& j) { j["spine"]["files"][1]["size"] = j["spine"]["files"][1]["size"].get<uint64_t>() + 1; },
       {"spine.files[1].size"}},
      {"spine checksum", [](OJson& j) { j["spine"]["files"][2]["xxh3"] = std::string(32, 'a'); }, {"spine.files[2].xxh3"}, true},
      {"expert checksum", [](OJson& j) { j["experts"][0]["xxh3"][5] = std::string(32, 'b'); },
       {"experts[0].xxh3[5]", "no copy matches"}, true},
      {"drive rate", [](OJson& j) { j["drives"][1]["rate_mb_s"] = 1.0; }, {}},
  };
  for (const Edit& e : edits) {
    SCOPED_TRACE(e.what);
    OJson j = OJson::parse(pristine);
    e.edit(j);
    { std::ofstream(path, std::ios::trunc) << j.dump(1) << "\n"; }
    ASSERT_NE(run(store, "s"), 0);
    EXPECT_NE(err("s").find(path + ": its contents do not match its own checksum"), std::string::npos) << err("s");
    std::string doc;
    EXPECT_EQ(doctor(store, e.full ? "--full" : "", &doc), 1) << doc;
    EXPECT_NE(row(doc, "store: manifest checksum").find(" FAIL "), std::string::npos) << doc;
    for (const auto& s : e.doctor_says) EXPECT_NE(doc.find(s), std::string::npos) << "'" << s << "' not in:\n" << doc;
    EXPECT_EQ(doc.find("18446744073709547520 of"), std::string::npos) << doc;  // no read at a wrapped offset
  }
  // Removing the checksum field of a version 2 manifest is an edit too.
  OJson j = OJson::parse(pristine);
  j.erase("manifest_xxh3");
  { std::ofstream(path, std::ios::trunc) << j.dump(1) << "\n"; }
  ASSERT_NE(run(store, "s"), 0);
  EXPECT_NE(err("s").find("no manifest_xxh3 field"), std::string::npos) << err("s");
  { std::ofstream(path, std::ios::trunc) << pristine; }
  std::string doc;
  EXPECT_EQ(doctor(store, "--full", &doc), 0) << doc;
}

// A store written before manifests carried their own checksum (version 1) is
// accepted, with a warning from run and doctor: every byte it describes is
// still verified against it.
TEST_F(StoreIntegrity, Version1ManifestIsAcceptedWithAWarning) {
  const std::string store = prepare();
  const std::string path = store + "/manifest.json";
  ASSERT_EQ(run(store, "ref"), 0) << err("ref");
  OJson j = OJson::parse(slurp(path));
  j.erase("manifest_xxh3");
  j["version"] = 1;
  { std::ofstream(path, std::ios::trunc) << j.dump(1) << "\n"; }
  ASSERT_EQ(run(store, "v1"), 0) << err("v1");
  EXPECT_EQ(slurp(dir + "/ref.txt"), slurp(dir + "/v1.txt"));
  EXPECT_NE(err("v1").find("warning: " + store + ": manifest version 1 has no checksum of its own"), std::string::npos)
      << err("v1");
  std::string doc;
  EXPECT_EQ(doctor(store, "", &doc), 0) << doc;
  EXPECT_NE(row(doc, "store: manifest checksum").find(" WARN    manifest version 1"), std::string::npos) << doc;
  // Its data is still checked: a flipped spine byte is refused as before.
  auto man = Manifest::load(store);
  ASSERT_TRUE(man.ok()) << man.message();
  EXPECT_FALSE(man->sealed);
  Flip flip(store + "/spine/" + man->spine_files[0].name, 100, 0x40);
  EXPECT_NE(run(store, "s"), 0);
  EXPECT_NE(err("s").find("checksum mismatch"), std::string::npos) << err("s");
}

// Without --stats: one line per retry on a replica and one per healed read.
TEST_F(StoreIntegrity, HealedReadsAndRetriesAreLoggedWithoutStats) {
  const std::string store = prepare();
  auto man = Manifest::load(store);
  ASSERT_TRUE(man.ok());
  ASSERT_EQ(run(store, "ref"), 0) << err("ref");
  EXPECT_EQ(err("ref").find("store read:"), std::string::npos) << err("ref");
  // A flipped byte in the primary copy of every expert of layer 1.
  std::vector<std::unique_ptr<Flip>> flips;
  for (int e = 0; e < man->num_experts; ++e) {
    const Placement& p = man->experts[size_t(e)].at[0];
    flips.push_back(std::make_unique<Flip>(man->pack_path(p.drive, size_t(p.file)), p.offset + 64 + uint64_t(e), 0x08));
  }
  ASSERT_EQ(run(store, "s", "--prefetch 0"), 0) << err("s");
  EXPECT_EQ(slurp(dir + "/ref.txt"), slurp(dir + "/s.txt"));
  const std::string e = err("s");
  const size_t retries = count(e, "; retrying on drive "), healed = count(e, ": healed: read from drive ");
  EXPECT_GT(retries, 0u) << e;
  EXPECT_EQ(retries, healed) << e;
  EXPECT_EQ(retries, count(e, "checksum mismatch at offset")) << e;
  EXPECT_NE(e.find("store read: layer 1 expert "), std::string::npos) << e;
  // --stats counts the same retries.
  ASSERT_EQ(run(store, "st", "--prefetch 0 --stats --no-probe"), 0) << err("st");
  EXPECT_NE(err("st").find(fmt::format(", {} retried on a replica", count(err("st"), "; retrying on drive "))),
            std::string::npos)
      << err("st");
}

// The fault-injection sweep, in-process against the library (200 runs of a
// subprocess would take minutes): 200 random single-byte flips, each in a
// file picked uniformly from every file of the store (spine files, packs on
// both drives, the manifest), at a uniform offset.
TEST_F(StoreIntegrity, FaultSweepNeverGivesAWrongToken) {
  const std::string store = prepare();
  auto man = Manifest::load(store);
  ASSERT_TRUE(man.ok()) << man.message();
  std::vector<std::string> files;
  for (const auto& f : man->spine_files) files.push_back(store + "/spine/" + f.name);
  for (size_t d = 0; d < man->drives.size(); ++d)
    for (size_t p = 0; p < man->drives[d].packs.size(); ++p) files.push_back(man->pack_path(int(d), p));
  files.push_back(store + "/manifest.json");

  StoreRunOptions o;
  o.store = store;
  o.probe = false;
  std::mutex mu;
  std::string log;
  auto logger = [&](const std::string& line) {
    std::lock_guard<std::mutex> lock(mu);
    log += line + "\n";
  };
  GenerateOptions g;
  g.max_new = 3;
  // Logits of every decided token, or the error that refused the run.
  auto run_once = [&](std::vector<float>* logits, uint64_t* retries) -> Status {
    logits->clear();
    *retries = 0;
    DF_ASSIGN(StoreModel sm, open_store_model(o, 1, logger));
    Session session = sm.model->new_session();
    DF_TRY(generate(*sm.model, session, kPromptIds, g, [&](int32_t, std::span<const float> l) {
      logits->insert(logits->end(), l.begin(), l.end());
      return true;
    }));
    *retries = sm.source->engine().stats().retries;
    return {};
  };
  // The reference: the checkpoint itself, experts read in place.
  std::vector<float> want;
  {
    auto model = Model::open(tiny_model(11), 1);
    ASSERT_TRUE(model.ok()) << model.message();
    Session session = (*model)->new_session();
    ASSERT_TRUE(generate(**model, session, kPromptIds, g, [&](int32_t, std::span<const float> l) {
                  want.insert(want.end(), l.begin(), l.end());
                  return true;
                }).ok());
  }
  std::vector<float> got;
  uint64_t retries = 0;
  {
    Status s = run_once(&got, &retries);
    ASSERT_TRUE(s.ok()) << s.message();
    ASSERT_EQ(got.size(), want.size());
    ASSERT_EQ(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)), 0);
  }
  std::mt19937_64 rng(1800);
  int refused = 0, healed = 0, untouched = 0;
  for (int i = 0; i < 200; ++i) {
    const std::string& path = files[rng() % files.size()];
    const uint64_t offset = rng() % fs::file_size(path);
    const uint8_t mask = uint8_t(1 + rng() % 255);
    SCOPED_TRACE(fmt::format("flip {}: {} byte {} ^ 0x{:02x}", i, path, offset, mask));
    log.clear();
    Flip flip(path, offset, mask);
    Status s = run_once(&got, &retries);
    if (!s.ok()) {
      ++refused;
      EXPECT_NE(s.message().find(path), std::string::npos) << s.message();
      continue;
    }
    ASSERT_EQ(got.size(), want.size());
    ASSERT_EQ(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)), 0) << "wrong logits";
    // Only a pack byte can be healed; every retry was logged, named the
    // damaged file, and was healed.
    EXPECT_EQ(count(log, "; retrying on drive "), retries) << log;
    EXPECT_EQ(count(log, ": healed: read from drive "), retries) << log;
    EXPECT_EQ(count(log, path + ": checksum mismatch at offset"), retries) << log;
    if (retries) {
      EXPECT_TRUE(path.ends_with(".pack")) << log;
      ++healed;
    } else {
      ++untouched;  // a byte no read of this prompt used: padding or an expert not routed
    }
  }
  std::printf("  fault sweep: %d refused naming the file, %d healed from a replica, %d in bytes no read used\n",
              refused, healed, untouched);
  // The sweep exercised all three outcomes.
  EXPECT_GT(refused, 0);
  EXPECT_GT(healed, 0);
  EXPECT_GT(untouched, 0);
}

}  // namespace
}  // namespace deltafin
