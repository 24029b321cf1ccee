// mechanism.hpp (internal): one registered allocator, its records and its
// lifecycle, guarded by the per-mechanism lock.
//
// The mechanism lock protects lifecycle, live allocation records, the queued
// count and quarantined ownership. It is never held together with the
// registry lock and never across a callback: every method here either reads
// or updates records and returns, and callers make allocator calls after.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "ortmem/allocator.hpp"
#include "ortmem/binding_error.hpp"
#include "ortmem/binding_identity.hpp"
#include "ortmem/detail/active_operation.hpp"
#include "ortmem/mechanism_snapshot.hpp"

namespace ortmem::detail {

// A registered provider context or authority: an identity, a device and the
// provider's resource, kept alive by every mechanism that uses it.
template <class Id>
struct RegisteredResource {
  Id identity;
  DeviceKey device;
  std::shared_ptr<const void> resource;
};

// What a live record must match: a handle whose address, size or alignment
// differ from the record is stale, whatever its generation says.
struct AllocationRecord {
  BindingId binding;
  std::uintptr_t address;
  std::size_t bytes;
  std::size_t align;
};

class Mechanism {
 public:
  // Declared so that destruction runs allocator, then authority, then context:
  // an allocator's destructor may still need both (a CUDA context, a library).
  struct Resources {
    std::shared_ptr<RegisteredResource<ProviderContextIdentity>> context;
    std::shared_ptr<RegisteredResource<AuthorityIdentity>> authority;
    std::shared_ptr<DeviceAllocator> allocator;
  };

  // What a prepared release may do, read under the lock and acted on after.
  enum class Gate : std::uint8_t { kAllowed, kDeviceLost, kTerminated, kPoisoned };

  Mechanism(MechanismIdentity identity, DeviceKey device, MechanismCoherence coherence, Resources resources,
            std::shared_ptr<IdentityIssuer> identities);
  Mechanism(const Mechanism&) = delete;
  Mechanism& operator=(const Mechanism&) = delete;

  [[nodiscard]] MechanismIdentity identity() const noexcept { return identity_; }
  [[nodiscard]] DeviceKey device() const noexcept { return device_; }
  [[nodiscard]] MechanismCoherence coherence() const noexcept { return coherence_; }
  [[nodiscard]] ProviderContextIdentity context() const noexcept { return resources_.context->identity; }
  [[nodiscard]] AuthorityIdentity authority() const noexcept { return resources_.authority->identity; }
  [[nodiscard]] DeviceAllocator& allocator() const noexcept { return *resources_.allocator; }
  // The registry's issuer, for allocation generations; outlives the registry with the mechanism.
  [[nodiscard]] IdentityIssuer& identities() const noexcept { return *identities_; }

  // Opens an operation if the mechanism is active; `operation` names it in refusals.
  [[nodiscard]] Expected<ActiveOperation, BindingError> begin_active(std::string_view operation);
  // Records a new live allocation under `generation`.
  [[nodiscard]] Expected<void, BindingError> record(AllocationGeneration generation, const AllocationRecord& record);
  // Drops a record that was made but whose allocation is being undone.
  void forget(AllocationGeneration generation) noexcept;
  // Checks that metadata still names its live record (mechanism active).
  [[nodiscard]] Expected<void, BindingError> validate(const BindingIdentity& through,
                                                      const AllocationIdentity& identity,
                                                      const AllocationRecord& expected, std::string_view operation);
  // Removes the live record exactly once and counts a queued release; refused
  // (nothing changed) unless active or retired and the record matches.
  [[nodiscard]] Expected<ActiveOperation, BindingError> take_for_release(const BindingIdentity& through,
                                                                         const AllocationIdentity& identity,
                                                                         const AllocationRecord& expected);
  [[nodiscard]] Gate release_gate();
  void settle_released() noexcept;
  void settle_quarantined(const QuarantinedAllocation& record) noexcept;

  void retire();
  void invalidate(const std::shared_ptr<const std::string>& reason);
  // Not-quiescent or not-lost refusals for confirm_context_terminated.
  [[nodiscard]] Expected<void, BindingError> check_terminable(ProviderContextIdentity context);
  void terminate();
  [[nodiscard]] MechanismLifecycle lifecycle();

  [[nodiscard]] MechanismSnapshot snapshot();
  [[nodiscard]] std::vector<QuarantinedAllocation> quarantined();

 private:
  [[nodiscard]] BindingError inactive_error(std::string_view operation) const;
  [[nodiscard]] ActiveOperation open_operation() noexcept;

  const MechanismIdentity identity_;
  const DeviceKey device_;
  const MechanismCoherence coherence_;
  const std::shared_ptr<IdentityIssuer> identities_;

  std::mutex mutex_;
  MechanismLifecycle lifecycle_ = MechanismLifecycle::kActive;
  std::shared_ptr<const std::string> loss_reason_;
  // Keyed by allocation generation serial (unique in the registry).
  std::unordered_map<std::uint64_t, AllocationRecord> live_;
  std::size_t queued_ = 0;
  std::unordered_map<std::uint64_t, QuarantinedAllocation> quarantined_;
  // Kept beside the map so a snapshot is O(1) and stays right even if
  // recording a quarantine entry ran out of memory.
  std::size_t quarantined_count_ = 0;
  std::uint64_t quarantined_bytes_ = 0;
  // Set when bookkeeping could not be completed (out of memory while
  // recording): from then on releases settle as state-poisoned.
  bool poisoned_ = false;

  std::atomic<std::size_t> active_operations_{0};

  // Last, so the allocator goes before the records (see Resources).
  Resources resources_;
};

}  // namespace ortmem::detail
