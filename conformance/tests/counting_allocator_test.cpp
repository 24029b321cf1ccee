// cts::CountingAllocator decides whether a registry test stands on a broken
// allocator (a precondition) or failed on the registry's own bug. These tests
// pin that decision down, above all for the case that decides REL-014: two
// releases of one allocation racing, where the allocator rightly refuses
// whichever reaches it second.
#include "support/counting_allocator.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <thread>

#include "ortmem/host/host_allocator.hpp"

namespace ortmem::cts {
namespace {

// Test double: the real host allocator, except that the first release call
// waits inside the allocator until the test lets it go. That fixes the order
// the two racing releases reach the allocator in, which real threads leave
// to chance.
class FirstReleaseWaits final : public DeviceAllocator {
 public:
  Expected<void*, MemoryError> allocate(std::size_t bytes, std::size_t align) noexcept override {
    return inner_.allocate(bytes, align);
  }
  AllocationReleaseOutcome release(void* ptr, std::size_t bytes, std::size_t align) noexcept override {
    if (!first_taken_.exchange(true)) {
      inside_.store(true);
      while (!go_.load()) std::this_thread::yield();
    }
    return inner_.release(ptr, bytes, align);
  }
  void deallocate(void* ptr, std::size_t bytes, std::size_t align) noexcept override {
    inner_.deallocate(ptr, bytes, align);
  }
  DeviceKey device() const noexcept override { return inner_.device(); }

  std::atomic<bool> inside_{false};
  std::atomic<bool> go_{false};

 private:
  host::HostAllocator inner_;
  std::atomic<bool> first_taken_{false};
};

// Test double: refuses every release, as a broken allocator would.
class RefusesReleases final : public DeviceAllocator {
 public:
  Expected<void*, MemoryError> allocate(std::size_t bytes, std::size_t align) noexcept override {
    return inner_.allocate(bytes, align);
  }
  AllocationReleaseOutcome release(void*, std::size_t, std::size_t) noexcept override {
    return AllocationReleaseOutcome::failed("test double: refused");
  }
  void deallocate(void* ptr, std::size_t bytes, std::size_t align) noexcept override {
    inner_.deallocate(ptr, bytes, align);
  }
  DeviceKey device() const noexcept override { return inner_.device(); }

 private:
  host::HostAllocator inner_;
};

TEST(CountingAllocator, ARacingSecondReleaseIsTheCallersBugWhicheverArrivesFirst) {
  auto gated = std::make_shared<FirstReleaseWaits>();
  CountingAllocator counting(gated);
  void* ptr = *counting.allocate(64, 16);
  // The first caller finds the allocation live, then stalls before the
  // allocator; the second frees it; the first is then refused.
  std::thread first([&] { EXPECT_TRUE(counting.release(ptr, 64, 16).is_failed()); });
  while (!gated->inside_.load()) std::this_thread::yield();
  EXPECT_TRUE(counting.release(ptr, 64, 16).is_complete());
  gated->go_.store(true);
  first.join();
  EXPECT_EQ(counting.deviation(), std::nullopt) << "a refused double release was blamed on the allocator";
  EXPECT_EQ(counting.release_calls.load(), 2U);
}

TEST(CountingAllocator, ASequentialSecondReleaseIsNotNoted) {
  CountingAllocator counting(std::make_shared<host::HostAllocator>());
  void* ptr = *counting.allocate(64, 16);
  EXPECT_TRUE(counting.release(ptr, 64, 16).is_complete());
  EXPECT_TRUE(counting.release(ptr, 64, 16).is_failed());
  EXPECT_EQ(counting.deviation(), std::nullopt);
}

TEST(CountingAllocator, ALoneRefusedReleaseOfALiveAllocationIsNoted) {
  CountingAllocator counting(std::make_shared<RefusesReleases>());
  void* ptr = *counting.allocate(64, 16);
  EXPECT_TRUE(counting.release(ptr, 64, 16).is_failed());
  ASSERT_TRUE(counting.deviation().has_value());
  EXPECT_NE(counting.deviation()->find("release(64 bytes) of a live allocation"), std::string::npos);
  counting.inner().deallocate(ptr, 64, 16);
}

}  // namespace
}  // namespace ortmem::cts
