// Tiers, device keys, roles and the error vocabulary.
#include <gtest/gtest.h>

#include "ortmem/device.hpp"
#include "ortmem/memory_error.hpp"
#include "support/requirements.hpp"

namespace ortmem {
namespace {

using test_support::covers;

bool mentions(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(Tier, OrderIsFastestFirstAndNamesAreStable) {
  covers("ALLOC-004");
  EXPECT_LT(Tier::kDevice, Tier::kHost);
  EXPECT_LT(Tier::kHost, Tier::kDisk);
  EXPECT_EQ(tier_name(Tier::kDevice), "device");
  EXPECT_EQ(tier_name(Tier::kHost), "host");
  EXPECT_EQ(tier_name(Tier::kDisk), "disk");
}

TEST(DeviceKey, TwoAcceleratorsShareATierAndAreDifferentKeys) {
  covers("ALLOC-004");
  EXPECT_EQ(DeviceKey::host(), (DeviceKey{Tier::kHost, 0}));
  EXPECT_EQ(DeviceKey::device(0).tier, DeviceKey::device(1).tier);
  EXPECT_NE(DeviceKey::device(0), DeviceKey::device(1));
  EXPECT_NE(DeviceKey::device(0), DeviceKey::host());
  EXPECT_EQ(to_string(DeviceKey::device(1)), "device:1");
}

TEST(MemoryError, TierExhaustedCarriesItsFactsAndSaysWhatToDo) {
  covers("ALLOC-001", "ALLOC-003");
  const auto error = MemoryError::tier_exhausted(Tier::kDevice, 4096, 1000, 4000, MemoryRole::kv_cache());
  EXPECT_EQ(error.kind(), MemoryError::Kind::kTierExhausted);
  EXPECT_EQ(error.requested(), 4096U);
  EXPECT_EQ(error.used(), 1000U);
  EXPECT_EQ(error.limit(), 4000U);
  EXPECT_EQ(error.available(), 3000U);
  EXPECT_EQ(error.role(), MemoryRole::kv_cache());
  const auto text = error.message();
  EXPECT_TRUE(mentions(text, "4096 bytes of device memory")) << text;
  EXPECT_TRUE(mentions(text, "kv-cache")) << text;
  EXPECT_TRUE(mentions(text, "raise the device limit")) << text;
}

TEST(MemoryError, InvalidRequestCarriesTheReason) {
  covers("ALLOC-001", "ALLOC-003");
  const auto error = MemoryError::invalid_request(Tier::kHost, 64, "alignment 3 is not a power of two");
  EXPECT_EQ(error.kind(), MemoryError::Kind::kInvalidRequest);
  EXPECT_TRUE(mentions(error.message(), "64 bytes of host memory"));
  EXPECT_TRUE(mentions(error.message(), "alignment 3 is not a power of two"));
  EXPECT_TRUE(mentions(error.message(), "fix the request"));
}

TEST(MemoryError, AllocationFailedKeepsTheBackingAllocatorsOwnWords) {
  covers("ALLOC-001", "ALLOC-002");
  const auto out_of_memory = MemoryError::allocation_failed(Tier::kDevice, 1 << 20, "cudaErrorMemoryAllocation");
  const auto no_context = MemoryError::allocation_failed(Tier::kDevice, 1 << 20, "CUDA_ERROR_INVALID_CONTEXT");
  EXPECT_EQ(out_of_memory.reason(), "cudaErrorMemoryAllocation");
  EXPECT_TRUE(mentions(out_of_memory.message(), "cudaErrorMemoryAllocation"));
  EXPECT_TRUE(mentions(no_context.message(), "CUDA_ERROR_INVALID_CONTEXT"));
  EXPECT_NE(out_of_memory.message(), no_context.message());
}

TEST(MemoryError, CapacityUnavailableKeepsItsCauseForMatching) {
  covers("ALLOC-001");
  auto cause = std::make_shared<const MemoryError>(
      MemoryError::tier_exhausted(Tier::kHost, 100, 90, 100, MemoryRole::weights()));
  const auto error =
      MemoryError::capacity_unavailable(Tier::kHost, 100, 10, MemoryRole::weights(), "reclaim fell short", cause);
  EXPECT_EQ(error.kind(), MemoryError::Kind::kCapacityUnavailable);
  EXPECT_EQ(error.available(), 10U);
  ASSERT_NE(error.cause(), nullptr);
  EXPECT_EQ(error.cause()->kind(), MemoryError::Kind::kTierExhausted);
  EXPECT_TRUE(mentions(error.message(), "reclaim fell short"));
  EXPECT_TRUE(mentions(error.message(), "caused by"));
}

}  // namespace
}  // namespace ortmem
