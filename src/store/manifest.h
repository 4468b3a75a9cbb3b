// The store's manifest: what `prepare` wrote and where. Versioned JSON,
// written last (rename), so a store without it is incomplete and refused.
// Every expert has one or more placements (drive, pack file, offset) of the
// same 4 KiB-aligned span and one xxh3-128 over its payload bytes. Since
// version 2 the manifest also carries an xxh3-128 of its own text
// ("manifest_xxh3", computed with that field's value set to 32 zeros), so an
// edit or a damaged byte anywhere in it is refused before anything is read.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/result.h"
#include "io/checksum.h"

namespace deltafin {

// Version 2 added manifest_xxh3; version 1 manifests (no checksum of their
// own) are still read, and run/doctor warn about them (docs/design/store-and-read-engine.md).
// Version 3 added model.model_type and model.expert_format (the layout of a
// span, model/expert_layout.h); a version 1 or 2 store holds K3's MXFP4
// experts and is read as before.
constexpr int kManifestVersion = 3;
constexpr int kOldestManifestVersion = 1;
constexpr uint64_t kSpanAlign = 4096;
constexpr const char* kManifestName = "manifest.json";
constexpr const char* kSpineDirName = "spine";

// What run and doctor say about a version 1 manifest (accepted: see docs/design/store-and-read-engine.md).
constexpr const char* kUnsealedManifestWarning =
    "manifest version 1 has no checksum of its own (written before manifest_xxh3 existed): the spine and every expert "
    "read are still checked against it, but an edit to it is not detected as such; prepare the store again to add one";

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
  Hash128 xxh3;                  // over expert_bytes payload bytes (when has_sum)
  std::vector<Placement> at;     // first = primary; the rest are replicas on other drives
  // false only in a streamed store (Manifest::stream) for an expert whose
  // bytes were not local when the manifest was written: its checksum is
  // recorded when it is fetched (store/fetched_log.h). Written as null.
  bool has_sum = true;
};

// A streamed store (`setup --stream`): its experts are fetched on first use
// from this repository (and by `setup --resume`, which then writes the
// manifest without this section). Shard headers, which locate every expert's
// bytes, stay in STORE/.setup/checkpoint.
struct StreamSource {
  std::string endpoint, repo, commit;
  std::string token_file;  // as given to setup (empty: none)
  bool operator==(const StreamSource&) const = default;
};

struct Manifest {
  int version = kManifestVersion;  // as read; to_json always writes kManifestVersion
  bool sealed = true;              // the text carried a manifest_xxh3 that matched (false: version 1)
  std::string store_id;          // names the pack directory on every drive
  std::string source_dir;
  std::vector<SourceFile> source_files;
  std::string spine_dtype = "bf16";
  std::vector<StoreFile> spine_files;
  int num_layers = 0;
  int num_experts = 0;           // per MoE layer
  std::string model_type = "kimi_k3";    // config.json's (version 3; older stores: kimi_k3)
  std::string expert_format = "mxfp4";   // model/expert_layout.h's names (version 3; older stores: mxfp4)
  uint64_t expert_bytes = 0;     // payload: w1, w1 scales, w2, w2 scales, w3, w3 scales (expert_layout.h)
  uint64_t span_bytes = 0;       // align_up(expert_bytes, kSpanAlign)
  std::vector<int> moe_layers;   // model layer index of each MoE layer, ascending
  std::vector<DriveEntry> drives;
  std::vector<ExpertEntry> experts;  // [moe_index * num_experts + e]
  std::optional<StreamSource> stream;  // set: a streamed store, not complete yet

  std::string pack_dir(int drive) const;  // <root>/deltafin-<store_id>
  std::string pack_path(int drive, size_t pack) const;  // pack_dir(drive)/<pack name>
  int moe_index(int layer) const;         // -1 if not an MoE layer
  const ExpertEntry* expert(int layer, int e) const;

  // The current version, sealed with its own checksum.
  std::string to_json() const;
  // Checks the manifest's own checksum (refusing a mismatch, or a version 2+
  // manifest without one; a version 1 manifest is accepted with sealed =
  // false), then parse_contents.
  static Result<Manifest> parse(const std::string& text, const std::string& where);
  // Parses and checks every field and placement (indices in range, offsets
  // aligned, spans inside their file, no two spans overlapping, replicas on
  // distinct drives) without the manifest's own checksum; errors name the
  // field. doctor uses it to say which field is wrong in an edited manifest.
  static Result<Manifest> parse_contents(const std::string& text, const std::string& where);
  // Only the manifest's own checksum: ok when it matches; `sealed` false and
  // ok for a version 1 manifest (which has none).
  static Status check_seal(const std::string& text, const std::string& where, bool* sealed);
  static Result<Manifest> load(const std::string& store_dir);
  // The manifest's text and path ("" text: an error saying why there is none).
  static Result<std::pair<std::string, std::string>> read_text(const std::string& store_dir);
};

}  // namespace deltafin
