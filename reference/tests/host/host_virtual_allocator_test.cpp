// The host virtual allocator's own bookkeeping: what the generic VB and SM
// suites cannot see from outside.
#include "ortmem/host/host_virtual_allocator.hpp"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <thread>
#include <vector>

#include "support/requirements.hpp"

namespace ortmem::host {
namespace {

using test_support::covers;

std::shared_ptr<HostVirtualAllocator> make(std::size_t granularity = 0,
                                           std::shared_ptr<SyscallFaults> faults = nullptr) {
  auto allocator = HostVirtualAllocator::create({.granularity = granularity, .faults = std::move(faults)});
  EXPECT_TRUE(allocator) << (allocator ? "" : allocator.error().message());
  return *allocator;
}

TEST(HostVirtualAllocator, RefusesAGranularityThatIsNotAPageMultiple) {
  const auto page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  for (std::size_t granularity : {page / 2, page * 3, std::size_t{12345}}) {
    auto allocator = HostVirtualAllocator::create({.granularity = granularity, .faults = nullptr});
    ASSERT_FALSE(allocator) << granularity;
    EXPECT_EQ(allocator.error().kind(), MemoryError::Kind::kInvalidRequest);
    EXPECT_NE(allocator.error().reason().find("page size"), std::string::npos);
  }
  EXPECT_EQ(make(page * 512)->granularity(), page * 512);
}

// As for the host allocator: an allocation still reserved when the allocator
// goes may be quarantined, so its addresses stay mapped (msync answers ENOMEM
// for an unmapped range) and keep what was written there.
TEST(HostVirtualAllocator, DestroyingItUnmapsNothingItStillHeld) {
  const auto page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  void* held = nullptr;
  {
    auto allocator = make();
    auto ptr = allocator->allocate(3 * page, page);
    ASSERT_TRUE(ptr) << ptr.error().message();
    held = *ptr;
    std::memset(held, 0x5a, 3 * page);
  }
  ASSERT_EQ(::msync(held, 3 * page, MS_ASYNC), 0) << "the allocation was unmapped: " << std::strerror(errno);
  const auto* bytes = static_cast<const unsigned char*>(held);
  EXPECT_TRUE(std::all_of(bytes, bytes + 3 * page, [](unsigned char b) { return b == 0x5a; }));
}

TEST(HostVirtualAllocator, ReclaimingAfterItsContextIsDestroyedUnmapsEveryRegionStillReserved) {
  const auto page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  auto allocator = make();
  std::vector<void*> held;
  for (const std::size_t pages : {1, 3}) {
    auto ptr = allocator->allocate(pages * page, page);
    ASSERT_TRUE(ptr) << ptr.error().message();
    held.push_back(*ptr);
  }
  EXPECT_EQ(allocator->reclaim_all_after_context_destroyed(), 2U);
  EXPECT_EQ(allocator->live_allocations(), 0U);
  for (void* ptr : held) {
    EXPECT_EQ(::msync(ptr, page, MS_ASYNC), -1) << "a region outlived its context's reclaim";
    EXPECT_EQ(errno, ENOMEM);
  }
  EXPECT_EQ(allocator->reclaim_all_after_context_destroyed(), 0U) << "a region was reclaimed twice";
}

TEST(HostVirtualAllocator, TwoMegabyteGranulesRoundCommitsAndReleases) {
  covers("VB-001", "VB-004");
  auto allocator = make(std::size_t{2} << 20);
  const ByteRange range{100, 200};
  auto ptr = allocator->allocate_committed(std::size_t{5} << 20, 64, std::span<const ByteRange>(&range, 1));
  ASSERT_TRUE(ptr);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(*ptr) % (std::size_t{2} << 20), 0U) << "not granule-aligned";
  EXPECT_EQ(allocator->allocation_committed_bytes(*ptr, std::size_t{5} << 20, 64), std::size_t{2} << 20);
  const auto outcome = allocator->release(*ptr, std::size_t{5} << 20, 64);
  ASSERT_TRUE(outcome.is_complete());
  EXPECT_EQ(outcome.unmapped_bytes(), std::size_t{2} << 20);
  EXPECT_EQ(allocator->live_allocations(), 0U);
}

TEST(HostVirtualAllocator, APrefixIsFreedExactlyOnceInEitherOrder) {
  covers("SM-009");
  auto allocator = make();
  const std::size_t granule = allocator->granularity();
  for (bool handle_first : {true, false}) {
    auto target = allocator->allocate_committed(2 * granule, 64, {});
    auto prefix = allocator->create_shared_prefix(granule);
    ASSERT_TRUE(target && prefix);
    ASSERT_TRUE(allocator->commit_shared_prefix(**prefix, *target, 2 * granule, 0));
    EXPECT_EQ(allocator->live_prefix_memories(), 1U);
    if (handle_first) {
      prefix->reset();
      EXPECT_EQ(allocator->live_prefix_memories(), 1U) << "freed while a mapping remained";
      ASSERT_TRUE(allocator->release(*target, 2 * granule, 64).is_complete());
    } else {
      ASSERT_TRUE(allocator->release(*target, 2 * granule, 64).is_complete());
      EXPECT_EQ(allocator->live_prefix_memories(), 1U) << "freed while the handle remained";
      prefix->reset();
    }
    EXPECT_EQ(allocator->live_prefix_memories(), 0U) << "not freed once the last holder went";
  }
}

TEST(HostVirtualAllocator, AFailedFirstUnmapIsFailedAndTheAllocationStaysLive) {
  covers("ALLOC-018");
  auto faults = std::make_shared<SyscallFaults>();
  auto allocator = make(0, faults);
  auto ptr = allocator->allocate(3 * allocator->granularity(), 64);
  ASSERT_TRUE(ptr);
  faults->fail_nth(Syscall::kMunmap, 1);
  const auto refused = allocator->release(*ptr, 3 * allocator->granularity(), 64);
  EXPECT_TRUE(refused.is_failed()) << refused.describe();
  faults->clear();
  EXPECT_TRUE(allocator->release(*ptr, 3 * allocator->granularity(), 64).is_complete());
}

TEST(HostVirtualAllocator, ACommitThatFailsPartWayRollsBack) {
  covers("VB-002", "VB-005");
  auto faults = std::make_shared<SyscallFaults>();
  auto allocator = make(0, faults);
  const std::size_t granule = allocator->granularity();
  auto ptr = allocator->allocate_committed(4 * granule, 64, {});
  ASSERT_TRUE(ptr);
  faults->fail_nth(Syscall::kMprotect, 3);
  EXPECT_FALSE(allocator->commit_allocation_range(*ptr, 4 * granule, 64, 0, 4 * granule));
  faults->clear();
  EXPECT_EQ(allocator->allocation_committed_bytes(*ptr, 4 * granule, 64), 0U) << "a failed commit left granules mapped";
  EXPECT_TRUE(allocator->commit_allocation_range(*ptr, 4 * granule, 64, 0, 4 * granule));
  EXPECT_EQ(allocator->allocation_committed_bytes(*ptr, 4 * granule, 64), 4 * granule);
}

TEST(HostVirtualAllocator, ConcurrentReserveCommitAndReleaseAreSafe) {
  covers("ALLOC-016");
  auto allocator = make();
  const std::size_t granule = allocator->granularity();
  std::atomic<int> problems{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int round = 0; round < 200; ++round) {
        auto ptr = allocator->allocate_committed(3 * granule, 64, {});
        if (!ptr) {
          ++problems;
          continue;
        }
        if (!allocator->commit_allocation_range(*ptr, 3 * granule, 64, granule, granule)) ++problems;
        static_cast<unsigned char*>(*ptr)[granule] = 1;
        if (!allocator->release(*ptr, 3 * granule, 64).is_complete()) ++problems;
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(problems.load(), 0);
  EXPECT_EQ(allocator->live_allocations(), 0U);
}

}  // namespace
}  // namespace ortmem::host
