// adapters/host/host_vmm_variant.hpp: the host virtual-memory reference as a
// base for allocators that change one thing about it, and the host-vmm
// adapter around one.
//
// A known-bad virtual-backing or shared-mapping allocator overrides the one
// method it breaks, a known-good control the one choice it takes; everything
// else reaches one HostVirtualAllocator.
#pragma once

#include <memory>
#include <span>

#include "host/host_variant.hpp"
#include "host/host_vmm_adapter.hpp"
#include "ortmem/cts/adapter.hpp"
#include "ortmem/capability.hpp"
#include "ortmem/host/host_virtual_allocator.hpp"

namespace ortmem::adapters {

// The host-vmm adapter (page granules, fault injection) with `Allocator` wrapped around each
// HostVirtualAllocator it makes.
template <class Allocator>
class VmmVariant final : public RenamedHostAdapter {
 public:
  using RenamedHostAdapter::RenamedHostAdapter;
  cts::AdapterInfo info() const override {
    auto info = RenamedHostAdapter::info();
    info.capabilities.insert(
        {cts::Capability::kVirtualBacking, cts::Capability::kSharedMapping, cts::Capability::kFaultInjection});
    return info;
  }
  std::shared_ptr<DeviceAllocator> make_allocator() override {
    return std::make_shared<Allocator>(
        scoped_to_context(*host::HostVirtualAllocator::create({.granularity = 0, .faults = plan_})), plan_);
  }
  cts::FaultInjection* faults() override { return &faults_; }

 private:
  std::shared_ptr<host::SyscallFaults> plan_ = std::make_shared<host::SyscallFaults>();
  SyscallFaultInjection faults_{plan_};
};

// Forwards the allocator and both capabilities to one HostVirtualAllocator; the capabilities it
// hands out are its own, so a mutant overriding one method sees every call to it. (The batch commit
// goes to the reference's batch path, which commits through the reference's own single commit, not
// back through the wrapper's.)
class ForwardingVmm : public DeviceAllocator, public VirtualBacking, public SharedMapping {
 public:
  // `plan` is the adapter's fault plan, for a mutant that misbehaves around
  // an injected fault.
  explicit ForwardingVmm(std::shared_ptr<host::HostVirtualAllocator> inner,
                         std::shared_ptr<host::SyscallFaults> plan = nullptr)
      : inner_(std::move(inner)), plan_(std::move(plan)) {}

  // DeviceAllocator.
  Expected<void*, MemoryError> allocate(std::size_t bytes, std::size_t align) noexcept override {
    return inner_->allocate(bytes, align);
  }
  AllocationReleaseOutcome release(void* ptr, std::size_t bytes, std::size_t align) noexcept override {
    return inner_->release(ptr, bytes, align);
  }
  void deallocate(void* ptr, std::size_t bytes, std::size_t align) noexcept override {
    (void)release(ptr, bytes, align);
  }
  DeviceKey device() const noexcept override { return inner_->device(); }
  bool commits_on_demand() const noexcept override { return inner_->commits_on_demand(); }
  VirtualBacking* as_virtual_backing() noexcept override { return this; }
  SharedMapping* as_shared_mapping() noexcept override { return this; }

  // VirtualBacking.
  Expected<void*, MemoryError> allocate_committed(std::size_t bytes, std::size_t align,
                                                  std::span<const ByteRange> committed) noexcept override {
    return inner_->allocate_committed(bytes, align, committed);
  }
  Expected<void, MemoryError> commit_allocation_range(void* ptr, std::size_t allocation_bytes, std::size_t align,
                                                      std::size_t offset, std::size_t bytes) noexcept override {
    return inner_->commit_allocation_range(ptr, allocation_bytes, align, offset, bytes);
  }
  Expected<void, MemoryError> commit_allocation_ranges(
      std::span<const AllocationCommitRange> ranges) noexcept override {
    return inner_->commit_allocation_ranges(ranges);
  }
  Expected<std::uint64_t, MemoryError> decommit_allocation_range(void* ptr, std::size_t allocation_bytes,
                                                                 std::size_t align, std::size_t offset,
                                                                 std::size_t bytes) noexcept override {
    return inner_->decommit_allocation_range(ptr, allocation_bytes, align, offset, bytes);
  }
  Expected<std::uint64_t, MemoryError> mapped_bytes_for_allocation(std::size_t bytes,
                                                                   std::size_t align) const noexcept override {
    return inner_->mapped_bytes_for_allocation(bytes, align);
  }
  Expected<std::uint64_t, MemoryError> mapped_bytes_for_allocation_ranges(
      std::span<const AllocationCommitRange> ranges) const noexcept override {
    return inner_->mapped_bytes_for_allocation_ranges(ranges);
  }
  std::size_t allocation_committed_bytes(void* ptr, std::size_t allocation_bytes,
                                         std::size_t align) const noexcept override {
    return inner_->allocation_committed_bytes(ptr, allocation_bytes, align);
  }

  // SharedMapping.
  Expected<std::unique_ptr<SharedDevicePrefix>, MemoryError> create_shared_prefix(std::size_t bytes) noexcept override {
    return inner_->create_shared_prefix(bytes);
  }
  Expected<std::uint64_t, MemoryError> incremental_owned_bytes_for_shared_prefix(
      const SharedDevicePrefix& prefix) const noexcept override {
    return inner_->incremental_owned_bytes_for_shared_prefix(prefix);
  }
  Expected<SharedPrefixCommitInfo, MemoryError> commit_shared_prefix(const SharedDevicePrefix& prefix, void* ptr,
                                                                     std::size_t allocation_bytes,
                                                                     std::size_t byte_offset) noexcept override {
    return inner_->commit_shared_prefix(prefix, ptr, allocation_bytes, byte_offset);
  }

 protected:
  [[nodiscard]] std::size_t granule() const noexcept { return inner_->granularity(); }
  std::shared_ptr<host::HostVirtualAllocator> inner_;
  std::shared_ptr<host::SyscallFaults> plan_;
};

}  // namespace ortmem::adapters
