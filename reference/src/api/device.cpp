#include "ortmem/device.hpp"

#include "ortmem/memory_role.hpp"

namespace ortmem {

std::string to_string(DeviceKey key) { return std::string(tier_name(key.tier)) + ":" + std::to_string(key.index); }

std::string to_string(MemoryRole role) {
  switch (role.kind) {
    case MemoryRole::Kind::kKvCache: return "kv-cache";
    case MemoryRole::Kind::kWorkspace: return role.step_scoped ? "workspace (step-scoped)" : "workspace";
    case MemoryRole::Kind::kWeights: return "weights";
    case MemoryRole::Kind::kActivation: return "activation";
  }
  return "unknown role";
}

}  // namespace ortmem
