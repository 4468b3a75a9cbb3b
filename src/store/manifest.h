// The store's manifest: what `prepare` wrote and where. Versioned JSON,
// written last (rename), so a store without it is incomplete and refused.
// Every expert has one or more placements (drive, pack file, offset) of the
// same 4 KiB-aligned span and one xxh3-128 over its payload bytes.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/result.h"
#include "io/checksum.h"

namespace deltafin {

constexpr int kManifestVersion = 1;
constexpr uint64_t kSpanAlign = 4096;
constexpr const char* kManifestName = "manifest.json";
constexpr const char* kSpineDirName = "spine";

inline uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

struct SourceFile {
  std::string name;  // relative to the checkpoint directory
  uint64_t size = 0;
  std::string sha256;
};

struct StoreFile {
  std::string name;  // relative to its directory (drive pack dir or store spine dir)
  uint64_t size = 0;
  Hash128 xxh3;      // spine files: whole-file checksum; packs: unused (zero)
};

struct DriveEntry {
  std::string root;       // absolute drive root given at prepare time
  double rate_mb_s = 0;   // measured (or given) read rate at prepare time
  std::vector<StoreFile> packs;
};

struct Placement {
  int drive = 0;
  int file = 0;  // index into drives[drive].packs
  uint64_t offset = 0;
  bool operator==(const Placement&) const = default;
};

struct ExpertEntry {
  Hash128 xxh3;                  // over expert_bytes payload bytes
  std::vector<Placement> at;     // first = primary; the rest are replicas on other drives
};

struct Manifest {
  int version = kManifestVersion;
  std::string store_id;          // names the pack directory on every drive
  std::string source_dir;
  std::vector<SourceFile> source_files;
  std::string spine_dtype = "bf16";
  std::vector<StoreFile> spine_files;
  int num_layers = 0;
  int num_experts = 0;           // per MoE layer
  uint64_t expert_bytes = 0;     // payload: w1.packed, w1.scale, w2.packed, w2.scale, w3.packed, w3.scale
  uint64_t span_bytes = 0;       // align_up(expert_bytes, kSpanAlign)
  std::vector<int> moe_layers;   // model layer index of each MoE layer, ascending
  std::vector<DriveEntry> drives;
  std::vector<ExpertEntry> experts;  // [moe_index * num_experts + e]

  std::string pack_dir(int drive) const;  // <root>/deltafin-<store_id>
  std::string pack_path(int drive, size_t pack) const;  // pack_dir(drive)/<pack name>
  int moe_index(int layer) const;         // -1 if not an MoE layer
  const ExpertEntry* expert(int layer, int e) const;

  std::string to_json() const;
  // Parses and checks every field and placement (indices in range, offsets
  // aligned, spans inside their file, no two spans overlapping, replicas on
  // distinct drives); errors name the field.
  static Result<Manifest> parse(const std::string& text, const std::string& where);
  static Result<Manifest> load(const std::string& store_dir);
};

}  // namespace deltafin
