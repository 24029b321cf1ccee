// ortmem/owning_allocation.hpp: the owner of one allocation and its views.
//
// An OwningAllocation is move-only and is consumed by exactly one release:
//   - release_now(): prepare and execute here;
//   - release_deferred(queue): hand final ownership to a provider's queue;
//   - prepare_release(): take the request and route it yourself.
// A release refused before anything changed (binding mismatch, stale
// generation, device lost, outstanding views, a queue whose context takes no
// more work) hands the exact owner back, still live, inside the error.
//
// Destroying an owner without releasing it QUARANTINES the allocation
// (reason owner-dropped): the destructor never frees, never calls the
// allocator, never enqueues and never waits, because it cannot know whether
// the device is still using the bytes.
//
// Views are cloneable. While any view (or clone) lives, physical release is
// refused with outstanding-views(count). A view that outlives its owner is
// stale: it fails validation and its callback never runs. Counted views are
// the only way to reach an owned allocation's bytes through the binding: an
// OwnedView is used only through MemoryBinding::with_view and never yields an
// uncounted BoundMemoryView, and an owner never lends its plain metadata
// (into_bound() gives up ownership, and only once no view is left).
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>

#include "ortmem/binding.hpp"
#include "ortmem/deferred.hpp"

namespace ortmem {

class OwningReleaseError;

// A counted view of an owned allocation; every live copy blocks release.
class OwnedView {
 public:
  OwnedView(const OwnedView& other) noexcept;
  OwnedView& operator=(const OwnedView& other) noexcept;
  OwnedView(OwnedView&& other) noexcept;
  OwnedView& operator=(OwnedView&& other) noexcept;
  ~OwnedView();

  [[nodiscard]] AllocationIdentity allocation_identity() const noexcept { return view_.allocation_identity(); }
  [[nodiscard]] std::size_t size() const noexcept { return view_.size(); }

 private:
  friend class MemoryBinding;
  friend class OwningAllocation;
  OwnedView(BoundMemoryView view, std::shared_ptr<std::atomic<std::size_t>> outstanding) noexcept;

  BoundMemoryView view_;
  std::shared_ptr<std::atomic<std::size_t>> outstanding_;  // null once moved from
};

class OwningAllocation {
 public:
  OwningAllocation(const OwningAllocation&) = delete;
  OwningAllocation& operator=(const OwningAllocation&) = delete;
  // A moved-from owner owns nothing and its destructor does nothing.
  OwningAllocation(OwningAllocation&& other) noexcept
      : allocation_(std::move(other.allocation_)), views_(std::move(other.views_)) {}
  // Assigning over a live owner abandons it exactly as destroying it would.
  OwningAllocation& operator=(OwningAllocation&& other) noexcept;
  // Inline, like the move: after every consuming release an emptied owner is
  // destroyed, and only an owner that still owns has anything to do.
  ~OwningAllocation() {
    if (owns()) abandon();
  }

  // False only for a moved-from owner.
  [[nodiscard]] bool owns() const noexcept { return allocation_.mechanism_ != nullptr; }
  [[nodiscard]] AllocationIdentity identity() const noexcept { return allocation_.identity(); }
  [[nodiscard]] MemoryBinding binding() const noexcept { return allocation_.binding(); }
  [[nodiscard]] void* data() const noexcept { return allocation_.data(); }
  [[nodiscard]] std::size_t size() const noexcept { return allocation_.size(); }
  [[nodiscard]] std::size_t alignment() const noexcept { return allocation_.alignment(); }
  // An owner you can still hold is always live; every other state is reported
  // by the outcome that consumed it.
  [[nodiscard]] AllocationReleaseState state() const noexcept { return AllocationReleaseState::kLive; }

  // Lends a view of [offset, offset + bytes). Not for concurrent use on one owner.
  [[nodiscard]] Expected<OwnedView, BindingError> view(std::size_t offset, std::size_t bytes);
  [[nodiscard]] std::size_t outstanding_views() const noexcept;

  [[nodiscard]] Expected<PreparedAllocationRelease, OwningReleaseError> prepare_release() &&;
  [[nodiscard]] Expected<AllocationReleaseOutcome, OwningReleaseError> release_now() &&;
  [[nodiscard]] Expected<DeferredReleaseDisposition, OwningReleaseError> release_deferred(
      DeferredReleaseQueue& queue) &&;
  // Gives up ownership and returns plain metadata (views must be gone).
  [[nodiscard]] Expected<BoundAllocation, OwningReleaseError> into_bound() &&;

  // Owns an allocation the binding layer just recorded.
  OwningAllocation(detail::BindingKey key, const std::shared_ptr<const void>& owner, detail::Mechanism& mechanism,
                   const detail::AllocationName& name, detail::RecordSlot slot, void* ptr, std::size_t bytes,
                   std::size_t align) noexcept
      : allocation_(key, owner, mechanism, name, slot, ptr, bytes, align) {}

 private:
  friend class MemoryBinding;
  friend class BoundSharedMapping;
  friend class BoundVirtualBacking;

  // outstanding_views() with no call on the path every release takes: most
  // owners never lend a view.
  [[nodiscard]] std::size_t lent_views() const noexcept { return views_ ? outstanding_views() : 0; }
  // A refused release of any kind: this owner comes back, still live, with
  // `error`. Out of line and returning the whole result, so that a release
  // that succeeds builds no error in its frame.
  template <class T>
  [[nodiscard]] Expected<T, OwningReleaseError> refuse(BindingError error) &&;
  // Refused because `views` views this owner lent are still alive.
  template <class T>
  [[nodiscard]] Expected<T, OwningReleaseError> refuse_for_views(std::size_t views) &&;
  // Takes the metadata out unless views are outstanding.
  [[nodiscard]] Expected<BoundAllocation, OwningReleaseError> take() &&;
  // Takes this owner's live record for release (see Mechanism::take_record).
  [[nodiscard]] detail::TakeResult take_own_record(MechanismLifecycle& lifecycle) noexcept;
  // Takes the live record into a request; callers have checked for views.
  // On refusal nothing changed and this owner still owns; on success it owns
  // nothing.
  [[nodiscard]] Expected<PreparedAllocationRelease, BindingError> prepare_in_place();
  void abandon() noexcept;
  // Queues `request` with `pin` and returns its receipt, made where the
  // caller receives it: one named result and one return, so it is never
  // moved (beside the refusals' returns in one function, it was).
  [[nodiscard]] static Expected<DeferredReleaseDisposition, OwningReleaseError> enqueue_with_receipt(
      PreparedAllocationRelease& request, ProviderContextPin& pin, DeferredReleaseQueue& queue) noexcept;

  // An owner owns exactly while this metadata pins its mechanism: every path
  // that gives the allocation up moves that pin on (into a request, into the
  // metadata handed back, into another owner) or drops it once released, so
  // no flag is kept beside it. Not an optional: the metadata is built in
  // place, here, when the allocation is recorded, and an optional could only
  // take it by a move.
  BoundAllocation allocation_;
  // Created by the first view(): most allocations never lend one.
  std::shared_ptr<std::atomic<std::size_t>> views_;
};

// A refused owning release: the exact owner comes back, still live.
class OwningReleaseError {
 public:
  OwningReleaseError(BindingError error, OwningAllocation allocation) noexcept
      : error_(std::move(error)), allocation_(std::move(allocation)) {}

  [[nodiscard]] const BindingError& error() const noexcept { return error_; }
  [[nodiscard]] const OwningAllocation& allocation() const noexcept { return allocation_; }
  [[nodiscard]] AllocationReleaseState state() const noexcept { return AllocationReleaseState::kLive; }
  [[nodiscard]] OwningAllocation take_allocation() && { return std::move(allocation_); }

 private:
  BindingError error_;
  OwningAllocation allocation_;
};

template <class Fn>
auto MemoryBinding::with_view(const OwnedView& view, Fn&& fn) const
    -> Expected<std::invoke_result_t<Fn, ValidatedMemoryView>, BindingError> {
  return with_view(view.view_, std::forward<Fn>(fn));
}

}  // namespace ortmem
