// ortmem/bound_capability.hpp: capabilities reached through a binding.
//
// A bound capability re-validates binding identity and the allocation's
// generation on EVERY call, before the capability runs, so metadata from
// another binding fails with binding-mismatch and stale metadata with
// stale-allocation without any callback. Calls run with no lock held and
// count as active operations of the mechanism.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "ortmem/binding.hpp"
#include "ortmem/capability.hpp"
#include "ortmem/owning_allocation.hpp"

namespace ortmem {

class BoundVirtualBacking {
 public:
  [[nodiscard]] const BindingIdentity& binding_identity() const noexcept { return binding_.identity(); }

  // Reserves an allocation committing only `committed`, and owns it.
  [[nodiscard]] Expected<OwningAllocation, BindingError> allocate_committed(std::size_t bytes, std::size_t align,
                                                                            std::span<const ByteRange> committed) const;
  [[nodiscard]] Expected<void, BindingError> commit(const BoundAllocation& allocation, std::size_t offset,
                                                    std::size_t bytes) const;
  [[nodiscard]] Expected<std::uint64_t, BindingError> decommit(const BoundAllocation& allocation, std::size_t offset,
                                                               std::size_t bytes) const;
  [[nodiscard]] Expected<std::size_t, BindingError> committed_bytes(const BoundAllocation& allocation) const;
  // The same on an owned allocation (an owner never lends its metadata).
  [[nodiscard]] Expected<void, BindingError> commit(const OwningAllocation& owner, std::size_t offset,
                                                    std::size_t bytes) const {
    return commit(owner.allocation_, offset, bytes);
  }
  [[nodiscard]] Expected<std::uint64_t, BindingError> decommit(const OwningAllocation& owner, std::size_t offset,
                                                               std::size_t bytes) const {
    return decommit(owner.allocation_, offset, bytes);
  }
  [[nodiscard]] Expected<std::size_t, BindingError> committed_bytes(const OwningAllocation& owner) const {
    return committed_bytes(owner.allocation_);
  }
  [[nodiscard]] Expected<std::uint64_t, BindingError> mapped_bytes_for_allocation(std::size_t bytes,
                                                                                  std::size_t align) const;

 private:
  friend class MemoryBinding;
  explicit BoundVirtualBacking(MemoryBinding binding) noexcept : binding_(std::move(binding)) {}
  MemoryBinding binding_;
};

// A shared prefix created through one binding; usable only through it.
class BoundSharedPrefix {
 public:
  [[nodiscard]] const BindingIdentity& binding_identity() const noexcept { return binding_; }
  [[nodiscard]] const SharedDevicePrefix& prefix() const noexcept { return *prefix_; }

 private:
  friend class BoundSharedMapping;
  BoundSharedPrefix(BindingIdentity binding, std::shared_ptr<SharedDevicePrefix> prefix) noexcept
      : binding_(binding), prefix_(std::move(prefix)) {}
  BindingIdentity binding_;
  std::shared_ptr<SharedDevicePrefix> prefix_;
};

class BoundSharedMapping {
 public:
  [[nodiscard]] const BindingIdentity& binding_identity() const noexcept { return binding_.identity(); }

  [[nodiscard]] Expected<BoundSharedPrefix, BindingError> create_shared_prefix(std::size_t bytes) const;
  [[nodiscard]] Expected<std::uint64_t, BindingError> incremental_owned_bytes(const BoundSharedPrefix& prefix) const;
  [[nodiscard]] Expected<SharedPrefixCommitInfo, BindingError> commit_shared_prefix(const BoundSharedPrefix& prefix,
                                                                                    const BoundAllocation& allocation,
                                                                                    std::size_t byte_offset) const;
  [[nodiscard]] Expected<SharedPrefixCommitInfo, BindingError> commit_shared_prefix(const BoundSharedPrefix& prefix,
                                                                                    const OwningAllocation& owner,
                                                                                    std::size_t byte_offset) const {
    return commit_shared_prefix(prefix, owner.allocation_, byte_offset);
  }

 private:
  friend class MemoryBinding;
  explicit BoundSharedMapping(MemoryBinding binding) noexcept : binding_(std::move(binding)) {}
  [[nodiscard]] Expected<void, BindingError> check_prefix(const BoundSharedPrefix& prefix) const;
  MemoryBinding binding_;
};

}  // namespace ortmem
