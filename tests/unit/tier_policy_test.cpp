// The RAM tier's policy (frequency with ageing, admission, pins) on hand-made
// request sequences, the tier's memory staying within its byte budget, and
// the heat file's arithmetic and checks.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "store/heat_file.h"
#include "store/ram_tier.h"
#include "store/tier_policy.h"

namespace deltafin {
namespace {

auto none = [](int) { return false; };

TEST(TierPolicy, FreeSlotsFirstThenOnlyAHigherScoreEvicts) {
  TierPolicy p(10, 2, 1000);
  int ev = 0;
  p.use(1);
  const int s1 = p.admit(1, none, &ev);
  ASSERT_GE(s1, 0);
  EXPECT_EQ(ev, -1);
  EXPECT_EQ(p.slot_of(1), -1);  // reserved, not resident before publish
  p.publish(s1, 1);
  EXPECT_EQ(p.slot_of(1), s1);
  p.use(2);
  const int s2 = p.admit(2, none, &ev);
  ASSERT_GE(s2, 0);
  EXPECT_NE(s1, s2);
  p.publish(s2, 2);
  EXPECT_EQ(p.free_slots(), 0u);
  // Key 3 once: score 1, ties with both residents: bypassed.
  p.use(3);
  EXPECT_EQ(p.admit(3, none, &ev), -1);
  // Twice: 2 > 1, so the lowest resident goes (1 and 2 tie: the lower key).
  p.use(3);
  EXPECT_EQ(p.admit(3, none, &ev), s1);
  EXPECT_EQ(ev, 1);
  EXPECT_EQ(p.slot_of(1), -1);
  p.publish(s1, 3);
  EXPECT_EQ(p.resident(), 2u);
  // A use of a resident raises its score: 2 is now 2, 3 is 2; 4 at 2 ties: bypassed.
  p.use(2);
  p.use(4);
  p.use(4);
  EXPECT_EQ(p.admit(4, none, &ev), -1);
  // At 3 it beats both, but pinned slots are never taken.
  p.use(4);
  EXPECT_EQ(p.admit(4, [&](int s) { return s == s1 || s == s2; }, &ev), -1);
  EXPECT_EQ(p.admit(4, [&](int s) { return s == s1; }, &ev), s2);
  EXPECT_EQ(ev, 2);
  // The read failed: the slot is free again and nothing is resident there.
  p.abandon(s2);
  EXPECT_EQ(p.slot_of(4), -1);
  EXPECT_EQ(p.free_slots(), 1u);
  EXPECT_EQ(p.resident(), 1u);
  // A second fill of a resident key (a request naming an expert twice) frees its slot instead.
  {
    TierPolicy q(4, 3, 1000);
    int e1 = 0, e2 = 0;
    q.use(0);
    const int a = q.admit(0, none, &e1), b = q.admit(0, none, &e2);
    q.publish(a, 0);
    q.publish(b, 0);
    EXPECT_EQ(q.slot_of(0), a);
    EXPECT_EQ(q.resident(), 1u);
    EXPECT_EQ(q.free_slots(), 2u);
  }
  // Abandoning a resident's slot drops it too.
  p.abandon(s1);
  EXPECT_EQ(p.slot_of(3), -1);
  EXPECT_EQ(p.free_slots(), 2u);
  EXPECT_EQ(p.resident(), 0u);
}

TEST(TierPolicy, ScoresHalveEveryAgeEveryUses) {
  TierPolicy p(4, 1, 4);
  p.use(0), p.use(0), p.use(0);  // 3
  EXPECT_EQ(p.score(0), 3.0);
  p.use(1);  // the 4th use: everything halves after counting it
  EXPECT_EQ(p.score(0), 1.5);
  EXPECT_EQ(p.score(1), 0.5);
  int ev = 0;
  const int s = p.admit(0, none, &ev);
  p.publish(s, 0);
  // Key 1 needs more than 1.5: two more uses give it 2.5.
  p.use(1), p.use(1);
  EXPECT_EQ(p.admit(1, none, &ev), s);  // 2.5 > 1.5
  EXPECT_EQ(ev, 0);
  p.publish(s, 1);
  p.use(2), p.use(1);  // 8th use: halve
  EXPECT_EQ(p.score(1), 1.75);
  EXPECT_EQ(p.score(0), 0.75);
  // Seeded scores take part like counted ones.
  p.seed(3, 10);
  EXPECT_EQ(p.admit(3, none, &ev), s);
  EXPECT_EQ(ev, 1);
}

uint64_t rss_bytes() {
  std::ifstream f("/proc/self/status");
  std::string name;
  uint64_t kb = 0;
  while (f >> name) {
    if (name == "VmRSS:") {
      f >> kb;
      return kb << 10;
    }
    f.ignore(1 << 20, '\n');
  }
  return 0;
}

// Three tokens' requests (K3: 92 MoE layers x 16 each), at most half the
// slots, or none when one token's are over half the slots; 1/16 of the slots
// when not known; an explicit window is capped at half the slots.
TEST(TierPolicy, TheDefaultWindowIsThreeTokensRequestsAtMostHalfOrNone) {
  EXPECT_EQ(tier_window(10469, 1472), 4416u);  // real K3, 256 GB: 3 tokens' requests
  EXPECT_EQ(tier_window(8832, 1472), 4416u);   // exactly half
  EXPECT_EQ(tier_window(8831, 1472), 4415u);   // capped at half the slots
  EXPECT_EQ(tier_window(3545, 1472), 1772u);
  EXPECT_EQ(tier_window(2944, 1472), 1472u);  // one token's requests are exactly half
  EXPECT_EQ(tier_window(2943, 1472), 0u);
  EXPECT_EQ(tier_window(330, 1472), 0u);
  EXPECT_EQ(tier_window(48, 0), 3u);
  EXPECT_EQ(TierPolicy(100, 10, 0, 9).window(), 5u);
  EXPECT_EQ(TierPolicy(100, 10, 0, tier_window(10, 6)).window(), 0u);
}

// The recency window by hand: 4 slots, 2 of them the window. Every request
// is one group (use, then admit on a miss, publish), nothing pinned.
TEST(TierPolicy, MissesEnterTheWindowAndOnlyAHigherScoreMovesOnToMain) {
  TierPolicy p(10, 4, 1000, 2);
  EXPECT_EQ(p.window(), 2u);
  int evicted = -1;
  auto request = [&](int key) {
    p.use(key);
    if (p.slot_of(key) >= 0) return p.slot_of(key);
    const int s = p.admit(key, none, &evicted);
    if (s >= 0) p.publish(s, key);
    return s;
  };
  // Free slots (0 first): 0 and 1 fill the window, 2 and 3 the main part.
  EXPECT_EQ(request(0), 0);
  EXPECT_EQ(request(1), 1);
  EXPECT_EQ(request(2), 2);
  EXPECT_EQ(request(3), 3);
  EXPECT_EQ(p.resident_in_window(), 2u);
  EXPECT_EQ(request(0), 0);  // a hit: 0 is the window's most recent now
  // 4 misses: the window's least recent, 1 (score 1), is not above main's
  // lowest (2 and 3 at 1): it leaves the tier and 4 takes its slot.
  EXPECT_EQ(request(4), 1);
  EXPECT_EQ(evicted, 1);
  EXPECT_EQ(request(0), 0);  // 0 at 3; the window's order: 4, 0
  EXPECT_EQ(request(5), 1);  // 4 (1) leaves the same way
  EXPECT_EQ(evicted, 4);
  EXPECT_EQ(request(5), 1);  // a hit: 5 at 2; order 0, 5
  // 6 misses: the window's least recent is 0, at 3 above main's lowest (2 at
  // 1): 0 moves to the main part in its slot, 2 leaves, 6 takes 2's slot.
  EXPECT_EQ(request(6), 2);
  EXPECT_EQ(evicted, 2);
  EXPECT_EQ(p.slot_of(0), 0);
  EXPECT_EQ(p.slot_of(2), -1);
  EXPECT_EQ(p.resident_in_window(), 2u);  // 5 and 6
  EXPECT_EQ(p.resident(), 4u);
  // Pinned window residents are passed over: with 5 and 6 pinned, 9 (at 1)
  // falls back to the main part, where nothing is lower: bypass.
  p.use(9);
  EXPECT_EQ(p.admit(9, [&](int slot) { return slot == 1 || slot == 2; }, &evicted), -1);
}

// Filling far more experts than fit, with evictions, never grows the process
// beyond the tier's budget: the slots (faulted in at create) are the only
// memory it has.
TEST(RamTier, ResidentMemoryStaysWithinTheBudget) {
  const uint64_t span = 1 << 20, budget = 48ull << 20;
  const uint64_t rss0 = rss_bytes();
  ASSERT_GT(rss0, 0u);
  auto t = RamTier::create(budget + span / 2, span, 400);
  ASSERT_TRUE(t.ok()) << t.message();
  EXPECT_EQ((*t)->slots(), 48u);
  EXPECT_LE((*t)->bytes(), budget + span / 2);
  for (int round = 0; round < 3; ++round)
    for (int k = 0; k < 400; ++k) {
      const int key = (k * 7 + round) % 400;
      for (int u = 0; u < 1 + k % 3; ++u) {
        if ((*t)->lookup(key)) continue;
        if (uint8_t* slot = (*t)->reserve(key)) {
          std::memset(slot, key & 0xff, span);  // what a read does to its slot
          (*t)->publish(slot, key);
        }
        (*t)->unpin_all();
      }
    }
  const RamTierStats& st = (*t)->stats();
  EXPECT_GT(st.evictions, 0u);
  EXPECT_GT(st.hits, 0u);
  EXPECT_EQ(st.bypassed, 0u);  // a demand miss always enters through the window (none is pinned here)
  EXPECT_EQ((*t)->policy().window(), 3u);  // 48 / 16: create() had no requests per token
  EXPECT_EQ((*t)->policy().resident(), 48u);
  const uint64_t grown = rss_bytes() - rss0;
  EXPECT_GT(grown, budget / 2) << "the slots were not mapped";
  EXPECT_LE(grown, budget + (8ull << 20)) << "the tier grew beyond its budget";
  // Every resident slot still holds its own key's bytes.
  for (int key = 0; key < 400; ++key)
    if ((*t)->resident(key)) {
      const uint8_t* p = (*t)->lookup(key);
      ASSERT_NE(p, nullptr);
      EXPECT_EQ(p[0], key & 0xff);
      EXPECT_EQ(p[span - 1], key & 0xff);
    }
}

TEST(RamTier, BudgetBelowOneSpanIsAnError) {
  auto t = RamTier::create(4095, 4096, 10);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.message().find("hold no expert"), std::string::npos) << t.message();
}

}  // namespace
}  // namespace deltafin

namespace deltafin {
namespace {

TEST(HeatFile, RunsFadeAndTheFileRoundTripsOrIsRefused) {
  HeatFile h;
  h.store_id = "abc", h.moe_layers = 2, h.experts = 2;
  h.add_run({4, 0, 2, 0});
  h.add_run({0, 8, 2, 0});
  EXPECT_EQ(h.runs, 2u);
  EXPECT_DOUBLE_EQ(h.weight, 1.75);
  EXPECT_EQ(h.counts, (std::vector<double>{3, 8, 3.5, 0}));  // 0.75 x old + new
  EXPECT_DOUBLE_EQ(h.per_run(1), 8 / 1.75);
  const std::string dir = (std::filesystem::temp_directory_path() / fmt::format("deltafin-heat-{}", ::getpid())).string();
  std::filesystem::create_directories(dir);
  ASSERT_TRUE(save_heat(dir, h).ok());
  auto back = load_heat(dir, "abc", 2, 2);
  ASSERT_TRUE(back.ok()) << back.message();
  EXPECT_EQ(back->counts, h.counts);
  EXPECT_EQ(back->runs, 2u);
  EXPECT_NE(load_heat(dir, "other", 2, 2).message().find("is for store abc"), std::string::npos);
  EXPECT_NE(load_heat(dir, "abc", 3, 2).message().find("2 x 2 experts"), std::string::npos);
  {
    std::ofstream f(dir + "/heat.json");
    f << R"({"format":"deltafin-heat-1","store_id":"abc","moe_layers":2,"experts":2,"runs":1,"weight":1,"counts":[1,2,3]})";
  }
  EXPECT_NE(load_heat(dir, "abc", 2, 2).message().find("3 counts"), std::string::npos);
  {
    std::ofstream f(dir + "/heat.json");
    f << R"({"format":"deltafin-heat-1","store_id":"abc","moe_layers":1,"experts":2,"runs":1,"weight":1,"counts":[1,-2]})";
  }
  EXPECT_NE(load_heat_file(dir + "/heat.json").message().find("negative"), std::string::npos);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace deltafin
