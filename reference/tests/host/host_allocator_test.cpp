// The reference host allocator against the ordinary allocator contract.
#include "ortmem/host/host_allocator.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#include "support/requirements.hpp"

namespace ortmem::host {
namespace {

using test_support::covers;

std::uintptr_t address_of(const void* ptr) { return reinterpret_cast<std::uintptr_t>(ptr); }

TEST(HostAllocator, ReturnsAlignedNonNullAddressesForEveryAlignmentUpTo4MiB) {
  covers("ALLOC-005");
  HostAllocator allocator;
  for (std::size_t align = 1; align <= (std::size_t{4} << 20); align <<= 1) {
    for (std::size_t bytes : {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{4096}}) {
      auto ptr = allocator.allocate(bytes, align);
      ASSERT_TRUE(ptr) << ptr.error().message();
      ASSERT_NE(*ptr, nullptr);
      EXPECT_EQ(address_of(*ptr) % align, 0U) << "bytes " << bytes << " align " << align;
      const auto outcome = allocator.release(*ptr, bytes, align);
      ASSERT_TRUE(outcome.is_complete()) << outcome.describe();
    }
  }
  EXPECT_EQ(allocator.live_allocations(), 0U);
}

// Destroying an allocator must not free what it still holds: the allocator
// cannot tell an owner that never released from a quarantined allocation, and
// quarantined memory is never reissued. Freed, the block would be the heap's
// next answer for its size (the thread's cache is last-in first-out).
TEST(HostAllocator, DestroyingItReissuesNothingItStillHeld) {
  void* held = nullptr;
  {
    HostAllocator allocator;
    auto ptr = allocator.allocate(48, 8);
    ASSERT_TRUE(ptr) << ptr.error().message();
    held = *ptr;
    std::memset(held, 0x5a, 48);
  }
  std::vector<void*> later;
  for (int i = 0; i < 64; ++i) later.push_back(::operator new(48));
  EXPECT_EQ(std::find(later.begin(), later.end(), held), later.end())
      << "a block the allocator still held was reissued";
  for (void* block : later) ::operator delete(block);
  const auto* bytes = static_cast<const unsigned char*>(held);
  EXPECT_TRUE(std::all_of(bytes, bytes + 48, [](unsigned char b) { return b == 0x5a; }));
}

TEST(HostAllocator, ReclaimingAfterItsContextIsDestroyedFreesEveryLiveBlockOnce) {
  HostAllocator allocator;
  for (const std::size_t align : {std::size_t{8}, std::size_t{64}, std::size_t{4096}}) {
    ASSERT_TRUE(allocator.allocate(100, align));
  }
  // Under ASan a second free, or a free that does not match the allocation's alignment, fails here.
  EXPECT_EQ(allocator.reclaim_all_after_context_destroyed(), 3U);
  EXPECT_EQ(allocator.live_allocations(), 0U);
  EXPECT_EQ(allocator.live_bytes(), 0U);
  EXPECT_EQ(allocator.reclaim_all_after_context_destroyed(), 0U);
}

TEST(HostAllocator, ZeroByteAllocationsAreDistinctAndReleasable) {
  covers("ALLOC-007");
  HostAllocator allocator;
  std::vector<void*> blocks;
  for (int i = 0; i < 16; ++i) {
    auto ptr = allocator.allocate(0, 8);
    ASSERT_TRUE(ptr) << ptr.error().message();
    blocks.push_back(*ptr);
  }
  std::sort(blocks.begin(), blocks.end());
  EXPECT_EQ(std::adjacent_find(blocks.begin(), blocks.end()), blocks.end()) << "two zero-byte blocks alias";
  for (void* block : blocks) {
    const auto outcome = allocator.release(block, 0, 8);
    ASSERT_TRUE(outcome.is_complete()) << outcome.describe();
    EXPECT_EQ(outcome.accounting()->allocation_bytes, 0U);
  }
}

TEST(HostAllocator, RefusesAlignmentThatIsNotAPowerOfTwo) {
  covers("ALLOC-008");
  HostAllocator allocator;
  for (std::size_t align : {std::size_t{0}, std::size_t{3}, std::size_t{48}, std::size_t{4097}}) {
    auto ptr = allocator.allocate(64, align);
    ASSERT_FALSE(ptr) << "alignment " << align << " was accepted";
    EXPECT_EQ(ptr.error().kind(), MemoryError::Kind::kInvalidRequest);
    EXPECT_EQ(ptr.error().requested(), 64U);
    EXPECT_NE(ptr.error().reason().find("power of two"), std::string::npos) << ptr.error().reason();
  }
  EXPECT_EQ(allocator.live_allocations(), 0U);
}

TEST(HostAllocator, RefusesASizeThatOverflowsWhenRounded) {
  covers("ALLOC-008");
  HostAllocator allocator;
  auto ptr = allocator.allocate(SIZE_MAX, 64);
  ASSERT_FALSE(ptr);
  EXPECT_EQ(ptr.error().kind(), MemoryError::Kind::kInvalidRequest);
  EXPECT_NE(ptr.error().reason().find("overflows"), std::string::npos) << ptr.error().reason();
  EXPECT_EQ(allocator.live_allocations(), 0U);
}

TEST(HostAllocator, ReportsABackingRefusalAsAllocationFailedWithTheBackingReason) {
  covers("ALLOC-009", "ALLOC-002");
  HostAllocator allocator;
  for (std::size_t bytes : {std::size_t{1} << 50 /* 1 PiB */, SIZE_MAX - 4096}) {
    auto ptr = allocator.allocate(bytes, 1);
    ASSERT_FALSE(ptr) << bytes << " bytes were granted";
    EXPECT_EQ(ptr.error().kind(), MemoryError::Kind::kAllocationFailed);
    EXPECT_EQ(ptr.error().requested(), bytes);
    EXPECT_NE(ptr.error().reason().find("system allocator"), std::string::npos);
    EXPECT_NE(ptr.error().message().find(ptr.error().reason()), std::string::npos)
        << "the message must keep the backing allocator's own words";
  }
  EXPECT_EQ(allocator.live_allocations(), 0U);
}

TEST(HostAllocator, LiveAllocationsNeverOverlapAndKeepTheirContents) {
  covers("ALLOC-006", "ALLOC-015");
  HostAllocator allocator;
  struct Block {
    unsigned char* ptr;
    std::size_t bytes;
    std::size_t align;
    unsigned char pattern;
  };
  std::vector<Block> blocks;
  for (std::size_t i = 0; i < 64; ++i) {
    const std::size_t bytes = 1 + (i * 977) % 20000;
    const std::size_t align = std::size_t{1} << (i % 13);
    auto ptr = allocator.allocate(bytes, align);
    ASSERT_TRUE(ptr) << ptr.error().message();
    blocks.push_back({static_cast<unsigned char*>(*ptr), bytes, align, static_cast<unsigned char>(i * 37 + 1)});
    std::memset(blocks.back().ptr, blocks.back().pattern, bytes);
  }
  auto by_address = blocks;
  std::sort(by_address.begin(), by_address.end(), [](const Block& a, const Block& b) { return a.ptr < b.ptr; });
  for (std::size_t i = 1; i < by_address.size(); ++i) {
    EXPECT_LE(by_address[i - 1].ptr + by_address[i - 1].bytes, by_address[i].ptr) << "blocks overlap";
  }
  for (const Block& block : blocks) {
    EXPECT_EQ(std::count(block.ptr, block.ptr + block.bytes, block.pattern), static_cast<std::ptrdiff_t>(block.bytes))
        << "another allocation overwrote this one";
    ASSERT_TRUE(allocator.release(block.ptr, block.bytes, block.align).is_complete());
  }
}

TEST(HostAllocator, CompleteReleaseReportsTheExactAllocationBytesAndZeroUnmapped) {
  covers("ALLOC-017");
  HostAllocator allocator;
  auto ptr = allocator.allocate(12345, 32);
  ASSERT_TRUE(ptr);
  const auto outcome = allocator.release(*ptr, 12345, 32);
  ASSERT_TRUE(outcome.is_complete()) << outcome.describe();
  EXPECT_EQ(*outcome.accounting(), ReleaseAccounting::eager(12345));
  EXPECT_EQ(outcome.state(), AllocationReleaseState::kReleased);
  EXPECT_EQ(allocator.live_bytes(), 0U);
}

TEST(HostAllocator, ReleaseOfAnUnknownAddressIsFailedWithNothingChanged) {
  covers("ALLOC-018", "ALLOC-020");
  HostAllocator allocator;
  auto live = allocator.allocate(256, 16);
  ASSERT_TRUE(live);
  alignas(16) unsigned char not_ours[256];
  const auto outcome = allocator.release(not_ours, sizeof not_ours, 16);
  ASSERT_TRUE(outcome.is_failed()) << outcome.describe();
  EXPECT_EQ(outcome.state(), AllocationReleaseState::kLive);
  EXPECT_EQ(outcome.accounting(), nullptr);
  EXPECT_EQ(allocator.live_allocations(), 1U);
  EXPECT_TRUE(allocator.release(*live, 256, 16).is_complete());
}

TEST(HostAllocator, ReleaseWithWrongSizeOrAlignmentIsFailedAndTheAllocationStaysLive) {
  covers("ALLOC-018", "ALLOC-020");
  HostAllocator allocator;
  auto ptr = allocator.allocate(512, 64);
  ASSERT_TRUE(ptr);
  std::memset(*ptr, 0x5A, 512);
  for (auto [bytes, align] : {std::pair<std::size_t, std::size_t>{511, 64}, {512, 32}, {1024, 64}}) {
    const auto outcome = allocator.release(*ptr, bytes, align);
    ASSERT_TRUE(outcome.is_failed()) << "release(" << bytes << ", " << align << ") " << outcome.describe();
    EXPECT_NE(outcome.failure()->reason().find("nothing was changed"), std::string::npos);
  }
  EXPECT_EQ(allocator.live_allocations(), 1U);
  auto* bytes = static_cast<unsigned char*>(*ptr);
  EXPECT_EQ(std::count(bytes, bytes + 512, 0x5A), 512) << "a refused release touched the bytes";
  EXPECT_TRUE(allocator.release(*ptr, 512, 64).is_complete()) << "a Failed release must leave it releasable";
}

TEST(HostAllocator, DoubleReleaseIsDetectedAsFailed) {
  covers("ALLOC-021");
  HostAllocator allocator;
  auto ptr = allocator.allocate(64, 8);
  ASSERT_TRUE(ptr);
  ASSERT_TRUE(allocator.release(*ptr, 64, 8).is_complete());
  EXPECT_TRUE(allocator.release(*ptr, 64, 8).is_failed());
}

TEST(HostAllocator, DeviceAndCapabilitiesAreStableAndEagerOnly) {
  covers("ALLOC-010", "ALLOC-013");
  HostAllocator allocator;
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(allocator.device(), DeviceKey::host());
    EXPECT_EQ(allocator.as_virtual_backing(), nullptr);
    EXPECT_EQ(allocator.as_shared_mapping(), nullptr);
    EXPECT_FALSE(allocator.commits_on_demand());
    auto ptr = allocator.allocate(8, 8);
    ASSERT_TRUE(ptr);
    ASSERT_TRUE(allocator.release(*ptr, 8, 8).is_complete());
  }
}

TEST(HostAllocator, LegacyDeallocateFreesALiveAllocationAndIgnoresAnUnknownOne) {
  covers("ALLOC-022");
  HostAllocator allocator;
  auto ptr = allocator.allocate(100, 4);
  ASSERT_TRUE(ptr);
  allocator.deallocate(*ptr, 100, 4);
  EXPECT_EQ(allocator.live_allocations(), 0U);
  allocator.deallocate(*ptr, 100, 4);  // already gone: must not double free (asan would report it)
  EXPECT_EQ(allocator.live_allocations(), 0U);
}

TEST(HostAllocator, ConcurrentAllocateAndReleaseFromEightThreads) {
  covers("ALLOC-016", "ALLOC-006");
  HostAllocator allocator;
  constexpr int kThreads = 8;
  constexpr int kRounds = 2000;
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::vector<std::pair<unsigned char*, std::size_t>> held;
      for (int round = 0; round < kRounds; ++round) {
        const std::size_t bytes = 1 + static_cast<std::size_t>((round * 131 + t * 17) % 700);
        auto ptr = allocator.allocate(bytes, 16);
        if (!ptr) {
          failures.fetch_add(1);
          continue;
        }
        auto* block = static_cast<unsigned char*>(*ptr);
        std::memset(block, t + 1, bytes);
        held.emplace_back(block, bytes);
        if (held.size() > 8) {
          auto [old, old_bytes] = held.front();
          held.erase(held.begin());
          if (std::count(old, old + old_bytes, t + 1) != static_cast<std::ptrdiff_t>(old_bytes)) failures.fetch_add(1);
          if (!allocator.release(old, old_bytes, 16).is_complete()) failures.fetch_add(1);
        }
      }
      for (auto [block, bytes] : held) {
        if (!allocator.release(block, bytes, 16).is_complete()) failures.fetch_add(1);
      }
    });
  }
  // The totals are read while the workers run, so that the tsan preset checks
  // those reads against the writers. Their values mid-run are not asserted:
  // a sum over shards read one after another may count a block released from
  // one shard and its successor in another.
  std::atomic<bool> done{false};
  std::thread reader([&] {
    while (!done.load()) {
      (void)allocator.live_allocations();
      (void)allocator.live_bytes();
    }
  });
  for (auto& thread : threads) thread.join();
  done = true;
  reader.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(allocator.live_allocations(), 0U);
  EXPECT_EQ(allocator.live_bytes(), 0U);
}

}  // namespace
}  // namespace ortmem::host
