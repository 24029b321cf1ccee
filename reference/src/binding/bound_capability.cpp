#include "ortmem/bound_capability.hpp"

#include "mechanism.hpp"

namespace ortmem {

// Every bound capability call opens an operation (so termination cannot be
// confirmed under it) and validates binding and generation first; only then
// is the capability asked, with no lock held.
namespace {

// `binding` is the allocation's own (its handle's name, private to the friends that call this).
detail::AllocationRecord record_of(BindingId binding, const BoundAllocation& allocation) {
  return {binding, reinterpret_cast<std::uintptr_t>(allocation.data()), allocation.size(), allocation.alignment()};
}

}  // namespace

Expected<OwningAllocation, BindingError> BoundVirtualBacking::allocate_committed(
    std::size_t bytes, std::size_t align, std::span<const ByteRange> committed) const {
  auto operation = binding_.mechanism_->begin_active("reserving through virtual backing");
  if (!operation) return fail(std::move(operation.error()));
  auto ptr = binding_.mechanism_->allocator().as_virtual_backing()->allocate_committed(bytes, align, committed);
  if (!ptr) return fail(BindingError::memory(std::move(ptr.error())));
  auto owner = binding_.adopt_allocation(*ptr, bytes, align);
  if (!owner) (void)binding_.mechanism_->allocator().release(*ptr, bytes, align);
  return owner;
}

Expected<void, BindingError> BoundVirtualBacking::commit(const BoundAllocation& allocation, std::size_t offset,
                                                         std::size_t bytes) const {
  auto operation = binding_.mechanism_->begin_active("committing a range");
  if (!operation) return fail(std::move(operation.error()));
  if (auto valid =
          binding_.mechanism_->validate(binding_.identity_.id, allocation.name_, allocation.slot_,
                                        record_of(allocation.name_.binding(), allocation), "committing a range");
      !valid)
    return fail(std::move(valid.error()));
  auto committed = binding_.mechanism_->allocator().as_virtual_backing()->commit_allocation_range(
      allocation.data(), allocation.size(), allocation.alignment(), offset, bytes);
  if (!committed) return fail(BindingError::memory(std::move(committed.error())));
  return {};
}

Expected<std::uint64_t, BindingError> BoundVirtualBacking::decommit(const BoundAllocation& allocation,
                                                                    std::size_t offset, std::size_t bytes) const {
  auto operation = binding_.mechanism_->begin_active("decommitting a range");
  if (!operation) return fail(std::move(operation.error()));
  if (auto valid =
          binding_.mechanism_->validate(binding_.identity_.id, allocation.name_, allocation.slot_,
                                        record_of(allocation.name_.binding(), allocation), "decommitting a range");
      !valid)
    return fail(std::move(valid.error()));
  auto unmapped = binding_.mechanism_->allocator().as_virtual_backing()->decommit_allocation_range(
      allocation.data(), allocation.size(), allocation.alignment(), offset, bytes);
  if (!unmapped) return fail(BindingError::memory(std::move(unmapped.error())));
  return *unmapped;
}

Expected<std::size_t, BindingError> BoundVirtualBacking::committed_bytes(const BoundAllocation& allocation) const {
  auto operation = binding_.mechanism_->begin_active("reading committed bytes");
  if (!operation) return fail(std::move(operation.error()));
  if (auto valid =
          binding_.mechanism_->validate(binding_.identity_.id, allocation.name_, allocation.slot_,
                                        record_of(allocation.name_.binding(), allocation), "reading committed bytes");
      !valid)
    return fail(std::move(valid.error()));
  return binding_.mechanism_->allocator().as_virtual_backing()->allocation_committed_bytes(
      allocation.data(), allocation.size(), allocation.alignment());
}

Expected<std::uint64_t, BindingError> BoundVirtualBacking::mapped_bytes_for_allocation(std::size_t bytes,
                                                                                       std::size_t align) const {
  auto operation = binding_.mechanism_->begin_active("estimating mapped bytes");
  if (!operation) return fail(std::move(operation.error()));
  auto mapped = binding_.mechanism_->allocator().as_virtual_backing()->mapped_bytes_for_allocation(bytes, align);
  if (!mapped) return fail(BindingError::memory(std::move(mapped.error())));
  return *mapped;
}

Expected<BoundSharedPrefix, BindingError> BoundSharedMapping::create_shared_prefix(std::size_t bytes) const {
  auto operation = binding_.mechanism_->begin_active("creating a shared prefix");
  if (!operation) return fail(std::move(operation.error()));
  auto prefix = binding_.mechanism_->allocator().as_shared_mapping()->create_shared_prefix(bytes);
  if (!prefix) return fail(BindingError::memory(std::move(prefix.error())));
  return BoundSharedPrefix(binding_.identity_, std::shared_ptr<SharedDevicePrefix>(std::move(*prefix)));
}

Expected<void, BindingError> BoundSharedMapping::check_prefix(const BoundSharedPrefix& prefix) const {
  // A prefix made through another registry is foreign, not a binding mismatch (BIND-001).
  if (prefix.binding_identity().id.issuer() != binding_.identity_.id.issuer()) {
    return fail(BindingError::foreign_registry("shared prefix"));
  }
  if (prefix.binding_identity().id != binding_.identity_.id) {
    return fail(BindingError::binding_mismatch(binding_.identity_.id, prefix.binding_identity().id));
  }
  return {};
}

Expected<std::uint64_t, BindingError> BoundSharedMapping::incremental_owned_bytes(
    const BoundSharedPrefix& prefix) const {
  if (auto valid = check_prefix(prefix); !valid) return fail(std::move(valid.error()));
  auto operation = binding_.mechanism_->begin_active("pricing a shared prefix mapping");
  if (!operation) return fail(std::move(operation.error()));
  auto cost =
      binding_.mechanism_->allocator().as_shared_mapping()->incremental_owned_bytes_for_shared_prefix(prefix.prefix());
  if (!cost) return fail(BindingError::memory(std::move(cost.error())));
  return *cost;
}

Expected<SharedPrefixCommitInfo, BindingError> BoundSharedMapping::commit_shared_prefix(
    const BoundSharedPrefix& prefix, const BoundAllocation& allocation, std::size_t byte_offset) const {
  if (auto valid = check_prefix(prefix); !valid) return fail(std::move(valid.error()));
  auto operation = binding_.mechanism_->begin_active("mapping a shared prefix");
  if (!operation) return fail(std::move(operation.error()));
  if (auto valid =
          binding_.mechanism_->validate(binding_.identity_.id, allocation.name_, allocation.slot_,
                                        record_of(allocation.name_.binding(), allocation), "mapping a shared prefix");
      !valid)
    return fail(std::move(valid.error()));
  auto info = binding_.mechanism_->allocator().as_shared_mapping()->commit_shared_prefix(
      prefix.prefix(), allocation.data(), allocation.size(), byte_offset);
  if (!info) return fail(BindingError::memory(std::move(info.error())));
  return *info;
}

}  // namespace ortmem
