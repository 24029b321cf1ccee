#include "mechanism_table.hpp"

#include <algorithm>

namespace ortmem::detail {
namespace {

// The first entry not ordered before `identity`.
template <class Entries>
auto position(Entries& entries, MechanismIdentity identity) noexcept {
  return std::lower_bound(
      entries.begin(), entries.end(), identity,
      [](const MechanismTable::Entry& entry, MechanismIdentity wanted) { return entry.first < wanted; });
}

}  // namespace

const std::shared_ptr<Mechanism>* MechanismTable::find(MechanismIdentity identity) const noexcept {
  const auto found = position(entries_, identity);
  return found != entries_.end() && found->first == identity ? &found->second : nullptr;
}

void MechanismTable::add(MechanismIdentity identity, std::shared_ptr<Mechanism> mechanism) {
  entries_.emplace(position(entries_, identity), identity, std::move(mechanism));
}

std::shared_ptr<Mechanism> MechanismTable::take(MechanismIdentity identity) noexcept {
  const auto found = position(entries_, identity);
  if (found == entries_.end() || found->first != identity) return nullptr;
  std::shared_ptr<Mechanism> taken = std::move(found->second);
  entries_.erase(found);
  return taken;
}

}  // namespace ortmem::detail
