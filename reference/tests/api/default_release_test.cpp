// The structured release that every allocator inherits from the legacy entry points.
#include <gtest/gtest.h>

#include <atomic>

#include "ortmem/allocator.hpp"
#include "ortmem/host/host_allocator.hpp"
#include "support/requirements.hpp"

namespace ortmem {
namespace {

using test_support::covers;

// Test double: an allocator that implements only the three required methods,
// the way a pre-structured-release allocator does.
class LegacyOnlyAllocator final : public DeviceAllocator {
 public:
  Expected<void*, MemoryError> allocate(std::size_t bytes, std::size_t align) noexcept override {
    return inner_.allocate(bytes, align);
  }
  void deallocate(void* ptr, std::size_t bytes, std::size_t align) noexcept override {
    deallocations.fetch_add(1);
    inner_.deallocate(ptr, bytes, align);
  }
  DeviceKey device() const noexcept override { return DeviceKey::host(); }

  std::atomic<int> deallocations{0};

 private:
  host::HostAllocator inner_;
};

// Test double: a legacy allocator that reports mapped bytes through the older unmapped entry point.
class LegacyMappedAllocator final : public DeviceAllocator {
 public:
  Expected<void*, MemoryError> allocate(std::size_t bytes, std::size_t align) noexcept override {
    return inner_.allocate(bytes, align);
  }
  void deallocate(void* ptr, std::size_t bytes, std::size_t align) noexcept override {
    inner_.deallocate(ptr, bytes, align);
  }
  std::uint64_t deallocate_with_unmapped(void* ptr, std::size_t bytes, std::size_t align) noexcept override {
    deallocate(ptr, bytes, align);
    return 4096;
  }
  DeviceKey device() const noexcept override { return DeviceKey::host(); }

 private:
  host::HostAllocator inner_;
};

TEST(DefaultRelease, WrapsLegacyDeallocateAndReportsComplete) {
  covers("ALLOC-022", "ALLOC-017");
  LegacyOnlyAllocator allocator;
  auto ptr = allocator.allocate(300, 16);
  ASSERT_TRUE(ptr);
  const auto outcome = allocator.release(*ptr, 300, 16);
  ASSERT_TRUE(outcome.is_complete()) << outcome.describe();
  EXPECT_EQ(*outcome.accounting(), ReleaseAccounting::eager(300));
  EXPECT_EQ(allocator.deallocations.load(), 1);
}

TEST(DefaultRelease, CarriesUnmappedBytesFromTheLegacyUnmappedEntryPoint) {
  covers("ALLOC-022");
  LegacyMappedAllocator allocator;
  auto ptr = allocator.allocate(8192, 4096);
  ASSERT_TRUE(ptr);
  const auto outcome = allocator.release(*ptr, 8192, 4096);
  ASSERT_TRUE(outcome.is_complete());
  EXPECT_EQ(outcome.accounting()->allocation_bytes, 8192U);
  EXPECT_EQ(outcome.unmapped_bytes(), 4096U);
}

TEST(DefaultRelease, CapabilitiesAreAbsentAndCommitsOnDemandIsFalseByDefault) {
  covers("ALLOC-012", "ALLOC-013");
  LegacyOnlyAllocator allocator;
  EXPECT_EQ(allocator.as_virtual_backing(), nullptr);
  EXPECT_EQ(allocator.as_shared_mapping(), nullptr);
  EXPECT_FALSE(allocator.commits_on_demand());
}

}  // namespace
}  // namespace ortmem
