// Corrupted checkpoints: `deltafin inspect` must refuse each with exit code
// non-zero and one line "error: ..." naming the file and, where there is one,
// the tensor. No crash (CI runs this under ASan/UBSan).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <random>
#include <nlohmann/json.hpp>

#include "checkpoint/make_model.h"
#include "checkpoint/safetensors.h"
#include "checkpoint_test_util.h"
#include "model/weights.h"

namespace deltafin {
namespace {

namespace fs = std::filesystem;
using testing::read_file;
using testing::ScratchDir;
using testing::write_file;
using OJson = nlohmann::ordered_json;

// A shard split into its header text and data bytes.
struct RawShard {
  std::string header, data;
};

RawShard load_raw(const fs::path& p) {
  const std::string f = read_file(p);
  uint64_t hlen = 0;
  for (int i = 7; i >= 0; --i) hlen = (hlen << 8) | uint8_t(f[i]);
  return {f.substr(8, hlen), f.substr(8 + hlen)};
}

void save_raw(const fs::path& p, std::string header, const std::string& data) {
  header.append((8 - header.size() % 8) % 8, ' ');
  std::string len(8, '\0');
  for (int i = 0; i < 8; ++i) len[i] = char(uint64_t(header.size()) >> (8 * i));
  write_file(p, len + header + data);
}

class BadCheckpoint : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    pristine_ = new ScratchDir("bad-pristine");
    auto p = find_preset("tiny");
    ASSERT_TRUE(p.ok());
    ASSERT_TRUE(make_model(*p, pristine_->str(), 1).ok());
  }
  static void TearDownTestSuite() {
    delete pristine_;
    pristine_ = nullptr;
  }

  void SetUp() override { fs::copy(pristine_->path(), dir_.path(), fs::copy_options::recursive | fs::copy_options::overwrite_existing); }

  // The shard file holding a tensor, per the index.
  fs::path shard_of(const std::string& tensor) {
    auto idx = nlohmann::json::parse(read_file(dir_.path() / "model.safetensors.index.json"));
    return dir_.path() / idx["weight_map"][tensor].get<std::string>();
  }

  void edit_header(const fs::path& shard, const std::function<void(OJson&)>& fn) {
    RawShard r = load_raw(shard);
    OJson h = OJson::parse(r.header);
    fn(h);
    save_raw(shard, h.dump(), r.data);
  }

  void edit_header_text(const fs::path& shard, const std::function<void(std::string&)>& fn) {
    RawShard r = load_raw(shard);
    fn(r.header);
    save_raw(shard, r.header, r.data);
  }

  void edit_config(const std::function<void(OJson&)>& fn) {
    OJson c = OJson::parse(read_file(dir_.path() / "config.json"));
    fn(c);
    write_file(dir_.path() / "config.json", c.dump(2));
  }

  // Runs inspect and checks the refusal: non-zero exit, no crash, exactly one
  // line, and every expected fragment (file name, tensor, reason) present.
  void expect_refused(const std::vector<std::string>& fragments, const std::string& extra = "") {
    auto r = testing::run_deltafin("inspect --model " + dir_.str() + " " + extra, scratch_.path());
    ASSERT_TRUE(r.exited) << "crashed: " << r.err;
    std::printf("  refused (exit %d): %s", r.code, r.err.c_str());  // the message, for the CI log
    EXPECT_NE(r.code, 0) << r.out;
    ASSERT_FALSE(r.err.empty());
    EXPECT_EQ(r.err.rfind("error: ", 0), 0u) << r.err;
    EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << "not one line: " << r.err;
    for (const auto& f : fragments) EXPECT_NE(r.err.find(f), std::string::npos) << "'" << f << "' not in: " << r.err;
  }

  static inline ScratchDir* pristine_ = nullptr;
  ScratchDir dir_{"bad"}, scratch_{"bad-cmd"};
  const std::string embed_ = "language_model.model.embed_tokens.weight";
  const std::string norm0_ = "language_model.model.layers.0.input_layernorm.weight";
  const std::string post0_ = "language_model.model.layers.0.post_attention_layernorm.weight";
};

TEST_F(BadCheckpoint, PristineCopyIsAccepted) {
  auto r = testing::run_deltafin("inspect --verify-experts --model " + dir_.str(), scratch_.path());
  ASSERT_TRUE(r.exited);
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("MLA latent cache per token"), std::string::npos);
}

TEST_F(BadCheckpoint, InvalidJsonHeader) {
  const fs::path s = shard_of(embed_);
  edit_header_text(s, [](std::string& h) { h[0] = 'x'; });
  expect_refused({s.string(), "not valid JSON"});
}

TEST_F(BadCheckpoint, HeaderLengthPastEndOfFile) {
  const fs::path s = shard_of(embed_);
  std::string f = read_file(s);
  const uint64_t too_long = f.size();
  for (int i = 0; i < 8; ++i) f[i] = char(too_long >> (8 * i));
  write_file(s, f);
  expect_refused({s.string(), "past end of file"});
}

TEST_F(BadCheckpoint, ImplausibleHeaderLength) {
  const fs::path s = shard_of(embed_);
  std::string f = read_file(s);
  for (int i = 0; i < 8; ++i) f[i] = char(0xff);
  write_file(s, f);
  expect_refused({s.string(), "header length"});
}

TEST_F(BadCheckpoint, TensorOffsetsOutsideTheFile) {
  const fs::path s = shard_of(norm0_);
  edit_header(s, [&](OJson& h) { h[norm0_]["data_offsets"] = {1ull << 40, (1ull << 40) + 512}; });
  expect_refused({s.string(), norm0_, "past the data region"});
}

TEST_F(BadCheckpoint, OverlappingOffsets) {
  const fs::path s = shard_of(norm0_);
  ASSERT_EQ(s, shard_of(post0_));
  edit_header(s, [&](OJson& h) { h[post0_]["data_offsets"] = h[norm0_]["data_offsets"]; });
  expect_refused({s.string(), "overlaps", norm0_, post0_});
}

TEST_F(BadCheckpoint, WrongDtype) {
  const fs::path s = shard_of(embed_);
  edit_header(s, [&](OJson& h) { h[embed_]["dtype"] = "F16"; });  // same size: only the binder can tell
  expect_refused({s.string(), embed_, "dtype F16 but BF16 expected"});
}

TEST_F(BadCheckpoint, WrongShape) {
  const fs::path s = shard_of(embed_);
  edit_header(s, [&](OJson& h) { h[embed_]["shape"] = {256, 512}; });  // same byte count, transposed
  expect_refused({s.string(), embed_, "shape [256, 512] but [512, 256] expected"});
}

TEST_F(BadCheckpoint, MissingTensor) {
  // Removed from its shard (data and header) and from the index: a clean
  // checkpoint that simply lacks it.
  const std::string name = "language_model.model.layers.3.self_attn.kv_b_proj.weight";
  const fs::path s = shard_of(name);
  RawShard r = load_raw(s);
  OJson h = OJson::parse(r.header), out = OJson::object();
  std::string data;
  for (auto& [k, v] : h.items()) {
    if (k == "__metadata__") {
      out[k] = v;
      continue;
    }
    if (k == name) continue;
    const uint64_t b = v["data_offsets"][0], e = v["data_offsets"][1];
    OJson nv = v;
    nv["data_offsets"] = {data.size(), data.size() + (e - b)};
    data += r.data.substr(b, e - b);
    out[k] = nv;
  }
  save_raw(s, out.dump(), data);
  OJson idx = OJson::parse(read_file(dir_.path() / "model.safetensors.index.json"));
  idx["weight_map"].erase(name);
  write_file(dir_.path() / "model.safetensors.index.json", idx.dump());
  expect_refused({dir_.str(), name, "missing"});
}

TEST_F(BadCheckpoint, TensorListedInIndexButAbsentFromShard) {
  const std::string name = "language_model.model.layers.99.mlp.up_proj.weight";
  OJson idx = OJson::parse(read_file(dir_.path() / "model.safetensors.index.json"));
  idx["weight_map"][name] = "model-00002-of-00003.safetensors";
  write_file(dir_.path() / "model.safetensors.index.json", idx.dump());
  expect_refused({"model.safetensors.index.json", name, "model-00002-of-00003.safetensors"});
}

TEST_F(BadCheckpoint, UnknownDtype) {
  const fs::path s = shard_of(norm0_);
  edit_header(s, [&](OJson& h) { h[norm0_]["dtype"] = "Q4_K"; });
  expect_refused({s.string(), norm0_, "unknown dtype 'Q4_K'"});
}

TEST_F(BadCheckpoint, Mxfp4ScaleByte255) {
  const std::string name = expert_tensor_name(4, 17, "w3", "weight_scale");
  const fs::path s = shard_of(name);
  uint64_t off = 0;
  {
    auto ck = Checkpoint::open(dir_.str());
    ASSERT_TRUE(ck.ok()) << ck.message();
    const TensorInfo* t = (*ck)->find(name);
    ASSERT_NE(t, nullptr);
    off = t->file_offset + t->nbytes / 2;
  }
  std::string f = read_file(s);
  f[off] = char(255);
  write_file(s, f);
  // Scale bytes are checked when an expert is first used, or all of them
  // with --verify-experts.
  expect_refused({s.string(), name, "255"}, "--verify-experts");
}

TEST_F(BadCheckpoint, TruncatedShard) {
  const fs::path s = shard_of(embed_);
  fs::resize_file(s, fs::file_size(s) - 1000);
  expect_refused({s.string(), "tensor '", "past the data region"});
}

TEST_F(BadCheckpoint, EmptyShard) {
  const fs::path s = shard_of(embed_);
  fs::resize_file(s, 0);
  expect_refused({s.string(), "truncated"});
}

TEST_F(BadCheckpoint, TrailingBytesAfterData) {
  const fs::path s = shard_of(embed_);
  write_file(s, read_file(s) + std::string(64, '\0'));
  expect_refused({s.string(), "64 trailing bytes"});
}

TEST_F(BadCheckpoint, GapInDataRegion) {
  // The last tensor in data order moved 8 bytes up: an unused gap before it
  // (the file is extended so its range still fits).
  const fs::path s = shard_of(embed_);
  RawShard r = load_raw(s);
  OJson h = OJson::parse(r.header);
  std::string last;
  uint64_t last_end = 0;
  for (auto& [k, v] : h.items())
    if (k != "__metadata__" && v["data_offsets"][1].get<uint64_t>() > last_end) last = k, last_end = v["data_offsets"][1];
  h[last]["data_offsets"] = {h[last]["data_offsets"][0].get<uint64_t>() + 8, last_end + 8};
  save_raw(s, h.dump(), r.data + std::string(8, '\0'));
  expect_refused({s.string(), last, "unused bytes"});
}

TEST_F(BadCheckpoint, ConfigInconsistentWithTensors) {
  edit_config([](OJson& c) { c["text_config"]["hidden_size"] = 320; });
  expect_refused({shard_of(embed_).string(), embed_, "shape [512, 256] but [512, 320] expected"});
}

TEST_F(BadCheckpoint, ConfigExpertCountInconsistent) {
  edit_config([](OJson& c) { c["text_config"]["num_experts"] = 48; });
  expect_refused({"gate.weight", "shape [32, 256] but [48, 256] expected", ".safetensors"});
}

TEST_F(BadCheckpoint, NonUtf8TensorName) {
  const std::string name = "language_model.model.norm.weight";
  const fs::path s = shard_of(name);
  edit_header_text(s, [&](std::string& h) {
    const size_t at = h.find("\"" + name + "\"");
    ASSERT_NE(at, std::string::npos);
    h.replace(at + 1, name.size(), "language_model.model.norm\xff.weight");
  });
  expect_refused({s.string(), "language_model.model.norm\\xff.weight", "not valid UTF-8"});
}

// Random bytes over the start of a header are damage, not a tensor with a bad
// name: the message says the header is not valid JSON (issue 18).
TEST_F(BadCheckpoint, RandomBytesAtHeaderStartAreInvalidJson) {
  const fs::path s = shard_of(norm0_);
  const RawShard pristine = load_raw(s);
  std::mt19937_64 rng(18);
  for (int round = 0; round < 6; ++round) {
    SCOPED_TRACE(round);
    std::string h = pristine.header;
    // Rounds 0-2 overwrite the opening '{' as well; 3-5 keep it and garble what follows.
    const size_t from = round < 3 ? 0 : 1;
    for (size_t i = from; i < from + 48; ++i) h[i] = char(0x80 | (rng() & 0x7f));  // never UTF-8 on its own
    save_raw(s, h, pristine.data);
    expect_refused({s.string(), "header is not valid JSON"});
    auto r = testing::run_deltafin("inspect --model " + dir_.str(), scratch_.path());
    EXPECT_EQ(r.err.find("name is not valid UTF-8"), std::string::npos) << r.err;
  }
}

TEST_F(BadCheckpoint, DuplicateTensorNames) {
  const fs::path s = shard_of(norm0_);
  edit_header_text(s, [&](std::string& h) {
    const size_t at = h.find("\"" + post0_ + "\"");
    ASSERT_NE(at, std::string::npos);
    h.replace(at + 1, post0_.size(), norm0_);
  });
  expect_refused({s.string(), norm0_, "duplicate"});
}

TEST_F(BadCheckpoint, NegativeShapeEntry) {
  const fs::path s = shard_of(norm0_);
  edit_header(s, [&](OJson& h) { h[norm0_]["shape"] = {-256}; });
  expect_refused({s.string(), norm0_, "non-negative"});
}

TEST_F(BadCheckpoint, NonZeroALogPadding) {
  const std::string name = "language_model.model.layers.1.self_attn.A_log";
  const fs::path s = shard_of(name);
  uint64_t off = 0;
  {
    auto ck = Checkpoint::open(dir_.str());
    ASSERT_TRUE(ck.ok());
    const TensorInfo* t = (*ck)->find(name);
    ASSERT_NE(t, nullptr);
    off = t->file_offset + t->nbytes - 4;  // last padding entry
  }
  std::string f = read_file(s);
  const float one = 1.0f;
  std::memcpy(f.data() + off, &one, 4);
  write_file(s, f);
  expect_refused({s.string(), name, "padding"});
}

TEST_F(BadCheckpoint, InvalidConfigJson) {
  const std::string c = read_file(dir_.path() / "config.json");
  write_file(dir_.path() / "config.json", c.substr(0, c.size() / 2));
  expect_refused({(dir_.path() / "config.json").string(), "not valid JSON"});
}

TEST_F(BadCheckpoint, ConfigMissingField) {
  edit_config([](OJson& c) { c["text_config"]["linear_attn_config"].erase("kda_layers"); });
  expect_refused({(dir_.path() / "config.json").string(), "kda_layers is missing"});
}

TEST_F(BadCheckpoint, InvalidIndexJson) {
  write_file(dir_.path() / "model.safetensors.index.json", "{\"weight_map\": {\"a\": ");
  expect_refused({"model.safetensors.index.json", "not valid JSON"});
}

TEST_F(BadCheckpoint, MissingShardFile) {
  const fs::path s = dir_.path() / "model-00002-of-00003.safetensors";
  fs::remove(s);
  expect_refused({s.string(), "cannot open"});
}

TEST_F(BadCheckpoint, ShardNameEscapingTheDirectory) {
  OJson idx = OJson::parse(read_file(dir_.path() / "model.safetensors.index.json"));
  idx["weight_map"][embed_] = "../model-00001-of-00003.safetensors";
  write_file(dir_.path() / "model.safetensors.index.json", idx.dump());
  expect_refused({"model.safetensors.index.json", embed_, "invalid shard name"});
}

}  // namespace
}  // namespace deltafin
