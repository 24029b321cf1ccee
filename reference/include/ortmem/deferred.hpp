// ortmem/deferred.hpp: final ownership detached from its live record, and the
// provider-owned queue that releases it later.
//
// Release happens in three steps:
//   1. Prepare (MemoryBinding::prepare_release / OwningAllocation): binding
//      identity AND allocation generation are matched and the live record is
//      removed exactly once under the mechanism lock, so two racing final
//      releases can never both proceed. The request reports state queued
//      from that moment, and pins allocator, authority and provider context.
//   2. Queue (optional): a DeferredReleaseQueue owned by the provider context
//      takes the request, with no registry or mechanism lock held.
//   3. Execute: reads the mechanism's gate and calls the allocator with no
//      lock held when the gate allows. Execute never returns Failed:
//        active/retired  -> allocator; Complete -> released,
//                           Quarantined -> residual recorded,
//                           Failed -> quarantined (allocator-refused), since
//                           the live record is already gone;
//        device-lost     -> quarantined (device-lost), allocator not called;
//        terminated      -> quarantined (mechanism-terminated);
//        poisoned        -> quarantined (state-poisoned).
//      A queue whose implementation frees the memory itself (an nxmem
//      plugin's deferred release) settles the request with what that free
//      reported instead (settle), and the allocator is not called again.
//
// Abandonment is safe: destroying a prepared request, or an enqueue error
// still holding its request, quarantines it (abandoned-request). Nothing here
// frees, calls the allocator, enqueues or waits in a destructor.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <utility>

#include "ortmem/binding.hpp"
#include "ortmem/context_pin.hpp"

namespace ortmem {

namespace detail {
struct TakenRelease;
}  // namespace detail

class PreparedAllocationRelease {
 public:
  PreparedAllocationRelease(const PreparedAllocationRelease&) = delete;
  PreparedAllocationRelease& operator=(const PreparedAllocationRelease&) = delete;
  // Inline, as the destructor's test is: a deferred release moves its request
  // into the queue and out again, and each move and each moved-from
  // destructor would otherwise be a call.
  PreparedAllocationRelease(PreparedAllocationRelease&& other) noexcept
      : mechanism_(std::move(other.mechanism_)), name_(other.name_), slot_(other.slot_), ptr_(other.ptr_),
        bytes_(other.bytes_), align_(other.align_), armed_(std::exchange(other.armed_, false)) {}
  PreparedAllocationRelease& operator=(PreparedAllocationRelease&& other) noexcept;
  ~PreparedAllocationRelease() {
    if (armed_) abandon();
  }

  // These five require a request not moved from (one that was reports
  // default identities).
  [[nodiscard]] AllocationIdentity identity() const noexcept;
  [[nodiscard]] BindingIdentity binding_identity() const noexcept;
  [[nodiscard]] DeviceKey device() const noexcept;
  // The accounting authority a manager refunds against, even after retirement.
  [[nodiscard]] AuthorityIdentity authority() const noexcept;
  [[nodiscard]] ProviderContextIdentity provider_context() const noexcept;
  [[nodiscard]] void* data() const noexcept { return ptr_; }
  [[nodiscard]] std::size_t size() const noexcept { return bytes_; }
  [[nodiscard]] std::size_t alignment() const noexcept { return align_; }
  // Already queued before any queue has seen it: the live record is gone.
  [[nodiscard]] AllocationReleaseState state() const noexcept;
  // False only for a moved-from or consumed request.
  [[nodiscard]] bool is_armed() const noexcept { return armed_; }

  [[nodiscard]] AllocationReleaseOutcome execute() && noexcept;
  // Records the outcome of a release already performed by whoever holds the
  // memory (a queue that frees it itself, as an nxmem plugin does). The
  // allocator is not called and the mechanism's gate is not read: the memory's
  // fate is decided, so the record must say what happened to it. Failed
  // settles as an allocator-refused quarantine, as from execute().
  [[nodiscard]] AllocationReleaseOutcome settle(AllocationReleaseOutcome performed) && noexcept;
  // Settles as device-lost without calling the allocator (a queue that observed loss).
  [[nodiscard]] AllocationReleaseOutcome quarantine_device_lost() && noexcept;
  // Settles as quarantined with `reason` without calling the allocator.
  [[nodiscard]] AllocationReleaseOutcome quarantine(QuarantineReason reason) && noexcept;

  // Built only by the binding layer, from a record it took.
  PreparedAllocationRelease(detail::BindingKey, std::shared_ptr<detail::Mechanism> mechanism,
                            const detail::AllocationName& name, detail::RecordSlot slot, void* ptr, std::size_t bytes,
                            std::size_t align) noexcept;

 private:
  // Quarantines an armed request as abandoned: never frees, never calls the
  // allocator, never waits, since nobody knows whether the device still uses it.
  void abandon() noexcept;
  [[nodiscard]] detail::TakenRelease taken() const noexcept;
  AllocationReleaseOutcome settle_quarantined(ReleaseAccounting accounting, AllocationReleaseState state,
                                              QuarantineReason reason, std::uint64_t retained_bytes) noexcept;
  void disarm() noexcept;

  // The allocation's binding's mechanism: pins allocator, authority and
  // provider context, and with name_ makes the allocation's identity (see
  // detail::AllocationName).
  std::shared_ptr<detail::Mechanism> mechanism_;
  detail::AllocationName name_;
  detail::RecordSlot slot_;  // where the record was taken from: its shard counts this request as queued
  void* ptr_;
  std::size_t bytes_;
  std::size_t align_;
  // Until the request settles it is counted as queued (and so as an active
  // operation) by the shard its record was taken from, which keeps the
  // mechanism non-quiescent; false once consumed or moved from.
  bool armed_;
};

// A queue's receipt for a request it took: from then on the request is the
// queue's, and there is nothing about it for the caller to use. A type rather
// than void because an Expected<void, E> zero-fills the room for E (here a
// whole request) on every success, a cost on each deferred release.
struct DeferredEnqueued {};

// A refused enqueue. It holds the EXACT request the queue was given (nothing
// rebuilt); take it back with take_request(), or destroy the error and the
// request quarantines itself (abandoned-request).
class DeferredEnqueueError {
 public:
  DeferredEnqueueError(DeferredEnqueueRejection rejection, PreparedAllocationRelease request) noexcept
      : rejection_(rejection), request_(std::move(request)) {}

  [[nodiscard]] DeferredEnqueueRejection rejection() const noexcept { return rejection_; }
  [[nodiscard]] const PreparedAllocationRelease& request() const noexcept { return request_; }
  [[nodiscard]] PreparedAllocationRelease take_request() && noexcept { return std::move(request_); }
  // Quarantines the request with enqueue-rejected(rejection) as its reason.
  [[nodiscard]] AllocationReleaseOutcome quarantine() && noexcept {
    return std::move(request_).quarantine(QuarantineReason::enqueue_rejected(rejection_));
  }
  [[nodiscard]] std::string message() const;

 private:
  DeferredEnqueueRejection rejection_;
  PreparedAllocationRelease request_;
};

// A provider-owned sink for final ownership (per context or per stream).
//
// Contract for implementations:
//   - pin_context() claims the queue's provider context for one more request;
//     a refusal means "take no work" and the caller keeps its owner live.
//   - enqueue() is called with no registry or mechanism lock held and must not
//     block on the device. It records a fence; the request executes once the
//     fence is observed, in FIFO order, exactly once. The pin travels with the
//     request and is released only once it has settled. The request is taken
//     by rvalue reference, so it moves once, into the queue's storage or
//     into the refusal; a queue that does neither leaves it with the caller,
//     where it quarantines itself when dropped.
//   - On refusal it hands back the exact request with the first rejection that
//     applies of: device-lost, closed, full (refused for anything else). It
//     never drops a request to signal failure.
//   - pending() is exact, and a bounded queue never exceeds its capacity.
//   - On device loss, pending requests settle as device-lost without calling
//     the allocator, keeping their pins until settled.
class DeferredReleaseQueue {
 public:
  virtual ~DeferredReleaseQueue() = default;
  [[nodiscard]] virtual Expected<ProviderContextPin, ProviderContextPinError> pin_context() noexcept = 0;
  [[nodiscard]] virtual Expected<DeferredEnqueued, DeferredEnqueueError> enqueue(PreparedAllocationRelease&& request,
                                                                                 ProviderContextPin pin) noexcept = 0;
  [[nodiscard]] virtual std::size_t pending() const noexcept = 0;
};

// What release_deferred did with an owner.
class DeferredReleaseDisposition {
 public:
  [[nodiscard]] static DeferredReleaseDisposition queued(const AllocationIdentity& identity) {
    return DeferredReleaseDisposition(identity, std::nullopt, std::nullopt);
  }
  [[nodiscard]] static DeferredReleaseDisposition quarantined(const AllocationIdentity& identity,
                                                              DeferredEnqueueRejection rejection,
                                                              AllocationReleaseOutcome outcome) {
    return DeferredReleaseDisposition(identity, rejection, std::move(outcome));
  }

  [[nodiscard]] bool is_queued() const noexcept { return !outcome_.has_value(); }
  [[nodiscard]] const AllocationIdentity& identity() const noexcept { return identity_; }
  [[nodiscard]] AllocationReleaseState state() const noexcept {
    return outcome_ ? AllocationReleaseState::kQuarantined : AllocationReleaseState::kQueued;
  }
  [[nodiscard]] std::optional<DeferredEnqueueRejection> rejection() const noexcept { return rejection_; }
  [[nodiscard]] const std::optional<AllocationReleaseOutcome>& outcome() const noexcept { return outcome_; }

  // What queued() builds for `request`, public to the binding layer only, so
  // that an owner can build it in place in the Expected it returns. The
  // identity is written once, where the caller receives it: copied from a
  // temporary, it was read back in wide loads over narrower stores, which
  // wait for the stores to retire.
  DeferredReleaseDisposition(detail::BindingKey, const PreparedAllocationRelease& request) noexcept
      : identity_(request.identity()) {}

 private:
  DeferredReleaseDisposition(const AllocationIdentity& identity, std::optional<DeferredEnqueueRejection> rejection,
                             std::optional<AllocationReleaseOutcome> outcome)
      : identity_(identity), rejection_(rejection), outcome_(std::move(outcome)) {}

  AllocationIdentity identity_;
  std::optional<DeferredEnqueueRejection> rejection_;
  std::optional<AllocationReleaseOutcome> outcome_;
};

}  // namespace ortmem
