#include "host_vmm_adapter.hpp"

#include "host_adapter.hpp"
#include "ortmem/cts/adapter_registry.hpp"
#include "ortmem/host/host_virtual_allocator.hpp"

namespace ortmem::adapters {

SyscallFaultInjection::SyscallFaultInjection(std::shared_ptr<host::SyscallFaults> plan,
                                             std::optional<std::set<cts::FaultPoint>> points)
    : plan_(std::move(plan)), points_(std::move(points)) {}

bool SyscallFaultInjection::arm(cts::FaultPoint point, std::uint64_t nth) {
  if (points_ && !points_->contains(point)) return false;
  const auto syscall = syscall_behind(point);
  if (!syscall) return false;
  plan_->fail_nth(*syscall, nth);
  return true;
}

void SyscallFaultInjection::clear() { plan_->clear(); }

std::optional<host::Syscall> SyscallFaultInjection::syscall_behind(cts::FaultPoint point) {
  switch (point) {
    case cts::FaultPoint::kReleaseUnmap: return host::Syscall::kMunmap;
    case cts::FaultPoint::kCommit: return host::Syscall::kMprotect;
    case cts::FaultPoint::kDecommit: return host::Syscall::kMprotect;
    case cts::FaultPoint::kPrefixMap: return host::Syscall::kMmap;
    case cts::FaultPoint::kPhysicalFree: return host::Syscall::kMadvise;
    case cts::FaultPoint::kAccessGrant: return std::nullopt;
  }
  return std::nullopt;
}

namespace {

class HostVmmAdapter final : public HostAdapter {
 public:
  HostVmmAdapter(std::string name, std::size_t granularity) : name_(std::move(name)), granularity_(granularity) {}

  cts::AdapterInfo info() const override {
    auto info = HostAdapter::info();
    info.name = name_;
    info.capabilities.insert(
        {cts::Capability::kVirtualBacking, cts::Capability::kSharedMapping, cts::Capability::kFaultInjection});
    return info;
  }
  std::shared_ptr<DeviceAllocator> make_allocator() override {
    // A granularity this adapter chose itself cannot be refused.
    return scoped_to_context(*host::HostVirtualAllocator::create({.granularity = granularity_, .faults = plan_}));
  }
  cts::FaultInjection* faults() override { return &faults_; }

 private:
  std::string name_;
  std::size_t granularity_;
  std::shared_ptr<host::SyscallFaults> plan_ = std::make_shared<host::SyscallFaults>();
  SyscallFaultInjection faults_{plan_};
};

}  // namespace

void register_host_vmm_adapters() {
  cts::register_adapter("host-vmm", [] { return std::make_unique<HostVmmAdapter>("host-vmm", 0); });
  cts::register_adapter("host-vmm-2m",
                        [] { return std::make_unique<HostVmmAdapter>("host-vmm-2m", std::size_t{2} << 20); });
}

}  // namespace ortmem::adapters
