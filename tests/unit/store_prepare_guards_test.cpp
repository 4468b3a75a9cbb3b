// prepare's guards (issue 18): a drive root that does not exist or is not a
// directory is refused (never created), roots on one file system are one
// device (weighted equally, with a warning), --out inside the source is
// refused, an interrupted run's differing option is named, and a run that
// refuses its own options leaves nothing behind.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "checkpoint_test_util.h"
#include "store/manifest.h"
#include "test_models.h"

namespace deltafin {
namespace {

namespace fs = std::filesystem;
using testing::run_deltafin;
using testing::ScratchDir;
using testing::tiny_model;

class PrepareGuards : public ::testing::Test {
 protected:
  ScratchDir dir_{"prepare-guards"}, cmd_{"prepare-guards-cmd"};
  std::string d(const std::string& name) const { return (dir_.path() / name).string(); }
  testing::CommandResult prepare(const std::string& args) {
    return run_deltafin("prepare --quiet --model " + tiny_model(11) + " " + args, cmd_.path());
  }
  void expect_refused(const testing::CommandResult& r, const std::vector<std::string>& fragments) {
    ASSERT_TRUE(r.exited) << r.err;
    EXPECT_NE(r.code, 0) << r.err;
    for (const auto& f : fragments) EXPECT_NE(r.err.find(f), std::string::npos) << "'" << f << "' not in: " << r.err;
  }
};

TEST_F(PrepareGuards, MissingDriveRootIsRefusedNotCreated) {
  auto r = prepare("--out " + d("store") + " --drive " + d("nodrive") + ":900");
  expect_refused(r, {"--drive " + d("nodrive") + ": does not exist", "create it (or mount the drive there)"});
  EXPECT_FALSE(fs::exists(d("nodrive")));
  EXPECT_FALSE(fs::exists(d("store"))) << "a refused run left the store directory behind";
  // A file where a drive root should be.
  { std::ofstream(d("file")) << "x"; }
  expect_refused(prepare("--out " + d("store") + " --drive " + d("file")), {d("file") + ": is not a directory"});
  EXPECT_FALSE(fs::exists(d("store")));
  // make-model --store checks before writing its spine checkpoint.
  auto m = run_deltafin("make-model --preset tiny --out " + d("spine") + " --store " + d("store") + " --drive " +
                            d("nodrive"),
                        cmd_.path());
  expect_refused(m, {"--drive " + d("nodrive") + ": does not exist"});
  EXPECT_FALSE(fs::exists(d("spine")));
  EXPECT_FALSE(fs::exists(d("nodrive")));
}

TEST_F(PrepareGuards, OutInsideTheSourceIsRefused) {
  // A copy of the checkpoint, so the test may write next to it.
  fs::copy(tiny_model(11), d("model"), fs::copy_options::recursive);
  fs::create_directories(d("d0"));
  size_t files = 0;
  for (auto it = fs::directory_iterator(d("model")); it != fs::directory_iterator(); ++it) ++files;
  for (const std::string& out : {d("model"), d("model") + "/store", d("model") + "/../model/sub/store"}) {
    SCOPED_TRACE(out);
    auto r = run_deltafin("prepare --quiet --model " + d("model") + " --out " + out + " --drive " + d("d0") + ":900",
                          cmd_.path());
    expect_refused(r, {"--out " + out, "the source checkpoint " + d("model")});
  }
  auto r = run_deltafin("prepare --quiet --model " + d("model") + " --out " + d("store") + " --drive " + d("model") +
                            ":900",
                        cmd_.path());
  expect_refused(r, {"--drive " + d("model") + ": is inside the source checkpoint"});
  size_t after = 0;
  for (auto it = fs::directory_iterator(d("model")); it != fs::directory_iterator(); ++it) ++after;
  EXPECT_EQ(after, files) << "prepare wrote into the source";
  EXPECT_FALSE(fs::exists(d("store")));
}

TEST_F(PrepareGuards, RefusedOptionsLeaveNothingBehind) {
  fs::create_directories(d("d0"));
  fs::create_directories(d("d1"));
  const std::string drives = " --drive " + d("d0") + ":900 --drive " + d("d1") + ":800";
  expect_refused(prepare("--out " + d("store") + drives + " --replicate-hot lots"), {"--replicate-hot"});
  EXPECT_FALSE(fs::exists(d("store")));
  expect_refused(prepare("--out " + d("store") + drives + " --replicas-from " + d("missing.txt")), {d("missing.txt")});
  EXPECT_FALSE(fs::exists(d("store")));
  expect_refused(prepare("--out " + d("store") + " --drive " + d("d0") + ":900 --replicate-hot 4"), {"at least two --drive"});
  EXPECT_FALSE(fs::exists(d("store")));
  expect_refused(prepare("--out " + d("store") + drives + " --spine int4"), {"--spine 'int4'"});
  EXPECT_FALSE(fs::exists(d("store")));
  // The corrected run then works from scratch.
  auto ok = prepare("--out " + d("store") + drives + " --replicate-hot 4");
  EXPECT_EQ(ok.code, 0) << ok.err;
  EXPECT_TRUE(fs::exists(d("store") + "/manifest.json"));
}

TEST_F(PrepareGuards, InterruptedRunNamesTheDifferingOption) {
  fs::create_directories(d("d0"));
  fs::create_directories(d("d1"));
  const std::string drives = " --drive " + d("d0") + ":900 --drive " + d("d1") + ":800";
  ASSERT_EQ(prepare("--out " + d("store") + drives + " --replicate-hot 4").code, 0);
  // As if interrupted before the manifest: its records stay, the manifest goes.
  fs::remove(d("store") + "/manifest.json");
  fs::create_directories(d("store") + "/.prepare/done");
  nlohmann::json opts = {{"model", tiny_model(11)},
                         {"drives", {d("d0"), d("d1")}},
                         {"rates", {900.0, 800.0}},
                         {"replicate_hot", "4"},
                         {"replicas_from", ""},
                         {"spine", "bf16"}};
  { std::ofstream(d("store") + "/.prepare/done/options.json") << opts.dump() << "\n"; }
  auto r = prepare("--out " + d("store") + drives + " --replicate-hot 6");
  expect_refused(r, {"different options (replicate_hot: \"4\" before, \"6\" now)", "/.prepare"});
  r = prepare("--out " + d("store") + " --drive " + d("d0") + ":900 --drive " + d("d1") + ":700 --replicate-hot 4");
  expect_refused(r, {"rates: [900.0,800.0] before, [900.0,700.0] now"});
  // The same options resume.
  r = prepare("--out " + d("store") + drives + " --replicate-hot 4");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(fs::exists(d("store") + "/manifest.json"));
}

TEST_F(PrepareGuards, RootsOnOneFileSystemAreOneDevice) {
  fs::create_directories(d("d0"));
  fs::create_directories(d("d1"));
  // Both probed: one probe, one rate, a warning.
  auto r = run_deltafin("prepare --model " + tiny_model(11) + " --out " + d("store") + " --drive " + d("d0") +
                            " --drive " + d("d1"),
                        cmd_.path());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("warning: drive roots " + d("d0") + ", " + d("d1") + " are on one file system"),
            std::string::npos)
      << r.err;
  size_t probes = 0;
  for (size_t at = r.err.find("probe)"); at != std::string::npos; at = r.err.find("probe)", at + 1)) ++probes;
  EXPECT_EQ(probes, 1u) << r.err;
  auto m = Manifest::load(d("store"));
  ASSERT_TRUE(m.ok()) << m.message();
  ASSERT_EQ(m->drives.size(), 2u);
  EXPECT_EQ(m->drives[0].rate_mb_s, m->drives[1].rate_mb_s);
  // Equal weights: each drive holds half of every layer's experts.
  for (const auto& dr : m->drives)
    for (const auto& p : dr.packs) EXPECT_EQ(p.size, uint64_t(m->num_experts / 2) * m->span_bytes) << p.name;
}

}  // namespace
}  // namespace deltafin
