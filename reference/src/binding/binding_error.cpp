#include "ortmem/binding_error.hpp"

namespace ortmem {

std::string_view coherence_name(MechanismCoherence coherence) noexcept {
  return coherence == MechanismCoherence::kTrustedComposite ? "trusted-composite" : "self-contained";
}

std::string_view lifecycle_name(MechanismLifecycle lifecycle) noexcept {
  switch (lifecycle) {
    case MechanismLifecycle::kActive: return "active";
    case MechanismLifecycle::kRetired: return "retired";
    case MechanismLifecycle::kDeviceLost: return "device-lost";
    case MechanismLifecycle::kTerminated: return "terminated";
  }
  return "unknown";
}

std::string to_string(const AllocationIdentity& identity) {
  return "allocation#" + std::to_string(identity.generation.opaque().serial()) + " of " +
         to_string(identity.binding.id);
}

BindingError BindingError::identity_exhausted() { return BindingError(Kind::kIdentityExhausted); }

BindingError BindingError::foreign_registry(std::string_view handle_kind) {
  BindingError error(Kind::kForeignRegistry);
  error.subject_ = handle_kind;
  return error;
}

BindingError BindingError::device_mismatch(std::string_view subject, DeviceKey expected, DeviceKey actual) {
  BindingError error(Kind::kDeviceMismatch);
  error.subject_ = subject;
  error.expected_device_ = expected;
  error.actual_device_ = actual;
  return error;
}

BindingError BindingError::unregistered(ProviderContextIdentity context) {
  BindingError error(Kind::kUnregisteredProviderContext);
  error.context_ = context;
  return error;
}

BindingError BindingError::unregistered(AuthorityIdentity authority) {
  BindingError error(Kind::kUnregisteredAuthority);
  error.authority_ = authority;
  return error;
}

BindingError BindingError::unregistered(MechanismIdentity mechanism) {
  BindingError error(Kind::kUnregisteredMechanism);
  error.mechanism_ = mechanism;
  return error;
}

BindingError BindingError::in_use(ProviderContextIdentity context) {
  BindingError error(Kind::kProviderContextInUse);
  error.context_ = context;
  return error;
}

BindingError BindingError::in_use(AuthorityIdentity authority) {
  BindingError error(Kind::kAuthorityInUse);
  error.authority_ = authority;
  return error;
}

BindingError BindingError::no_selected_mechanism(DeviceKey device) {
  BindingError error(Kind::kNoSelectedMechanism);
  error.actual_device_ = device;
  return error;
}

BindingError BindingError::inactive_mechanism(MechanismIdentity mechanism, MechanismLifecycle lifecycle,
                                              std::string_view operation) {
  BindingError error(Kind::kInactiveMechanism);
  error.mechanism_ = mechanism;
  error.lifecycle_ = lifecycle;
  error.subject_ = operation;
  return error;
}

BindingError BindingError::device_lost(DeviceKey device, std::shared_ptr<const std::string> reason) {
  BindingError error(Kind::kDeviceLost);
  error.actual_device_ = device;
  error.lifecycle_ = MechanismLifecycle::kDeviceLost;
  error.loss_reason_ = std::move(reason);
  return error;
}

BindingError BindingError::binding_mismatch(BindingId expected, BindingId actual) {
  BindingError error(Kind::kBindingMismatch);
  error.expected_binding_ = expected;
  error.actual_binding_ = actual;
  return error;
}

BindingError BindingError::stale_allocation(const AllocationIdentity& allocation) {
  BindingError error(Kind::kStaleAllocation);
  error.allocation_ = allocation;
  return error;
}

BindingError BindingError::outstanding_views(const AllocationIdentity& allocation, std::size_t views) {
  BindingError error(Kind::kOutstandingViews);
  error.allocation_ = allocation;
  error.count_ = views;
  return error;
}

BindingError BindingError::release_quarantined(const AllocationIdentity& allocation,
                                               const ResidualOwnership& residual) {
  BindingError error(Kind::kReleaseQuarantined);
  error.allocation_ = allocation;
  error.residual_ = residual;
  return error;
}

BindingError BindingError::quarantined_ownership(MechanismIdentity mechanism, std::size_t count) {
  BindingError error(Kind::kQuarantinedOwnership);
  error.mechanism_ = mechanism;
  error.count_ = count;
  return error;
}

BindingError BindingError::view_out_of_bounds(std::size_t offset, std::size_t end, std::size_t allocation_bytes) {
  BindingError error(Kind::kViewOutOfBounds);
  error.offset_ = offset;
  error.end_ = end;
  error.allocation_bytes_ = allocation_bytes;
  return error;
}

BindingError BindingError::context_not_quiescent(ProviderContextIdentity context, std::size_t active_operations) {
  BindingError error(Kind::kContextNotQuiescent);
  error.context_ = context;
  error.count_ = active_operations;
  return error;
}

BindingError BindingError::deferred_refused(const ProviderContextPinError& pin_error) {
  BindingError error(Kind::kDeferredRefused);
  error.context_ = pin_error.context;
  error.pin_error_ = pin_error;
  return error;
}

BindingError BindingError::memory(MemoryError memory_error) {
  BindingError error(Kind::kMemory);
  error.memory_error_ = std::move(memory_error);
  return error;
}

const std::string& BindingError::loss_reason() const noexcept {
  static const std::string kNoReason = "the provider gave no reason";
  return loss_reason_ ? *loss_reason_ : kNoReason;
}

std::string BindingError::message() const {
  switch (kind_) {
    case Kind::kIdentityExhausted: return "the registry's identity space is exhausted; create a new registry";
    case Kind::kForeignRegistry:
      return "the " + subject_ + " handle belongs to another binding registry; use handles from this registry only";
    case Kind::kDeviceMismatch:
      return "cannot register the " + subject_ + " for " + to_string(actual_device_) +
             ": the provider context is registered for " + to_string(expected_device_) +
             "; register it against a context of the same device";
    case Kind::kUnregisteredProviderContext:
      return "provider context " + to_string(context_) + " is not registered (never, or already removed)";
    case Kind::kProviderContextInUse:
      return "provider context " + to_string(context_) +
             " is still used by a registered mechanism; remove the mechanism first";
    case Kind::kUnregisteredAuthority:
      return "authority " + to_string(authority_) + " is not registered (never, or already removed)";
    case Kind::kAuthorityInUse:
      return "authority " + to_string(authority_) +
             " is still used by a registered mechanism; remove the mechanism first";
    case Kind::kUnregisteredMechanism:
      return "mechanism " + to_string(mechanism_) + " is not registered (never, or already removed)";
    case Kind::kNoSelectedMechanism:
      return "device " + to_string(actual_device_) + " has no selected memory mechanism; register or select one";
    case Kind::kInactiveMechanism:
      return "mechanism " + to_string(mechanism_) + " is " + std::string(lifecycle_name(lifecycle_)) + "; " + subject_ +
             " is not permitted";
    case Kind::kDeviceLost:
      return "device " + to_string(actual_device_) + " was lost (" + loss_reason() +
             "); nothing may run on it, release included: ownership is settled when the context's termination is "
             "confirmed";
    case Kind::kBindingMismatch:
      return "binding mismatch: the operation was made through " + to_string(expected_binding_) +
             " but the metadata belongs to " + to_string(actual_binding_) + "; use the binding that issued it";
    case Kind::kStaleAllocation:
      return to_string(allocation_) + " is stale: it was already released, or its record no longer matches";
    case Kind::kOutstandingViews:
      return to_string(allocation_) + " still has " + std::to_string(count_) +
             " outstanding view(s); drop every view before releasing it";
    case Kind::kReleaseQuarantined:
      return "release of " + to_string(allocation_) + " left " + std::to_string(residual_.retained_bytes) +
             " byte(s) " + std::string(state_name(residual_.state)) + ": " + describe(residual_.reason) +
             "; the ownership stays listed until the context's termination is confirmed";
    case Kind::kQuarantinedOwnership:
      return "mechanism " + to_string(mechanism_) + " still holds " + std::to_string(count_) +
             " quarantined allocation(s); removal would lose ownership that was deliberately retained: confirm the "
             "context's termination first";
    case Kind::kViewOutOfBounds:
      return "view range " + std::to_string(offset_) + ".." + std::to_string(end_) + " exceeds the allocation's " +
             std::to_string(allocation_bytes_) + " bytes";
    case Kind::kContextNotQuiescent:
      return "provider context " + to_string(context_) + " still has " + std::to_string(count_) +
             " active mechanism operation(s) (callbacks in flight or releases queued); settle them first";
    case Kind::kDeferredRefused:
      return "the deferred release was refused because " + pin_error_->message() +
             "; the allocation stays live and must be released through the normal path";
    case Kind::kMemory: return memory_error_->message();
  }
  return "unknown binding error";
}

std::string_view kind_name(BindingError::Kind kind) noexcept {
  using Kind = BindingError::Kind;
  switch (kind) {
    case Kind::kIdentityExhausted: return "identity-exhausted";
    case Kind::kForeignRegistry: return "foreign-registry";
    case Kind::kDeviceMismatch: return "device-mismatch";
    case Kind::kUnregisteredProviderContext: return "unregistered-provider-context";
    case Kind::kProviderContextInUse: return "provider-context-in-use";
    case Kind::kUnregisteredAuthority: return "unregistered-authority";
    case Kind::kAuthorityInUse: return "authority-in-use";
    case Kind::kUnregisteredMechanism: return "unregistered-mechanism";
    case Kind::kNoSelectedMechanism: return "no-selected-mechanism";
    case Kind::kInactiveMechanism: return "inactive-mechanism";
    case Kind::kDeviceLost: return "device-lost";
    case Kind::kBindingMismatch: return "binding-mismatch";
    case Kind::kStaleAllocation: return "stale-allocation";
    case Kind::kOutstandingViews: return "outstanding-views";
    case Kind::kReleaseQuarantined: return "release-quarantined";
    case Kind::kQuarantinedOwnership: return "quarantined-ownership";
    case Kind::kViewOutOfBounds: return "view-out-of-bounds";
    case Kind::kContextNotQuiescent: return "context-not-quiescent";
    case Kind::kDeferredRefused: return "deferred-refused";
    case Kind::kMemory: return "memory";
  }
  return "unknown";
}

}  // namespace ortmem
