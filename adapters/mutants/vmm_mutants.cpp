// adapters/mutants/vmm_mutants.cpp: known-bad virtual-backing and
// shared-mapping adapters, each breaking one VB or SM rule on top of the host
// virtual-memory reference (HostVirtualAllocator).
#include <cstring>
#include <map>
#include <mutex>
#include <set>

#include "host/host_vmm_variant.hpp"
#include "ortmem/capability.hpp"
#include "ortmem/cts/adapter_registry.hpp"
#include "ortmem/host/host_virtual_allocator.hpp"

namespace ortmem::adapters::mutants {
namespace {

// Commits the whole reservation whatever ranges were listed.
class OverCommit final : public ForwardingVmm {
 public:
  using ForwardingVmm::ForwardingVmm;
  Expected<void*, MemoryError> allocate_committed(std::size_t bytes, std::size_t align,
                                                  std::span<const ByteRange>) noexcept override {
    return inner_->allocate(bytes, align);
  }
};

// Reports success for commits it never makes.
class CommitNoop final : public ForwardingVmm {
 public:
  using ForwardingVmm::ForwardingVmm;
  Expected<void, MemoryError> commit_allocation_range(void*, std::size_t, std::size_t, std::size_t,
                                                      std::size_t) noexcept override {
    return {};
  }
};

// Reports one granule more than a decommit unmapped.
class DecommitOverreports final : public ForwardingVmm {
 public:
  using ForwardingVmm::ForwardingVmm;
  Expected<std::uint64_t, MemoryError> decommit_allocation_range(void* ptr, std::size_t allocation_bytes,
                                                                 std::size_t align, std::size_t offset,
                                                                 std::size_t bytes) noexcept override {
    auto unmapped = inner_->decommit_allocation_range(ptr, allocation_bytes, align, offset, bytes);
    if (unmapped) *unmapped += granule();
    return unmapped;
  }
};

// Releases of more than four granules count a guard granule past the end
// that was never mapped: Complete, the right allocation bytes, one granule too
// many unmapped.
class ReleaseOverreports final : public ForwardingVmm {
 public:
  using ForwardingVmm::ForwardingVmm;
  AllocationReleaseOutcome release(void* ptr, std::size_t bytes, std::size_t align) noexcept override {
    auto outcome = inner_->release(ptr, bytes, align);
    if (!outcome.is_complete() || bytes <= 4 * granule()) return outcome;
    return AllocationReleaseOutcome::complete({bytes, outcome.unmapped_bytes() + granule()});
  }
};

// Estimates the bytes asked for, not the granules a commit maps.
class LowEstimate final : public ForwardingVmm {
 public:
  using ForwardingVmm::ForwardingVmm;
  Expected<std::uint64_t, MemoryError> mapped_bytes_for_allocation(std::size_t bytes,
                                                                   std::size_t) const noexcept override {
    return bytes;
  }
  Expected<std::uint64_t, MemoryError> mapped_bytes_for_allocation_ranges(
      std::span<const AllocationCommitRange> ranges) const noexcept override {
    std::uint64_t total = 0;
    for (const auto& range : ranges) total += range.bytes;
    return total;
  }
};

// Committed bytes never go down.
class StaleCommitted final : public ForwardingVmm {
 public:
  using ForwardingVmm::ForwardingVmm;
  std::size_t allocation_committed_bytes(void* ptr, std::size_t allocation_bytes,
                                         std::size_t align) const noexcept override {
    const std::lock_guard lock(mutex_);
    auto& high = high_water_[ptr];
    high = std::max(high, inner_->allocation_committed_bytes(ptr, allocation_bytes, align));
    return high;
  }

 private:
  mutable std::mutex mutex_;
  mutable std::map<void*, std::size_t> high_water_;
};

// Refuses to commit a range again once it was decommitted.
class NoRecommit final : public ForwardingVmm {
 public:
  using ForwardingVmm::ForwardingVmm;
  Expected<std::uint64_t, MemoryError> decommit_allocation_range(void* ptr, std::size_t allocation_bytes,
                                                                 std::size_t align, std::size_t offset,
                                                                 std::size_t bytes) noexcept override {
    const std::lock_guard lock(mutex_);
    decommitted_.insert(ptr);
    return inner_->decommit_allocation_range(ptr, allocation_bytes, align, offset, bytes);
  }
  Expected<void, MemoryError> commit_allocation_range(void* ptr, std::size_t allocation_bytes, std::size_t align,
                                                      std::size_t offset, std::size_t bytes) noexcept override {
    {
      const std::lock_guard lock(mutex_);
      if (decommitted_.contains(ptr))
        return fail(MemoryError::invalid_request(Tier::kHost, bytes, "mutant: no recommit"));
    }
    return inner_->commit_allocation_range(ptr, allocation_bytes, align, offset, bytes);
  }

 private:
  std::mutex mutex_;
  std::set<void*> decommitted_;
};

// Clamps out-of-range commits instead of refusing them.
class ClampsRanges final : public ForwardingVmm {
 public:
  using ForwardingVmm::ForwardingVmm;
  Expected<void, MemoryError> commit_allocation_range(void* ptr, std::size_t allocation_bytes, std::size_t align,
                                                      std::size_t offset, std::size_t bytes) noexcept override {
    if (offset >= allocation_bytes) return {};
    bytes = std::min(bytes, allocation_bytes - offset);
    return inner_->commit_allocation_range(ptr, allocation_bytes, align, offset, bytes);
  }
};

// Reports a failed decommit as done.
class DishonestDecommit final : public ForwardingVmm {
 public:
  using ForwardingVmm::ForwardingVmm;
  Expected<std::uint64_t, MemoryError> decommit_allocation_range(void* ptr, std::size_t allocation_bytes,
                                                                 std::size_t align, std::size_t offset,
                                                                 std::size_t bytes) noexcept override {
    auto unmapped = inner_->decommit_allocation_range(ptr, allocation_bytes, align, offset, bytes);
    return unmapped ? unmapped : Expected<std::uint64_t, MemoryError>(std::uint64_t{0});
  }
};

// A prefix handle around the reference's, so mutants can misreport it.
class WrappedPrefix final : public SharedDevicePrefix {
 public:
  WrappedPrefix(std::unique_ptr<SharedDevicePrefix> inner, bool misreport, bool scrub_on_drop)
      : inner_(std::move(inner)), misreport_(misreport), scrub_on_drop_(scrub_on_drop) {}
  ~WrappedPrefix() override {
    if (scrub_on_drop_) std::memset(reinterpret_cast<void*>(inner_->device_ptr()), 0, inner_->mapped_bytes());
  }
  std::uint64_t device_ptr() const noexcept override { return inner_->device_ptr(); }
  std::uint64_t committed_physical_bytes() const noexcept override { return inner_->committed_physical_bytes(); }
  std::size_t mapped_bytes() const noexcept override { return inner_->mapped_bytes(); }
  std::size_t requested_bytes() const noexcept override {
    return misreport_ ? inner_->mapped_bytes() : inner_->requested_bytes();
  }
  [[nodiscard]] const SharedDevicePrefix& inner() const { return *inner_; }

 private:
  std::unique_ptr<SharedDevicePrefix> inner_;
  bool misreport_;
  bool scrub_on_drop_;
};

const SharedDevicePrefix& unwrap(const SharedDevicePrefix& prefix) {
  const auto* wrapped = dynamic_cast<const WrappedPrefix*>(&prefix);
  return wrapped != nullptr ? wrapped->inner() : prefix;
}

template <bool kMisreport, bool kScrub>
class PrefixWrapping : public ForwardingVmm {
 public:
  using ForwardingVmm::ForwardingVmm;
  Expected<std::unique_ptr<SharedDevicePrefix>, MemoryError> create_shared_prefix(std::size_t bytes) noexcept override {
    auto prefix = inner_->create_shared_prefix(bytes);
    if (!prefix) return prefix;
    return std::unique_ptr<SharedDevicePrefix>(std::make_unique<WrappedPrefix>(std::move(*prefix), kMisreport, kScrub));
  }
  Expected<std::uint64_t, MemoryError> incremental_owned_bytes_for_shared_prefix(
      const SharedDevicePrefix& prefix) const noexcept override {
    return inner_->incremental_owned_bytes_for_shared_prefix(unwrap(prefix));
  }
  Expected<SharedPrefixCommitInfo, MemoryError> commit_shared_prefix(const SharedDevicePrefix& prefix, void* ptr,
                                                                     std::size_t allocation_bytes,
                                                                     std::size_t byte_offset) noexcept override {
    return inner_->commit_shared_prefix(unwrap(prefix), ptr, allocation_bytes, byte_offset);
  }
};
using MisreportedGeometry = PrefixWrapping<true, false>;  // requested_bytes reports the rounded size
using EarlyFree = PrefixWrapping<false, true>;            // dropping the handle scrubs the bytes

// Prices any prefix, its own or not, at zero.
class ForeignAtZero final : public ForwardingVmm {
 public:
  using ForwardingVmm::ForwardingVmm;
  Expected<std::uint64_t, MemoryError> incremental_owned_bytes_for_shared_prefix(
      const SharedDevicePrefix&) const noexcept override {
    return std::uint64_t{0};
  }
};

// When a commit fails, maps the prefix anyway and still reports the failure.
class PartialOnError final : public ForwardingVmm {
 public:
  using ForwardingVmm::ForwardingVmm;
  Expected<SharedPrefixCommitInfo, MemoryError> commit_shared_prefix(const SharedDevicePrefix& prefix, void* ptr,
                                                                     std::size_t allocation_bytes,
                                                                     std::size_t byte_offset) noexcept override {
    auto info = inner_->commit_shared_prefix(prefix, ptr, allocation_bytes, byte_offset);
    if (info) return info;
    plan_->clear();
    (void)inner_->commit_shared_prefix(prefix, ptr, allocation_bytes, byte_offset);
    return info;
  }
};

// Charges every mapping the prefix's full size again.
class ChargesMappings final : public ForwardingVmm {
 public:
  using ForwardingVmm::ForwardingVmm;
  Expected<SharedPrefixCommitInfo, MemoryError> commit_shared_prefix(const SharedDevicePrefix& prefix, void* ptr,
                                                                     std::size_t allocation_bytes,
                                                                     std::size_t byte_offset) noexcept override {
    auto info = inner_->commit_shared_prefix(prefix, ptr, allocation_bytes, byte_offset);
    if (info) info->additional_owned_bytes = prefix.mapped_bytes();
    return info;
  }
};

// Rounds an unaligned offset down instead of refusing it.
class RoundsOffsets final : public ForwardingVmm {
 public:
  using ForwardingVmm::ForwardingVmm;
  Expected<SharedPrefixCommitInfo, MemoryError> commit_shared_prefix(const SharedDevicePrefix& prefix, void* ptr,
                                                                     std::size_t allocation_bytes,
                                                                     std::size_t byte_offset) noexcept override {
    return inner_->commit_shared_prefix(prefix, ptr, allocation_bytes, byte_offset / granule() * granule());
  }
};

// Maps a fresh prefix of its own when handed a foreign one.
class AdoptsForeign final : public ForwardingVmm {
 public:
  using ForwardingVmm::ForwardingVmm;
  Expected<SharedPrefixCommitInfo, MemoryError> commit_shared_prefix(const SharedDevicePrefix& prefix, void* ptr,
                                                                     std::size_t allocation_bytes,
                                                                     std::size_t byte_offset) noexcept override {
    auto info = inner_->commit_shared_prefix(prefix, ptr, allocation_bytes, byte_offset);
    if (info || inner_->incremental_owned_bytes_for_shared_prefix(prefix)) return info;
    auto own = inner_->create_shared_prefix(prefix.requested_bytes());
    if (!own) return info;
    return inner_->commit_shared_prefix(**own, ptr, allocation_bytes, byte_offset);
  }
};

// Copies the prefix into private, writable memory instead of mapping it.
class PrivateCopy final : public ForwardingVmm {
 public:
  using ForwardingVmm::ForwardingVmm;
  Expected<SharedPrefixCommitInfo, MemoryError> commit_shared_prefix(const SharedDevicePrefix& prefix, void* ptr,
                                                                     std::size_t allocation_bytes,
                                                                     std::size_t byte_offset) noexcept override {
    if (auto cost = inner_->incremental_owned_bytes_for_shared_prefix(prefix); !cost) return fail(cost.error());
    const std::size_t bytes =
        std::min(prefix.mapped_bytes(), allocation_bytes - std::min(allocation_bytes, byte_offset));
    if (auto done = inner_->commit_allocation_range(ptr, allocation_bytes, 64, byte_offset, bytes); !done) {
      return fail(done.error());
    }
    std::memcpy(static_cast<unsigned char*>(ptr) + byte_offset, reinterpret_cast<const void*>(prefix.device_ptr()),
                bytes);
    return SharedPrefixCommitInfo{0, prefix.mapped_bytes(), prefix.mapped_bytes() / granule()};
  }
};

template <class Mutant>
void add(const std::string& name) {
  register_variant<VmmVariant<Mutant>>(name, kKnownBad);
}

}  // namespace

void register_vmm_mutant_adapters() {
  add<OverCommit>("mutant:vb-over-commit");
  add<CommitNoop>("mutant:vb-commit-noop");
  add<DecommitOverreports>("mutant:vb-decommit-overreports");
  add<ReleaseOverreports>("mutant:vb-release-overreports");
  add<LowEstimate>("mutant:vb-low-estimate");
  add<StaleCommitted>("mutant:vb-stale-committed-bytes");
  add<NoRecommit>("mutant:vb-no-recommit");
  add<ClampsRanges>("mutant:vb-clamps-ranges");
  add<DishonestDecommit>("mutant:vb-dishonest-decommit");
  add<MisreportedGeometry>("mutant:sm-misreported-geometry");
  add<ForeignAtZero>("mutant:sm-foreign-at-zero");
  add<PartialOnError>("mutant:sm-partial-on-error");
  add<ChargesMappings>("mutant:sm-charges-mappings");
  add<RoundsOffsets>("mutant:sm-rounds-offsets");
  add<AdoptsForeign>("mutant:sm-adopts-foreign");
  add<PrivateCopy>("mutant:sm-private-copy");
  add<EarlyFree>("mutant:sm-early-free");
}

}  // namespace ortmem::adapters::mutants
