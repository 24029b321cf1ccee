// ortmem/binding.hpp: a registry-issued binding and the metadata it issues.
//
// A MemoryBinding is the only way to reach a registered mechanism's allocator.
// It is a cheap, copyable handle that pins the mechanism's allocator, authority
// and provider context for as long as it (or anything made through it) lives,
// even after the registry entries are removed and the registry is gone.
//
// Every operation through binding B on metadata made by another binding (even
// of the same mechanism) fails with binding-mismatch before any callback.
// Metadata is matched on binding and allocation generation and on the exact
// address, size and alignment of the live record, so a stale handle can never
// act on a newer allocation at the same address.
//
// BoundAllocation is non-owning metadata whose only release path is the
// legacy explicit release(); OwningAllocation (ortmem/owning_allocation.hpp)
// is the owner. Views are validated before their pointer is exposed: with_view
// runs its callback with no lock held, and never runs it for a stale view.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "ortmem/allocator.hpp"
#include "ortmem/binding_error.hpp"
#include "ortmem/binding_identity.hpp"
#include "ortmem/expected.hpp"
#include "ortmem/mechanism_snapshot.hpp"

namespace ortmem {

class MemoryBinding;
class OwningAllocation;

namespace detail {
class ActiveOperation;
class Mechanism;
enum class TakeResult : std::uint8_t;  // what taking a live record for release found (mechanism.hpp)

// Where a mechanism keeps one live record. Metadata carries it so the
// registry finds the record without hashing. It is only a hint: the record
// there is trusted only when its generation (and binding, address, size and
// alignment) match the metadata, so a slot reused by a later allocation makes
// old metadata stale, never current, and an out-of-range slot is simply stale.
struct RecordSlot {
  std::uint32_t shard = 0;
  std::uint32_t index = 0;
};

// The part of an allocation's identity that a handle carries. The rest (the
// device, mechanism, provider context and authority) is its mechanism's, fixed
// when the mechanism was registered, and the handle pins that mechanism: so
// it is read from there rather than copied into every handle, which keeps an
// owner small enough that moving it through an Expected costs little. The
// three ids come from one registry's issuer, so the issuer is kept once.
class AllocationName {
 public:
  // Requires: all three issued by the same issuer (as one registry issues them).
  AllocationName(BindingId binding, BindingGeneration binding_generation, AllocationGeneration generation) noexcept
      : binding_(binding), binding_generation_(binding_generation.opaque().serial()),
        generation_(generation.opaque().serial()) {}

  [[nodiscard]] BindingId binding() const noexcept { return binding_; }
  [[nodiscard]] BindingGeneration binding_generation() const noexcept {
    return BindingGeneration(OpaqueIdentity(binding_.issuer(), binding_generation_));
  }
  [[nodiscard]] AllocationGeneration generation() const noexcept {
    return AllocationGeneration(OpaqueIdentity(binding_.issuer(), generation_));
  }
  // What the mechanism's records are keyed on.
  [[nodiscard]] std::uint64_t generation_serial() const noexcept { return generation_; }

 private:
  BindingId binding_;
  std::uint64_t binding_generation_;  // serials of binding_'s issuer
  std::uint64_t generation_;
};

// Proof that the caller is the binding layer. Metadata, owners and release
// requests have public constructors that take one, so they can be built in
// place inside the Expected that reports them (they are large, and every move
// is a copy), and still nobody else can make one.
class BindingKey {
  friend class ortmem::MemoryBinding;
  friend class ortmem::OwningAllocation;
  BindingKey() = default;
};
}  // namespace detail

class BoundAllocation;
class BoundMemoryView;
class BoundSharedMapping;
class BoundVirtualBacking;
class ExplicitReleaseError;
class OwnedView;
class OwningAllocation;
class PreparedAllocationRelease;

// A pointer that was validated against its live record; valid only inside with_view.
class ValidatedMemoryView {
 public:
  [[nodiscard]] void* data() const noexcept { return ptr_; }
  [[nodiscard]] std::size_t size() const noexcept { return bytes_; }

 private:
  friend class MemoryBinding;
  ValidatedMemoryView(void* ptr, std::size_t bytes) noexcept : ptr_(ptr), bytes_(bytes) {}
  void* ptr_;
  std::size_t bytes_;
};

class MemoryBinding {
 public:
  [[nodiscard]] const BindingIdentity& identity() const noexcept { return identity_; }

  // Allocates through the mechanism and records non-owning metadata.
  [[nodiscard]] Expected<BoundAllocation, BindingError> allocate(std::size_t bytes, std::size_t align) const;
  // Allocates and returns the owner.
  [[nodiscard]] Expected<OwningAllocation, BindingError> allocate_owning(std::size_t bytes, std::size_t align) const;
  // Takes ownership of memory the binding's own mechanism produced through a
  // specialised entry point; it gets a fresh generation and then behaves
  // exactly like a binding-issued allocation. Memory from anywhere else is a
  // caller bug the binding cannot detect.
  [[nodiscard]] Expected<OwningAllocation, BindingError> adopt_allocation(void* ptr, std::size_t bytes,
                                                                          std::size_t align) const;

  // Detaches final ownership from the live record (exactly once); on refusal
  // the metadata comes back unchanged inside the error.
  [[nodiscard]] Expected<PreparedAllocationRelease, ExplicitReleaseError> prepare_release(
      BoundAllocation allocation) const;
  // The legacy explicit release: prepare, then execute. A quarantined outcome
  // is reported as release-quarantined, and the metadata is dead afterwards.
  [[nodiscard]] Expected<void, ExplicitReleaseError> release(BoundAllocation allocation) const;

  // Runs fn(ValidatedMemoryView) with no lock held once the view matches its
  // live record; fn is not called when the view is stale, lost or foreign.
  template <class Fn>
  auto with_view(const BoundMemoryView& view, Fn&& fn) const
      -> Expected<std::invoke_result_t<Fn, ValidatedMemoryView>, BindingError>;
  // The same for a counted view of an owned allocation (owning_allocation.hpp),
  // which never hands out an uncounted copy of itself.
  template <class Fn>
  auto with_view(const OwnedView& view, Fn&& fn) const
      -> Expected<std::invoke_result_t<Fn, ValidatedMemoryView>, BindingError>;

  [[nodiscard]] Expected<std::optional<BoundVirtualBacking>, BindingError> virtual_backing() const;
  [[nodiscard]] Expected<std::optional<BoundSharedMapping>, BindingError> shared_mapping() const;

  [[nodiscard]] std::vector<QuarantinedAllocation> quarantined() const;
  [[nodiscard]] MechanismSnapshot mechanism_snapshot() const;

 private:
  friend class BindingRegistry;
  friend class BoundAllocation;
  friend class BoundMemoryView;
  friend class BoundSharedMapping;
  friend class BoundVirtualBacking;
  friend class OwningAllocation;
  friend class PreparedAllocationRelease;

  MemoryBinding(BindingIdentity identity, std::shared_ptr<detail::Mechanism> mechanism) noexcept;

  // Prepares `allocation` as if through the binding named `through`, whose
  // mechanism is `mechanism`. Owners prepare through their allocation's own
  // binding this way without copying it (which would cost two atomic
  // reference-count updates per release).
  [[nodiscard]] static Expected<PreparedAllocationRelease, ExplicitReleaseError> prepare_through(
      BindingId through, detail::Mechanism& mechanism, BoundAllocation allocation);
  [[nodiscard]] static Expected<PreparedAllocationRelease, ExplicitReleaseError> prepare_owned(
      BoundAllocation allocation);
  // The step both share: takes the live record and moves `allocation` into
  // the request; when refused, `allocation` is left exactly as it was.
  [[nodiscard]] static Expected<PreparedAllocationRelease, BindingError> take_record(BindingId through,
                                                                                     detail::Mechanism& mechanism,
                                                                                     BoundAllocation& allocation);

  // Validates the view, then runs body(context, validated) with an active
  // operation open and no lock held; returns the refusal, if any. The one
  // step of with_view that is not a template, so that the operation's type
  // stays out of this header.
  using ViewBody = void (*)(void* context, ValidatedMemoryView validated);
  [[nodiscard]] std::optional<BindingError> run_with_view(const BoundMemoryView& view, ViewBody body,
                                                          void* context) const;
  // Opens an operation, allocates with no lock held and records the result
  // as a Handle (BoundAllocation or OwningAllocation), built once, where the
  // caller receives it: a handle is large, and every move of it is a copy.
  template <class Handle>
  [[nodiscard]] Expected<Handle, BindingError> allocate_as(std::size_t bytes, std::size_t align) const;
  // Records ptr as live in record shard `home` and builds its Handle;
  // `operation` (the caller's, still open, counted in `home`) ends in the
  // same step. Refused, it hands ptr back to the allocator if `hand_back`.
  template <class Handle>
  [[nodiscard]] Expected<Handle, BindingError> record_as(std::uint32_t home, void* ptr, std::size_t bytes,
                                                         std::size_t align, detail::ActiveOperation& operation,
                                                         bool hand_back) const;

  BindingIdentity identity_;
  // Pins the mechanism, and through it the allocator, authority, provider
  // context and the registry's identity issuer.
  std::shared_ptr<detail::Mechanism> mechanism_;
};

// Non-owning metadata of one live allocation. Copies name the same
// allocation; whichever copy releases first wins, and every other copy is
// stale from then on.
class BoundAllocation {
 public:
  // Requires: not moved from (a moved-from handle names nothing, and reports
  // a default identity).
  [[nodiscard]] AllocationIdentity identity() const noexcept;
  // The binding that made it (a new handle on the same binding). Requires: not moved from.
  [[nodiscard]] MemoryBinding binding() const noexcept;
  [[nodiscard]] void* data() const noexcept { return ptr_; }
  [[nodiscard]] std::size_t size() const noexcept { return bytes_; }
  [[nodiscard]] std::size_t alignment() const noexcept { return align_; }

  // A view of [offset, offset + bytes); refused when out of bounds or stale.
  [[nodiscard]] Expected<BoundMemoryView, BindingError> view(std::size_t offset, std::size_t bytes) const;

  // For the binding layer only (the key): public so that the metadata can be
  // built in place inside the Expected that reports it. `owner` is what its
  // reference to `mechanism` shares a count with.
  BoundAllocation(detail::BindingKey, const std::shared_ptr<const void>& owner, detail::Mechanism& mechanism,
                  const detail::AllocationName& name, detail::RecordSlot slot, void* ptr, std::size_t bytes,
                  std::size_t align) noexcept
      : mechanism_(owner, &mechanism), name_(name), slot_(slot), ptr_(ptr), bytes_(bytes), align_(align) {}

 private:
  friend class BoundSharedMapping;
  friend class BoundVirtualBacking;
  friend class MemoryBinding;
  friend class OwningAllocation;
  friend class PreparedAllocationRelease;
  BoundAllocation(std::shared_ptr<detail::Mechanism> mechanism, const detail::AllocationName& name,
                  detail::RecordSlot slot, void* ptr, std::size_t bytes, std::size_t align) noexcept
      : mechanism_(std::move(mechanism)), name_(name), slot_(slot), ptr_(ptr), bytes_(bytes), align_(align) {}

  // The binding's mechanism, pinned as a MemoryBinding pins it; with name_ it
  // makes the allocation's whole identity.
  std::shared_ptr<detail::Mechanism> mechanism_;
  detail::AllocationName name_;
  // Where the mechanism keeps the live record (a lookup hint, see RecordSlot).
  detail::RecordSlot slot_;
  void* ptr_;
  std::size_t bytes_;
  std::size_t align_;
};

// A sub-range of one allocation, validated again every time it is used.
class BoundMemoryView {
 public:
  // Both require: not moved from (as for BoundAllocation).
  [[nodiscard]] MemoryBinding binding() const noexcept;
  [[nodiscard]] AllocationIdentity allocation_identity() const noexcept;
  [[nodiscard]] std::size_t offset() const noexcept { return offset_; }
  [[nodiscard]] std::size_t size() const noexcept { return bytes_; }

 private:
  friend class BoundAllocation;
  friend class MemoryBinding;
  BoundMemoryView(std::shared_ptr<detail::Mechanism> mechanism, const detail::AllocationName& name,
                  detail::RecordSlot slot, void* allocation_ptr, std::size_t allocation_bytes, std::size_t align,
                  std::size_t offset, std::size_t bytes) noexcept
      : mechanism_(std::move(mechanism)), name_(name), slot_(slot), allocation_ptr_(allocation_ptr),
        allocation_bytes_(allocation_bytes), align_(align), offset_(offset), bytes_(bytes) {}

  std::shared_ptr<detail::Mechanism> mechanism_;  // as in BoundAllocation
  detail::AllocationName name_;
  detail::RecordSlot slot_;  // the allocation's record slot
  void* allocation_ptr_;
  std::size_t allocation_bytes_;
  std::size_t align_;
  std::size_t offset_;
  std::size_t bytes_;
};

// A refused explicit release. Before any mutation the metadata comes back
// live (outcome empty); after a release that ended in quarantine, the outcome
// says what is retained and the metadata is stale.
class ExplicitReleaseError {
 public:
  ExplicitReleaseError(BindingError error, BoundAllocation allocation,
                       std::optional<AllocationReleaseOutcome> outcome = std::nullopt)
      : error_(std::move(error)), allocation_(std::move(allocation)), outcome_(std::move(outcome)) {}

  [[nodiscard]] const BindingError& error() const noexcept { return error_; }
  [[nodiscard]] const BoundAllocation& allocation() const noexcept { return allocation_; }
  [[nodiscard]] const std::optional<AllocationReleaseOutcome>& outcome() const noexcept { return outcome_; }
  [[nodiscard]] bool is_quarantined() const noexcept { return outcome_.has_value(); }
  [[nodiscard]] AllocationReleaseState state() const noexcept {
    return outcome_ ? outcome_->state() : AllocationReleaseState::kLive;
  }
  [[nodiscard]] BoundAllocation take_allocation() && { return std::move(allocation_); }

 private:
  BindingError error_;
  BoundAllocation allocation_;
  std::optional<AllocationReleaseOutcome> outcome_;
};

template <class Fn>
auto MemoryBinding::with_view(const BoundMemoryView& view, Fn&& fn) const
    -> Expected<std::invoke_result_t<Fn, ValidatedMemoryView>, BindingError> {
  using Result = std::invoke_result_t<Fn, ValidatedMemoryView>;
  struct Frame {
    Fn&& fn;
    std::optional<std::conditional_t<std::is_void_v<Result>, std::monostate, Result>> result;
  };
  Frame frame{std::forward<Fn>(fn), std::nullopt};
  // The operation stays open while fn runs, so the context cannot be confirmed
  // terminated under it; no lock is held, so fn may re-enter the registry.
  auto body = [](void* context, ValidatedMemoryView validated) {
    auto& call = *static_cast<Frame*>(context);
    if constexpr (std::is_void_v<Result>) {
      std::forward<Fn>(call.fn)(validated);
    } else {
      call.result.emplace(std::forward<Fn>(call.fn)(validated));
    }
  };
  if (auto refused = run_with_view(view, body, &frame)) return fail(std::move(*refused));
  if constexpr (std::is_void_v<Result>) {
    return {};
  } else {
    return std::move(*frame.result);
  }
}

}  // namespace ortmem
