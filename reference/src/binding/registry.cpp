#include "ortmem/registry.hpp"

#include <optional>
#include <unordered_map>

#include "mechanism.hpp"
#include "ortmem/detail/lock_guard.hpp"
#include "mechanism_table.hpp"
#include "ortmem/detail/spin_lock.hpp"

namespace ortmem {

using detail::LockGuard;
using detail::Mechanism;
using ContextEntry = detail::RegisteredResource<ProviderContextIdentity>;
using AuthorityEntry = detail::RegisteredResource<AuthorityIdentity>;

struct DeviceKeyHash {
  std::size_t operator()(DeviceKey key) const noexcept {
    return (static_cast<std::size_t>(key.tier) << 32) ^ key.index;
  }
};

// The registry lock guards these tables and the selection; it is never held
// while a mechanism lock is taken or a provider is called, so nothing under it
// does more than look up, walk, insert or erase. That is also why it is a
// spin lock: a snapshot holds it for one lookup, and a mutex's call into
// libpthread and its two atomic operations each way cost more than that.
// An entry leaves a table under the lock and is let go after it: the last
// reference to a mechanism or a provider's resource runs provider code.
struct BindingRegistry::State {
  explicit State(IdentityIssuer issuer) : identities(std::make_shared<IdentityIssuer>(std::move(issuer))) {}

  // Shared with bindings, which issue allocation generations after the registry is gone.
  std::shared_ptr<IdentityIssuer> identities;
  detail::SpinLock guard;
  std::unordered_map<ProviderContextIdentity, std::shared_ptr<ContextEntry>> contexts ORTMEM_GUARDED_BY(guard);
  std::unordered_map<AuthorityIdentity, std::shared_ptr<AuthorityEntry>> authorities ORTMEM_GUARDED_BY(guard);
  detail::MechanismTable mechanisms ORTMEM_GUARDED_BY(guard);
  std::unordered_map<DeviceKey, MechanismIdentity, DeviceKeyHash> selected ORTMEM_GUARDED_BY(guard);
};

namespace {

template <class Id>
Expected<Id, BindingError> issue(IdentityIssuer& issuer) {
  auto issued = issuer.issue<Id>();
  if (!issued) return fail(BindingError::identity_exhausted());
  return *issued;
}

}  // namespace

Expected<BindingRegistry, BindingError> BindingRegistry::create(RegistryOptions options) {
  auto issuer = IdentityIssuer::create_starting_at(options.first_serial);
  if (!issuer) return fail(BindingError::identity_exhausted());
  return BindingRegistry(std::make_shared<State>(std::move(*issuer)));
}

Expected<RegisteredProviderContext, BindingError> BindingRegistry::register_provider_context(
    DeviceKey device, std::shared_ptr<const void> resource) const {
  auto identity = issue<ProviderContextIdentity>(*state_->identities);
  if (!identity) return fail(identity.error());
  auto entry = std::make_shared<ContextEntry>(ContextEntry{*identity, device, std::move(resource)});
  const LockGuard lock(state_->guard);
  state_->contexts.emplace(*identity, std::move(entry));
  return RegisteredProviderContext{*identity, device};
}

Expected<RegisteredAuthority, BindingError> BindingRegistry::register_authority(
    DeviceKey device, std::shared_ptr<const void> resource) const {
  auto identity = issue<AuthorityIdentity>(*state_->identities);
  if (!identity) return fail(identity.error());
  auto entry = std::make_shared<AuthorityEntry>(AuthorityEntry{*identity, device, std::move(resource)});
  const LockGuard lock(state_->guard);
  state_->authorities.emplace(*identity, std::move(entry));
  return RegisteredAuthority{*identity, device};
}

Expected<RegisteredMechanism, BindingError> BindingRegistry::register_allocator(
    const RegisteredProviderContext& context, const RegisteredAuthority& authority,
    std::shared_ptr<DeviceAllocator> allocator) const {
  return register_mechanism(context, authority, std::move(allocator), MechanismCoherence::kSelfContained);
}

Expected<RegisteredMechanism, BindingError> BindingRegistry::register_trusted_composite(
    const RegisteredProviderContext& context, const RegisteredAuthority& authority,
    std::shared_ptr<DeviceAllocator> allocator) const {
  return register_mechanism(context, authority, std::move(allocator), MechanismCoherence::kTrustedComposite);
}

Expected<RegisteredMechanism, BindingError> BindingRegistry::register_mechanism(
    const RegisteredProviderContext& context, const RegisteredAuthority& authority,
    std::shared_ptr<DeviceAllocator> allocator, MechanismCoherence coherence) const {
  if (!state_->identities->issued(context.identity)) return fail(BindingError::foreign_registry("provider context"));
  if (!state_->identities->issued(authority.identity)) return fail(BindingError::foreign_registry("authority"));
  std::shared_ptr<ContextEntry> context_entry;
  std::shared_ptr<AuthorityEntry> authority_entry;
  {
    const LockGuard lock(state_->guard);
    const auto found_context = state_->contexts.find(context.identity);
    if (found_context == state_->contexts.end()) return fail(BindingError::unregistered(context.identity));
    const auto found_authority = state_->authorities.find(authority.identity);
    if (found_authority == state_->authorities.end()) return fail(BindingError::unregistered(authority.identity));
    context_entry = found_context->second;
    authority_entry = found_authority->second;
  }
  if (authority_entry->device != context_entry->device) {
    return fail(BindingError::device_mismatch("authority", context_entry->device, authority_entry->device));
  }
  // Asked with no lock held: device() is a provider callback.
  const DeviceKey allocator_device = allocator->device();
  if (allocator_device != context_entry->device) {
    return fail(BindingError::device_mismatch("allocator", context_entry->device, allocator_device));
  }
  auto identity = issue<MechanismIdentity>(*state_->identities);
  if (!identity) return fail(identity.error());
  const DeviceKey device = context_entry->device;
  auto mechanism =
      Mechanism::make(*identity, device, coherence,
                      Mechanism::Resources{std::move(context_entry), std::move(authority_entry), std::move(allocator)},
                      state_->identities);
  const LockGuard lock(state_->guard);
  // The lock was not held while device() ran, so the context or authority may
  // have been removed meanwhile (nothing used them yet). Registering against
  // one now would leave a mechanism whose context is unregistered and whose
  // termination could never be confirmed.
  if (!state_->contexts.contains(context.identity)) return fail(BindingError::unregistered(context.identity));
  if (!state_->authorities.contains(authority.identity)) return fail(BindingError::unregistered(authority.identity));
  state_->mechanisms.add(*identity, std::move(mechanism));
  state_->selected.try_emplace(device, *identity);  // the first mechanism of a device is selected
  return RegisteredMechanism{*identity, device, coherence};
}

Expected<std::shared_ptr<Mechanism>, BindingError> BindingRegistry::find(const RegisteredMechanism& mechanism) const {
  if (!state_->identities->issued(mechanism.identity)) return fail(BindingError::foreign_registry("mechanism"));
  const LockGuard lock(state_->guard);
  const std::shared_ptr<Mechanism>* entry = state_->mechanisms.find(mechanism.identity);
  if (entry == nullptr) return fail(BindingError::unregistered(mechanism.identity));
  return *entry;
}

Expected<void, BindingError> BindingRegistry::select(const RegisteredMechanism& mechanism) const {
  auto entry = find(mechanism);
  if (!entry) return fail(entry.error());
  if (const auto lifecycle = (*entry)->lifecycle(); lifecycle != MechanismLifecycle::kActive) {
    return fail(BindingError::inactive_mechanism(mechanism.identity, lifecycle, "selecting a mechanism"));
  }
  // The registered device, not the handle's copy of it: a handle is plain data
  // and its device field could name another device.
  const DeviceKey device = (*entry)->device();
  std::optional<MechanismIdentity> prior;
  {
    const LockGuard lock(state_->guard);
    auto& selected = state_->selected;
    if (const auto found = selected.find(device); found != selected.end()) prior = found->second;
    selected.insert_or_assign(device, mechanism.identity);
  }
  // A retire or invalidation may have run between the check and the publish.
  // It made the lifecycle terminal first, so looking again here catches it.
  if (const auto lifecycle = (*entry)->lifecycle(); lifecycle != MechanismLifecycle::kActive) {
    if (auto withdrawn = withdraw_selection(device, mechanism.identity, prior); !withdrawn) {
      return fail(withdrawn.error());
    }
    return fail(BindingError::inactive_mechanism(mechanism.identity, lifecycle, "selecting a mechanism"));
  }
  return {};
}

Expected<void, BindingError> BindingRegistry::withdraw_selection(DeviceKey device, MechanismIdentity candidate,
                                                                 std::optional<MechanismIdentity> prior) const {
  MechanismIdentity owner = candidate;
  std::optional<MechanismIdentity> replacement = prior;
  for (;;) {
    std::shared_ptr<Mechanism> restorable;
    if (replacement) {
      {
        const LockGuard lock(state_->guard);
        const auto selected = state_->selected.find(device);
        if (selected == state_->selected.end() || selected->second != owner) return {};
        if (const auto* found = state_->mechanisms.find(*replacement)) restorable = *found;
      }
      if (restorable && restorable->lifecycle() != MechanismLifecycle::kActive) restorable.reset();
    }
    {
      const LockGuard lock(state_->guard);
      const auto selected = state_->selected.find(device);
      if (selected == state_->selected.end() || selected->second != owner) return {};
      if (!restorable || state_->mechanisms.find(restorable->identity()) == nullptr) {
        state_->selected.erase(selected);
        return {};
      }
      selected->second = restorable->identity();
    }
    // The restored mechanism may itself have been retired meanwhile: go round once more.
    if (restorable->lifecycle() == MechanismLifecycle::kActive) return {};
    owner = restorable->identity();
    replacement.reset();
  }
}

Expected<MemoryBinding, BindingError> BindingRegistry::bind(DeviceKey device) const {
  std::shared_ptr<Mechanism> entry;
  {
    const LockGuard lock(state_->guard);
    const auto selected = state_->selected.find(device);
    if (selected == state_->selected.end()) return fail(BindingError::no_selected_mechanism(device));
    const auto* found = state_->mechanisms.find(selected->second);
    if (found == nullptr) return fail(BindingError::unregistered(selected->second));
    entry = *found;
  }
  return issue_binding(entry);
}

Expected<MemoryBinding, BindingError> BindingRegistry::bind_registered(const RegisteredMechanism& mechanism) const {
  auto entry = find(mechanism);
  if (!entry) return fail(entry.error());
  return issue_binding(*entry);
}

Expected<MemoryBinding, BindingError> BindingRegistry::issue_binding(
    const std::shared_ptr<Mechanism>& mechanism) const {
  auto operation = mechanism->begin_active("issuing a binding");
  if (!operation) return fail(operation.error());
  auto id = issue<BindingId>(*state_->identities);
  if (!id) return fail(id.error());
  auto generation = issue<BindingGeneration>(*state_->identities);
  if (!generation) return fail(generation.error());
  return MemoryBinding(mechanism->binding_identity(*id, *generation), mechanism);
}

Expected<void, BindingError> BindingRegistry::retire(const RegisteredMechanism& mechanism) const {
  auto entry = find(mechanism);
  if (!entry) return fail(entry.error());
  // Terminal first, then deselect: see the header. The selection is looked up
  // under the registered device, not the handle's copy (as in select()).
  (*entry)->retire();
  const LockGuard lock(state_->guard);
  if (const auto selected = state_->selected.find((*entry)->device());
      selected != state_->selected.end() && selected->second == mechanism.identity) {
    state_->selected.erase(selected);
  }
  return {};
}

Expected<void, BindingError> BindingRegistry::invalidate_device(DeviceKey device, std::string reason) const {
  auto shared_reason = std::make_shared<const std::string>(std::move(reason));
  std::vector<std::shared_ptr<Mechanism>> entries;
  {
    const LockGuard lock(state_->guard);
    for (const auto& [identity, entry] : state_->mechanisms) {
      if (entry->device() == device) entries.push_back(entry);
    }
  }
  for (const auto& entry : entries) entry->invalidate(shared_reason);
  const LockGuard lock(state_->guard);
  const auto selected = state_->selected.find(device);
  if (selected == state_->selected.end()) return {};
  for (const auto& entry : entries) {
    if (entry->identity() == selected->second) {
      state_->selected.erase(selected);
      break;
    }
  }
  return {};
}

Expected<void, BindingError> BindingRegistry::confirm_context_terminated(
    const RegisteredProviderContext& context) const {
  if (!state_->identities->issued(context.identity)) return fail(BindingError::foreign_registry("provider context"));
  std::vector<std::shared_ptr<Mechanism>> entries;
  {
    const LockGuard lock(state_->guard);
    if (!state_->contexts.contains(context.identity)) return fail(BindingError::unregistered(context.identity));
    for (const auto& [identity, entry] : state_->mechanisms) {
      if (entry->context() == context.identity) entries.push_back(entry);
    }
  }
  // All checked before any is terminated, so a refusal changes nothing. Once
  // device-lost no new operation can start, so the check stays true.
  for (const auto& entry : entries) {
    if (auto terminable = entry->check_terminable(context.identity); !terminable) return terminable;
  }
  for (const auto& entry : entries) entry->terminate();
  return {};
}

Expected<void, BindingError> BindingRegistry::remove(const RegisteredMechanism& mechanism) const {
  auto entry = find(mechanism);
  if (!entry) return fail(entry.error());
  const MechanismSnapshot snapshot = (*entry)->quiescence_snapshot();
  // Quarantine first: it is the reason removal is unsafe that a caller cannot
  // fix by waiting or retiring.
  if (snapshot.quarantined_allocations != 0) {
    return fail(BindingError::quarantined_ownership(mechanism.identity, snapshot.quarantined_allocations));
  }
  if (snapshot.lifecycle == MechanismLifecycle::kActive || snapshot.live_allocations != 0 ||
      snapshot.queued_releases != 0 || snapshot.active_operations != 0) {
    return fail(BindingError::inactive_mechanism(mechanism.identity, snapshot.lifecycle,
                                                 "removing a mechanism before it is retired and quiescent"));
  }
  const LockGuard lock(state_->guard);
  // Looked up again under this lock: a removal racing this one may have
  // taken it since find(), and exactly one of them removes it. `entry` still
  // holds the mechanism, so it is let go after this lock (State).
  if (!state_->mechanisms.take(mechanism.identity)) return fail(BindingError::unregistered(mechanism.identity));
  // The registered device, not the handle's copy (as in select()).
  if (const auto selected = state_->selected.find((*entry)->device());
      selected != state_->selected.end() && selected->second == mechanism.identity) {
    state_->selected.erase(selected);
  }
  return {};
}

Expected<void, BindingError> BindingRegistry::remove_provider_context(const RegisteredProviderContext& context) const {
  if (!state_->identities->issued(context.identity)) return fail(BindingError::foreign_registry("provider context"));
  std::shared_ptr<ContextEntry> removed;  // declared before the guard, so let go after it (State)
  const LockGuard lock(state_->guard);
  const auto found = state_->contexts.find(context.identity);
  if (found == state_->contexts.end()) return fail(BindingError::unregistered(context.identity));
  for (const auto& [identity, entry] : state_->mechanisms) {
    if (entry->context() == context.identity) return fail(BindingError::in_use(context.identity));
  }
  removed = std::move(found->second);
  state_->contexts.erase(found);
  return {};
}

Expected<void, BindingError> BindingRegistry::remove_authority(const RegisteredAuthority& authority) const {
  if (!state_->identities->issued(authority.identity)) return fail(BindingError::foreign_registry("authority"));
  std::shared_ptr<AuthorityEntry> removed;  // declared before the guard, so let go after it (State)
  const LockGuard lock(state_->guard);
  const auto found = state_->authorities.find(authority.identity);
  if (found == state_->authorities.end()) return fail(BindingError::unregistered(authority.identity));
  for (const auto& [identity, entry] : state_->mechanisms) {
    if (entry->authority() == authority.identity) return fail(BindingError::in_use(authority.identity));
  }
  removed = std::move(found->second);
  state_->authorities.erase(found);
  return {};
}

Expected<MechanismSnapshot, BindingError> BindingRegistry::snapshot(const RegisteredMechanism& mechanism) const {
  if (!state_->identities->issued(mechanism.identity)) return fail(BindingError::foreign_registry("mechanism"));
  // Read under the registry lock rather than through a copy of the entry, as
  // find() would make: the mechanism's snapshot takes no lock and writes
  // nothing, so this lock is held briefly, and the copy would add two atomic
  // updates of the entry's reference count to every snapshot.
  const LockGuard lock(state_->guard);
  const std::shared_ptr<Mechanism>* entry = state_->mechanisms.find(mechanism.identity);
  if (entry == nullptr) return fail(BindingError::unregistered(mechanism.identity));
  return (*entry)->snapshot();
}

std::vector<MechanismSnapshot> BindingRegistry::snapshots() const {
  std::vector<std::shared_ptr<Mechanism>> entries;
  {
    const LockGuard lock(state_->guard);
    for (const auto& [identity, entry] : state_->mechanisms) entries.push_back(entry);
  }
  std::vector<MechanismSnapshot> result;
  result.reserve(entries.size());
  for (const auto& entry : entries) result.push_back(entry->snapshot());
  return result;
}

Expected<std::vector<QuarantinedAllocation>, BindingError> BindingRegistry::quarantined(
    const RegisteredMechanism& mechanism) const {
  auto entry = find(mechanism);
  if (!entry) return fail(entry.error());
  return (*entry)->quarantined();
}

}  // namespace ortmem
