// `setup`'s pieces that need no server: repository names, the Hub's tree
// listing (paths, LFS SHA-256s, git blob ids), Link-header paging, URL
// escaping, the git blob digest of a file, and the tensor sizes a
// safetensors header gives the disk-space check. The downloads themselves,
// with their faults, are tested against a local server in
// tests/e2e/setup_hub.sh.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "hub/hub_api.h"
#include "hub/http.h"
#include "hub/setup.h"
#include "io/checksum.h"
#include "test_models.h"

namespace deltafin::hub {
namespace {

namespace fs = std::filesystem;

TEST(HubRepoSpec, NamesAndRevisions) {
  auto a = parse_repo_spec("moonshotai/Kimi-K3");
  ASSERT_TRUE(a.ok()) << a.message();
  EXPECT_EQ(a->repo, "moonshotai/Kimi-K3");
  EXPECT_EQ(a->revision, "main");
  auto b = parse_repo_spec("org/name.v2@refs/pr/3");
  ASSERT_TRUE(b.ok()) << b.message();
  EXPECT_EQ(b->repo, "org/name.v2");
  EXPECT_EQ(b->revision, "refs/pr/3");
  for (const char* bad : {"", "noslash", "/name", "org/", "a/b/c", "org/na me", "org/name@", "org/..", "o?rg/x",
                          "org/name@a b"}) {
    auto r = parse_repo_spec(bad);
    EXPECT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.message().find("--repo"), std::string::npos) << r.message();
  }
}

TEST(HubListing, FilesWithTheirDigestsDirectoriesSkipped) {
  const std::string sha = std::string(64, 'a'), blob = std::string(40, 'b');
  const std::string text = R"([
    {"type": "directory", "path": "figures", "oid": ")" + blob + R"(", "size": 0},
    {"type": "file", "path": "config.json", "size": 12, "oid": ")" + blob + R"("},
    {"type": "file", "path": "model-00001-of-000002.safetensors", "size": 99, "oid": ")" + blob + R"(",
     "lfs": {"oid": "sha256:)" + std::string(64, 'A') + R"(", "size": 99, "pointerSize": 134}},
    {"type": "file", "path": "figures/a.png", "size": 3, "oid": ")" + blob + R"(", "lfs": {"oid": ")" + sha + R"(", "size": 3}}
  ])";
  auto r = parse_tree_listing(text);
  ASSERT_TRUE(r.ok()) << r.message();
  ASSERT_EQ(r->size(), 3u);
  EXPECT_EQ((*r)[0].path, "config.json");
  EXPECT_EQ((*r)[0].git_oid, blob);
  EXPECT_TRUE((*r)[0].sha256.empty());
  EXPECT_EQ((*r)[1].sha256, sha);  // "sha256:" prefix dropped, lower case
  EXPECT_EQ((*r)[1].size, 99u);
  EXPECT_EQ((*r)[2].path, "figures/a.png");
}

TEST(HubListing, HostileOrBrokenEntriesAreRefusedByName) {
  const std::string blob = std::string(40, 'b');
  auto entry = [&](const std::string& fields) { return "[{\"type\": \"file\", " + fields + "}]"; };
  const std::pair<std::string, std::string> cases[] = {
      {entry(R"("path": "../etc/passwd", "size": 1, "oid": ")" + blob + "\""), "'..'"},
      {entry(R"("path": "/abs", "size": 1, "oid": ")" + blob + "\""), "not a relative file path"},
      {entry(R"("path": "a//b", "size": 1, "oid": ")" + blob + "\""), "empty"},
      {entry(R"("path": "a/./b", "size": 1, "oid": ")" + blob + "\""), "'.'"},
      {entry(R"("path": "x", "oid": ")" + blob + "\""), "size"},
      {entry(R"("path": "x", "size": -1, "oid": ")" + blob + "\""), "size"},
      {entry(R"("path": "x", "size": 1, "oid": "zz")"), "git SHA-1"},
      {entry(R"("path": "x", "size": 1)"), "neither"},
      {entry(R"("path": "x", "size": 1, "lfs": {"oid": "abc", "size": 1})"), "not a SHA-256"},
      {entry(R"("path": "x", "size": 2, "lfs": {"oid": ")" + std::string(64, 'c') + R"(", "size": 1})"),
       "lfs.size differs"},
      {"{\"not\": \"a list\"}", "JSON array"},
      {"[1, 2", "not JSON"},
  };
  for (const auto& [text, want] : cases) {
    auto r = parse_tree_listing(text);
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_NE(r.message().find(want), std::string::npos) << r.message() << " / want " << want;
  }
}

TEST(HubHttp, LinkHeaderAndEscaping) {
  EXPECT_EQ(parse_link_next(R"(<https://h/api/models/a/b/tree/c?cursor=xyz>; rel="next")"),
            "https://h/api/models/a/b/tree/c?cursor=xyz");
  EXPECT_EQ(parse_link_next(R"(<https://h/p1>; rel="prev", <https://h/p3>; rel="next")"), "https://h/p3");
  EXPECT_EQ(parse_link_next(R"(<https://h/p1>; rel="prev")"), "");
  EXPECT_EQ(parse_link_next(""), "");
  EXPECT_EQ(url_escape("refs/pr/3", false), "refs%2Fpr%2F3");
  EXPECT_EQ(url_escape("dir/a b+c.json", true), "dir/a%20b%2Bc.json");
}

TEST(HubDigest, GitBlobSha1MatchesGit) {
  const fs::path d = testing::temp_dir("hub_digest");
  std::ofstream(d / "hello") << "hello\n";
  std::ofstream(d / "empty");
  // `git hash-object` of these two files.
  auto h = git_blob_sha1_file((d / "hello").string());
  ASSERT_TRUE(h.ok()) << h.message();
  EXPECT_EQ(*h, "ce013625030ba8dba906f756967f9e9ca394464a");
  auto e = git_blob_sha1_file((d / "empty").string());
  ASSERT_TRUE(e.ok()) << e.message();
  EXPECT_EQ(*e, "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391");
}

TEST(HubSizes, ExpertBytesAndCountFromAHeader) {
  const std::string h = R"({"__metadata__": {"format": "pt"},
    "model.layers.1.mlp.experts.0.w1.weight_packed": {"dtype": "U8", "shape": [4, 8], "data_offsets": [0, 32]},
    "model.layers.1.mlp.experts.0.w1.weight_scale": {"dtype": "U8", "shape": [4, 1], "data_offsets": [32, 36]},
    "model.layers.1.mlp.experts.1.w1.weight_packed": {"dtype": "U8", "shape": [4, 8], "data_offsets": [36, 68]},
    "model.layers.1.mlp.shared_experts.w1.weight": {"dtype": "BF16", "shape": [4, 4], "data_offsets": [68, 100]},
    "model.layers.1.self_attn.q_proj.weight": {"dtype": "BF16", "shape": [2, 2], "data_offsets": [100, 108]}})";
  auto s = sizes_from_header(h, "shard");
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(s->tensors, 108u);
  EXPECT_EQ(s->expert_bytes, 68u);  // shared experts are spine
  EXPECT_EQ(s->experts, 2u);
  EXPECT_FALSE(sizes_from_header(R"({"t": {"data_offsets": [8, 4]}})", "s").ok());
  EXPECT_FALSE(sizes_from_header(R"({"t": {"dtype": "U8"}})", "s").ok());
  EXPECT_FALSE(sizes_from_header("[]", "s").ok());
}

}  // namespace
}  // namespace deltafin::hub
