// ortmem/registry.hpp: the binding registry.
//
// The registry issues opaque identities for provider contexts, authorities,
// mechanisms (registered allocators) and bindings, and selects one mechanism
// per device. A handle from another registry is refused as foreign, naming
// what kind of handle it was, before anything runs.
//
// Registration order is context, authority, then an allocator against both;
// the allocator's device must equal theirs. The first mechanism registered for
// a device is selected automatically; later ones only by select().
//
// Lifecycle of a mechanism:
//   active -> retired -> (removed)        retire(): no new work, existing
//                                         allocations still releasable
//   active/retired -> device-lost         invalidate_device(): everything
//                                         refused, the allocator never called again
//   device-lost -> terminated             confirm_context_terminated(): only when
//                                         quiescent; discharges records without
//                                         any allocator call
// No path leads back.
//
// Locking: one registry lock (registration, selection) and one lock per
// mechanism (lifecycle, records, counts). They are never held together, and
// no allocator, capability or queue callback ever runs under either, so a
// callback may call back into the registry.
//
// The registry is a handle: copies share one registry. Bindings and
// everything made through them keep their allocator, authority and context
// alive after the registry is gone; when the last holder goes the allocator
// is destroyed first (it still sees its context and authority), then the
// authority, then the provider context.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "ortmem/allocator.hpp"
#include "ortmem/binding.hpp"
#include "ortmem/binding_error.hpp"
#include "ortmem/mechanism_snapshot.hpp"

namespace ortmem {

struct RegisteredProviderContext {
  ProviderContextIdentity identity;
  DeviceKey device;
  friend bool operator==(const RegisteredProviderContext&, const RegisteredProviderContext&) = default;
};

struct RegisteredAuthority {
  AuthorityIdentity identity;
  DeviceKey device;
  friend bool operator==(const RegisteredAuthority&, const RegisteredAuthority&) = default;
};

struct RegisteredMechanism {
  MechanismIdentity identity;
  DeviceKey device;
  MechanismCoherence coherence = MechanismCoherence::kSelfContained;
  friend bool operator==(const RegisteredMechanism&, const RegisteredMechanism&) = default;
};

struct RegistryOptions {
  // The first identity serial to issue. Only exhaustion tests set it high, to
  // reach the end of the identity space without issuing 2^64 identities.
  std::uint64_t first_serial = 1;
};

class BindingRegistry {
 public:
  [[nodiscard]] static Expected<BindingRegistry, BindingError> create(RegistryOptions options = {});

  // `resource` is whatever the provider needs kept alive (a context object, a
  // loaded library); the registry only holds it.
  [[nodiscard]] Expected<RegisteredProviderContext, BindingError> register_provider_context(
      DeviceKey device, std::shared_ptr<const void> resource = nullptr) const;
  [[nodiscard]] Expected<RegisteredAuthority, BindingError> register_authority(
      DeviceKey device, std::shared_ptr<const void> resource = nullptr) const;
  [[nodiscard]] Expected<RegisteredMechanism, BindingError> register_allocator(
      const RegisteredProviderContext& context, const RegisteredAuthority& authority,
      std::shared_ptr<DeviceAllocator> allocator) const;
  // The registrar attests that `allocator` is a wrapper routing allocation,
  // capabilities and release to one coherent mechanism.
  [[nodiscard]] Expected<RegisteredMechanism, BindingError> register_trusted_composite(
      const RegisteredProviderContext& context, const RegisteredAuthority& authority,
      std::shared_ptr<DeviceAllocator> allocator) const;

  [[nodiscard]] Expected<void, BindingError> select(const RegisteredMechanism& mechanism) const;
  // Binds the selected mechanism of `device`; no selection is no-selected-mechanism.
  [[nodiscard]] Expected<MemoryBinding, BindingError> bind(DeviceKey device) const;
  [[nodiscard]] Expected<MemoryBinding, BindingError> bind_registered(const RegisteredMechanism& mechanism) const;

  // Retirement is made terminal before the selection is dropped, so a racing
  // select() can never leave a retired mechanism selected.
  [[nodiscard]] Expected<void, BindingError> retire(const RegisteredMechanism& mechanism) const;
  // Every mechanism of `device` becomes device-lost; only selections naming
  // them are dropped. Calls no provider and frees nothing.
  [[nodiscard]] Expected<void, BindingError> invalidate_device(DeviceKey device, std::string reason) const;
  // Allowed when every mechanism of the context is device-lost (or already
  // terminated) and none has an active operation; else not-quiescent(count).
  [[nodiscard]] Expected<void, BindingError> confirm_context_terminated(const RegisteredProviderContext& context) const;

  [[nodiscard]] Expected<void, BindingError> remove(const RegisteredMechanism& mechanism) const;
  [[nodiscard]] Expected<void, BindingError> remove_provider_context(const RegisteredProviderContext& context) const;
  [[nodiscard]] Expected<void, BindingError> remove_authority(const RegisteredAuthority& authority) const;

  [[nodiscard]] Expected<MechanismSnapshot, BindingError> snapshot(const RegisteredMechanism& mechanism) const;
  [[nodiscard]] std::vector<MechanismSnapshot> snapshots() const;
  [[nodiscard]] Expected<std::vector<QuarantinedAllocation>, BindingError> quarantined(
      const RegisteredMechanism& mechanism) const;

 private:
  struct State;
  explicit BindingRegistry(std::shared_ptr<State> state) noexcept : state_(std::move(state)) {}

  [[nodiscard]] Expected<RegisteredMechanism, BindingError> register_mechanism(
      const RegisteredProviderContext& context, const RegisteredAuthority& authority,
      std::shared_ptr<DeviceAllocator> allocator, MechanismCoherence coherence) const;
  [[nodiscard]] Expected<std::shared_ptr<detail::Mechanism>, BindingError> find(
      const RegisteredMechanism& mechanism) const;
  [[nodiscard]] Expected<MemoryBinding, BindingError> issue_binding(
      const std::shared_ptr<detail::Mechanism>& mechanism) const;
  [[nodiscard]] Expected<void, BindingError> withdraw_selection(DeviceKey device, MechanismIdentity candidate,
                                                                std::optional<MechanismIdentity> prior) const;

  std::shared_ptr<State> state_;
};

}  // namespace ortmem
