#include "ortmem/owning_allocation.hpp"

#include "mechanism.hpp"
#include "release_settlement.hpp"

namespace ortmem {

OwnedView::OwnedView(BoundMemoryView view, std::shared_ptr<std::atomic<std::size_t>> outstanding) noexcept
    : view_(std::move(view)), outstanding_(std::move(outstanding)) {}

OwnedView::OwnedView(const OwnedView& other) noexcept : view_(other.view_), outstanding_(other.outstanding_) {
  if (outstanding_) outstanding_->fetch_add(1, std::memory_order_acq_rel);
}

OwnedView& OwnedView::operator=(const OwnedView& other) noexcept {
  if (this != &other) *this = OwnedView(other);
  return *this;
}

OwnedView::OwnedView(OwnedView&& other) noexcept : view_(other.view_), outstanding_(std::move(other.outstanding_)) {}

OwnedView& OwnedView::operator=(OwnedView&& other) noexcept {
  if (this != &other) {
    if (outstanding_) outstanding_->fetch_sub(1, std::memory_order_acq_rel);
    view_ = other.view_;
    outstanding_ = std::move(other.outstanding_);
  }
  return *this;
}

OwnedView::~OwnedView() {
  if (outstanding_) outstanding_->fetch_sub(1, std::memory_order_acq_rel);
}

OwningAllocation& OwningAllocation::operator=(OwningAllocation&& other) noexcept {
  if (this != &other) {
    abandon();
    allocation_ = std::move(other.allocation_);
    views_ = std::move(other.views_);
  }
  return *this;
}

void OwningAllocation::abandon() noexcept {
  if (!owns()) return;
  BoundAllocation allocation = std::move(allocation_);  // takes the pin: this owner owns nothing from here
  // Quarantine, never free: the device may still be using the bytes. If the
  // record cannot be taken (device lost, already terminated) it stays where
  // it is and confirmed termination discharges it.
  if (auto prepared = MemoryBinding::prepare_owned(std::move(allocation))) {
    (void)std::move(*prepared).quarantine(QuarantineReason::of(QuarantineReason::Kind::kOwnerDropped));
  }
}

Expected<OwnedView, BindingError> OwningAllocation::view(std::size_t offset, std::size_t bytes) {
  auto view = allocation_.view(offset, bytes);
  if (!view) return fail(std::move(view.error()));
  if (!views_) views_ = std::make_shared<std::atomic<std::size_t>>(0);
  views_->fetch_add(1, std::memory_order_acq_rel);
  return OwnedView(std::move(*view), views_);
}

std::size_t OwningAllocation::outstanding_views() const noexcept {
  return views_ ? views_->load(std::memory_order_acquire) : 0;
}

OwningReleaseError OwningAllocation::refuse_for_views(std::size_t views) && {
  BindingError error = BindingError::outstanding_views(identity(), views);
  return OwningReleaseError(std::move(error), std::move(*this));
}

Expected<BoundAllocation, OwningReleaseError> OwningAllocation::take() && {
  if (const std::size_t views = lent_views(); views != 0) return fail(std::move(*this).refuse_for_views(views));
  return std::move(allocation_);  // the pin goes with it
}

Expected<BoundAllocation, OwningReleaseError> OwningAllocation::into_bound() && { return std::move(*this).take(); }

Expected<PreparedAllocationRelease, BindingError> OwningAllocation::prepare_in_place() {
  // Prepared through the allocation's own binding, in place: the metadata
  // moves once, into the request, and only if the record was taken. One
  // named result and one return, so the request is built where the caller
  // receives it.
  auto prepared = MemoryBinding::take_record(allocation_.name_.binding(), *allocation_.mechanism_, allocation_);
  // On success the request took the metadata's pin, so this owner owns nothing.
  return prepared;
}

Expected<PreparedAllocationRelease, OwningReleaseError> OwningAllocation::prepare_release() && {
  if (const std::size_t views = lent_views(); views != 0) return fail(std::move(*this).refuse_for_views(views));
  auto prepared = prepare_in_place();
  // Refused before anything changed: this same owner, views and all, goes back.
  if (!prepared) return fail(OwningReleaseError(std::move(prepared.error()), std::move(*this)));
  return std::move(*prepared);
}

Expected<AllocationReleaseOutcome, OwningReleaseError> OwningAllocation::release_now() && {
  if (const std::size_t views = lent_views(); views != 0) return fail(std::move(*this).refuse_for_views(views));
  // Settled in place, exactly as a prepared request would be, without moving
  // the metadata into one: this owner's own pin keeps the mechanism alive
  // until the outcome is known. Taken through the allocation's own binding,
  // so the checks that it is this registry's and this binding's hold by
  // construction.
  detail::Mechanism& mechanism = *allocation_.mechanism_;
  const detail::AllocationName& name = allocation_.name_;
  MechanismLifecycle lifecycle{};
  const auto taken = mechanism.take_record(
      name, allocation_.slot_,
      {name.binding(), reinterpret_cast<std::uintptr_t>(allocation_.ptr_), allocation_.bytes_, allocation_.align_},
      lifecycle);
  if (taken != detail::Mechanism::Taken::kTaken) [[unlikely]] {
    return fail(OwningReleaseError(mechanism.take_error(taken, lifecycle, name), std::move(*this)));
  }
  Expected<AllocationReleaseOutcome, OwningReleaseError> outcome(
      tl::in_place, detail::execute_release({mechanism, name, allocation_.slot_, allocation_.ptr_, allocation_.bytes_,
                                             allocation_.align_}));
  // This owner's pin on the mechanism, held until the outcome was known;
  // without it the owner owns nothing.
  allocation_.mechanism_.reset();
  return outcome;
}

Expected<DeferredReleaseDisposition, OwningReleaseError> OwningAllocation::release_deferred(
    DeferredReleaseQueue& queue) && {
  if (const std::size_t views = lent_views(); views != 0) return fail(std::move(*this).refuse_for_views(views));
  // The pin comes first: a context that takes no more work must leave the
  // allocation live and releasable, which is only true before prepare.
  auto pin = queue.pin_context();
  if (!pin) return fail(OwningReleaseError(BindingError::deferred_refused(pin.error()), std::move(*this)));
  auto prepared = prepare_in_place();
  if (!prepared) return fail(OwningReleaseError(std::move(prepared.error()), std::move(*this)));
  // The receipt is made where the caller receives it, and before the request
  // moves on: the request holds the pin on the mechanism that the identity is
  // read from. One named result, returned on both paths, so it is never moved.
  Expected<DeferredReleaseDisposition, OwningReleaseError> disposition(tl::in_place, detail::BindingKey(),
                                                                       prepared->identity());
  // No registry or mechanism lock is held here.
  auto queued = queue.enqueue(std::move(*prepared), std::move(*pin));
  if (!queued) {
    const DeferredEnqueueRejection rejection = queued.error().rejection();
    *disposition = DeferredReleaseDisposition::quarantined(disposition->identity(), rejection,
                                                           std::move(queued.error()).quarantine());
  }
  return disposition;
}

}  // namespace ortmem
