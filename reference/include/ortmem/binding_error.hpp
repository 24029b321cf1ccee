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

  [[nodiscard]] Kind kind() const noexcept { return kind_; }
  [[nodiscard]] const std::string& subject() const noexcept { return subject_; }
  [[nodiscard]] DeviceKey expected_device() const noexcept { return expected_device_; }
  [[nodiscard]] DeviceKey actual_device() const noexcept { return actual_device_; }
  [[nodiscard]] ProviderContextIdentity context() const noexcept { return context_; }
  [[nodiscard]] AuthorityIdentity authority() const noexcept { return authority_; }
  [[nodiscard]] MechanismIdentity mechanism() const noexcept { return mechanism_; }
  [[nodiscard]] MechanismLifecycle lifecycle() const noexcept { return lifecycle_; }
  [[nodiscard]] const std::string& loss_reason() const noexcept;
  [[nodiscard]] BindingId expected_binding() const noexcept { return expected_binding_; }
  [[nodiscard]] BindingId actual_binding() const noexcept { return actual_binding_; }
  [[nodiscard]] const AllocationIdentity& allocation() const noexcept { return allocation_; }
  // Outstanding views, quarantined allocations or active operations, by kind.
  [[nodiscard]] std::size_t count() const noexcept { return count_; }
  [[nodiscard]] const ResidualOwnership& residual() const noexcept { return residual_; }
  [[nodiscard]] std::size_t offset() const noexcept { return offset_; }
  [[nodiscard]] std::size_t end() const noexcept { return end_; }
  [[nodiscard]] std::size_t allocation_bytes() const noexcept { return allocation_bytes_; }
  [[nodiscard]] const std::optional<ProviderContextPinError>& pin_error() const noexcept { return pin_error_; }
  [[nodiscard]] const std::optional<MemoryError>& memory_error() const noexcept { return memory_error_; }

  [[nodiscard]] std::string message() const;

 private:
  explicit BindingError(Kind kind) noexcept : kind_(kind) {}

  Kind kind_;
  std::string subject_;
  DeviceKey expected_device_{};
  DeviceKey actual_device_{};
  ProviderContextIdentity context_;
  AuthorityIdentity authority_;
  MechanismIdentity mechanism_;
  MechanismLifecycle lifecycle_ = MechanismLifecycle::kActive;
  std::shared_ptr<const std::string> loss_reason_;
  BindingId expected_binding_;
  BindingId actual_binding_;
  AllocationIdentity allocation_;
  std::size_t count_ = 0;
  ResidualOwnership residual_;
  std::size_t offset_ = 0;
  std::size_t end_ = 0;
  std::size_t allocation_bytes_ = 0;
  std::optional<ProviderContextPinError> pin_error_;
  std::optional<MemoryError> memory_error_;
};

[[nodiscard]] std::string_view kind_name(BindingError::Kind kind) noexcept;

}  // namespace ortmem
