// The CUDA virtual-memory state machine, over the simulated driver (a test
// double over host mmap): the driver calls it makes, what it unwinds, and
// what it owns after each kind of partial failure.
#include "ortmem/cuda/cuda_virtual_allocator.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

#include "ortmem/cuda/testing/simulated_vmm_driver.hpp"
#include "support/requirements.hpp"

namespace ortmem::cuda {
namespace {

using ortmem::test_support::covers;
using testing::SimulatedVmmDriver;

constexpr std::size_t kGranule = std::size_t{64} << 10;

class CudaVirtualAllocatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto created = CudaVirtualAllocator::create(driver_, {.device = DeviceKey::device(0), .faults = faults_});
    ASSERT_TRUE(created) << created.error().message();
    allocator_ = *created;
  }
  void* committed(std::size_t bytes, std::vector<ByteRange> ranges) {
    auto ptr = allocator_->allocate_committed(bytes, 64, ranges);
    EXPECT_TRUE(ptr) << (ptr ? "" : ptr.error().message());
    return ptr ? *ptr : nullptr;
  }
  static unsigned char* at(void* ptr, std::size_t offset) { return static_cast<unsigned char*>(ptr) + offset; }
  // Nothing is held by the driver any more: no handle, mapping or reservation.
  void expect_nothing_held() {
    EXPECT_EQ(driver_->live_handles(), 0U);
    EXPECT_EQ(driver_->mappings(), 0U);
    EXPECT_EQ(driver_->reservations(), 0U);
  }

  std::shared_ptr<SimulatedVmmDriver> driver_ = std::make_shared<SimulatedVmmDriver>(kGranule);
  std::shared_ptr<DriverFaults> faults_ = std::make_shared<DriverFaults>();
  std::shared_ptr<CudaVirtualAllocator> allocator_;
};

TEST_F(CudaVirtualAllocatorTest, RefusesADriverWhoseGranularityIsNotAPowerOfTwo) {
  auto allocator = CudaVirtualAllocator::create(std::make_shared<SimulatedVmmDriver>(3 * kGranule), {});
  ASSERT_FALSE(allocator);
  EXPECT_NE(allocator.error().reason().find("power of two"), std::string::npos) << allocator.error().message();
}

TEST_F(CudaVirtualAllocatorTest, EachCommittedGranuleHasItsOwnHandleMappedReadWrite) {
  covers("VB-001", "VB-004");
  void* ptr = committed(3 * kGranule + 1, {{0, 3 * kGranule + 1}});
  ASSERT_NE(ptr, nullptr);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(ptr) % kGranule, 0U);
  EXPECT_EQ(driver_->live_handles(), 4U);
  EXPECT_EQ(driver_->calls("cuMemMap"), 4U);
  EXPECT_EQ(driver_->calls("cuMemSetAccess"), 4U);
  std::memset(ptr, 0x5A, 3 * kGranule + 1);  // read-write all the way
  EXPECT_EQ(allocator_->allocation_committed_bytes(ptr, 3 * kGranule + 1, 64), 4 * kGranule);
}

TEST_F(CudaVirtualAllocatorTest, ReleaseUnmapsOneRunAtATimeAndGivesEverythingBack) {
  covers("ALLOC-017", "VB-004");
  // Runs: [0,2) and [3,5) with a hole at 2.
  void* ptr = committed(5 * kGranule, {{0, 2 * kGranule}, {3 * kGranule, 5 * kGranule}});
  ASSERT_NE(ptr, nullptr);
  const auto outcome = allocator_->release(ptr, 5 * kGranule, 64);
  ASSERT_TRUE(outcome.is_complete()) << outcome.describe();
  EXPECT_EQ(outcome.unmapped_bytes(), 4 * kGranule);
  EXPECT_EQ(driver_->calls("cuMemUnmap"), 2U) << "one unmap per contiguous run";
  EXPECT_EQ(driver_->calls("cuMemRelease"), 4U);
  expect_nothing_held();
}

TEST_F(CudaVirtualAllocatorTest, ACommitThatFailsAtAnyStepUnwindsInReverse) {
  covers("VB-002");
  void* ptr = committed(4 * kGranule, {});
  ASSERT_NE(ptr, nullptr);
  for (DriverCall call : {DriverCall::kMemMap, DriverCall::kMemSetAccess}) {
    for (std::uint64_t nth = 1; nth <= 4; ++nth) {
      faults_->fail_nth(call, nth);
      auto done = allocator_->commit_allocation_range(ptr, 4 * kGranule, 64, 0, 4 * kGranule);
      faults_->clear();
      ASSERT_FALSE(done) << driver_call_name(call) << " #" << nth << " failed but the commit succeeded";
      EXPECT_NE(done.error().reason().find(driver_call_name(call)), std::string::npos) << done.error().message();
      EXPECT_EQ(allocator_->allocation_committed_bytes(ptr, 4 * kGranule, 64), 0U);
      EXPECT_EQ(driver_->mappings(), 0U) << "a failed commit left a mapping";
      EXPECT_EQ(driver_->live_handles(), 0U) << "a failed commit left a handle";
    }
  }
  ASSERT_TRUE(allocator_->commit_allocation_range(ptr, 4 * kGranule, 64, 0, 4 * kGranule));
  ASSERT_TRUE(allocator_->release(ptr, 4 * kGranule, 64).is_complete());
  expect_nothing_held();
}

TEST_F(CudaVirtualAllocatorTest, AGranuleSharedByTwoRangesStaysUntilBothGo) {
  covers("VB-005");
  void* ptr = committed(2 * kGranule, {{0, 100}, {200, 300}});
  ASSERT_NE(ptr, nullptr);
  EXPECT_EQ(driver_->live_handles(), 1U);
  auto first = allocator_->decommit_allocation_range(ptr, 2 * kGranule, 64, 0, 100);
  ASSERT_TRUE(first);
  EXPECT_EQ(*first, 0U) << "unmapped a granule another range still needs";
  std::memset(at(ptr, 200), 1, 100);  // still mapped
  auto second = allocator_->decommit_allocation_range(ptr, 2 * kGranule, 64, 200, 100);
  ASSERT_TRUE(second);
  EXPECT_EQ(*second, kGranule);
  EXPECT_EQ(driver_->live_handles(), 0U);
}

TEST_F(CudaVirtualAllocatorTest, AFailedDecommitMapsBackWhatItUnmappedWithTheBytesIntact) {
  covers("VB-008");
  void* ptr = committed(4 * kGranule, {{0, 4 * kGranule}});
  ASSERT_NE(ptr, nullptr);
  for (std::size_t g = 0; g < 4; ++g) std::memset(at(ptr, g * kGranule), static_cast<int>(0x10 + g), kGranule);
  faults_->fail_nth(DriverCall::kMemUnmap, 3);  // after two of four granules
  auto decommitted = allocator_->decommit_allocation_range(ptr, 4 * kGranule, 64, 0, 4 * kGranule);
  faults_->clear();
  ASSERT_FALSE(decommitted);
  EXPECT_NE(decommitted.error().reason().find("nothing was changed"), std::string::npos);
  EXPECT_EQ(allocator_->allocation_committed_bytes(ptr, 4 * kGranule, 64), 4 * kGranule);
  EXPECT_EQ(driver_->live_handles(), 4U) << "a rolled-back granule lost its handle";
  for (std::size_t g = 0; g < 4; ++g) {
    EXPECT_EQ(*at(ptr, g * kGranule + 17), 0x10 + g) << "granule " << g << " lost its bytes";
  }
  EXPECT_EQ(allocator_->stranded_handles(), 0U);
  ASSERT_TRUE(allocator_->release(ptr, 4 * kGranule, 64).is_complete());
  expect_nothing_held();
}

TEST_F(CudaVirtualAllocatorTest, AMappingThatCannotBeTakenBackIsOrphanedNotForgotten) {
  covers("VB-002", "ALLOC-017");
  void* ptr = committed(2 * kGranule, {});
  ASSERT_NE(ptr, nullptr);
  // The second granule maps, its access is refused, and taking it back fails too.
  faults_->fail_nth(DriverCall::kMemSetAccess, 2);
  faults_->fail_nth(DriverCall::kMemUnmap, 1);
  auto done = allocator_->commit_allocation_range(ptr, 2 * kGranule, 64, 0, 2 * kGranule);
  faults_->clear();
  ASSERT_FALSE(done);
  EXPECT_NE(done.error().reason().find("could not be taken back"), std::string::npos) << done.error().message();
  EXPECT_EQ(allocator_->allocation_committed_bytes(ptr, 2 * kGranule, 64), 0U) << "an orphan counted as committed";
  EXPECT_EQ(driver_->mappings(), 1U) << "the orphaned mapping is still there, and known";
  EXPECT_FALSE(allocator_->commit_allocation_range(ptr, 2 * kGranule, 64, kGranule, 1)) << "committed over an orphan";
  const auto outcome = allocator_->release(ptr, 2 * kGranule, 64);
  ASSERT_TRUE(outcome.is_complete()) << outcome.describe();
  expect_nothing_held();
}

TEST_F(CudaVirtualAllocatorTest, AFirstRunThatWillNotUnmapIsFailedWithNothingChanged) {
  covers("ALLOC-018");
  void* ptr = committed(2 * kGranule, {{0, 2 * kGranule}});
  ASSERT_NE(ptr, nullptr);
  faults_->fail_nth(DriverCall::kMemUnmap, 1);
  const auto refused = allocator_->release(ptr, 2 * kGranule, 64);
  faults_->clear();
  ASSERT_TRUE(refused.is_failed()) << refused.describe();
  std::memset(ptr, 2, 2 * kGranule);  // still live and mapped
  ASSERT_TRUE(allocator_->release(ptr, 2 * kGranule, 64).is_complete());
  expect_nothing_held();
}

TEST_F(CudaVirtualAllocatorTest, ALaterRunThatWillNotUnmapLeavesAPartiallyUnmappedResidual) {
  covers("ALLOC-019", "REL-009");
  void* ptr = committed(5 * kGranule, {{0, kGranule}, {2 * kGranule, 5 * kGranule}});
  ASSERT_NE(ptr, nullptr);
  faults_->fail_nth(DriverCall::kMemUnmap, 2);
  const auto outcome = allocator_->release(ptr, 5 * kGranule, 64);
  faults_->clear();
  ASSERT_TRUE(outcome.is_quarantined()) << outcome.describe();
  EXPECT_EQ(outcome.state(), AllocationReleaseState::kPartiallyUnmapped);
  EXPECT_EQ(outcome.unmapped_bytes(), kGranule);
  EXPECT_EQ(outcome.residual()->retained_bytes, 3 * kGranule);
  EXPECT_EQ(outcome.residual()->reason.kind, QuarantineReason::Kind::kPartialRelease);
  EXPECT_EQ(driver_->live_handles(), 3U) << "the first run's handle was not given back, or a retained one was";
  EXPECT_EQ(driver_->reservations(), 1U) << "a quarantined range must stay reserved, never reissued";
  EXPECT_TRUE(allocator_->release(ptr, 5 * kGranule, 64).is_failed()) << "released twice";
  EXPECT_EQ(allocator_->live_allocations(), 0U);
}

TEST_F(CudaVirtualAllocatorTest, AHandleTheDriverWillNotTakeBackIsQuarantinedNotReused) {
  covers("ALLOC-019", "REL-009");
  void* ptr = committed(3 * kGranule, {{0, 3 * kGranule}});
  ASSERT_NE(ptr, nullptr);
  faults_->fail_nth(DriverCall::kMemRelease, 2);
  const auto outcome = allocator_->release(ptr, 3 * kGranule, 64);
  faults_->clear();
  ASSERT_TRUE(outcome.is_quarantined()) << outcome.describe();
  EXPECT_EQ(outcome.state(), AllocationReleaseState::kQuarantined) << "nothing is mapped any more";
  EXPECT_EQ(outcome.unmapped_bytes(), 3 * kGranule);
  EXPECT_EQ(outcome.residual()->retained_bytes, kGranule);
  EXPECT_EQ(allocator_->stranded_handles(), 1U);
  EXPECT_EQ(driver_->mappings(), 0U);
  EXPECT_EQ(driver_->live_handles(), 1U);
  EXPECT_EQ(driver_->reservations(), 1U);
}

TEST_F(CudaVirtualAllocatorTest, AStrandedHandleFromADecommitMakesTheReleaseQuarantined) {
  covers("VB-008", "ALLOC-019");
  void* ptr = committed(2 * kGranule, {{0, 2 * kGranule}});
  ASSERT_NE(ptr, nullptr);
  faults_->fail_nth(DriverCall::kMemRelease, 1);
  auto decommitted = allocator_->decommit_allocation_range(ptr, 2 * kGranule, 64, 0, kGranule);
  faults_->clear();
  ASSERT_TRUE(decommitted) << "the mapping is gone, so the decommit happened";
  EXPECT_EQ(allocator_->stranded_handles(), 1U);
  const auto outcome = allocator_->release(ptr, 2 * kGranule, 64);
  ASSERT_TRUE(outcome.is_quarantined()) << outcome.describe();
  EXPECT_EQ(outcome.residual()->retained_bytes, kGranule);
}

TEST_F(CudaVirtualAllocatorTest, APrefixIsCreatedOnceMappedReadOnlyAndFreedOnceInEitherOrder) {
  covers("SM-001", "SM-009");
  for (bool handle_first : {true, false}) {
    void* target = committed(3 * kGranule, {});
    auto prefix = allocator_->create_shared_prefix(2 * kGranule - 5);
    ASSERT_TRUE(target && prefix);
    std::memset(reinterpret_cast<void*>((*prefix)->device_ptr()), 0x77, 2 * kGranule);
    const std::uint64_t created = driver_->calls("cuMemCreate");
    auto info = allocator_->commit_shared_prefix(**prefix, target, 3 * kGranule, kGranule);
    ASSERT_TRUE(info) << info.error().message();
    EXPECT_EQ(driver_->calls("cuMemCreate"), created) << "sharing created physical memory";
    EXPECT_EQ(info->additional_owned_bytes, 0U);
    EXPECT_EQ(*at(target, kGranule + 9), 0x77);
    EXPECT_EQ(driver_->live_handles(), 2U);
    if (handle_first) {
      prefix->reset();
      EXPECT_EQ(driver_->live_handles(), 2U) << "freed while a mapping remained";
      ASSERT_TRUE(allocator_->release(target, 3 * kGranule, 64).is_complete());
    } else {
      ASSERT_TRUE(allocator_->release(target, 3 * kGranule, 64).is_complete());
      EXPECT_EQ(driver_->live_handles(), 2U) << "freed while the handle remained";
      prefix->reset();
    }
    expect_nothing_held();
  }
}

TEST_F(CudaVirtualAllocatorTest, APrefixThatFailsToMapPartWayLeavesNothingMapped) {
  covers("SM-003");
  void* target = committed(2 * kGranule, {});
  auto prefix = allocator_->create_shared_prefix(2 * kGranule);
  ASSERT_TRUE(target && prefix);
  const std::size_t window_mappings = driver_->mappings();
  faults_->fail_nth(DriverCall::kMemSetAccess, 2);
  EXPECT_FALSE(allocator_->commit_shared_prefix(**prefix, target, 2 * kGranule, 0));
  faults_->clear();
  EXPECT_EQ(driver_->mappings(), window_mappings);
  ASSERT_TRUE(allocator_->commit_shared_prefix(**prefix, target, 2 * kGranule, 0));
}

TEST_F(CudaVirtualAllocatorTest, TheDestructorFreesNothingSinceWhatIsLeftMayBeQuarantined) {
  void* unreleased = committed(kGranule, {{0, kGranule}});
  void* quarantined = committed(kGranule, {{0, kGranule}});
  ASSERT_TRUE(unreleased && quarantined);
  faults_->fail_nth(DriverCall::kMemRelease, 1);
  ASSERT_TRUE(allocator_->release(quarantined, kGranule, 64).is_quarantined());
  faults_->clear();
  const std::uint64_t calls = driver_->calls("cuMemUnmap") + driver_->calls("cuMemRelease");
  allocator_.reset();
  EXPECT_EQ(driver_->calls("cuMemUnmap") + driver_->calls("cuMemRelease"), calls) << "the destructor called the driver";
  EXPECT_EQ(driver_->live_handles(), 2U);
  EXPECT_EQ(driver_->reservations(), 2U);
}

TEST_F(CudaVirtualAllocatorTest, ConcurrentReserveCommitAndReleaseAreSafe) {
  covers("ALLOC-016");
  std::atomic<int> problems{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 100; ++round) {
        auto ptr = allocator_->allocate_committed(2 * kGranule, 64, {});
        if (!ptr) {
          ++problems;
          continue;
        }
        if (!allocator_->commit_allocation_range(*ptr, 2 * kGranule, 64, 0, kGranule + 1)) ++problems;
        std::memset(*ptr, t, kGranule + 1);
        if (!allocator_->decommit_allocation_range(*ptr, 2 * kGranule, 64, 0, kGranule)) ++problems;
        if (!allocator_->release(*ptr, 2 * kGranule, 64).is_complete()) ++problems;
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(problems.load(), 0);
  expect_nothing_held();
}

}  // namespace
}  // namespace ortmem::cuda
