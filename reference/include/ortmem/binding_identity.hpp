// ortmem/binding_identity.hpp: what a binding and an allocation are called.
//
// A binding names everything it was made from (device, mechanism, provider
// context, authority) plus its own id and generation. An allocation is named
// by its binding and a registry-issued generation, never by its address: the
// same address handed out again gets a new generation, so metadata of the
// earlier allocation can never match the later one.
#pragma once

#include "ortmem/device.hpp"
#include "ortmem/identity.hpp"

namespace ortmem {

struct BindingIdentity {
  BindingId id;
  BindingGeneration generation;
  DeviceKey device;
  MechanismIdentity mechanism;
  ProviderContextIdentity provider_context;
  AuthorityIdentity authority;
  friend constexpr bool operator==(const BindingIdentity&, const BindingIdentity&) noexcept = default;
};

struct AllocationIdentity {
  BindingIdentity binding;
  AllocationGeneration generation;
  friend constexpr bool operator==(const AllocationIdentity&, const AllocationIdentity&) noexcept = default;
};

// "allocation#12 of binding#7@1".
[[nodiscard]] std::string to_string(const AllocationIdentity& identity);

}  // namespace ortmem
