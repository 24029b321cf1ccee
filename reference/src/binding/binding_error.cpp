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
  error.details_->subject = handle_kind;
  return error;
}

BindingError BindingError::device_mismatch(std::string_view subject, DeviceKey expected, DeviceKey actual) {
  BindingError error(Kind::kDeviceMismatch);
  error.details_->subject = subject;
  error.details_->expected_device = expected;
  error.details_->actual_device = actual;
  return error;
}

BindingError BindingError::unregistered(ProviderContextIdentity context) {
  BindingError error(Kind::kUnregisteredProviderContext);
  error.details_->context = context;
  return error;
}

BindingError BindingError::unregistered(AuthorityIdentity authority) {
  BindingError error(Kind::kUnregisteredAuthority);
  error.details_->authority = authority;
  return error;
}

BindingError BindingError::unregistered(MechanismIdentity mechanism) {
  BindingError error(Kind::kUnregisteredMechanism);
  error.details_->mechanism = mechanism;
  return error;
}

BindingError BindingError::in_use(ProviderContextIdentity context) {
  BindingError error(Kind::kProviderContextInUse);
  error.details_->context = context;
  return error;
}

BindingError BindingError::in_use(AuthorityIdentity authority) {
  BindingError error(Kind::kAuthorityInUse);
  error.details_->authority = authority;
  return error;
}

BindingError BindingError::no_selected_mechanism(DeviceKey device) {
  BindingError error(Kind::kNoSelectedMechanism);
  error.details_->actual_device = device;
  return error;
}

BindingError BindingError::inactive_mechanism(MechanismIdentity mechanism, MechanismLifecycle lifecycle,
                                              std::string_view operation) {
  BindingError error(Kind::kInactiveMechanism);
  error.details_->mechanism = mechanism;
  error.details_->lifecycle = lifecycle;
  error.details_->subject = operation;
  return error;
}

BindingError BindingError::device_lost(DeviceKey device, std::shared_ptr<const std::string> reason) {
  BindingError error(Kind::kDeviceLost);
  error.details_->actual_device = device;
  error.details_->lifecycle = MechanismLifecycle::kDeviceLost;
  error.details_->loss_reason = std::move(reason);
  return error;
}

BindingError BindingError::binding_mismatch(BindingId expected, BindingId actual) {
  BindingError error(Kind::kBindingMismatch);
  error.details_->expected_binding = expected;
  error.details_->actual_binding = actual;
  return error;
}

BindingError BindingError::stale_allocation(const AllocationIdentity& allocation) {
  BindingError error(Kind::kStaleAllocation);
  error.details_->allocation = allocation;
  return error;
}

BindingError BindingError::outstanding_views(const AllocationIdentity& allocation, std::size_t views) {
  BindingError error(Kind::kOutstandingViews);
  error.details_->allocation = allocation;
  error.details_->count = views;
  return error;
}

BindingError BindingError::release_quarantined(const AllocationIdentity& allocation,
                                               const ResidualOwnership& residual) {
  BindingError error(Kind::kReleaseQuarantined);
  error.details_->allocation = allocation;
  error.details_->residual = residual;
  return error;
}

BindingError BindingError::quarantined_ownership(MechanismIdentity mechanism, std::size_t count) {
  BindingError error(Kind::kQuarantinedOwnership);
  error.details_->mechanism = mechanism;
  error.details_->count = count;
  return error;
}

BindingError BindingError::view_out_of_bounds(std::size_t offset, std::size_t end, std::size_t allocation_bytes) {
  BindingError error(Kind::kViewOutOfBounds);
  error.details_->offset = offset;
  error.details_->end = end;
  error.details_->allocation_bytes = allocation_bytes;
  return error;
}

BindingError BindingError::context_not_quiescent(ProviderContextIdentity context, std::size_t active_operations) {
  BindingError error(Kind::kContextNotQuiescent);
  error.details_->context = context;
  error.details_->count = active_operations;
  return error;
}

BindingError BindingError::deferred_refused(const ProviderContextPinError& pin_error) {
  BindingError error(Kind::kDeferredRefused);
  error.details_->context = pin_error.context;
  error.details_->pin_error = pin_error;
  return error;
}

BindingError BindingError::memory(MemoryError memory_error) {
  BindingError error(Kind::kMemory);
  error.details_->memory_error = std::move(memory_error);
  return error;
}

const std::string& BindingError::loss_reason() const noexcept {
  static const std::string kNoReason = "the provider gave no reason";
  return details_->loss_reason ? *details_->loss_reason : kNoReason;
}

std::string BindingError::message() const {
  switch (kind_) {
    case Kind::kIdentityExhausted: return "the registry's identity space is exhausted; create a new registry";
    case Kind::kForeignRegistry:
      return "the " + details_->subject +
             " handle belongs to another binding registry; use handles from this registry only";
    case Kind::kDeviceMismatch:
      return "cannot register the " + details_->subject + " for " + to_string(details_->actual_device) +
             ": the provider context is registered for " + to_string(details_->expected_device) +
             "; register it against a context of the same device";
    case Kind::kUnregisteredProviderContext:
      return "provider context " + to_string(details_->context) + " is not registered (never, or already removed)";
    case Kind::kProviderContextInUse:
      return "provider context " + to_string(details_->context) +
             " is still used by a registered mechanism; remove the mechanism first";
    case Kind::kUnregisteredAuthority:
      return "authority " + to_string(details_->authority) + " is not registered (never, or already removed)";
    case Kind::kAuthorityInUse:
      return "authority " + to_string(details_->authority) +
             " is still used by a registered mechanism; remove the mechanism first";
    case Kind::kUnregisteredMechanism:
      return "mechanism " + to_string(details_->mechanism) + " is not registered (never, or already removed)";
    case Kind::kNoSelectedMechanism:
      return "device " + to_string(details_->actual_device) +
             " has no selected memory mechanism; register or select one";
    case Kind::kInactiveMechanism:
      return "mechanism " + to_string(details_->mechanism) + " is " + std::string(lifecycle_name(details_->lifecycle)) +
             "; " + details_->subject + " is not permitted";
    case Kind::kDeviceLost:
      return "device " + to_string(details_->actual_device) + " was lost (" + loss_reason() +
             "); nothing may run on it, release included: ownership is settled when the context's termination is "
             "confirmed";
    case Kind::kBindingMismatch:
      return "binding mismatch: the operation was made through " + to_string(details_->expected_binding) +
             " but the metadata belongs to " + to_string(details_->actual_binding) + "; use the binding that issued it";
    case Kind::kStaleAllocation:
      return to_string(details_->allocation) + " is stale: it was already released, or its record no longer matches";
    case Kind::kOutstandingViews:
      return to_string(details_->allocation) + " still has " + std::to_string(details_->count) +
             " outstanding view(s); drop every view before releasing it";
    case Kind::kReleaseQuarantined:
      return "release of " + to_string(details_->allocation) + " left " +
             std::to_string(details_->residual.retained_bytes) + " byte(s) " +
             std::string(state_name(details_->residual.state)) + ": " + describe(details_->residual.reason) +
             "; the ownership stays listed until the context's termination is confirmed";
    case Kind::kQuarantinedOwnership:
      return "mechanism " + to_string(details_->mechanism) + " still holds " + std::to_string(details_->count) +
             " quarantined allocation(s); removal would lose ownership that was deliberately retained: confirm the "
             "context's termination first";
    case Kind::kViewOutOfBounds:
      return "view range " + std::to_string(details_->offset) + ".." + std::to_string(details_->end) +
             " exceeds the allocation's " + std::to_string(details_->allocation_bytes) + " bytes";
    case Kind::kContextNotQuiescent:
      return "provider context " + to_string(details_->context) + " still has " + std::to_string(details_->count) +
             " active mechanism operation(s) (callbacks in flight or releases queued); settle them first";
    case Kind::kDeferredRefused:
      return "the deferred release was refused because " + details_->pin_error->message() +
             "; the allocation stays live and must be released through the normal path";
    case Kind::kMemory: return details_->memory_error->message();
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
