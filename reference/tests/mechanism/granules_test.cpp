// Granule arithmetic and committed byte ranges: what every virtual-backing
// mechanism (host mmap, CUDA VMM) computes before it calls the system.
#include "ortmem/mechanism/vmm/granules.hpp"

#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "ortmem/mechanism/vmm/byte_range_set.hpp"
#include "ortmem/mechanism/vmm/mapped_bytes.hpp"

namespace ortmem::vmm {
namespace {

constexpr std::size_t kGranule = std::size_t{2} << 20;

TEST(Granules, RoundUpIsExactAndRefusesOverflow) {
  EXPECT_EQ(round_up(0, kGranule), 0U);
  EXPECT_EQ(round_up(1, kGranule), kGranule);
  EXPECT_EQ(round_up(kGranule, kGranule), kGranule);
  EXPECT_EQ(round_up(kGranule + 1, kGranule), 2 * kGranule);
  EXPECT_EQ(round_up(SIZE_MAX - kGranule + 1, kGranule), SIZE_MAX - kGranule + 1);
  EXPECT_EQ(round_up(SIZE_MAX - kGranule + 2, kGranule), std::nullopt);
  EXPECT_EQ(round_up(SIZE_MAX, kGranule), std::nullopt);
}

TEST(Granules, AByteRangeIsHeldByTheGranulesItTouches) {
  EXPECT_EQ(granules_holding(0, 0, kGranule).count, 0U) << "zero bytes touch no granule";
  EXPECT_EQ(granules_holding(0, 1, kGranule), (GranuleSpan{0, 1}));
  EXPECT_EQ(granules_holding(kGranule - 1, 2, kGranule), (GranuleSpan{0, 2})) << "two bytes across a boundary";
  EXPECT_EQ(granules_holding(kGranule, kGranule, kGranule), (GranuleSpan{1, 1}));
  EXPECT_EQ(granules_holding(100, 3 * kGranule, kGranule), (GranuleSpan{0, 4}));
  EXPECT_EQ(granules_holding(5 * kGranule + 7, 1, kGranule), (GranuleSpan{5, 1}));
}

TEST(Granules, RunsAreMaximalAndInAddressOrder) {
  const std::vector<bool> none(6, false);
  EXPECT_TRUE(contiguous_runs(none.size(), [&](std::size_t g) { return none[g]; }).empty());
  const std::vector<bool> all(4, true);
  EXPECT_EQ(contiguous_runs(all.size(), [&](std::size_t g) { return all[g]; }), (std::vector<GranuleSpan>{{0, 4}}));
  const std::vector<bool> holes = {true, true, false, true, false, false, true};
  EXPECT_EQ(contiguous_runs(holes.size(), [&](std::size_t g) { return holes[g]; }),
            (std::vector<GranuleSpan>{{0, 2}, {3, 1}, {6, 1}}));
  EXPECT_TRUE(contiguous_runs(0, [](std::size_t) { return true; }).empty());
}

TEST(Granules, RunsCoverExactlyTheMappedGranulesForAnyPattern) {
  std::mt19937 random(7);
  for (int round = 0; round < 500; ++round) {
    std::vector<bool> mapped(random() % 40);
    for (std::size_t g = 0; g < mapped.size(); ++g) mapped[g] = random() % 3 != 0;
    std::vector<bool> covered(mapped.size(), false);
    std::size_t previous_end = 0;
    bool first = true;
    for (const GranuleSpan run : contiguous_runs(mapped.size(), [&](std::size_t g) { return mapped[g]; })) {
      ASSERT_GT(run.count, 0U);
      if (!first) {
        ASSERT_GT(run.first, previous_end) << "two runs touch: they should have been one";
      }
      for (std::size_t g = run.first; g < run.end(); ++g) covered[g] = true;
      previous_end = run.end();
      first = false;
    }
    ASSERT_EQ(covered, mapped);
  }
}

// The set against a byte-per-byte model, over random adds and removes.
TEST(ByteRangeSet, MatchesAByteModelUnderRandomEdits) {
  std::mt19937 random(11);
  constexpr std::size_t kBytes = 64;
  for (int round = 0; round < 300; ++round) {
    ByteRangeSet set;
    std::vector<bool> model(kBytes, false);
    for (int step = 0; step < 20; ++step) {
      const std::size_t begin = random() % kBytes;
      const std::size_t end = begin + random() % (kBytes - begin + 1);
      const bool add = random() % 2 == 0;
      if (add) {
        set.add(begin, end);
      } else {
        set.remove(begin, end);
      }
      for (std::size_t b = begin; b < end; ++b) model[b] = add;
      // Disjoint, non-touching, non-empty ranges that hold exactly the model's bytes.
      std::vector<bool> held(kBytes, false);
      std::size_t last_end = 0;
      bool first = true;
      for (const auto& [first_byte, end_byte] : set.ranges()) {
        ASSERT_LT(first_byte, end_byte);
        if (!first) {
          ASSERT_GT(first_byte, last_end) << "ranges touch or overlap";
        }
        for (std::size_t b = first_byte; b < end_byte; ++b) held[b] = true;
        last_end = end_byte;
        first = false;
      }
      ASSERT_EQ(held, model);
      const std::size_t probe_begin = random() % kBytes;
      const std::size_t probe_end = probe_begin + random() % (kBytes - probe_begin + 1);
      bool expected = false;
      for (std::size_t b = probe_begin; b < probe_end; ++b) expected = expected || model[b];
      ASSERT_EQ(set.intersects(probe_begin, probe_end), expected) << probe_begin << ".." << probe_end;
    }
  }
}

TEST(MappedBytes, EachGranuleIsCountedOnceAndBadRangesAreRefused) {
  alignas(64) static unsigned char a[1];
  alignas(64) static unsigned char b[1];
  const AllocationCommitRange ranges[] = {
      {a, 4 * kGranule, 64, 10, 20},           // granule 0 of a
      {a, 4 * kGranule, 64, 100, 5},           // granule 0 again
      {a, 4 * kGranule, 64, kGranule - 1, 2},  // granules 0 and 1
      {b, kGranule, 64, 0, 0},                 // nothing
      {b, kGranule, 64, 0, 1},                 // granule 0 of b
  };
  EXPECT_EQ(*mapped_bytes_for_ranges(ranges, kGranule, Tier::kDevice), 3 * kGranule);
  const AllocationCommitRange outside[] = {{a, kGranule, 64, kGranule, 1}};
  EXPECT_FALSE(mapped_bytes_for_ranges(outside, kGranule, Tier::kDevice));
  EXPECT_EQ(*mapped_bytes_for_allocation(kGranule + 1, 64, kGranule, Tier::kDevice), 2 * kGranule);
  EXPECT_FALSE(mapped_bytes_for_allocation(64, 3, kGranule, Tier::kDevice)) << "alignment 3";
  EXPECT_FALSE(mapped_bytes_for_allocation(SIZE_MAX, 64, kGranule, Tier::kDevice)) << "overflow";
}

}  // namespace
}  // namespace ortmem::vmm
