// Virtual backing (VB), against any adapter that declares it.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ortmem/capability.hpp"
#include "support/process_memory.hpp"
#include "support/registry_harness.hpp"
#include "support/suite.hpp"

namespace ortmem::cts {
namespace {

constexpr std::size_t kMiB = std::size_t{1} << 20;

class VirtualBackingSuite : public CapabilitySuite<Capability::kVirtualBacking> {
 protected:
  void SetUp() override {
    CapabilitySuite::SetUp();
    if (ended()) return;
    backing_ = allocator_->as_virtual_backing();
    // Every test here measures in the granule a one-byte estimate names:
    // when that estimate is not a whole granule, VB-004 is what broke, not
    // the rule each test checks.
    ORTMEM_CTS_CHECKING("VB-004");
    auto granule = backing_->mapped_bytes_for_allocation(1, 1);
    ASSERT_TRUE(granule) << granule.error().message();
    granule_ = static_cast<std::size_t>(*granule);
    ASSERT_GT(granule_, 0U) << "the estimate for one byte maps nothing, so it is below what committing that byte maps";
  }

  // A reservation of `bytes`, all committed, every byte written `value`
  // (so every page is resident); null when it was refused.
  void* committed_and_filled(std::size_t bytes, std::uint8_t value) {
    void* ptr = reserve(bytes, {{0, bytes}});
    if (ptr != nullptr) adapter().memory().fill(ptr, bytes, value);
    return ptr;
  }

  // Releases `ptr` under the faults the caller armed, then clears them and
  // forgets the allocation. A Failed release changed nothing (ALLOC-018), so
  // releasing again with no fault armed must then succeed.
  AllocationReleaseOutcome release_under_faults(void* ptr, std::size_t bytes) {
    auto outcome = allocator_->release(ptr, bytes, 64);
    adapter().faults()->clear();
    if (outcome.is_failed()) {
      ORTMEM_CTS_CHECKING("ALLOC-018");
      const auto again = allocator_->release(ptr, bytes, 64);
      EXPECT_FALSE(again.is_failed()) << "after a Failed release, releasing again with no fault armed: "
                                      << again.describe();
    }
    forget(ptr);
    return outcome;
  }

  // Reserves `bytes` with its first granule and its second granule listed
  // as committed, while the second commit step is made to fail. True when
  // the reservation failed; one the fault missed is released again.
  bool reservation_fails(std::size_t bytes) {
    const ByteRange listed[] = {{0, 10}, {granule_, 2 * granule_}};
    (void)adapter().faults()->arm(FaultPoint::kCommit, 2);
    const auto reserved = backing_->allocate_committed(bytes, 64, listed);
    adapter().faults()->clear();
    if (reserved) (void)allocator_->release(*reserved, bytes, 64);
    return !reserved;
  }

  void* reserve(std::size_t bytes, std::vector<ByteRange> committed = {}) {
    auto ptr = backing_->allocate_committed(bytes, 64, committed);
    EXPECT_TRUE(ptr) << (ptr ? "" : ptr.error().message());
    if (!ptr) return nullptr;
    live_.emplace_back(*ptr, bytes);
    return *ptr;
  }
  std::size_t committed(void* ptr, std::size_t bytes) { return backing_->allocation_committed_bytes(ptr, bytes, 64); }
  bool holds(void* ptr, std::size_t bytes, std::uint8_t value) {
    return reads_as(adapter().memory(), ptr, bytes, value);
  }
  static void* at(void* base, std::size_t offset) { return static_cast<unsigned char*>(base) + offset; }
  // Whether a commit reported done is counted as `expected` committed bytes;
  // when it is not, VB-002 and VB-005 judge that, and a test that goes on to
  // write the bytes stands on broken ground (and must not write them: memory
  // a lying commit never mapped faults).
  bool counted(void* ptr, std::size_t bytes, std::size_t expected) {
    if (committed(ptr, bytes) == expected) return true;
    const std::string what = "a commit reported done is counted as " + std::to_string(committed(ptr, bytes)) +
                             " committed bytes, not " + std::to_string(expected);
    stands_on_broken(what);
    ADD_FAILURE() << what;
    return false;
  }

  // What releases that were made to meet a fault left open, told apart by
  // their outcome: a Complete release says the whole allocation went back
  // (ALLOC-017), a Quarantined one retaining 0 bytes that nothing is held
  // (ALLOC-019). Either may leave what a mechanism pools, so the releases of
  // a kind together may grow the descriptors by less than half their number;
  // one forgotten each time grows them by one each.
  struct ForgottenMemory {
    long complete_growth = 0;
    int complete = 0;
    long empty_growth = 0;
    int empty = 0;
    void count(const AllocationReleaseOutcome& outcome, long grown) {
      if (outcome.is_complete()) {
        complete_growth += grown;
        ++complete;
      } else if (outcome.residual()->retained_bytes == 0) {
        empty_growth += grown;
        ++empty;
      }
    }
    void expect_none(const std::string& releases) const {
      {
        ORTMEM_CTS_CHECKING("ALLOC-017");
        EXPECT_LT(complete_growth, std::max(1L, static_cast<long>(complete) / 2))
            << complete << " " << releases << " came back Complete, yet left " << complete_growth
            << " more open descriptors";
      }
      ORTMEM_CTS_CHECKING("ALLOC-019");
      EXPECT_LT(empty_growth, std::max(1L, static_cast<long>(empty) / 2))
          << empty << " " << releases << " were Quarantined retaining 0 bytes, yet left " << empty_growth
          << " more open descriptors";
    }
  };

  // Releases an allocation a fault met (once more if Failed: ALLOC-018) and
  // counts in `forgotten` the descriptors left open since `before`.
  void release_and_count(void* ptr, std::size_t bytes, long before, ForgottenMemory& forgotten) {
    auto outcome = allocator_->release(ptr, bytes, 64);
    if (outcome.is_failed()) {
      ORTMEM_CTS_CHECKING("ALLOC-018");
      outcome = allocator_->release(ptr, bytes, 64);
      ASSERT_FALSE(outcome.is_failed()) << "after a Failed release, releasing again: " << outcome.describe();
    }
    forgotten.count(outcome, static_cast<long>(open_descriptors_now()) - before);
  }

  VirtualBacking* backing_ = nullptr;
  std::size_t granule_ = 0;
};

TEST_P(VirtualBackingSuite, AllocateCommittedCommitsOnlyTheListedRanges) {
  covers("VB-001", "VB-004");
  const std::size_t bytes = 8 * granule_;
  void* ptr = reserve(bytes, {{0, 100}, {3 * granule_, 3 * granule_ + 10}});
  ASSERT_NE(ptr, nullptr);
  EXPECT_LE(committed(ptr, bytes), 2 * granule_) << "more than the listed ranges (rounded to granules) was committed";
  EXPECT_GE(committed(ptr, bytes), 2 * granule_);
  adapter().memory().fill(ptr, 100, 0x11);
  adapter().memory().fill(at(ptr, 3 * granule_), 10, 0x22);
  EXPECT_TRUE(holds(ptr, 100, 0x11));
  EXPECT_TRUE(holds(at(ptr, 3 * granule_), 10, 0x22));
}

// ALLOC-005 and ALLOC-006 for a reservation whose alignment no address space
// can hold: 2^62 is a power of two and a granule's span does not overflow, so
// the request is well formed and may be refused (as it must be wherever the
// system is asked for such a range) or honoured. Either way a pointer handed
// back is aligned as asked, and two handed back are two blocks, not one.
TEST_P(VirtualBackingSuite, AReservationAlignedBeyondTheAddressSpaceIsRefusedOrAligned) {
  covers("ALLOC-005", "ALLOC-006");
  constexpr std::size_t kAlign = std::size_t{1} << 62;
  std::vector<void*> returned;
  for (int call = 0; call < 2; ++call) {
    auto ptr = backing_->allocate_committed(granule_, kAlign, {});
    if (ptr) returned.push_back(*ptr);
  }
  {
    ORTMEM_CTS_CHECKING("ALLOC-005");
    for (void* ptr : returned) {
      EXPECT_NE(ptr, nullptr) << "a reservation aligned to 2^62 succeeded with a null pointer";
      EXPECT_EQ(reinterpret_cast<std::uintptr_t>(ptr) % kAlign, 0U)
          << "a reservation aligned to 2^62 succeeded at " << ptr;
    }
  }
  if (returned.size() == 2) {
    ORTMEM_CTS_CHECKING("ALLOC-006");
    const auto first = reinterpret_cast<std::uintptr_t>(returned[0]);
    const auto second = reinterpret_cast<std::uintptr_t>(returned[1]);
    EXPECT_TRUE(first + granule_ <= second || second + granule_ <= first)
        << "two live reservations of " << granule_ << " bytes overlap, at " << returned[0] << " and " << returned[1];
  }
  for (void* ptr : returned) (void)allocator_->release(ptr, granule_, kAlign);
}

TEST_P(VirtualBackingSuite, CommittedRangesAreUsableAndCounted) {
  covers("VB-002", "VB-005");
  const std::size_t bytes = 6 * granule_;
  void* ptr = reserve(bytes);
  ASSERT_NE(ptr, nullptr);
  EXPECT_EQ(committed(ptr, bytes), 0U);
  ASSERT_TRUE(backing_->commit_allocation_range(ptr, bytes, 64, granule_, 2 * granule_));
  EXPECT_EQ(committed(ptr, bytes), 2 * granule_);
  adapter().memory().fill(at(ptr, granule_), 2 * granule_, 0x5A);
  EXPECT_TRUE(holds(at(ptr, granule_), 2 * granule_, 0x5A));
  const AllocationCommitRange batch[] = {{ptr, bytes, 64, 4 * granule_, granule_}, {ptr, bytes, 64, 5 * granule_, 1}};
  ASSERT_TRUE(backing_->commit_allocation_ranges(batch));
  EXPECT_EQ(committed(ptr, bytes), 4 * granule_);
  adapter().memory().fill(at(ptr, 4 * granule_), granule_ + 1, 0x6B);
  EXPECT_TRUE(holds(at(ptr, 4 * granule_), granule_ + 1, 0x6B));
}

TEST_P(VirtualBackingSuite, DecommitUnmapsOnlyGranulesNothingElseNeeds) {
  covers("VB-003", "VB-005");
  const std::size_t bytes = 4 * granule_;
  void* ptr = reserve(bytes, {{0, bytes}});
  ASSERT_NE(ptr, nullptr);
  // Split the first granule: decommitting half of it unmaps nothing.
  auto half = backing_->decommit_allocation_range(ptr, bytes, 64, 0, granule_ / 2);
  ASSERT_TRUE(half) << half.error().message();
  EXPECT_EQ(*half, 0U) << "a granule that still backs committed bytes was counted as unmapped";
  EXPECT_EQ(committed(ptr, bytes), bytes);
  auto rest = backing_->decommit_allocation_range(ptr, bytes, 64, granule_ / 2, granule_ / 2);
  ASSERT_TRUE(rest);
  EXPECT_EQ(*rest, granule_) << "the granule's last committed bytes went, so the granule is unmapped";
  EXPECT_EQ(committed(ptr, bytes), 3 * granule_);
  auto two = backing_->decommit_allocation_range(ptr, bytes, 64, 2 * granule_, 2 * granule_);
  ASSERT_TRUE(two);
  EXPECT_EQ(*two, 2 * granule_);
  EXPECT_EQ(committed(ptr, bytes), granule_);
  // Still live and releasable.
  const auto outcome = allocator_->release(ptr, bytes, 64);
  ASSERT_TRUE(outcome.is_complete()) << outcome.describe();
  forget(ptr);
  EXPECT_EQ(outcome.unmapped_bytes(), granule_) << "release reports the bytes still mapped at release";
}

// VB-009 across histories that leave different granules mapped at release:
// sizes off the granule edges, nothing or everything committed, and ranges
// decommitted and recommitted in between.
TEST_P(VirtualBackingSuite, AReleaseUnmapsNoMoreThanTheAllocationCouldMap) {
  covers("VB-009");
  const std::size_t sizes[] = {1, granule_ - 1, granule_, granule_ + 1, 5 * granule_ + 7, 12 * granule_};
  for (const std::size_t bytes : sizes) {
    for (int history = 0; history < 3; ++history) {
      SCOPED_TRACE("bytes " + std::to_string(bytes) + ", history " + std::to_string(history));
      std::vector<ByteRange> ranges;
      if (history > 0) ranges.push_back({0, bytes});
      void* ptr = reserve(bytes, ranges);
      ASSERT_NE(ptr, nullptr);
      if (history == 2 && bytes > granule_) {
        // Every other granule out and back in: a release then meets many runs.
        for (std::size_t offset = 0; offset + granule_ <= bytes; offset += 2 * granule_) {
          ORTMEM_CTS_PRECONDITION();
          ASSERT_TRUE(backing_->decommit_allocation_range(ptr, bytes, 64, offset, granule_));
        }
        for (std::size_t offset = 0; offset + granule_ <= bytes; offset += 4 * granule_) {
          ORTMEM_CTS_PRECONDITION();
          ASSERT_TRUE(backing_->commit_allocation_range(ptr, bytes, 64, offset, granule_));
        }
      }
      const auto bound = backing_->mapped_bytes_for_allocation(bytes, 64);
      {
        ORTMEM_CTS_PRECONDITION();
        ASSERT_TRUE(bound) << bound.error().message();
      }
      const auto outcome = allocator_->release(ptr, bytes, 64);
      forget(ptr);
      {
        ORTMEM_CTS_PRECONDITION();
        ASSERT_TRUE(outcome.is_complete()) << outcome.describe();
      }
      EXPECT_LE(outcome.unmapped_bytes(), *bound)
          << "the release claims more unmapped bytes than the allocation could have had mapped";
    }
  }
  // A quarantined release counts what it did unmap; the same bound holds.
  if (adapter().faults() == nullptr) return;
  const std::size_t bytes = 5 * granule_;
  void* ptr = reserve(bytes, {{0, granule_}, {3 * granule_, 5 * granule_}});
  ASSERT_NE(ptr, nullptr);
  std::optional<AllocationReleaseOutcome> outcome;
  {
    ORTMEM_CTS_PRECONDITION();
    // An adapter whose release cannot fail part way (an nxmem plugin at
    // minor 0, whose deallocate can only say done or nothing) has no such point.
    if (!adapter().faults()->arm(FaultPoint::kReleaseUnmap, 2)) return;
    outcome = allocator_->release(ptr, bytes, 64);
    adapter().faults()->clear();
    if (!outcome->is_failed()) forget(ptr);
    ASSERT_FALSE(outcome->is_failed()) << outcome->describe();
  }
  EXPECT_LE(outcome->unmapped_bytes(), *backing_->mapped_bytes_for_allocation(bytes, 64))
      << "a quarantined release claims more unmapped bytes than the allocation could have had mapped";
}

// Decommitting every byte is not an end of life: only the allocator's
// release ends it, for an ordinary allocation and for lazy reservations
// committed fully, partly or not at all.
TEST_P(VirtualBackingSuite, DecommittingEverythingLeavesTheAllocationToRelease) {
  covers("ALLOC-014", "VB-003");
  const std::size_t bytes = 3 * granule_ + 5;
  for (int shape = 0; shape < 4; ++shape) {
    SCOPED_TRACE("shape " + std::to_string(shape));
    void* ptr = nullptr;
    if (shape == 0) {
      auto plain = allocator_->allocate(bytes, 64);
      ASSERT_TRUE(plain) << plain.error().message();
      ptr = *plain;
      live_.emplace_back(ptr, bytes);
    } else {
      std::vector<ByteRange> ranges;
      if (shape == 1) ranges.push_back({0, bytes});
      if (shape == 2) ranges.push_back({granule_, 2 * granule_});
      ptr = reserve(bytes, ranges);
      ASSERT_NE(ptr, nullptr);
    }
    {
      ORTMEM_CTS_PRECONDITION();
      ASSERT_TRUE(backing_->decommit_allocation_range(ptr, bytes, 64, 0, bytes));
    }
    const auto outcome = allocator_->release(ptr, bytes, 64);
    if (!outcome.is_failed()) forget(ptr);
    EXPECT_TRUE(outcome.is_complete()) << "after a decommit of every byte the allocation was no longer releasable: "
                                       << outcome.describe();
  }
}

// VB-003's "releases physical backing", seen by the kernel: the pages behind
// a decommitted range leave the process's resident memory, though the
// addresses stay reserved. A decommit that only takes access away (PROT_NONE
// without discarding the pages) keeps every byte resident. Judged on 16 MiB so
// that the process's own noise is far below the bound.
TEST_P(VirtualBackingSuite, ADecommitGivesItsPhysicalMemoryBack) {
  covers("VB-003");
  if (info().device.tier != Tier::kHost) {
    GTEST_SKIP() << std::string(kNotApplicable) << "device memory is not in the process's resident set";
  }
  const std::size_t bytes = std::max<std::size_t>(16 * kMiB, 4 * granule_);
  void* ptr = reserve(bytes, {{0, bytes}});
  ASSERT_NE(ptr, nullptr);
  if (!counted(ptr, bytes, bytes)) return;
  adapter().memory().fill(ptr, bytes, 0x2D);
  const std::size_t before = resident_bytes_now();
  const auto unmapped = backing_->decommit_allocation_range(ptr, bytes, 64, 0, bytes);
  const std::size_t after = resident_bytes_now();
  {
    ORTMEM_CTS_PRECONDITION();
    ASSERT_TRUE(unmapped) << unmapped.error().message();
  }
  const std::size_t dropped = before > after ? before - after : 0;
  EXPECT_GE(dropped, bytes / 2) << "decommitting " << bytes / kMiB << " MiB that were written lowered the process's "
                                << "resident memory by only " << dropped / kMiB << " MiB: the pages were kept";
}

// VB-003's "releases physical backing" for memory the kernel keeps outside
// the resident set: physical memory held as a file (a memfd, as a driver's
// handle may be) leaves the resident count when it is unmapped but lives on
// while its descriptor is open. Commit, write and decommit the same granules
// 64 times: a mechanism that pools what it decommitted holds at most one
// cycle's worth, one that never frees it holds a descriptor more per granule
// per cycle.
TEST_P(VirtualBackingSuite, DecommitCyclesHoldNoMoreThanOneCycleOfMemory) {
  covers("VB-003");
  constexpr int kCycles = 64;
  const std::size_t bytes = 8 * granule_;
  void* ptr = reserve(bytes);
  ASSERT_NE(ptr, nullptr);
  const std::size_t descriptors = open_descriptors_now();
  for (int cycle = 0; cycle < kCycles; ++cycle) {
    ORTMEM_CTS_PRECONDITION();
    ASSERT_TRUE(backing_->commit_allocation_range(ptr, bytes, 64, 0, bytes)) << "cycle " << cycle;
    if (!counted(ptr, bytes, bytes)) return;
    for (std::size_t g = 0; g < 8; ++g) adapter().memory().fill(at(ptr, g * granule_), 1, 0x3C);
    ASSERT_TRUE(backing_->decommit_allocation_range(ptr, bytes, 64, 0, bytes)) << "cycle " << cycle;
  }
  const std::size_t grown = open_descriptors_now() - std::min(descriptors, open_descriptors_now());
  EXPECT_LT(grown, std::size_t{kCycles / 2})
      << kCycles << " cycles of committing, writing and decommitting 8 granules "
      << "left " << grown << " more open descriptors: decommitted memory is kept";
}

// VB-011: a commit that fails part way keeps nothing it took. Fail the first,
// second or third mapping step of a commit of four granules, 64 times over:
// a mechanism that leaks what the failed call created (the handle of the
// granule whose mapping failed, or those it unmapped in its rollback) holds
// a descriptor more at each cycle. Then the same commit, unfaulted, works.
TEST_P(VirtualBackingSuite, FailedCommitsKeepNothingTheyTook) {
  covers("VB-011");
  ORTMEM_CTS_REQUIRE(Capability::kFaultInjection);
  constexpr int kCycles = 64;
  const std::size_t bytes = 4 * granule_;
  void* ptr = reserve(bytes);
  ASSERT_NE(ptr, nullptr);
  if (!adapter().faults()->arm(FaultPoint::kCommit, 1)) {
    GTEST_SKIP() << kNotApplicable << "the adapter has no fault point in a commit";
  }
  adapter().faults()->clear();
  const std::size_t descriptors = open_descriptors_now();
  int failed = 0;
  for (int cycle = 0; cycle < kCycles; ++cycle) {
    (void)adapter().faults()->arm(FaultPoint::kCommit, 1 + static_cast<std::uint64_t>(cycle % 3));
    const auto done = backing_->commit_allocation_range(ptr, bytes, 64, 0, bytes);
    adapter().faults()->clear();
    if (!done) {
      ++failed;
      continue;
    }
    ORTMEM_CTS_PRECONDITION();
    ASSERT_TRUE(backing_->decommit_allocation_range(ptr, bytes, 64, 0, bytes));
  }
  const std::size_t grown = open_descriptors_now() - std::min(descriptors, open_descriptors_now());
  EXPECT_LT(grown, std::size_t{kCycles / 2}) << failed << " commits failed part way and left " << grown
                                             << " more open descriptors: what they created was kept";
  EXPECT_EQ(committed(ptr, bytes), 0U) << "failed commits left bytes committed";
  const auto after = backing_->commit_allocation_range(ptr, bytes, 64, 0, bytes);
  ASSERT_TRUE(after) << "after the failed commits, the same commit with no fault armed: " << after.error().message();
  if (!counted(ptr, bytes, bytes)) return;
  adapter().memory().fill(ptr, bytes, 0x4B);
  EXPECT_TRUE(holds(ptr, bytes, 0x4B));
}

// VB-011 for allocate_committed: a reservation whose second listed range
// fails to commit leaves nothing, and the next reservation of the same shape
// (which the system often places at the same address) starts clean: a commit
// of a sub-granule range maps one granule, and its decommit unmaps it again.
// A mechanism that keeps the failed reservation's record, retires the address
// while the system hands it out again, or keeps what the failed call mapped,
// gets these wrong; 32 rounds make the last one show in the descriptors.
TEST_P(VirtualBackingSuite, AFailedReservationLeavesNothingForTheNextOne) {
  covers("VB-011", "VB-002", "VB-003");
  ORTMEM_CTS_REQUIRE(Capability::kFaultInjection);
  constexpr int kRounds = 32;
  const std::size_t bytes = 4 * granule_;
  if (!adapter().faults()->arm(FaultPoint::kCommit, 2)) {
    GTEST_SKIP() << kNotApplicable << "the adapter has no fault point in a commit";
  }
  adapter().faults()->clear();
  // The same steps with no fault armed, twice: what each must answer is
  // VB-002's, VB-003's and VB-006's to judge, and this test stands on it.
  for (int round = 0; round < 2; ++round) {
    auto fresh = backing_->allocate_committed(bytes, 64, {});
    if (!fresh) {
      stands_on_broken("a plain reservation was refused: " + fresh.error().message());
      break;
    }
    const bool plain = backing_->commit_allocation_range(*fresh, bytes, 64, 100, 100).has_value() &&
                       committed(*fresh, bytes) == granule_ &&
                       backing_->decommit_allocation_range(*fresh, bytes, 64, 100, 100).value_or(0) == granule_;
    const bool released = allocator_->release(*fresh, bytes, 64).is_complete();
    if (!plain || !released) {
      stands_on_broken("with no fault armed, a fresh reservation's one-granule commit, decommit or release went wrong");
      break;
    }
  }
  const std::size_t descriptors = open_descriptors_now();
  int failed = 0;
  for (int round = 0; round < kRounds && !HasFatalFailure(); ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    if (!reservation_fails(bytes)) continue;
    ++failed;
    void* ptr = reserve(bytes);
    ASSERT_NE(ptr, nullptr);
    {
      ORTMEM_CTS_CHECKING("VB-002");
      ASSERT_TRUE(backing_->commit_allocation_range(ptr, bytes, 64, 100, 100));
      EXPECT_EQ(committed(ptr, bytes), granule_) << "a fresh reservation after a failed one";
    }
    {
      ORTMEM_CTS_CHECKING("VB-003");
      const auto unmapped = backing_->decommit_allocation_range(ptr, bytes, 64, 100, 100);
      ASSERT_TRUE(unmapped) << unmapped.error().message();
      EXPECT_EQ(*unmapped, granule_) << "the only committed bytes were decommitted, yet their granule stayed mapped";
    }
    forget(ptr);
    ORTMEM_CTS_PRECONDITION();
    ASSERT_TRUE(allocator_->release(ptr, bytes, 64).is_complete());
  }
  if (failed == 0) GTEST_SKIP() << kNotApplicable << "no reservation met the fault (one mapping call for both ranges)";
  ORTMEM_CTS_CHECKING("VB-011");
  const std::size_t grown = open_descriptors_now() - std::min(descriptors, open_descriptors_now());
  EXPECT_LT(grown, std::size_t{kRounds / 2}) << failed << " reservations failed part way and left " << grown
                                             << " more open descriptors: what they mapped was kept";
}

// VB-011 seen by the kernel, on the host tier where a reservation is the
// process's own address space: a reservation whose second listed range fails
// to commit gives back the range it reserved, not only its record. 32 failed
// reservations of 16 MiB each would leave 512 MiB mapped if each kept its
// range; a mechanism that keeps nothing grows by the process's own noise.
TEST_P(VirtualBackingSuite, AFailedReservationGivesItsAddressSpaceBack) {
  covers("VB-011");
  ORTMEM_CTS_REQUIRE(Capability::kFaultInjection);
  if (info().device.tier != Tier::kHost) {
    GTEST_SKIP() << std::string(kNotApplicable) << "device address space is not in the process's address space";
  }
  if (!adapter().faults()->arm(FaultPoint::kCommit, 2)) {
    GTEST_SKIP() << kNotApplicable << "the adapter has no fault point in a commit";
  }
  adapter().faults()->clear();
  constexpr int kRounds = 32;
  const std::size_t bytes = std::max<std::size_t>(16 * kMiB, 4 * granule_);
  const std::size_t start = mapped_bytes_now();
  std::size_t failed = 0;
  for (int round = 0; round < kRounds; ++round) {
    if (!reservation_fails(bytes)) continue;
    ++failed;
  }
  if (failed == 0) GTEST_SKIP() << kNotApplicable << "no reservation met the fault (one mapping call for both ranges)";
  const std::size_t end = mapped_bytes_now();
  const std::size_t grown = end > start ? end - start : 0;
  EXPECT_LT(grown, failed * bytes / 2) << failed << " reservations of " << bytes / kMiB << " MiB failed part way and "
                                       << "the process maps " << grown / kMiB << " MiB more: their ranges were kept";
}

// VB-011 where access is a step of its own (a driver maps, then grants
// access): a commit whose grant fails at its first, second or third granule
// takes back the mapping it could not open, so the range is free again and
// the same commit, unfaulted, works. A mechanism that leaves the mapping in
// place, or records the granule as stuck though it took it back, refuses the
// retry for good.
TEST_P(VirtualBackingSuite, ACommitWhoseAccessGrantFailsLeavesTheRangeFree) {
  covers("VB-011", "VB-002");
  ORTMEM_CTS_REQUIRE(Capability::kFaultInjection);
  if (!adapter().faults()->arm(FaultPoint::kAccessGrant, std::uint64_t{1} << 40)) {
    GTEST_SKIP() << kNotApplicable
                 << "the adapter grants access in the same step that maps (no fault point of its own)";
  }
  adapter().faults()->clear();
  const std::size_t bytes = 4 * granule_;
  void* ptr = reserve(bytes);
  ASSERT_NE(ptr, nullptr);
  for (std::uint64_t nth = 1; nth <= 3 && !HasFatalFailure(); ++nth) {
    SCOPED_TRACE("access grant " + std::to_string(nth) + " failing");
    ASSERT_TRUE(adapter().faults()->arm(FaultPoint::kAccessGrant, nth));
    const auto done = backing_->commit_allocation_range(ptr, bytes, 64, 0, bytes);
    adapter().faults()->clear();
    if (!done) {
      ORTMEM_CTS_CHECKING("VB-011");
      EXPECT_EQ(committed(ptr, bytes), 0U) << "the failed commit left bytes committed";
      const auto retried = backing_->commit_allocation_range(ptr, bytes, 64, 0, bytes);
      ASSERT_TRUE(retried) << "the same commit with no fault armed: " << retried.error().message();
    }
    if (!counted(ptr, bytes, bytes)) return;
    {
      ORTMEM_CTS_CHECKING("VB-002");
      adapter().memory().fill(ptr, bytes, static_cast<std::uint8_t>(0x50 + nth));
      EXPECT_TRUE(holds(ptr, bytes, static_cast<std::uint8_t>(0x50 + nth)));
    }
    ORTMEM_CTS_PRECONDITION();
    ASSERT_TRUE(backing_->decommit_allocation_range(ptr, bytes, 64, 0, bytes));
  }
}

// A release whose giving back of one granule's physical memory fails, 24
// times over. Complete says the whole allocation went back (ALLOC-017), and a
// Quarantined residual that retains no bytes says nothing is held
// (ALLOC-019): in both cases the process holds no more descriptors per release
// than memory a mechanism pools, so the cycles judged together grow the count
// by less than half their number. A mechanism that forgets the memory it could
// not free answers one of the two while a descriptor stays open each time.
TEST_P(VirtualBackingSuite, AFailedPhysicalFreeIsRetainedNotForgotten) {
  covers("ALLOC-017", "ALLOC-019", "ALLOC-018");
  ORTMEM_CTS_REQUIRE(Capability::kFaultInjection);
  if (!adapter().faults()->arm(FaultPoint::kPhysicalFree, std::uint64_t{1} << 40)) {
    GTEST_SKIP() << kNotApplicable << "the adapter has no fault point where physical memory is given back";
  }
  adapter().faults()->clear();
  constexpr int kCycles = 24;
  const std::size_t bytes = 4 * granule_;
  ForgottenMemory forgotten;
  for (int cycle = 0; cycle < kCycles && !HasFatalFailure(); ++cycle) {
    const auto before = static_cast<long>(open_descriptors_now());
    auto ptr = backing_->allocate_committed(bytes, 64, std::vector<ByteRange>{{0, bytes}});
    {
      ORTMEM_CTS_PRECONDITION();
      ASSERT_TRUE(ptr) << ptr.error().message();
    }
    if (!counted(*ptr, bytes, bytes)) {
      (void)allocator_->release(*ptr, bytes, 64);
      return;
    }
    for (std::size_t g = 0; g < 4; ++g) adapter().memory().fill(at(*ptr, g * granule_), 1, 0x6A);
    (void)adapter().faults()->arm(FaultPoint::kPhysicalFree, 1 + static_cast<std::uint64_t>(cycle % 4));
    auto outcome = allocator_->release(*ptr, bytes, 64);
    adapter().faults()->clear();
    if (outcome.is_failed()) {
      ORTMEM_CTS_CHECKING("ALLOC-018");
      outcome = allocator_->release(*ptr, bytes, 64);
      ASSERT_FALSE(outcome.is_failed()) << "after a Failed release, releasing again with no fault armed: "
                                        << outcome.describe();
    }
    forgotten.count(outcome, static_cast<long>(open_descriptors_now()) - before);
  }
  forgotten.expect_none("releases whose physical free was made to fail");
}

// VB-011 when the taking back fails too: two faults meet in one commit (a
// mapping step fails and the unmap that should take back an earlier granule
// fails; an access grant fails and so does the unmap of the granule it could
// not open; a mapping step fails and so does giving back that granule's
// physical memory). What the commit could not take back stays owned by the
// allocation: a commit over it afterwards is refused or leaves every byte
// writable (VB-002), and the allocation's release either gives everything
// back or retains it (a Complete release, or a Quarantined one retaining 0
// bytes, with a descriptor left open each time is memory forgotten:
// ALLOC-017, ALLOC-019). Each pair is judged on its own: one pair's clean
// releases must not hide another's forgotten memory. Combinations the
// adapter cannot arm are skipped.
TEST_P(VirtualBackingSuite, WhatAFailedCommitCouldNotTakeBackStaysOwned) {
  covers("VB-011", "VB-002", "ALLOC-017", "ALLOC-019", "ALLOC-018");
  ORTMEM_CTS_REQUIRE(Capability::kFaultInjection);
  struct Pair {
    FaultPoint first;
    std::uint64_t first_nth;
    FaultPoint second;
  };
  std::vector<Pair> pairs;
  for (const Pair& pair :
       {Pair{FaultPoint::kCommit, 2, FaultPoint::kDecommit}, Pair{FaultPoint::kAccessGrant, 1, FaultPoint::kDecommit},
        Pair{FaultPoint::kCommit, 1, FaultPoint::kPhysicalFree}}) {
    if (can_fail_together(pair.first, pair.second)) pairs.push_back(pair);
  }
  if (pairs.empty()) GTEST_SKIP() << kNotApplicable << "the adapter cannot fail a commit and its taking back at once";
  constexpr int kRounds = 8;
  const std::size_t bytes = 4 * granule_;
  for (const Pair& pair : pairs) {
    const std::string points = "fault points " + std::to_string(static_cast<int>(pair.first)) + " and " +
                               std::to_string(static_cast<int>(pair.second));
    ForgottenMemory forgotten;
    for (int round = 0; round < kRounds && !HasFatalFailure(); ++round) {
      SCOPED_TRACE(points + ", round " + std::to_string(round));
      const auto before = static_cast<long>(open_descriptors_now());
      auto reserved = backing_->allocate_committed(bytes, 64, {});
      {
        ORTMEM_CTS_PRECONDITION();
        ASSERT_TRUE(reserved) << reserved.error().message();
      }
      void* ptr = *reserved;
      (void)adapter().faults()->arm(pair.first, pair.first_nth);
      (void)adapter().faults()->arm(pair.second, 1);
      const auto done = backing_->commit_allocation_range(ptr, bytes, 64, 0, bytes);
      adapter().faults()->clear();
      const auto again = done ? done : backing_->commit_allocation_range(ptr, bytes, 64, 0, bytes);
      if (again) {
        ORTMEM_CTS_CHECKING("VB-002");
        for (std::size_t g = 0; g < 4; ++g) {
          const WriteProbe probe = adapter().memory().probe_write(at(ptr, g * granule_), 0x77);
          ASSERT_NE(probe.outcome, WriteProbe::Outcome::kRefused)
              << "granule " << g << " of a commit reported done refuses writes: " << probe.detail;
        }
        adapter().memory().fill(ptr, bytes, 0x77);
        EXPECT_TRUE(holds(ptr, bytes, 0x77));
        EXPECT_EQ(committed(ptr, bytes), bytes) << "a commit of the whole allocation reported done";
      }
      release_and_count(ptr, bytes, before, forgotten);
    }
    forgotten.expect_none("releases after a commit that met " + points);
  }
}

// The same when a decommit fails part way and putting an earlier granule
// back fails too: the allocation is damaged, and what it could neither give
// back nor map again must still be its own, so its release gives everything
// back or retains it (ALLOC-017, ALLOC-019). A mechanism that drops the
// physical memory it could not map back from its books forgets it.
TEST_P(VirtualBackingSuite, WhatAFailedDecommitCouldNotPutBackStaysOwned) {
  covers("ALLOC-017", "ALLOC-019", "ALLOC-018");
  ORTMEM_CTS_REQUIRE(Capability::kFaultInjection);
  if (!can_fail_together(FaultPoint::kDecommit, FaultPoint::kCommit))
    GTEST_SKIP() << kNotApplicable << "the adapter cannot fail a decommit and its putting back at once";
  constexpr int kRounds = 6;
  const std::size_t bytes = 4 * granule_;
  ForgottenMemory forgotten;
  for (int round = 0; round < kRounds && !HasFatalFailure(); ++round) {
    // The second, third or fourth unmap fails, so one to three granules are to be put back.
    const std::uint64_t failing_unmap = 2 + static_cast<std::uint64_t>(round % 3);
    SCOPED_TRACE("unmap " + std::to_string(failing_unmap) + " fails, round " + std::to_string(round));
    const auto before = static_cast<long>(open_descriptors_now());
    const std::vector<ByteRange> whole{{0, bytes}};
    auto reserved = backing_->allocate_committed(bytes, 64, whole);
    {
      ORTMEM_CTS_PRECONDITION();
      ASSERT_TRUE(reserved) << reserved.error().message();
    }
    void* ptr = *reserved;
    (void)adapter().faults()->arm(FaultPoint::kDecommit, failing_unmap);
    (void)adapter().faults()->arm(FaultPoint::kCommit, 1);
    (void)backing_->decommit_allocation_range(ptr, bytes, 64, 0, bytes);
    adapter().faults()->clear();
    release_and_count(ptr, bytes, before, forgotten);
  }
  forgotten.expect_none("releases after a decommit that could not put back what it took");
}

// The empty range at the very end of an allocation lies inside it: commit
// and decommit treat it alike, and a decommit of it unmaps nothing. A
// mechanism that takes it from one and refuses it from the other cannot
// recommit what it decommitted (VB-006), or cannot decommit what it committed (VB-003).
TEST_P(VirtualBackingSuite, TheEmptyRangeAtTheEndIsTreatedAlikeByCommitAndDecommit) {
  covers("VB-003", "VB-006");
  for (std::size_t bytes : {2 * granule_, 2 * granule_ + 5}) {
    SCOPED_TRACE(std::to_string(bytes) + " bytes");
    void* ptr = reserve(bytes, {{0, bytes}});
    ASSERT_NE(ptr, nullptr);
    const auto decommitted = backing_->decommit_allocation_range(ptr, bytes, 64, bytes, 0);
    const auto committed_again = backing_->commit_allocation_range(ptr, bytes, 64, bytes, 0);
    if (decommitted) {
      ORTMEM_CTS_CHECKING("VB-003");
      EXPECT_EQ(*decommitted, 0U) << "an empty decommit unmapped bytes";
      ORTMEM_CTS_CHECKING("VB-006");
      EXPECT_TRUE(committed_again) << "the empty range at the end was decommitted but cannot be committed again: "
                                   << committed_again.error().message();
    } else {
      ORTMEM_CTS_CHECKING("VB-003");
      EXPECT_FALSE(committed_again) << "the empty range at the end commits, but its decommit is refused: "
                                    << decommitted.error().message();
    }
    EXPECT_EQ(committed(ptr, bytes), (bytes + granule_ - 1) / granule_ * granule_);
  }
}

TEST_P(VirtualBackingSuite, EstimatesAreWholeGranulesAndNeverBelowWhatCommitMaps) {
  covers("VB-004");
  for (std::size_t bytes : {std::size_t{1}, granule_ - 1, granule_, granule_ + 1, 5 * granule_ + 3}) {
    auto estimate = backing_->mapped_bytes_for_allocation(bytes, 64);
    ASSERT_TRUE(estimate);
    EXPECT_EQ(*estimate % granule_, 0U);
    void* ptr = reserve(bytes, {{0, bytes}});
    ASSERT_NE(ptr, nullptr);
    EXPECT_GE(*estimate, committed(ptr, bytes)) << bytes << " bytes";
  }
  // Two tiny ranges in one granule, one in another: estimated as what they map.
  const std::size_t bytes = 4 * granule_;
  void* ptr = reserve(bytes);
  ASSERT_NE(ptr, nullptr);
  const AllocationCommitRange ranges[] = {
      {ptr, bytes, 64, 0, 8}, {ptr, bytes, 64, 16, 8}, {ptr, bytes, 64, 2 * granule_, 8}};
  auto estimate = backing_->mapped_bytes_for_allocation_ranges(ranges);
  ASSERT_TRUE(estimate);
  ASSERT_TRUE(backing_->commit_allocation_ranges(ranges));
  EXPECT_GE(*estimate, committed(ptr, bytes));
  EXPECT_EQ(*estimate % granule_, 0U);
  // Never past the span of what the ranges name: a sum that wraps, or a
  // range counted once per byte, is not "erring high".
  const auto whole = backing_->mapped_bytes_for_allocation(bytes, 64);
  ASSERT_TRUE(whole);
  EXPECT_LE(*estimate, *whole) << "three ranges of one allocation of " << bytes << " bytes";
  const AllocationCommitRange one_each[] = {{ptr, bytes, 64, granule_, granule_ + 1}, ranges[0]};
  const auto pair = backing_->mapped_bytes_for_allocation_ranges(one_each);
  ASSERT_TRUE(pair) << pair.error().message();
  EXPECT_LE(*pair, *whole) << "two ranges of one allocation of " << bytes << " bytes";
  EXPECT_GE(*pair, 3 * granule_) << "two ranges that touch three granules";
}

// A request commit accepts is estimated, down to the empty range at the very
// end of an allocation; a malformed one is refused as allocate refuses it.
TEST_P(VirtualBackingSuite, EstimatesAnswerWhatCommitAcceptsAndRefuseWhatAllocateRefuses) {
  covers("VB-004");
  for (std::size_t bytes : {4 * granule_, 4 * granule_ - 1}) {
    void* ptr = reserve(bytes);
    ASSERT_NE(ptr, nullptr);
    const AllocationCommitRange at_end[] = {{ptr, bytes, 64, bytes, 0}};
    if (!backing_->commit_allocation_ranges(at_end)) continue;  // refusing it everywhere is consistent too
    const auto estimate = backing_->mapped_bytes_for_allocation_ranges(at_end);
    ASSERT_TRUE(estimate) << "an empty range at the end of " << bytes
                          << " bytes commits but its estimate is refused: " << estimate.error().message();
    EXPECT_EQ(*estimate, 0U);
  }
  const auto misaligned = backing_->mapped_bytes_for_allocation(64, 3);
  ASSERT_FALSE(misaligned) << "alignment 3 was estimated at " << *misaligned << " bytes";
  EXPECT_EQ(misaligned.error().kind(), MemoryError::Kind::kInvalidRequest) << misaligned.error().message();
  const auto huge = backing_->mapped_bytes_for_allocation(SIZE_MAX - 1, 64);
  ASSERT_FALSE(huge) << SIZE_MAX - 1 << " bytes, which overflow when rounded to whole granules, were estimated";
  EXPECT_EQ(huge.error().kind(), MemoryError::Kind::kInvalidRequest) << huge.error().message();
}

TEST_P(VirtualBackingSuite, ADecommittedRangeCanBeCommittedAgain) {
  covers("VB-006");
  // Again and again, over the same bytes and over others: a mechanism that
  // recycles what it decommitted must keep serving the second recommit too.
  const std::size_t bytes = 4 * granule_;
  void* ptr = committed_and_filled(bytes, 0x77);
  ASSERT_NE(ptr, nullptr);
  const ByteRange ranges[] = {
      {0, bytes},   {granule_, 2 * granule_}, {0, bytes}, {2 * granule_, 4 * granule_}, {granule_, 2 * granule_},
      {0, granule_}};
  std::uint8_t pattern = 0x80;
  for (const ByteRange& range : ranges) {
    SCOPED_TRACE("bytes [" + std::to_string(range.begin) + ", " + std::to_string(range.end) + ")");
    const std::size_t length = range.end - range.begin;
    {
      ORTMEM_CTS_PRECONDITION();
      ASSERT_TRUE(backing_->decommit_allocation_range(ptr, bytes, 64, range.begin, length));
    }
    auto again = backing_->commit_allocation_range(ptr, bytes, 64, range.begin, length);
    ASSERT_TRUE(again) << "a decommitted range could not be committed again: " << again.error().message();
    adapter().memory().fill(at(ptr, range.begin), length, ++pattern);
    EXPECT_TRUE(holds(at(ptr, range.begin), length, pattern));
    EXPECT_EQ(committed(ptr, bytes), bytes);
  }
}

TEST_P(VirtualBackingSuite, InvalidTargetsAreRefusedAndChangeNothing) {
  covers("VB-007");
  const std::size_t bytes = 2 * granule_;
  void* ptr = reserve(bytes, {{0, granule_}});
  ASSERT_NE(ptr, nullptr);
  adapter().memory().fill(ptr, granule_, 0x42);
  EXPECT_FALSE(backing_->commit_allocation_range(ptr, bytes, 64, granule_, bytes)) << "range past the end";
  EXPECT_FALSE(backing_->commit_allocation_range(ptr, bytes, 64, SIZE_MAX, 2)) << "offset overflow";
  EXPECT_FALSE(backing_->decommit_allocation_range(ptr, bytes, 64, 0, bytes + 1)) << "decommit past the end";
  EXPECT_FALSE(backing_->commit_allocation_range(ptr, bytes + 1, 64, 0, 1)) << "wrong allocation size";
  alignas(64) static unsigned char not_ours[64];
  EXPECT_FALSE(backing_->commit_allocation_range(not_ours, 64, 64, 0, 64)) << "not an allocation";
  EXPECT_FALSE(backing_->decommit_allocation_range(not_ours, 64, 64, 0, 64));
  EXPECT_EQ(committed(ptr, bytes), granule_);
  EXPECT_TRUE(holds(ptr, granule_, 0x42));
}

TEST_P(VirtualBackingSuite, AFailedDecommitChangesNothingOrSaysWhat) {
  covers("VB-008");
  ORTMEM_CTS_REQUIRE(Capability::kFaultInjection);
  const std::size_t bytes = 4 * granule_;
  void* ptr = committed_and_filled(bytes, 0x31);
  ASSERT_NE(ptr, nullptr);
  if (!adapter().faults()->arm(FaultPoint::kDecommit, 3)) {  // fail part way through four granules
    GTEST_SKIP() << kNotApplicable << "the adapter has no fault point in a decommit";
  }
  auto decommitted = backing_->decommit_allocation_range(ptr, bytes, 64, granule_, 3 * granule_);
  adapter().faults()->clear();
  ASSERT_FALSE(decommitted) << "a decommit that failed part way reported success";
  EXPECT_EQ(committed(ptr, bytes), bytes) << "the failed decommit left a partial change";
  // Every byte, including those of the granules unmapped before the failure,
  // is mapped again with its contents.
  EXPECT_TRUE(holds(ptr, bytes, 0x31)) << "the failed decommit lost bytes it should have rolled back";
  adapter().memory().fill(at(ptr, 3 * granule_), granule_, 0x32);  // still writable
  EXPECT_TRUE(holds(at(ptr, 3 * granule_), granule_, 0x32));
}

// VB-003's "really stopped being mapped", seen by the kernel on the host
// tier: the bytes a decommit counts as unmapped have left the process's
// resident memory. One granule alone, and a run of 16 MiB: a mechanism that
// gives back one granule too few keeps all of a lone granule's pages. Only a
// count of a MiB or more is judged (a sanitizer's allocations are noise).
TEST_P(VirtualBackingSuite, ADecommitGaveBackWhatItCountsUnmapped) {
  covers("VB-003");
  if (info().device.tier != Tier::kHost) {
    GTEST_SKIP() << std::string(kNotApplicable) << "device memory is not in the process's resident set";
  }
  const std::size_t run = std::max<std::size_t>(1, 16 * kMiB / granule_);
  int judged = 0;
  for (const std::size_t granules : {std::size_t{1}, run}) {
    SCOPED_TRACE(std::to_string(granules) + " granules");
    const std::size_t bytes = (granules + 1) * granule_;
    void* ptr = committed_and_filled(bytes, 0x2B);
    ASSERT_NE(ptr, nullptr);
    const std::size_t before = resident_bytes_now();
    const auto unmapped = backing_->decommit_allocation_range(ptr, bytes, 64, granule_, granules * granule_);
    const std::size_t after = resident_bytes_now();
    ASSERT_TRUE(unmapped) << unmapped.error().message();
    if (*unmapped < kMiB) continue;
    ++judged;
    const std::size_t dropped = before > after ? before - after : 0;
    ORTMEM_CTS_CHECKING("VB-003");
    EXPECT_GE(dropped, *unmapped / 2) << "the decommit counts " << *unmapped
                                      << " bytes unmapped, but the process's resident memory fell by only " << dropped;
  }
  if (judged == 0) GTEST_SKIP() << kNotApplicable << "no decommit unmapped a MiB or more";
}

// VB-008 where a decommit gives physical memory back: a failure there, after
// some granules' bytes were already dropped, cannot be undone, so an error
// that leaves them counted as committed reports a change as none. Three
// granules are decommitted with the second giving back made to fail: the
// call succeeds having decommitted all three, or what it leaves committed
// keeps its bytes (a count in between says what changed).
TEST_P(VirtualBackingSuite, AFailedDiscardInADecommitLosesNoBytes) {
  covers("VB-008");
  ORTMEM_CTS_REQUIRE(Capability::kFaultInjection);
  const std::size_t bytes = 4 * granule_;
  void* ptr = committed_and_filled(bytes, 0x5C);
  ASSERT_NE(ptr, nullptr);
  if (!adapter().faults()->arm(FaultPoint::kPhysicalFree, 2)) {
    GTEST_SKIP() << kNotApplicable << "the adapter has no fault point where physical memory is given back";
  }
  auto decommitted = backing_->decommit_allocation_range(ptr, bytes, 64, granule_, 3 * granule_);
  adapter().faults()->clear();
  const std::size_t left = committed(ptr, bytes);
  if (decommitted) {
    EXPECT_EQ(left, granule_) << "a decommit reported success, yet " << left << " bytes are still committed";
  } else if (left == bytes) {
    EXPECT_TRUE(holds(ptr, bytes, 0x5C)) << "a failed decommit that left every byte committed lost some of them";
  }
  EXPECT_TRUE(holds(ptr, granule_, 0x5C)) << "the granule outside the decommitted range lost its bytes";
}

TEST_P(VirtualBackingSuite, APartialReleaseIsQuarantinedWithItsResidual) {
  covers("ALLOC-019", "REL-009");
  ORTMEM_CTS_REQUIRE(Capability::kFaultInjection);
  // Two mapped runs with a hole between: the second unmap fails.
  const std::size_t bytes = 5 * granule_;
  void* ptr = reserve(bytes, {{0, granule_}, {3 * granule_, 5 * granule_}});
  ASSERT_NE(ptr, nullptr);
  if (!adapter().faults()->arm(FaultPoint::kReleaseUnmap, 2)) {
    GTEST_SKIP() << kNotApplicable << "the adapter has no fault point in a release's unmap";
  }
  const auto outcome = allocator_->release(ptr, bytes, 64);
  adapter().faults()->clear();
  ASSERT_TRUE(outcome.is_quarantined()) << outcome.describe();
  forget(ptr);  // never releasable again
  EXPECT_EQ(outcome.state(), AllocationReleaseState::kPartiallyUnmapped);
  EXPECT_EQ(outcome.accounting()->allocation_bytes, bytes);
  EXPECT_EQ(outcome.unmapped_bytes(), granule_);
  EXPECT_EQ(outcome.residual()->retained_bytes, 2 * granule_);
  EXPECT_EQ(outcome.residual()->address, reinterpret_cast<std::uintptr_t>(ptr));
  EXPECT_EQ(outcome.residual()->reason.kind, QuarantineReason::Kind::kPartialRelease);
  EXPECT_TRUE(allocator_->release(ptr, bytes, 64).is_failed()) << "a quarantined allocation was released again";
}

// ALLOC-019's residual when a release stops part way after a physical free
// before the stop failed too: the bytes still mapped are still held, so the
// retained count is at least those, whatever else the mechanism keeps (the
// memory it could not free, for one).
TEST_P(VirtualBackingSuite, AResidualRetainsAtLeastWhatIsStillMapped) {
  covers("ALLOC-019", "ALLOC-018");
  ORTMEM_CTS_REQUIRE(Capability::kFaultInjection);
  const std::size_t bytes = 5 * granule_;
  void* ptr = reserve(bytes, {{0, granule_}, {3 * granule_, 5 * granule_}});
  ASSERT_NE(ptr, nullptr);
  if (!counted(ptr, bytes, 3 * granule_)) return;
  const bool armed =
      adapter().faults()->arm(FaultPoint::kReleaseUnmap, 2) && adapter().faults()->arm(FaultPoint::kPhysicalFree, 1);
  if (!armed) {
    adapter().faults()->clear();
    GTEST_SKIP() << kNotApplicable << "the adapter cannot fail a release's unmap and a physical free at once";
  }
  const auto outcome = release_under_faults(ptr, bytes);
  if (!outcome.is_quarantined()) GTEST_SKIP() << kNotApplicable << "the release was " << outcome.describe();
  ORTMEM_CTS_CHECKING("ALLOC-019");
  const std::uint64_t mapped = 3 * granule_;
  const std::uint64_t still_mapped = mapped - std::min(mapped, outcome.unmapped_bytes());
  EXPECT_GE(outcome.residual()->retained_bytes, still_mapped)
      << "a release of " << mapped << " mapped bytes unmapped " << outcome.unmapped_bytes()
      << " and stopped, yet retains only " << outcome.residual()->retained_bytes << ": " << outcome.describe();
}

// A release that unmapped every run and then stopped (freeing the reserved
// addresses failed) is Quarantined with nothing mapped. What it retains is
// memory of the allocation's own, mapped or physical, so whole granules:
// a count of a byte or two is no amount such a mechanism can hold, and it
// would go into a governor's books as quarantined memory.
TEST_P(VirtualBackingSuite, AQuarantinedReleaseRetainsWholeGranules) {
  covers("ALLOC-019", "ALLOC-018");
  ORTMEM_CTS_REQUIRE(Capability::kFaultInjection);
  const std::size_t bytes = 3 * granule_;
  void* ptr = reserve(bytes, {{0, bytes}});
  ASSERT_NE(ptr, nullptr);
  if (!adapter().faults()->arm(FaultPoint::kReleaseUnmap, 2)) {
    GTEST_SKIP() << kNotApplicable << "the adapter has no fault point in a release's unmap";
  }
  const auto outcome = release_under_faults(ptr, bytes);
  if (!outcome.is_quarantined()) GTEST_SKIP() << kNotApplicable << "the release was " << outcome.describe();
  ORTMEM_CTS_CHECKING("ALLOC-019");
  EXPECT_EQ(outcome.residual()->retained_bytes % granule_, 0U)
      << "a quarantined release retains " << outcome.residual()->retained_bytes << " bytes, not whole granules of "
      << granule_ << ": " << outcome.describe();
}

// ALLOC-019's "the bytes actually unmapped", seen by the kernel: when a
// release stops part way, the runs it counts as unmapped have left the
// process's resident memory. A first run of many granules, away from the
// allocation's start, is unmapped and a second, one granule at the end, is
// made to fail: a mechanism that unmaps the wrong addresses, or counts a run it
// never unmapped, keeps the first run's pages.
TEST_P(VirtualBackingSuite, AQuarantinedReleaseGaveBackWhatItCountsUnmapped) {
  covers("ALLOC-019", "ALLOC-018");
  ORTMEM_CTS_REQUIRE(Capability::kFaultInjection);
  if (info().device.tier != Tier::kHost) {
    GTEST_SKIP() << std::string(kNotApplicable) << "device memory is not in the process's resident set";
  }
  const std::size_t run = std::max<std::size_t>(1, 16 * kMiB / granule_);
  const std::size_t bytes = (2 * run + 2) * granule_;
  void* ptr = reserve(bytes, {{run * granule_, 2 * run * granule_}, {bytes - 1, bytes}});
  ASSERT_NE(ptr, nullptr);
  if (!counted(ptr, bytes, (run + 1) * granule_)) return;
  adapter().memory().fill(at(ptr, run * granule_), run * granule_, 0x1F);
  adapter().memory().fill(at(ptr, bytes - 1), 1, 0x1F);
  if (!adapter().faults()->arm(FaultPoint::kReleaseUnmap, 2)) {
    GTEST_SKIP() << kNotApplicable << "the adapter has no fault point in a release's unmap";
  }
  const std::size_t before = resident_bytes_now();
  const auto outcome = release_under_faults(ptr, bytes);
  const std::size_t after = resident_bytes_now();
  if (!outcome.is_quarantined()) GTEST_SKIP() << kNotApplicable << "the release was " << outcome.describe();
  // A count of a few pages is within the process's own noise (a sanitizer's
  // allocations, for one); only a count of a MiB or more is judged.
  if (outcome.unmapped_bytes() < kMiB) return;
  const std::size_t dropped = before > after ? before - after : 0;
  ORTMEM_CTS_CHECKING("ALLOC-019");
  EXPECT_GE(dropped, outcome.unmapped_bytes() / 2)
      << "the quarantined release counts " << outcome.unmapped_bytes() << " bytes unmapped, but the process's resident "
      << "memory fell by only " << dropped;
}

TEST_P(VirtualBackingSuite, APartialReleaseThroughTheRegistryIsRecorded) {
  covers("REL-009", "OWN-008");
  ORTMEM_CTS_REQUIRE(Capability::kFaultInjection);
  RegistryHarness harness(adapter());
  ASSERT_TRUE(harness.ready());
  auto bound = **harness.binding->virtual_backing();
  const std::size_t bytes = 3 * granule_;
  const ByteRange ranges[] = {{0, granule_}, {2 * granule_, 3 * granule_}};
  auto owner = bound.allocate_committed(bytes, 64, ranges);
  ASSERT_TRUE(owner) << owner.error().message();
  if (!adapter().faults()->arm(FaultPoint::kReleaseUnmap, 2)) {
    GTEST_SKIP() << kNotApplicable << "the adapter has no fault point in a release's unmap";
  }
  auto outcome = std::move(*owner).release_now();
  adapter().faults()->clear();
  ASSERT_TRUE(outcome);
  ASSERT_TRUE(outcome->is_quarantined()) << outcome->describe();
  const auto records = harness.binding->quarantined();
  ASSERT_EQ(records.size(), 1U);
  EXPECT_EQ(records[0].state, AllocationReleaseState::kPartiallyUnmapped);
  EXPECT_EQ(records[0].retained_bytes, granule_);
  EXPECT_EQ(harness.snapshot().quarantined_bytes, granule_);
}

ORTMEM_CTS_INSTANTIATE(VirtualBackingSuite);

}  // namespace
}  // namespace ortmem::cts
