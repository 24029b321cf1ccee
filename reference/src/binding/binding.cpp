#include "ortmem/binding.hpp"

#include "mechanism.hpp"
#include "ortmem/bound_capability.hpp"
#include "ortmem/deferred.hpp"
#include "ortmem/owning_allocation.hpp"

namespace ortmem {

namespace {

// An allocation's refusals, out of line and returning the whole result, so
// that an allocation that succeeds builds no error in its frame.
template <class Handle>
[[gnu::cold, gnu::noinline]] Expected<Handle, BindingError> refuse_inactive(detail::Mechanism& mechanism,
                                                                            MechanismLifecycle lifecycle) {
  return fail(mechanism.inactive_error(lifecycle, "allocating"));
}
template <class Handle>
[[gnu::cold, gnu::noinline]] Expected<Handle, BindingError> refuse_memory(MemoryError& error) {
  return fail(BindingError::memory(std::move(error)));
}
// Not recorded: nothing changed. An allocation that was never recorded
// goes straight back (nobody else can name it); an adopted one stays the
// caller's.
template <class Handle>
[[gnu::cold, gnu::noinline]] Expected<Handle, BindingError> refuse_unrecorded(detail::Mechanism& mechanism,
                                                                              detail::Mechanism::Recorded refusal,
                                                                              void* ptr, std::size_t bytes,
                                                                              std::size_t align, bool hand_back) {
  if (hand_back) (void)mechanism.allocator().release(ptr, bytes, align);
  return fail(mechanism.record_error(refusal, bytes));
}

}  // namespace

MemoryBinding::MemoryBinding(BindingIdentity identity, std::shared_ptr<detail::Mechanism> mechanism) noexcept
    : identity_(identity), mechanism_(std::move(mechanism)) {}

template <class Handle>
[[gnu::always_inline]] inline Expected<Handle, BindingError> MemoryBinding::record_as(
    std::uint32_t home, void* ptr, std::size_t bytes, std::size_t align, detail::ActiveOperation& operation,
    bool hand_back) const {
  detail::Mechanism& mechanism = *mechanism_;
  detail::Mechanism::Recorded refusal{};
  {
    detail::Mechanism::Recording recording(mechanism, home, detail::record_of(identity_.id, ptr, bytes, align),
                                           operation);
    if (recording.result() == detail::Mechanism::Recorded::kLive) [[likely]] {
      // Built here, under the recording's lock, where the caller receives it.
      return Expected<Handle, BindingError>(
          tl::in_place, detail::BindingKey(), recording.owner(), mechanism,
          detail::AllocationName{identity_.id, identity_.generation, recording.generation()}, recording.slot(), ptr,
          bytes, align);
    }
    refusal = recording.result();
  }
  return refuse_unrecorded<Handle>(mechanism, refusal, ptr, bytes, align, hand_back);
}

template <class Handle>
[[gnu::always_inline]] inline Expected<Handle, BindingError> MemoryBinding::allocate_as(std::size_t bytes,
                                                                                        std::size_t align) const {
  // The hot path: the mechanism's inline steps, with every refusal built out
  // of line (see Mechanism::open_operation).
  detail::Mechanism& mechanism = *mechanism_;
  const detail::Mechanism::Opened opened = mechanism.open_operation();
  if (opened.shard == nullptr) [[unlikely]] {
    return refuse_inactive<Handle>(mechanism, opened.lifecycle);
  }
  detail::ActiveOperation operation(opened.shard->guard, opened.shard->active);
  // No lock is held across the allocator: it may call back into the registry.
  auto ptr = mechanism.allocator().allocate(bytes, align);
  if (!ptr) [[unlikely]] {
    return refuse_memory<Handle>(ptr.error());
  }
  return record_as<Handle>(opened.home, *ptr, bytes, align, operation, /*hand_back=*/true);
}

Expected<BoundAllocation, BindingError> MemoryBinding::allocate(std::size_t bytes, std::size_t align) const {
  return allocate_as<BoundAllocation>(bytes, align);
}

Expected<OwningAllocation, BindingError> MemoryBinding::allocate_owning(std::size_t bytes, std::size_t align) const {
  return allocate_as<OwningAllocation>(bytes, align);
}

Expected<OwningAllocation, BindingError> MemoryBinding::adopt_allocation(void* ptr, std::size_t bytes,
                                                                         std::size_t align) const {
  auto operation = mechanism_->begin_active("adopting an allocation");
  if (!operation) return fail(operation.error());
  return record_as<OwningAllocation>(detail::RecordTable::home_shard(), ptr, bytes, align, *operation,
                                     /*hand_back=*/false);
}

Expected<PreparedAllocationRelease, ExplicitReleaseError> MemoryBinding::prepare_release(
    BoundAllocation allocation) const {
  return prepare_through(identity_.id, *mechanism_, std::move(allocation));
}

Expected<PreparedAllocationRelease, ExplicitReleaseError> MemoryBinding::prepare_owned(BoundAllocation allocation) {
  // Read before the allocation moves on: the request it becomes keeps the mechanism alive.
  const BindingId through = allocation.name_.binding();
  detail::Mechanism& mechanism = *allocation.mechanism_;
  return prepare_through(through, mechanism, std::move(allocation));
}

Expected<PreparedAllocationRelease, ExplicitReleaseError> MemoryBinding::prepare_through(BindingId through,
                                                                                         detail::Mechanism& mechanism,
                                                                                         BoundAllocation allocation) {
  auto prepared = take_record(through, mechanism, allocation);
  if (!prepared) return fail(ExplicitReleaseError(std::move(prepared.error()), std::move(allocation)));
  return std::move(*prepared);
}

Expected<PreparedAllocationRelease, BindingError> MemoryBinding::take_record(BindingId through,
                                                                             detail::Mechanism& mechanism,
                                                                             BoundAllocation& allocation) {
  if (auto taken = mechanism.take_for_release(
          through, allocation.name_, allocation.slot_,
          detail::record_of(allocation.name_.binding(), allocation.ptr_, allocation.bytes_, allocation.align_));
      !taken) {
    return fail(std::move(taken.error()));
  }
  // The request takes the allocation's own pin on its mechanism.
  return Expected<PreparedAllocationRelease, BindingError>(
      tl::in_place, detail::BindingKey(), std::move(allocation.mechanism_), allocation.name_, allocation.slot_,
      allocation.ptr_, allocation.bytes_, allocation.align_);
}

Expected<void, ExplicitReleaseError> MemoryBinding::release(BoundAllocation allocation) const {
  BoundAllocation metadata = allocation;  // comes back dead if the release ends in quarantine
  auto prepared = prepare_release(std::move(allocation));
  if (!prepared) return fail(std::move(prepared.error()));
  AllocationReleaseOutcome outcome = std::move(*prepared).execute();
  if (outcome.is_complete()) return {};
  // Named before the moves below: the order in which arguments are evaluated is unspecified.
  BindingError quarantined = BindingError::release_quarantined(metadata.identity(), *outcome.residual());
  return fail(ExplicitReleaseError(std::move(quarantined), std::move(metadata), std::move(outcome)));
}

std::optional<BindingError> MemoryBinding::run_with_view(const BoundMemoryView& view, ViewBody body,
                                                         void* context) const {
  // A view of another registry's allocation is foreign, and is named as a view (BIND-001).
  if (view.name_.binding().issuer() != identity_.id.issuer()) return BindingError::foreign_registry("view");
  auto operation = mechanism_->begin_active("using a view");
  if (!operation) return std::move(operation.error());
  if (auto valid = mechanism_->validate(
          identity_.id, view.name_, view.slot_,
          detail::record_of(view.name_.binding(), view.allocation_ptr_, view.allocation_bytes_, view.align_),
          "using a view");
      !valid) {
    return std::move(valid.error());
  }
  body(context, ValidatedMemoryView(static_cast<unsigned char*>(view.allocation_ptr_) + view.offset_, view.bytes_));
  return std::nullopt;  // the operation ends here, after the body, even when the body throws
}

Expected<std::optional<BoundVirtualBacking>, BindingError> MemoryBinding::virtual_backing() const {
  auto operation = mechanism_->begin_active("discovering virtual backing");
  if (!operation) return fail(operation.error());
  if (mechanism_->allocator().as_virtual_backing() == nullptr) return std::optional<BoundVirtualBacking>{};
  return std::optional{BoundVirtualBacking(*this)};
}

Expected<std::optional<BoundSharedMapping>, BindingError> MemoryBinding::shared_mapping() const {
  auto operation = mechanism_->begin_active("discovering shared mapping");
  if (!operation) return fail(operation.error());
  if (mechanism_->allocator().as_shared_mapping() == nullptr) return std::optional<BoundSharedMapping>{};
  return std::optional{BoundSharedMapping(*this)};
}

std::vector<QuarantinedAllocation> MemoryBinding::quarantined() const { return mechanism_->quarantined(); }

MechanismSnapshot MemoryBinding::mechanism_snapshot() const { return mechanism_->snapshot(); }

Expected<BoundMemoryView, BindingError> BoundAllocation::view(std::size_t offset, std::size_t bytes) const {
  if (offset > bytes_ || bytes > bytes_ - offset) {
    const std::size_t end = offset > SIZE_MAX - bytes ? SIZE_MAX : offset + bytes;
    return fail(BindingError::view_out_of_bounds(offset, end, bytes_));
  }
  if (auto valid = mechanism_->validate(name_.binding(), name_, slot_,
                                        detail::record_of(name_.binding(), ptr_, bytes_, align_), "creating a view");
      !valid) {
    return fail(valid.error());
  }
  return BoundMemoryView(mechanism_, name_, slot_, ptr_, bytes_, align_, offset, bytes);
}

AllocationIdentity BoundAllocation::identity() const noexcept {
  return detail::Mechanism::allocation_identity(mechanism_, name_);
}

MemoryBinding BoundAllocation::binding() const noexcept {
  return MemoryBinding(mechanism_->binding_identity(name_.binding(), name_.binding_generation()), mechanism_);
}

AllocationIdentity BoundMemoryView::allocation_identity() const noexcept {
  return detail::Mechanism::allocation_identity(mechanism_, name_);
}

MemoryBinding BoundMemoryView::binding() const noexcept {
  return MemoryBinding(mechanism_->binding_identity(name_.binding(), name_.binding_generation()), mechanism_);
}

}  // namespace ortmem
