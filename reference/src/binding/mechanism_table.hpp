// mechanism_table.hpp (internal): the registry's mechanisms by identity.
//
// A sorted vector, not a tree or a hash map: a registry holds a few
// mechanisms and every snapshot looks one up, and a binary search over
// contiguous entries costs a few comparisons where a tree walks a pointer
// per level and a hash map divides by its bucket count. Identities are issued
// in increasing order, so registering nearly always appends, and iteration
// is registration order (what snapshots() lists).
#pragma once

#include <memory>
#include <utility>  // std::pair
#include <vector>

#include "ortmem/identity.hpp"

namespace ortmem::detail {

class Mechanism;

class MechanismTable {
 public:
  using Entry = std::pair<MechanismIdentity, std::shared_ptr<Mechanism>>;

  // The entry registered under `identity`, or null; valid until the table changes.
  [[nodiscard]] const std::shared_ptr<Mechanism>* find(MechanismIdentity identity) const noexcept;
  // Requires: nothing is registered under `identity`.
  void add(MechanismIdentity identity, std::shared_ptr<Mechanism> mechanism);
  // Removes the entry and hands it back (null if there is none), so that the
  // caller lets go of it after its lock: the last reference destroys the
  // mechanism, and with it the provider's allocator, which may call out.
  [[nodiscard]] std::shared_ptr<Mechanism> take(MechanismIdentity identity) noexcept;

  [[nodiscard]] auto begin() const noexcept { return entries_.begin(); }
  [[nodiscard]] auto end() const noexcept { return entries_.end(); }

 private:
  std::vector<Entry> entries_;
};

}  // namespace ortmem::detail
