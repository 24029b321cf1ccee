// adapters/cuda/driver_fault_injection.hpp: the kit's fault points on a CUDA
// VMM mechanism, armed through its DriverFaults plan.
//
// A release unmaps runs and a decommit unmaps granules (cuMemUnmap); a
// commit and a prefix mapping map granules (cuMemMap) and then grant access
// to each (cuMemSetAccess); a release and a decommit give each granule's
// handle back (cuMemRelease).
#pragma once

#include <memory>

#include "ortmem/cts/adapter.hpp"
#include "ortmem/cuda/vmm_driver.hpp"

namespace ortmem::adapters {

class DriverFaultInjection final : public cts::FaultInjection {
 public:
  explicit DriverFaultInjection(std::shared_ptr<cuda::DriverFaults> plan) : plan_(std::move(plan)) {}
  bool arm(cts::FaultPoint point, std::uint64_t nth) override {
    plan_->fail_nth(call_behind(point), nth);
    return true;
  }
  void clear() override { plan_->clear(); }
  [[nodiscard]] const std::shared_ptr<cuda::DriverFaults>& plan() const { return plan_; }

 private:
  static cuda::DriverCall call_behind(cts::FaultPoint point) {
    switch (point) {
      case cts::FaultPoint::kReleaseUnmap: return cuda::DriverCall::kMemUnmap;
      case cts::FaultPoint::kCommit: return cuda::DriverCall::kMemMap;
      case cts::FaultPoint::kDecommit: return cuda::DriverCall::kMemUnmap;
      case cts::FaultPoint::kPrefixMap: return cuda::DriverCall::kMemMap;
      case cts::FaultPoint::kPhysicalFree: return cuda::DriverCall::kMemRelease;
      case cts::FaultPoint::kAccessGrant: return cuda::DriverCall::kMemSetAccess;
    }
    return cuda::DriverCall::kMemMap;
  }
  std::shared_ptr<cuda::DriverFaults> plan_;
};

}  // namespace ortmem::adapters
