// ortmem/binding_error.hpp: why a registry or binding operation was refused.
//
// Every refusal here happens before any allocator, capability or queue
// callback ran, unless the kind says otherwise (release-quarantined reports
// the outcome of a release that did run). message() names what was asked,
// what refused it, and what to do.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "ortmem/binding_identity.hpp"
#include "ortmem/context_pin.hpp"
#include "ortmem/mechanism_snapshot.hpp"
#include "ortmem/memory_error.hpp"
#include "ortmem/release_outcome.hpp"

namespace ortmem {

class BindingError {
 public:
  enum class Kind : std::uint8_t {
    kIdentityExhausted,
    kForeignRegistry,              // subject: which kind of handle
    kDeviceMismatch,               // subject, expected, actual
    kUnregisteredProviderContext,  // context
    kProviderContextInUse,         // context
    kUnregisteredAuthority,        // authority
    kAuthorityInUse,               // authority
    kUnregisteredMechanism,        // mechanism
    kNoSelectedMechanism,          // device
    kInactiveMechanism,            // mechanism, lifecycle, subject: the operation
    kDeviceLost,                   // device, reason
    kBindingMismatch,              // expected_binding, actual_binding
    kStaleAllocation,              // allocation
    kOutstandingViews,             // allocation, count
    kReleaseQuarantined,           // allocation, state, quarantine_reason, retained_bytes
    kQuarantinedOwnership,         // mechanism, count
    kViewOutOfBounds,              // offset, end, allocation_bytes
    kContextNotQuiescent,          // context, count (active operations)
    kDeferredRefused,              // context, pin_error: the queue's context took no more work
    kMemory,                       // memory_error: the mechanism refused
  };

  [[nodiscard]] static BindingError identity_exhausted();
  [[nodiscard]] static BindingError foreign_registry(std::string_view handle_kind);
  [[nodiscard]] static BindingError device_mismatch(std::string_view subject, DeviceKey expected, DeviceKey actual);
  [[nodiscard]] static BindingError unregistered(ProviderContextIdentity context);
  [[nodiscard]] static BindingError unregistered(AuthorityIdentity authority);
  [[nodiscard]] static BindingError unregistered(MechanismIdentity mechanism);
  [[nodiscard]] static BindingError in_use(ProviderContextIdentity context);
  [[nodiscard]] static BindingError in_use(AuthorityIdentity authority);
  [[nodiscard]] static BindingError no_selected_mechanism(DeviceKey device);
  [[nodiscard]] static BindingError inactive_mechanism(MechanismIdentity mechanism, MechanismLifecycle lifecycle,
                                                       std::string_view operation);
  [[nodiscard]] static BindingError device_lost(DeviceKey device, std::shared_ptr<const std::string> reason);
  [[nodiscard]] static BindingError binding_mismatch(BindingId expected, BindingId actual);
  [[nodiscard]] static BindingError stale_allocation(const AllocationIdentity& allocation);
  [[nodiscard]] static BindingError outstanding_views(const AllocationIdentity& allocation, std::size_t views);
  [[nodiscard]] static BindingError release_quarantined(const AllocationIdentity& allocation,
                                                        const ResidualOwnership& residual);
  [[nodiscard]] static BindingError quarantined_ownership(MechanismIdentity mechanism, std::size_t count);
  [[nodiscard]] static BindingError view_out_of_bounds(std::size_t offset, std::size_t end,
                                                       std::size_t allocation_bytes);
  [[nodiscard]] static BindingError context_not_quiescent(ProviderContextIdentity context,
                                                          std::size_t active_operations);
  [[nodiscard]] static BindingError deferred_refused(const ProviderContextPinError& pin_error);
  [[nodiscard]] static BindingError memory(MemoryError error);

  // A move shares the details as a copy does: a moved-from error stays whole.
  BindingError(const BindingError&) noexcept = default;
  BindingError(BindingError&& other) noexcept : BindingError(static_cast<const BindingError&>(other)) {}
  BindingError& operator=(const BindingError&) noexcept = default;
  BindingError& operator=(BindingError&& other) noexcept { return *this = static_cast<const BindingError&>(other); }
  ~BindingError() = default;

  [[nodiscard]] Kind kind() const noexcept { return kind_; }
  [[nodiscard]] const std::string& subject() const noexcept { return details_->subject; }
  [[nodiscard]] DeviceKey expected_device() const noexcept { return details_->expected_device; }
  [[nodiscard]] DeviceKey actual_device() const noexcept { return details_->actual_device; }
  [[nodiscard]] ProviderContextIdentity context() const noexcept { return details_->context; }
  [[nodiscard]] AuthorityIdentity authority() const noexcept { return details_->authority; }
  [[nodiscard]] MechanismIdentity mechanism() const noexcept { return details_->mechanism; }
  [[nodiscard]] MechanismLifecycle lifecycle() const noexcept { return details_->lifecycle; }
  [[nodiscard]] const std::string& loss_reason() const noexcept;
  [[nodiscard]] BindingId expected_binding() const noexcept { return details_->expected_binding; }
  [[nodiscard]] BindingId actual_binding() const noexcept { return details_->actual_binding; }
  [[nodiscard]] const AllocationIdentity& allocation() const noexcept { return details_->allocation; }
  // Outstanding views, quarantined allocations or active operations, by kind.
  [[nodiscard]] std::size_t count() const noexcept { return details_->count; }
  [[nodiscard]] const ResidualOwnership& residual() const noexcept { return details_->residual; }
  [[nodiscard]] std::size_t offset() const noexcept { return details_->offset; }
  [[nodiscard]] std::size_t end() const noexcept { return details_->end; }
  [[nodiscard]] std::size_t allocation_bytes() const noexcept { return details_->allocation_bytes; }
  [[nodiscard]] const std::optional<ProviderContextPinError>& pin_error() const noexcept { return details_->pin_error; }
  [[nodiscard]] const std::optional<MemoryError>& memory_error() const noexcept { return details_->memory_error; }

  [[nodiscard]] std::string message() const;

 private:
  // Everything an error reports beyond its kind. Made once with the error and
  // shared by its copies and moves (nothing changes it once made), so a moved-
  // from error still reports what it did. Out of line because an
  // Expected<T, BindingError> is as large as its larger side, and every
  // successful call returns one: inline, these fields made each result a
  // 464-byte object to build and move on the success path too.
  struct Details {
    std::string subject;
    DeviceKey expected_device{};
    DeviceKey actual_device{};
    ProviderContextIdentity context;
    AuthorityIdentity authority;
    MechanismIdentity mechanism;
    MechanismLifecycle lifecycle = MechanismLifecycle::kActive;
    std::shared_ptr<const std::string> loss_reason;
    BindingId expected_binding;
    BindingId actual_binding;
    AllocationIdentity allocation;
    std::size_t count = 0;
    ResidualOwnership residual;
    std::size_t offset = 0;
    std::size_t end = 0;
    std::size_t allocation_bytes = 0;
    std::optional<ProviderContextPinError> pin_error;
    std::optional<MemoryError> memory_error;
  };

  explicit BindingError(Kind kind) : kind_(kind), details_(std::make_shared<Details>()) {}

  Kind kind_;
  std::shared_ptr<Details> details_;  // never null
};

[[nodiscard]] std::string_view kind_name(BindingError::Kind kind) noexcept;

}  // namespace ortmem
