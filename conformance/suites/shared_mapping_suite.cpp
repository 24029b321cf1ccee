// Shared mapping (SM), against any adapter that declares it.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "ortmem/capability.hpp"
#include "support/process_memory.hpp"
#include "support/sanitizers.hpp"
#include "support/suite.hpp"

namespace ortmem::cts {
namespace {

class SharedMappingSuite : public CapabilitySuite<Capability::kSharedMapping> {
 protected:
  void SetUp() override {
    CapabilitySuite::SetUp();
    if (ended()) return;
    mapping_ = allocator_->as_shared_mapping();
    // A prefix of one byte maps exactly one granule.
    auto probe = mapping_->create_shared_prefix(1);
    ASSERT_TRUE(probe) << probe.error().message();
    granule_ = (*probe)->mapped_bytes();
    ASSERT_GT(granule_, 0U);
  }

  // A target allocation with nothing committed, so prefixes can be mapped in.
  void* target(std::size_t bytes) {
    void* ptr = nullptr;
    if (VirtualBacking* backing = allocator_->as_virtual_backing()) {
      auto reserved = backing->allocate_committed(bytes, 64, {});
      EXPECT_TRUE(reserved) << (reserved ? "" : reserved.error().message());
      if (reserved) ptr = *reserved;
    } else {
      auto allocated = allocator_->allocate(bytes, 64);
      if (allocated) ptr = *allocated;
    }
    if (ptr != nullptr) live_.emplace_back(ptr, bytes);
    return ptr;
  }
  std::unique_ptr<SharedDevicePrefix> prefix(std::size_t bytes) {
    auto created = mapping_->create_shared_prefix(bytes);
    EXPECT_TRUE(created) << (created ? "" : created.error().message());
    return created ? std::move(*created) : nullptr;
  }
  static void* owner_window(const SharedDevicePrefix& prefix) { return reinterpret_cast<void*>(prefix.device_ptr()); }
  bool holds(const void* ptr, std::size_t bytes, std::uint8_t value) {
    return reads_as(adapter().memory(), ptr, bytes, value);
  }
  static void* at(void* base, std::size_t offset) { return static_cast<unsigned char*>(base) + offset; }

  SharedMapping* mapping_ = nullptr;
  std::size_t granule_ = 0;
};

TEST_P(SharedMappingSuite, APrefixReportsItsGeometry) {
  covers("SM-001");
  for (std::size_t bytes : {std::size_t{1}, granule_, granule_ + 1, 3 * granule_ - 5}) {
    auto shared = prefix(bytes);
    ASSERT_NE(shared, nullptr);
    EXPECT_EQ(shared->requested_bytes(), bytes);
    EXPECT_EQ(shared->mapped_bytes(), (bytes + granule_ - 1) / granule_ * granule_);
    EXPECT_GE(shared->committed_physical_bytes(), bytes);
    EXPECT_NE(shared->device_ptr(), 0U);
  }
}

// ALLOC-001 for prefixes: a refused creation names the size that was asked,
// not one the mechanism rounded or substituted.
TEST_P(SharedMappingSuite, ARefusedPrefixNamesTheSizeAsked) {
  covers("ALLOC-001");
  for (std::size_t bytes : {std::size_t{0}, SIZE_MAX - 1}) {
    auto created = mapping_->create_shared_prefix(bytes);
    if (created) continue;  // a prefix of either size is the mechanism's business; how it refuses is the rule's
    EXPECT_EQ(created.error().requested(), bytes) << created.error().message();
  }
}

// A fault met while a prefix is created ends in a refusal that names the
// size asked (ALLOC-001), or in a prefix whose memory works: its owner's
// window takes writes, and what is written there shows through a mapping
// (SM-007). A creation that reports success over memory the mechanism failed
// to produce hands out a window that faults.
TEST_P(SharedMappingSuite, AFaultInAPrefixCreationGivesARefusalOrAWorkingPrefix) {
  covers("SM-007", "ALLOC-001");
  ORTMEM_CTS_REQUIRE(Capability::kFaultInjection);
  for (std::uint64_t nth = 1; nth <= 2 && !HasFatalFailure(); ++nth) {
    SCOPED_TRACE("prefix map " + std::to_string(nth) + " failing");
    if (!adapter().faults()->arm(FaultPoint::kPrefixMap, nth)) {
      GTEST_SKIP() << kNotApplicable << "the adapter has no fault point in mapping a prefix";
    }
    auto created = mapping_->create_shared_prefix(granule_);
    adapter().faults()->clear();
    if (!created) {
      ORTMEM_CTS_CHECKING("ALLOC-001");
      EXPECT_EQ(created.error().requested(), granule_) << created.error().message();
      continue;
    }
    const SharedDevicePrefix& shared = **created;
    ORTMEM_CTS_CHECKING("SM-007");
    const WriteProbe probe = adapter().memory().probe_write(owner_window(shared), 0x3B);
    ASSERT_NE(probe.outcome, WriteProbe::Outcome::kRefused)
        << "a prefix whose creation reported success refuses writes to its owner's window: " << probe.detail;
    adapter().memory().fill(owner_window(shared), granule_, 0x3B);
    void* ptr = target(granule_);
    {
      ORTMEM_CTS_PRECONDITION();
      ASSERT_NE(ptr, nullptr);
      const auto mapped = mapping_->commit_shared_prefix(shared, ptr, granule_, 0);
      ASSERT_TRUE(mapped) << mapped.error().message();
    }
    EXPECT_TRUE(holds(ptr, granule_, 0x3B)) << "a mapping of a prefix created while a fault was armed";
  }
}

// SM-009 for creations that are refused: a creation that failed has no holder,
// so it keeps nothing. On the host tier a prefix's memory is the process's own,
// and sizes it cannot hold (2^63 bytes, past a file's largest offset; 2^62,
// past the address space) are refused once the mechanism may have begun
// making that memory. 16 refusals of each size that each kept what they began
// with leave 16 more descriptors open.
TEST_P(SharedMappingSuite, RefusedPrefixCreationsKeepNoDescriptor) {
  covers("SM-009", "ALLOC-001");
#if defined(ORTMEM_CTS_UNDER_SANITIZER)
  // A mechanism may ask the heap for bookkeeping in proportion to the size
  // asked (a handle per granule), which a sanitizer's allocator aborts on
  // instead of letting operator new throw.
  GTEST_SKIP() << std::string(kNotApplicable) << "a request of 2^62 bytes cannot be refused under a sanitizer";
#endif
  if (info().device.tier != Tier::kHost) {
    GTEST_SKIP() << std::string(kNotApplicable) << "device memory is not held through the process's descriptors";
  }
  constexpr int kRounds = 16;
  for (const std::size_t bytes : {std::size_t{1} << 63, std::size_t{1} << 62}) {
    SCOPED_TRACE(std::to_string(bytes) + " bytes");
    const std::size_t start = open_descriptors_now();
    int refused = 0;
    for (int round = 0; round < kRounds; ++round) {
      auto created = mapping_->create_shared_prefix(bytes);
      if (created) continue;  // a mechanism that can hold it need not refuse it
      ++refused;
      ORTMEM_CTS_CHECKING("ALLOC-001");
      EXPECT_EQ(created.error().requested(), bytes) << created.error().message();
    }
    const std::size_t grown = open_descriptors_now() - std::min(start, open_descriptors_now());
    ORTMEM_CTS_CHECKING("SM-009");
    EXPECT_LT(grown, std::max<std::size_t>(1, static_cast<std::size_t>(refused) / 2))
        << refused << " refused prefix creations left " << grown << " more open descriptors";
  }
}

TEST_P(SharedMappingSuite, ForeignPrefixesAreRefusedBeforeAnyCost) {
  covers("SM-002", "SM-006");
  auto other_allocator = adapter().make_allocator();
  auto foreign = other_allocator->as_shared_mapping()->create_shared_prefix(granule_);
  ASSERT_TRUE(foreign);
  auto cost = mapping_->incremental_owned_bytes_for_shared_prefix(**foreign);
  ASSERT_FALSE(cost) << "a foreign prefix was priced at " << *cost;
  void* ptr = target(2 * granule_);
  ASSERT_NE(ptr, nullptr);
  auto commit = mapping_->commit_shared_prefix(**foreign, ptr, 2 * granule_, 0);
  ASSERT_FALSE(commit) << "a foreign prefix was mapped";
  EXPECT_EQ(cost.error().kind(), commit.error().kind()) << "cost and commit refuse a foreign prefix differently";
  auto own = prefix(granule_);
  auto own_cost = mapping_->incremental_owned_bytes_for_shared_prefix(*own);
  ASSERT_TRUE(own_cost);
  EXPECT_EQ(*own_cost, 0U);
}

TEST_P(SharedMappingSuite, ACommitReportsZeroOwnedBytesAndWhatItMapped) {
  covers("SM-004");
  auto shared = prefix(2 * granule_ - 7);
  void* ptr = target(4 * granule_);
  ASSERT_TRUE(shared && ptr);
  auto info = mapping_->commit_shared_prefix(*shared, ptr, 4 * granule_, granule_);
  ASSERT_TRUE(info) << info.error().message();
  EXPECT_EQ(info->additional_owned_bytes, 0U);
  EXPECT_EQ(info->newly_mapped_bytes, shared->mapped_bytes());
  EXPECT_EQ(info->granules, 2U);
}

TEST_P(SharedMappingSuite, BadPlacementIsRefused) {
  covers("SM-005", "SM-003");
  auto shared = prefix(2 * granule_);
  void* ptr = target(3 * granule_);
  ASSERT_TRUE(shared && ptr);
  EXPECT_FALSE(mapping_->commit_shared_prefix(*shared, ptr, 3 * granule_, 1)) << "an unaligned offset was accepted";
  EXPECT_FALSE(mapping_->commit_shared_prefix(*shared, ptr, 3 * granule_, 2 * granule_)) << "a prefix past the end";
  if (VirtualBacking* backing = allocator_->as_virtual_backing()) {
    ASSERT_TRUE(backing->commit_allocation_range(ptr, 3 * granule_, 64, granule_, 1));
    // The refusal leaves no mapping even when taking one back would fail: a
    // mechanism that maps the free granules before it meets the committed one
    // cannot unmap them with the unmap made to fail, and the last commit below
    // finds them (SM-003).
    FaultInjection* faults = info().declares(Capability::kFaultInjection) ? adapter().faults() : nullptr;
    if (faults != nullptr) (void)faults->arm(FaultPoint::kDecommit, 1);
    EXPECT_FALSE(mapping_->commit_shared_prefix(*shared, ptr, 3 * granule_, 0)) << "over committed bytes";
    if (faults != nullptr) faults->clear();
    ASSERT_TRUE(backing->decommit_allocation_range(ptr, 3 * granule_, 64, granule_, 1));
  }
  auto info = mapping_->commit_shared_prefix(*shared, ptr, 3 * granule_, 0);
  ASSERT_TRUE(info) << "the refusals left part of a mapping behind: " << info.error().message();
  EXPECT_FALSE(mapping_->commit_shared_prefix(*shared, ptr, 3 * granule_, 0)) << "mapped twice over itself";
}

TEST_P(SharedMappingSuite, TheTargetMustBeALiveAllocationOfExactlyThatSize) {
  covers("SM-006");
  auto shared = prefix(granule_);
  void* ptr = target(2 * granule_);
  ASSERT_TRUE(shared && ptr);
  EXPECT_FALSE(mapping_->commit_shared_prefix(*shared, ptr, 2 * granule_ + 1, 0)) << "wrong allocation size";
  alignas(64) static unsigned char not_ours[64];
  EXPECT_FALSE(mapping_->commit_shared_prefix(*shared, not_ours, 64, 0)) << "not an allocation";
  EXPECT_TRUE(mapping_->commit_shared_prefix(*shared, ptr, 2 * granule_, 0));
}

TEST_P(SharedMappingSuite, AFailedCommitLeavesNoMapping) {
  covers("SM-003");
  ORTMEM_CTS_REQUIRE(Capability::kFaultInjection);
  auto shared = prefix(granule_);
  void* ptr = target(2 * granule_);
  ASSERT_TRUE(shared && ptr);
  if (!adapter().faults()->arm(FaultPoint::kPrefixMap, 1)) {
    GTEST_SKIP() << kNotApplicable << "the adapter has no fault point in mapping a prefix";
  }
  EXPECT_FALSE(mapping_->commit_shared_prefix(*shared, ptr, 2 * granule_, 0));
  adapter().faults()->clear();
  // Nothing stayed mapped: the same range takes the prefix now.
  auto again = mapping_->commit_shared_prefix(*shared, ptr, 2 * granule_, 0);
  EXPECT_TRUE(again) << "the failed commit left the target range occupied: " << again.error().message();
}

// SM-003 when the failure comes part way through a prefix of several
// granules placed at an offset: what was mapped before it is taken back, so
// the same commit, unfaulted, maps the whole prefix and shows its bytes
// (SM-007). A mechanism that takes back the wrong granules, or records the
// wrong ones as free, leaves the range occupied.
TEST_P(SharedMappingSuite, APrefixCommitFailingPartWayLeavesNoMapping) {
  covers("SM-003", "SM-007");
  ORTMEM_CTS_REQUIRE(Capability::kFaultInjection);
  const std::size_t bytes = 5 * granule_;
  for (std::uint64_t nth = 2; nth <= 3 && !HasFatalFailure(); ++nth) {
    SCOPED_TRACE("prefix map " + std::to_string(nth) + " failing");
    auto shared = prefix(3 * granule_);
    void* ptr = target(bytes);
    ASSERT_TRUE(shared && ptr);
    adapter().memory().fill(owner_window(*shared), 3 * granule_, 0x4A);
    if (!adapter().faults()->arm(FaultPoint::kPrefixMap, nth)) {
      GTEST_SKIP() << kNotApplicable << "the adapter has no fault point in mapping a prefix";
    }
    const auto failed = mapping_->commit_shared_prefix(*shared, ptr, bytes, 2 * granule_);
    adapter().faults()->clear();
    const auto again = failed ? failed : mapping_->commit_shared_prefix(*shared, ptr, bytes, 2 * granule_);
    {
      ORTMEM_CTS_CHECKING("SM-003");
      ASSERT_TRUE(again) << "the failed commit left the target range occupied: " << again.error().message();
    }
    ORTMEM_CTS_CHECKING("SM-007");
    EXPECT_TRUE(holds(at(ptr, 2 * granule_), 3 * granule_, 0x4A)) << "a prefix commit reported done";
  }
}

TEST_P(SharedMappingSuite, EveryMappingSeesThePrefixBytes) {
  covers("SM-007");
  auto shared = prefix(granule_ + 100);
  void* first = target(4 * granule_);
  void* second = target(2 * granule_);
  ASSERT_TRUE(shared && first && second);
  adapter().memory().fill(owner_window(*shared), granule_ + 100, 0xC3);
  ASSERT_TRUE(mapping_->commit_shared_prefix(*shared, first, 4 * granule_, 2 * granule_));
  ASSERT_TRUE(mapping_->commit_shared_prefix(*shared, second, 2 * granule_, 0));
  EXPECT_TRUE(holds(at(first, 2 * granule_), granule_ + 100, 0xC3));
  EXPECT_TRUE(holds(second, granule_ + 100, 0xC3));
  adapter().memory().fill(owner_window(*shared), 10, 0x3C);  // later owner writes show through too
  EXPECT_TRUE(holds(second, 10, 0x3C));
}

TEST_P(SharedMappingSuite, AWriteThroughAMappingIsRefusedByTheSystem) {
  covers("SM-008");
  auto shared = prefix(granule_);
  void* ptr = target(granule_);
  ASSERT_TRUE(shared && ptr);
  adapter().memory().fill(owner_window(*shared), granule_, 0x01);
  ASSERT_TRUE(mapping_->commit_shared_prefix(*shared, ptr, granule_, 0));
  // The adapter's probe asks the system (a forked child's write for host
  // memory, the driver's record of the mapping for device memory).
  const WriteProbe probe = adapter().memory().probe_write(ptr, 0xEE);
  if (probe.outcome == WriteProbe::Outcome::kUnknown) GTEST_SKIP() << "no write probe verdict: " << probe.detail;
  EXPECT_TRUE(probe.outcome == WriteProbe::Outcome::kRefused)
      << "a write through the read-only mapping was not refused: " << probe.detail;
  EXPECT_TRUE(holds(owner_window(*shared), granule_, 0x01));
}

TEST_P(SharedMappingSuite, PhysicalBytesLiveUntilTheLastHolderInEitherOrder) {
  covers("SM-009");
  // Handle first: the mapping keeps the bytes readable.
  {
    void* ptr = target(granule_);
    auto shared = prefix(granule_);
    ASSERT_TRUE(shared && ptr);
    adapter().memory().fill(owner_window(*shared), granule_, 0x5D);
    ASSERT_TRUE(mapping_->commit_shared_prefix(*shared, ptr, granule_, 0));
    shared.reset();
    EXPECT_TRUE(holds(ptr, granule_, 0x5D)) << "the bytes went with the handle while a mapping remained";
  }
  // Mapping first: the handle keeps the bytes readable.
  {
    void* ptr = target(granule_);
    auto shared = prefix(granule_);
    ASSERT_TRUE(shared && ptr);
    adapter().memory().fill(owner_window(*shared), granule_, 0x6E);
    ASSERT_TRUE(mapping_->commit_shared_prefix(*shared, ptr, granule_, 0));
    ASSERT_TRUE(allocator_->release(ptr, granule_, 64).is_complete());
    forget(ptr);
    EXPECT_TRUE(holds(owner_window(*shared), granule_, 0x6E))
        << "the bytes went with the mapping while the handle remained";
  }
}

// A commit over a mapped prefix may be refused, changing nothing: the
// mapping still shows the prefix and still refuses writes. Or it may succeed,
// and then its range is writable like any committed range (VB-002), by memory
// of the target's own: the write must not reach the prefix (SM-008). A
// success that maps nothing leaves a range the caller was told it may write
// that faults when written.
TEST_P(SharedMappingSuite, ACommitOverAMappingIsRefusedOrMakesTheRangeWritable) {
  covers("VB-002", "VB-005", "SM-007", "SM-008");
  VirtualBacking* backing = allocator_->as_virtual_backing();
  if (backing == nullptr) GTEST_SKIP() << std::string(kNotApplicable) << "targets are not virtual-backing allocations";
  const std::size_t bytes = 2 * granule_;
  void* ptr = target(bytes);
  auto shared = prefix(granule_);
  ASSERT_TRUE(shared && ptr);
  adapter().memory().fill(owner_window(*shared), granule_, 0x2C);
  ASSERT_TRUE(mapping_->commit_shared_prefix(*shared, ptr, bytes, 0));
  const std::size_t before = backing->allocation_committed_bytes(ptr, bytes, 64);
  const auto done = backing->commit_allocation_range(ptr, bytes, 64, 0, granule_);
  const WriteProbe probe = adapter().memory().probe_write(ptr, 0x91);
  if (!done) {
    {
      ORTMEM_CTS_CHECKING("VB-005");
      EXPECT_EQ(backing->allocation_committed_bytes(ptr, bytes, 64), before)
          << "a refused commit changed the committed bytes";
    }
    {
      ORTMEM_CTS_CHECKING("SM-007");
      EXPECT_TRUE(holds(ptr, granule_, 0x2C))
          << "after a refused commit over it the mapping no longer shows the prefix";
    }
    ORTMEM_CTS_CHECKING("SM-008");
    EXPECT_FALSE(probe.outcome == WriteProbe::Outcome::kAllowed)
        << "after a refused commit over it the mapping lets writes through: " << probe.detail;
    return;
  }
  {
    ORTMEM_CTS_CHECKING("VB-002");
    EXPECT_GE(backing->allocation_committed_bytes(ptr, bytes, 64), granule_)
        << "a commit reported done is not counted in the committed bytes";
    ASSERT_FALSE(probe.outcome == WriteProbe::Outcome::kRefused)
        << "a commit over a mapping reported done, yet the range refuses writes: " << probe.detail;
  }
  adapter().memory().fill(ptr, granule_, 0x91);
  {
    ORTMEM_CTS_CHECKING("VB-002");
    EXPECT_TRUE(holds(ptr, granule_, 0x91)) << "the committed range does not keep what was written";
  }
  ORTMEM_CTS_CHECKING("SM-008");
  EXPECT_TRUE(holds(owner_window(*shared), granule_, 0x2C))
      << "a write into a range committed over a mapping reached the shared prefix";
}

// "Freed exactly once, when the last of them goes": on the host tier the
// kernel's books show a prefix whose last holder leaves its memory behind.
// 64 cycles of an 8 MiB prefix mapped into a target, its holders dropped in
// alternating order, would leave 512 MiB of address space and 64 descriptors
// behind if either order forgot the memory; freed once, nothing grows (a
// sanitized kit runs a quarter of the cycles, and the bounds follow).
TEST_P(SharedMappingSuite, TheLastHolderFreesThePrefixMemoryInEitherOrder) {
  covers("SM-009");
  if (info().device.tier != Tier::kHost) {
    GTEST_SKIP() << std::string(kNotApplicable) << "device memory is not in the process's address space";
  }
  constexpr int kCycles = probe_rounds(64);
  const std::size_t bytes = std::max<std::size_t>((8u << 20) / granule_, 1) * granule_;
  const std::size_t start_bytes = mapped_bytes_now();
  const std::size_t start_descriptors = open_descriptors_now();
  for (int cycle = 0; cycle < kCycles; ++cycle) {
    void* ptr = target(bytes);
    auto shared = prefix(bytes);
    ASSERT_TRUE(shared && ptr);
    adapter().memory().fill(owner_window(*shared), 4096, 0x7F);
    ASSERT_TRUE(mapping_->commit_shared_prefix(*shared, ptr, bytes, 0));
    if (cycle % 2 == 0) shared.reset();
    {
      // A release that does not complete is ALLOC-018's to judge, not SM-009's.
      ORTMEM_CTS_PRECONDITION();
      ASSERT_TRUE(allocator_->release(ptr, bytes, 64).is_complete());
    }
    forget(ptr);
    shared.reset();
  }
  const std::size_t end_bytes = mapped_bytes_now();
  const std::size_t grown = end_bytes > start_bytes ? end_bytes - start_bytes : 0;
  EXPECT_LT(grown, kCycles * bytes / 2) << "after " << kCycles << " prefixes of " << (bytes >> 20)
                                        << " MiB lost their last holder the process maps " << (grown >> 20)
                                        << " MiB more: the prefix memory was not freed";
  const std::size_t end_descriptors = open_descriptors_now();
  EXPECT_LT(end_descriptors, start_descriptors + kCycles / 2)
      << "after " << kCycles << " prefixes lost their last holder the process has "
      << end_descriptors - start_descriptors << " more open descriptors: the prefix memory was not freed";
}

// SM-009 when a release stops after its unmaps (giving back the reserved
// addresses failed): the prefix's only mapping went with the unmaps and its
// handle went before, so nothing holds the prefix's memory any more and it is
// freed, although the allocation is quarantined. Judged over 8 rounds by the
// descriptors, on the releases that say they retain nothing.
TEST_P(SharedMappingSuite, AReleaseStoppedAfterItsUnmapsLetsThePrefixGo) {
  covers("SM-009");
  ORTMEM_CTS_REQUIRE(Capability::kFaultInjection);
  if (!adapter().faults()->arm(FaultPoint::kReleaseUnmap, 2)) {
    GTEST_SKIP() << kNotApplicable << "the adapter has no fault point in a release's unmap";
  }
  adapter().faults()->clear();
  constexpr int kRounds = 8;
  long growth = 0;
  int judged = 0;
  for (int round = 0; round < kRounds && !HasFatalFailure(); ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    const auto before = static_cast<long>(open_descriptors_now());
    void* ptr = target(granule_);
    auto shared = prefix(granule_);
    ASSERT_TRUE(shared && ptr);
    {
      ORTMEM_CTS_PRECONDITION();
      ASSERT_TRUE(mapping_->commit_shared_prefix(*shared, ptr, granule_, 0));
    }
    shared.reset();
    (void)adapter().faults()->arm(FaultPoint::kReleaseUnmap, 2);
    auto outcome = allocator_->release(ptr, granule_, 64);
    adapter().faults()->clear();
    // A Failed release changed nothing (ALLOC-018's to judge): the next one counts.
    if (outcome.is_failed()) outcome = allocator_->release(ptr, granule_, 64);
    if (outcome.is_failed()) continue;
    forget(ptr);
    if (outcome.is_complete() || outcome.residual()->retained_bytes == 0) {
      growth += static_cast<long>(open_descriptors_now()) - before;
      ++judged;
    }
  }
  EXPECT_LT(growth, std::max(1L, static_cast<long>(judged) / 2))
      << judged << " releases of a target whose only mapping was a dropped prefix retained nothing, yet left " << growth
      << " more open descriptors: the prefix memory was not freed";
}

// VB-008 and SM-008 when a decommit's giving back of physical memory fails:
// the decommit is undone (or done), and undoing it touches no granule but its
// own, so a prefix mapped beside it still refuses writes and keeps its bytes.
TEST_P(SharedMappingSuite, AFailedPhysicalFreeInADecommitTouchesNoOtherGranule) {
  covers("VB-008", "SM-008");
  ORTMEM_CTS_REQUIRE(Capability::kFaultInjection);
  VirtualBacking* backing = allocator_->as_virtual_backing();
  if (backing == nullptr) GTEST_SKIP() << std::string(kNotApplicable) << "targets are not virtual-backing allocations";
  if (!adapter().faults()->arm(FaultPoint::kPhysicalFree, 1)) {
    GTEST_SKIP() << kNotApplicable << "the adapter has no fault point where physical memory is given back";
  }
  adapter().faults()->clear();
  constexpr int kRounds = 4;
  const std::size_t bytes = 2 * granule_;
  for (int round = 0; round < kRounds && !HasFatalFailure(); ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    void* ptr = target(bytes);
    auto shared = prefix(granule_);
    ASSERT_TRUE(shared && ptr);
    adapter().memory().fill(owner_window(*shared), granule_, 0x4D);
    {
      // What this test stands on: a prefix mapped at granule 0, and granule 1
      // committed privately, keeping what is written to it.
      ORTMEM_CTS_PRECONDITION();
      ASSERT_TRUE(mapping_->commit_shared_prefix(*shared, ptr, bytes, 0));
      const std::size_t with_prefix = backing->allocation_committed_bytes(ptr, bytes, 64);
      ASSERT_TRUE(backing->commit_allocation_range(ptr, bytes, 64, granule_, granule_));
      // Written only once committed: writing to uncommitted bytes may fault.
      ASSERT_EQ(backing->allocation_committed_bytes(ptr, bytes, 64), with_prefix + granule_);
      adapter().memory().fill(at(ptr, granule_), granule_, 0x17);
      ASSERT_TRUE(holds(at(ptr, granule_), granule_, 0x17)) << "a committed granule does not keep what was written";
    }
    const std::size_t committed_before = backing->allocation_committed_bytes(ptr, bytes, 64);
    (void)adapter().faults()->arm(FaultPoint::kPhysicalFree, 1);
    const auto decommitted = backing->decommit_allocation_range(ptr, bytes, 64, granule_, granule_);
    adapter().faults()->clear();
    if (!decommitted) {
      ORTMEM_CTS_CHECKING("VB-008");
      EXPECT_EQ(backing->allocation_committed_bytes(ptr, bytes, 64), committed_before)
          << "a failed decommit changed them";
      EXPECT_TRUE(holds(at(ptr, granule_), granule_, 0x17))
          << "a failed decommit lost the bytes it failed to give back";
    }
    ORTMEM_CTS_CHECKING("SM-008");
    const WriteProbe probe = adapter().memory().probe_write(ptr, 0xE1);
    if (probe.outcome != WriteProbe::Outcome::kUnknown) {
      EXPECT_TRUE(probe.outcome == WriteProbe::Outcome::kRefused)
          << "after a decommit of the granule beside it, the prefix mapping lets writes through: " << probe.detail;
    }
    EXPECT_TRUE(holds(owner_window(*shared), granule_, 0x4D));
  }
}

// A decommit over a range that holds a mapped prefix between two private
// granules may take the private ones, never the prefix: its bytes still read
// back through the mapping (SM-007). A mechanism that gives memory back over
// a whole span at once must leave the prefix's bytes where they live.
TEST_P(SharedMappingSuite, ADecommitAcrossAPrefixLeavesItsBytes) {
  covers("SM-007");
  VirtualBacking* backing = allocator_->as_virtual_backing();
  if (backing == nullptr) GTEST_SKIP() << std::string(kNotApplicable) << "targets are not virtual-backing allocations";
  const std::size_t bytes = 3 * granule_;
  void* ptr = target(bytes);
  auto shared = prefix(granule_);
  ASSERT_TRUE(shared && ptr);
  adapter().memory().fill(owner_window(*shared), granule_, 0x6E);
  {
    ORTMEM_CTS_PRECONDITION();
    ASSERT_TRUE(backing->commit_allocation_range(ptr, bytes, 64, 0, granule_));
    ASSERT_TRUE(backing->commit_allocation_range(ptr, bytes, 64, 2 * granule_, granule_));
    ASSERT_TRUE(mapping_->commit_shared_prefix(*shared, ptr, bytes, granule_));
    ASSERT_TRUE(holds(at(ptr, granule_), granule_, 0x6E));
  }
  (void)backing->decommit_allocation_range(ptr, bytes, 64, 0, bytes);  // refused or done, the prefix stays
  ORTMEM_CTS_CHECKING("SM-007");
  EXPECT_TRUE(holds(at(ptr, granule_), granule_, 0x6E)) << "a decommit around a mapped prefix changed its bytes";
  EXPECT_TRUE(holds(owner_window(*shared), granule_, 0x6E));
}

// Where access is a step of its own, an access grant that fails together
// with the unmap that should take the mapping back leaves a granule mapped
// without access: in a prefix's creation, or in a prefix commit. What was left
// stays owned and goes with its holder. A creation that failed has no holder,
// so it keeps nothing (SM-009); a target whose prefix commit failed is
// released Complete with nothing left, or Quarantined retaining what it keeps
// (ALLOC-017, ALLOC-019); a retried commit that succeeds shows the prefix
// (SM-003). Judged over 8 rounds each by the descriptors the process holds.
TEST_P(SharedMappingSuite, WhatAFailedPrefixStepCouldNotTakeBackStaysOwned) {
  covers("SM-009", "SM-003", "ALLOC-017", "ALLOC-019");
  ORTMEM_CTS_REQUIRE(Capability::kFaultInjection);
  if (!can_fail_together(FaultPoint::kAccessGrant, FaultPoint::kDecommit))
    GTEST_SKIP() << kNotApplicable << "the adapter cannot fail an access grant and an unmap at once";
  constexpr int kRounds = 8;
  const std::size_t bytes = 3 * granule_;
  long created_growth = 0;
  long released_growth = 0;
  int released = 0;
  for (int round = 0; round < kRounds && !HasFatalFailure(); ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    {
      const auto before = static_cast<long>(open_descriptors_now());
      (void)adapter().faults()->arm(FaultPoint::kAccessGrant, 1 + static_cast<std::uint64_t>(round % 3));
      (void)adapter().faults()->arm(FaultPoint::kDecommit, 1);
      auto created = mapping_->create_shared_prefix(bytes);
      adapter().faults()->clear();
      if (created) created->reset();
      created_growth += static_cast<long>(open_descriptors_now()) - before;
    }
    const auto before = static_cast<long>(open_descriptors_now());
    auto shared = prefix(granule_);
    void* ptr = target(bytes);
    ASSERT_TRUE(shared && ptr);
    adapter().memory().fill(owner_window(*shared), 64, 0x2E);
    (void)adapter().faults()->arm(FaultPoint::kAccessGrant, 1);
    (void)adapter().faults()->arm(FaultPoint::kDecommit, 1);
    const auto failed = mapping_->commit_shared_prefix(*shared, ptr, bytes, granule_);
    adapter().faults()->clear();
    const auto again = failed ? failed : mapping_->commit_shared_prefix(*shared, ptr, bytes, granule_);
    if (again) {
      ORTMEM_CTS_CHECKING("SM-003");
      EXPECT_TRUE(holds(at(ptr, granule_), 64, 0x2E)) << "a prefix commit reported done does not show the prefix";
    }
    shared.reset();
    forget(ptr);
    const auto outcome = allocator_->release(ptr, bytes, 64);
    if (outcome.is_complete() || (outcome.is_quarantined() && outcome.residual()->retained_bytes == 0)) {
      released_growth += static_cast<long>(open_descriptors_now()) - before;
      ++released;
    }
  }
  {
    ORTMEM_CTS_CHECKING("SM-009");
    EXPECT_LT(created_growth, kRounds / 2) << kRounds << " prefix creations failed with an access grant and an unmap, "
                                           << "and left " << created_growth << " more open descriptors";
  }
  ORTMEM_CTS_CHECKING("ALLOC-019");
  EXPECT_LT(released_growth, std::max(1L, static_cast<long>(released) / 2))
      << released << " targets whose prefix commit failed were released Complete or retaining 0 bytes, yet left "
      << released_growth << " more open descriptors";
}

ORTMEM_CTS_INSTANTIATE(SharedMappingSuite);

}  // namespace
}  // namespace ortmem::cts
