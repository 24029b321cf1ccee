// ortmem/memory_role.hpp: what a reservation is for.
//
// Roles only travel inside errors here (a refusal names the role it refused);
// policy that depends on them lives above this layer.
#pragma once

#include <cstdint>
#include <string>

namespace ortmem {

struct MemoryRole {
  enum class Kind : std::uint8_t { kKvCache, kWorkspace, kWeights, kActivation };

  Kind kind = Kind::kWorkspace;
  // Meaningful for workspaces only: scratch that dies with one step.
  bool step_scoped = false;

  [[nodiscard]] static constexpr MemoryRole kv_cache() noexcept { return {Kind::kKvCache, false}; }
  [[nodiscard]] static constexpr MemoryRole workspace(bool step_scoped) noexcept {
    return {Kind::kWorkspace, step_scoped};
  }
  [[nodiscard]] static constexpr MemoryRole weights() noexcept { return {Kind::kWeights, false}; }
  [[nodiscard]] static constexpr MemoryRole activation() noexcept { return {Kind::kActivation, false}; }

  friend constexpr bool operator==(MemoryRole, MemoryRole) noexcept = default;
};

// "kv-cache", "workspace (step-scoped)", "workspace", "weights", "activation".
[[nodiscard]] std::string to_string(MemoryRole role);

}  // namespace ortmem
