// The parts of the CUDA reference that talk to the runtime: how a free's
// error becomes an outcome, and what every entry point says on a machine
// with no GPU (the checks that need a device run in scripts/gpu-check.sh).
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include "ortmem/cuda/cuda_allocator.hpp"
#include "ortmem/cuda/cuda_device.hpp"
#include "ortmem/cuda/cuda_provider_context.hpp"
#include "ortmem/cuda/cuda_vmm_driver.hpp"
#include "support/requirements.hpp"

namespace ortmem::cuda {
namespace {

using ortmem::test_support::covers;
using State = AllocationReleaseState;
using Reason = QuarantineReason::Kind;

TEST(CudaFreeOutcome, SuccessIsCompleteWithEagerAccounting) {
  covers("ALLOC-017");
  const auto outcome = release_outcome_after_free(cudaSuccess, 4096, 0x1000, 256);
  ASSERT_TRUE(outcome.is_complete());
  EXPECT_EQ(*outcome.accounting(), ReleaseAccounting::eager(4096));
}

TEST(CudaFreeOutcome, OnlyArgumentRefusalsAreFailed) {
  covers("ALLOC-018");
  for (cudaError_t error : {cudaErrorInvalidValue, cudaErrorInvalidDevicePointer}) {
    const auto outcome = release_outcome_after_free(error, 64, 0x1000, 256);
    EXPECT_TRUE(outcome.is_failed()) << cudaGetErrorName(error);
    EXPECT_NE(outcome.failure()->reason().find(cudaGetErrorName(error)), std::string::npos);
  }
}

TEST(CudaFreeOutcome, ALostDeviceIsDeviceLostQuarantineOfTheWholeBlock) {
  covers("ALLOC-019");
  for (cudaError_t error : {cudaErrorIllegalAddress, cudaErrorLaunchFailure, cudaErrorECCUncorrectable,
                            cudaErrorDevicesUnavailable, cudaErrorNoDevice}) {
    const auto outcome = release_outcome_after_free(error, 64, 0x2000, 512);
    ASSERT_TRUE(outcome.is_quarantined()) << cudaGetErrorName(error);
    EXPECT_EQ(outcome.state(), State::kDeviceLost) << cudaGetErrorName(error);
    EXPECT_EQ(outcome.residual()->reason.kind, Reason::kDeviceLost);
    EXPECT_EQ(outcome.residual()->retained_bytes, 64U);
    EXPECT_EQ(outcome.residual()->address, 0x2000U);
    EXPECT_EQ(outcome.residual()->align, 512U);
  }
}

TEST(CudaFreeOutcome, AnUnexplainedErrorIsQuarantinedNeverFailed) {
  covers("ALLOC-018", "ALLOC-019");
  for (cudaError_t error : {cudaErrorUnknown, cudaErrorNotPermitted, cudaErrorMemoryAllocation}) {
    const auto outcome = release_outcome_after_free(error, 64, 0x3000, 256);
    ASSERT_TRUE(outcome.is_quarantined()) << cudaGetErrorName(error);
    EXPECT_EQ(outcome.state(), State::kQuarantined);
    EXPECT_EQ(outcome.residual()->reason.kind, Reason::kAllocatorRefused);
  }
}

class WithoutADevice : public ::testing::Test {
 protected:
  void SetUp() override {
    if (probe_cuda_device(0)) GTEST_SKIP() << "this machine has a CUDA device; gpu-check.sh covers it";
  }
};

TEST_F(WithoutADevice, EveryEntryPointSaysWhyInOneLine) {
  const auto probed = probe_cuda_device(0);
  ASSERT_FALSE(probed);
  EXPECT_EQ(probed.error().rfind("no CUDA device", 0), 0U) << probed.error();
  EXPECT_EQ(probed.error().find('\n'), std::string::npos) << probed.error();
  auto allocator = CudaAllocator::create(0);
  ASSERT_FALSE(allocator);
  EXPECT_NE(allocator.error().reason().find("no CUDA device"), std::string::npos) << allocator.error().message();
  auto driver = load_cuda_vmm_driver(0);
  ASSERT_FALSE(driver);
  EXPECT_EQ(driver.error().rfind("no CUDA device", 0), 0U) << driver.error();
  auto context = CudaProviderContext::create(ProviderContextIdentity{}, 0);
  ASSERT_FALSE(context);
  EXPECT_EQ(context.error().rfind("no CUDA device", 0), 0U) << context.error();
}

}  // namespace
}  // namespace ortmem::cuda
