// How many experts per row the next-layer guess reads ahead (Model's
// `--prefetch auto`), learned per MoE layer from how often the guesses of
// each rank were routed. The guessing router ranks every expert; the engine
// ranks `max_per_row` of them each time, whatever it reads, and once the
// layer's real router has run, every rank is scored: its guess was routed or
// not. A layer reads ahead as many guesses per row as there are ranks whose
// recent share of routed guesses is at least `min_precision`.
//
// Why ranks: the guess's top few experts are routed almost always and its
// tail almost never, and where the tail starts differs by model and by layer
// (on the k3-shaped benchmark model 15 of 16 ranks are right; on the real K3,
// 59-70% of a top-16 guess, less after attention layers). A wrong guess costs
// a read and a buffer; a right one starts a read a layer early. Scoring ranks
// that were not read keeps the count free to grow back. Only timing depends
// on it: every expert used is still the one the router picks.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

namespace deltafin {

class GuessDepth {
 public:
  // `initial` guesses per row until a layer has been scored once. Scores age
  // by half every `half_life` rows scored for that layer.
  GuessDepth(int layers, int max_per_row, double min_precision, int initial, int half_life = 32);

  int max_per_row() const { return max_; }
  // Guesses per row to read ahead for MoE layer `layer` now.
  int per_row(int layer) const { return count_[size_t(layer)]; }
  // One row's guess for `layer`, best first (`ranked.size()` <= max_per_row),
  // against the experts the layer's router then picked for that row.
  void score(int layer, std::span<const int> ranked, std::span<const int> routed);

 private:
  int max_;
  double min_precision_, keep_;
  std::vector<double> routed_, scored_;  // [layer][rank], decayed counts
  std::vector<int> count_;               // [layer]
};

}  // namespace deltafin
