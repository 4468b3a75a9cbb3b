// The engine's ExpertSource over a store: acquire(layer, ids) issues every
// expert read of the layer at once through the read engine (demand purpose),
// waits, checks (checksums in the engine, MXFP4 scale bytes here) and returns
// views into arena buffers that stay valid until the next acquire().
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "io/aligned_arena.h"
#include "io/read_engine.h"
#include "model/expert_source.h"
#include "store/manifest.h"

namespace deltafin {

struct StoreReadOptions {
  io::EngineOptions engine;
  uint64_t arena_bytes = 8ull << 30;  // bound on expert buffers (at least one layer's union must fit)
};

class StoreExpertSource : public ExpertSource {
 public:
  // Opens every pack file (a missing drive root or a pack of the wrong size
  // becomes a warning when all its experts have another copy, else an error
  // naming the expert, drive and file).
  static Result<std::unique_ptr<StoreExpertSource>> open(const Manifest& m, const ModelConfig& cfg,
                                                         const StoreReadOptions& opts,
                                                         std::vector<std::string>* warnings);
  ~StoreExpertSource() override;
  Status acquire(int layer, std::span<const int> experts, std::span<ExpertWeights> out) override;
  ExpertSourceStats stats() const override { return stats_; }

  io::ReadEngine& engine() { return *engine_; }
  const io::ReadEngine& engine() const { return *engine_; }
  const Manifest& manifest() const { return man_; }
  // Pack files of a drive that opened fine (for the probe).
  std::vector<std::string> drive_files(int drive) const;
  // The read request for one expert (replicas, checksum, label); dest unset.
  Result<io::ReadRequest> request(int layer, int expert) const;

 private:
  StoreExpertSource() = default;
  Manifest man_;
  ModelConfig cfg_;
  std::unique_ptr<io::ReadEngine> engine_;
  std::unique_ptr<io::AlignedArena> arena_;
  std::vector<std::vector<int>> file_ids_;  // [drive][pack] -> engine file id, -1 if unusable
  std::vector<uint8_t*> held_;
  uint64_t part_offset_[6] = {}, part_bytes_[6] = {};
  ExpertSourceStats stats_;
};

}  // namespace deltafin
