#include "ortmem/cuda/cuda_virtual_allocator.hpp"

#include <algorithm>
#include <new>
#include <string>
#include <vector>

#include "ortmem/detail/lock_guard.hpp"
#include "ortmem/detail/mutex.hpp"
#include "ortmem/detail/thread_annotations.hpp"
#include "ortmem/mechanism/vmm/mapped_bytes.hpp"
#include "ortmem/mechanism/vmm/regions.hpp"

namespace ortmem::cuda {

std::string_view driver_call_name(DriverCall call) noexcept {
  switch (call) {
    case DriverCall::kMemUnmap: return "cuMemUnmap";
    case DriverCall::kMemRelease: return "cuMemRelease";
    case DriverCall::kMemMap: return "cuMemMap";
    case DriverCall::kMemSetAccess: return "cuMemSetAccess";
  }
  return "unknown";
}

namespace {

// kOrphaned: still mapped after a failed call could not take its mapping
// back. Not committed memory (no access is promised), never committed over,
// and unmapped and given back with the rest of the allocation.
enum class Granule : std::uint8_t { kUnmapped, kCommitted, kShared, kOrphaned };

DriverFault injected(DriverCall call) { return DriverFault{driver_call_name(call), "injected failure (fault plan)"}; }

// The physical bytes of one prefix: a handle per granule, and the owner's
// read-write window. Held by the prefix handle and by every mapping of it;
// the last holder tears it down, exactly once.
struct PrefixMemory {
  PrefixMemory(std::shared_ptr<VmmDriver> owner_driver, std::size_t granule_bytes)
      : driver(std::move(owner_driver)), granularity(granule_bytes) {}
  PrefixMemory(const PrefixMemory&) = delete;
  ~PrefixMemory() {
    // A destructor cannot report: a handle the driver refuses here stays with
    // the driver's process-wide bookkeeping, which is all that can be done.
    for (std::size_t g = 0; g < mapped_granules; ++g) (void)driver->unmap(window + g * granularity, granularity);
    if (window != 0) (void)driver->free_reservation(window, handles.size() * granularity);
    for (PhysicalHandle handle : handles) (void)driver->release(handle);
  }
  [[nodiscard]] std::size_t bytes() const noexcept { return handles.size() * granularity; }

  const std::shared_ptr<VmmDriver> driver;
  const std::size_t granularity;
  std::vector<PhysicalHandle> handles;
  DevicePtr window = 0;
  std::size_t mapped_granules = 0;  // of the owner window, from its start
};

struct Slot {
  Granule state = Granule::kUnmapped;
  PhysicalHandle handle = 0;             // the prefix's when `prefix` is set, else this region's own
  std::shared_ptr<PrefixMemory> prefix;  // set for granules of a shared prefix
};

struct CudaRegion : vmm::Region<Slot> {
  // Handles unmapped from this region that could be neither remapped nor
  // released: still owned, never reused. Their presence makes release quarantine.
  std::vector<PhysicalHandle> stranded;
};

// A shared prefix handle: identifies its allocator, holds the physical bytes.
class CudaSharedPrefix final : public SharedDevicePrefix {
 public:
  CudaSharedPrefix(const CudaVirtualAllocator* owner, std::shared_ptr<PrefixMemory> memory, std::size_t requested)
      : owner_(owner), memory_(std::move(memory)), requested_(requested) {}
  std::uint64_t device_ptr() const noexcept override { return memory_->window; }
  std::uint64_t committed_physical_bytes() const noexcept override { return memory_->bytes(); }
  std::size_t mapped_bytes() const noexcept override { return memory_->bytes(); }
  std::size_t requested_bytes() const noexcept override { return requested_; }

  [[nodiscard]] const CudaVirtualAllocator* owner() const noexcept { return owner_; }
  [[nodiscard]] const std::shared_ptr<PrefixMemory>& memory() const noexcept { return memory_; }

 private:
  const CudaVirtualAllocator* owner_;
  std::shared_ptr<PrefixMemory> memory_;
  std::size_t requested_;
};

void* as_pointer(DevicePtr address) noexcept { return reinterpret_cast<void*>(static_cast<std::uintptr_t>(address)); }
DevicePtr as_address(const void* ptr) noexcept { return reinterpret_cast<std::uintptr_t>(ptr); }

}  // namespace

struct CudaVirtualAllocator::State {
  State(std::shared_ptr<VmmDriver> vmm_driver, DeviceKey key, std::shared_ptr<DriverFaults> plan)
      : driver(std::move(vmm_driver)), granularity(driver->granularity()), tier(key.tier), faults(std::move(plan)) {}

  [[nodiscard]] bool fails(DriverCall call) const noexcept { return faults && faults->should_fail(call); }
  [[nodiscard]] MemoryError invalid(std::uint64_t requested, std::string reason) const {
    return MemoryError::invalid_request(tier, requested, std::move(reason));
  }
  [[nodiscard]] MemoryError driver_failed(std::uint64_t requested, const DriverFault& fault,
                                          std::string_view what) const {
    return MemoryError::allocation_failed(tier, requested, fault.message() + "; " + std::string(what));
  }
  [[nodiscard]] Expected<void, DriverFault> unmap(DevicePtr address, std::size_t bytes) const;
  [[nodiscard]] Expected<void, DriverFault> release_handle(PhysicalHandle handle) const;
  // Maps `handle` at `address` with `access`. On failure nothing stays mapped,
  // unless `stuck` says the mapping could not be taken back.
  [[nodiscard]] Expected<void, DriverFault> map_granule(DevicePtr address, PhysicalHandle handle, Access access,
                                                        bool& stuck) const;

  [[nodiscard]] Expected<CudaRegion*, MemoryError> reserve(std::size_t bytes, std::size_t align) ORTMEM_REQUIRES(mutex);
  [[nodiscard]] Expected<void, MemoryError> commit(CudaRegion& region, std::size_t offset, std::size_t bytes)
      ORTMEM_REQUIRES(mutex);
  // Unmaps and gives back everything of the region (see the header's release table).
  [[nodiscard]] AllocationReleaseOutcome release(CudaRegion& region) ORTMEM_REQUIRES(mutex);

  const std::shared_ptr<VmmDriver> driver;
  const std::size_t granularity;
  const Tier tier;
  const std::shared_ptr<DriverFaults> faults;
  mutable detail::Mutex mutex;
  vmm::RegionTable<CudaRegion> regions ORTMEM_GUARDED_BY(mutex);
};

Expected<std::shared_ptr<CudaVirtualAllocator>, MemoryError> CudaVirtualAllocator::create(
    std::shared_ptr<VmmDriver> driver, Options options) {
  const std::size_t granularity = driver->granularity();
  if (!is_valid_alignment(granularity)) {
    return fail(MemoryError::invalid_request(
        Tier::kDevice, 0, "the driver's granularity " + std::to_string(granularity) + " is not a power of two"));
  }
  return std::shared_ptr<CudaVirtualAllocator>(new CudaVirtualAllocator(std::move(driver), std::move(options)));
}

CudaVirtualAllocator::CudaVirtualAllocator(std::shared_ptr<VmmDriver> driver, Options options)
    : granularity_(driver->granularity()), device_(options.device),
      state_(std::make_unique<State>(std::move(driver), options.device, std::move(options.faults))) {}

// Gives nothing back. A region still here was either never released by its
// owner or is quarantined by the registry (owner dropped, enqueue refused,
// device lost), and the allocator cannot tell which: quarantined memory must
// never be freed, and after device loss the driver must not be called. The
// driver reclaims what is left with the context.
CudaVirtualAllocator::~CudaVirtualAllocator() = default;

Expected<void, DriverFault> CudaVirtualAllocator::State::unmap(DevicePtr address, std::size_t bytes) const {
  if (fails(DriverCall::kMemUnmap)) return fail(injected(DriverCall::kMemUnmap));
  return driver->unmap(address, bytes);
}

Expected<void, DriverFault> CudaVirtualAllocator::State::release_handle(PhysicalHandle handle) const {
  if (fails(DriverCall::kMemRelease)) return fail(injected(DriverCall::kMemRelease));
  return driver->release(handle);
}

Expected<void, DriverFault> CudaVirtualAllocator::State::map_granule(DevicePtr address, PhysicalHandle handle,
                                                                     Access access, bool& stuck) const {
  stuck = false;
  if (fails(DriverCall::kMemMap)) return fail(injected(DriverCall::kMemMap));
  if (auto mapped = driver->map(address, granularity, handle); !mapped) return mapped;
  auto accessible = fails(DriverCall::kMemSetAccess)
                        ? Expected<void, DriverFault>(fail(injected(DriverCall::kMemSetAccess)))
                        : driver->set_access(address, granularity, access);
  // A mapping nobody may access is still a mapping: take it back. If even
  // that fails, the caller must record the granule as still mapped.
  if (!accessible && !unmap(address, granularity)) stuck = true;
  return accessible;
}

std::size_t CudaVirtualAllocator::live_allocations() const noexcept {
  const detail::LockGuard lock(state_->mutex);
  return state_->regions.live_count();
}

std::size_t CudaVirtualAllocator::stranded_handles() const noexcept {
  const detail::LockGuard lock(state_->mutex);
  std::size_t stranded = 0;
  state_->regions.for_each([&](const CudaRegion& region) { stranded += region.stranded.size(); });
  return stranded;
}

Expected<CudaRegion*, MemoryError> CudaVirtualAllocator::State::reserve(std::size_t bytes, std::size_t align) {
  auto span = vmm::reservation_bytes(bytes, align, granularity, tier);
  if (!span) return fail(std::move(span.error()));
  auto address = driver->reserve(*span, std::max(align, granularity));
  if (!address) return fail(driver_failed(bytes, address.error(), "no address range was reserved"));
  auto region = std::make_unique<CudaRegion>();
  region->address = *address;
  region->bytes = bytes;
  region->align = align;
  region->slots.resize(*span / granularity);
  return &regions.insert(std::move(region));
}

Expected<void, MemoryError> CudaVirtualAllocator::State::commit(CudaRegion& region, std::size_t offset,
                                                                std::size_t bytes) {
  if (auto outside = vmm::check_inside(region.bytes, offset, bytes, tier)) return fail(std::move(*outside));
  const vmm::GranuleSpan span = vmm::granules_holding(offset, bytes, granularity);
  for (std::size_t g = span.first; g < span.end(); ++g) {
    if (region.slots[g].state == Granule::kShared) {
      return fail(invalid(bytes, "the range overlaps a read-only shared prefix mapping"));
    }
    if (region.slots[g].state == Granule::kOrphaned) {
      return fail(invalid(bytes,
                          "the range overlaps a granule an earlier failure left mapped without access; "
                          "release the allocation to give it back"));
    }
  }
  std::vector<std::size_t> mapped_now;
  mapped_now.reserve(span.count);
  for (std::size_t g = span.first; g < span.end(); ++g) {
    Slot& slot = region.slots[g];
    if (slot.state != Granule::kUnmapped) continue;
    auto handle = driver->create(granularity);
    bool stuck = false;
    Expected<void, DriverFault> mapped =
        handle ? map_granule(region.granule_address(g, granularity), *handle, Access::kReadWrite, stuck)
               : Expected<void, DriverFault>(fail(handle.error()));
    if (!mapped) {
      bool clean = !stuck;
      if (stuck) {
        slot = Slot{Granule::kOrphaned, *handle, nullptr};
      } else if (handle && !release_handle(*handle)) {
        region.stranded.push_back(*handle);
      }
      // Transactional: take back, newest first, what this call mapped.
      for (auto it = mapped_now.rbegin(); it != mapped_now.rend(); ++it) {
        Slot& done = region.slots[*it];
        if (!unmap(region.granule_address(*it, granularity), granularity)) {
          done.state = Granule::kOrphaned;
          clean = false;
          continue;
        }
        if (!release_handle(done.handle)) region.stranded.push_back(done.handle);
        done = Slot{};
      }
      return fail(driver_failed(bytes, mapped.error(),
                                clean ? "the granules this commit mapped were taken back"
                                      : "a granule could not be taken back: it stays mapped without access until "
                                        "the allocation is released"));
    }
    slot.state = Granule::kCommitted;
    slot.handle = *handle;
    mapped_now.push_back(g);
  }
  region.committed.add(offset, offset + bytes);
  return {};
}

Expected<void*, MemoryError> CudaVirtualAllocator::allocate(std::size_t bytes, std::size_t align) noexcept {
  const ByteRange whole{0, bytes};
  return allocate_committed(bytes, align, std::span<const ByteRange>(&whole, bytes == 0 ? 0 : 1));
}

Expected<void*, MemoryError> CudaVirtualAllocator::allocate_committed(std::size_t bytes, std::size_t align,
                                                                      std::span<const ByteRange> committed) noexcept {
  return vmm::with_records(device_.tier, bytes, [&]() -> Expected<void*, MemoryError> {
    if (auto refused = vmm::check_committed_ranges(bytes, committed, device_.tier)) return fail(std::move(*refused));
    const detail::LockGuard lock(state_->mutex);
    auto reserved = state_->reserve(bytes, align);
    if (!reserved) return fail(std::move(reserved.error()));
    CudaRegion& region = **reserved;
    for (const ByteRange& range : committed) {
      if (auto done = state_->commit(region, range.begin, range.size()); !done) {
        // Nothing of this allocation may outlive the failure: undo every range.
        if (state_->release(region).is_complete()) {
          state_->regions.erase(region.address);
        } else {
          region.retired = true;  // whatever could not be undone stays owned, never reissued
        }
        return fail(done.error());
      }
    }
    return as_pointer(region.address);
  });
}

Expected<void, MemoryError> CudaVirtualAllocator::commit_allocation_range(void* ptr, std::size_t allocation_bytes,
                                                                          std::size_t align, std::size_t offset,
                                                                          std::size_t bytes) noexcept {
  return vmm::with_records(device_.tier, bytes, [&]() -> Expected<void, MemoryError> {
    const detail::LockGuard lock(state_->mutex);
    CudaRegion* region = state_->regions.find_live(as_address(ptr), allocation_bytes, align);
    if (region == nullptr) return fail(vmm::not_live(device_.tier, bytes));
    return state_->commit(*region, offset, bytes);
  });
}

Expected<std::uint64_t, MemoryError> CudaVirtualAllocator::decommit_allocation_range(
    void* ptr, std::size_t allocation_bytes, std::size_t align, std::size_t offset, std::size_t bytes) noexcept {
  return vmm::with_records(device_.tier, bytes, [&]() -> Expected<std::uint64_t, MemoryError> {
    const detail::LockGuard lock(state_->mutex);
    CudaRegion* region = state_->regions.find_live(as_address(ptr), allocation_bytes, align);
    if (region == nullptr) return fail(vmm::not_live(device_.tier, bytes));
    if (auto outside = vmm::check_inside(region->bytes, offset, bytes, device_.tier)) {
      return fail(std::move(*outside));
    }
    vmm::ByteRangeSet remaining = region->committed;
    remaining.remove(offset, offset + bytes);
    const std::vector<std::size_t> victims =
        vmm::granules_to_decommit(remaining, offset, bytes, granularity_,
                                  [&](std::size_t g) { return region->slots[g].state == Granule::kCommitted; });
    for (std::size_t i = 0; i < victims.size(); ++i) {
      auto unmapped = state_->unmap(region->granule_address(victims[i], granularity_), granularity_);
      if (unmapped) continue;
      // Roll back, newest first: remap what this call unmapped. A granule
      // that cannot be remapped leaves the allocation damaged.
      bool rolled_back = true;
      for (std::size_t j = i; j-- > 0;) {
        Slot& slot = region->slots[victims[j]];
        bool stuck = false;
        if (state_->map_granule(region->granule_address(victims[j], granularity_), slot.handle, Access::kReadWrite,
                                stuck))
          continue;
        rolled_back = false;
        if (stuck) {
          slot.state = Granule::kOrphaned;
          continue;
        }
        region->stranded.push_back(slot.handle);
        slot = Slot{};
      }
      return fail(state_->driver_failed(bytes, unmapped.error(),
                                        rolled_back ? "nothing was changed"
                                                    : "a granule could not be mapped back; the allocation is damaged "
                                                      "and its release will be quarantined"));
    }
    // Every victim is unmapped: the decommit has happened. A handle the
    // driver will not take back stays owned (stranded), not reused.
    for (std::size_t g : victims) {
      Slot& slot = region->slots[g];
      if (!state_->release_handle(slot.handle)) region->stranded.push_back(slot.handle);
      slot = Slot{};
    }
    region->committed = std::move(remaining);
    return static_cast<std::uint64_t>(victims.size() * granularity_);
  });
}

Expected<std::uint64_t, MemoryError> CudaVirtualAllocator::mapped_bytes_for_allocation(
    std::size_t bytes, std::size_t align) const noexcept {
  return vmm::mapped_bytes_for_allocation(bytes, align, granularity_, device_.tier);
}

Expected<std::uint64_t, MemoryError> CudaVirtualAllocator::mapped_bytes_for_allocation_ranges(
    std::span<const AllocationCommitRange> ranges) const noexcept {
  return vmm::mapped_bytes_for_ranges(ranges, granularity_, device_.tier);
}

std::size_t CudaVirtualAllocator::allocation_committed_bytes(void* ptr, std::size_t allocation_bytes,
                                                             std::size_t align) const noexcept {
  const detail::LockGuard lock(state_->mutex);
  const CudaRegion* region = state_->regions.find_live(as_address(ptr), allocation_bytes, align);
  if (region == nullptr) return 0;
  return region->bytes_of_granules(granularity_, [](const Slot& slot) { return slot.state == Granule::kCommitted; });
}

AllocationReleaseOutcome CudaVirtualAllocator::State::release(CudaRegion& region) {
  const auto runs = vmm::contiguous_runs(region.slots.size(),
                                         [&](std::size_t g) { return region.slots[g].state != Granule::kUnmapped; });
  std::uint64_t unmapped = 0;
  std::uint64_t still_mapped = 0;
  for (const vmm::GranuleSpan run : runs) still_mapped += run.count * granularity;
  const auto quarantine = [&](AllocationReleaseState state, std::uint64_t retained) {
    region.retired = true;  // never live again, never reissued
    return AllocationReleaseOutcome::quarantined(
        {region.bytes, unmapped},
        {state, QuarantineReason::of(QuarantineReason::Kind::kPartialRelease), retained, region.address, region.align});
  };
  const auto stranded_bytes = [&] { return static_cast<std::uint64_t>(region.stranded.size() * granularity); };

  for (const vmm::GranuleSpan run : runs) {
    const std::size_t run_bytes = run.count * granularity;
    if (!unmap(region.granule_address(run.first, granularity), run_bytes)) {
      // The failed run is untouched: still mapped, still owned.
      if (unmapped == 0) {
        return AllocationReleaseOutcome::failed("cuMemUnmap of the first mapped run failed; nothing was changed");
      }
      return quarantine(AllocationReleaseState::kPartiallyUnmapped, still_mapped + stranded_bytes());
    }
    unmapped += run_bytes;
    still_mapped -= run_bytes;
    for (std::size_t g = run.first; g < run.end(); ++g) {
      Slot& slot = region.slots[g];
      // A prefix granule's handle belongs to the prefix, freed with its last holder.
      if (!slot.prefix && !release_handle(slot.handle)) region.stranded.push_back(slot.handle);
      slot = Slot{};
    }
  }
  if (!region.stranded.empty()) return quarantine(AllocationReleaseState::kQuarantined, stranded_bytes());
  if (!driver->free_reservation(region.address, region.reserved_bytes(granularity))) {
    return quarantine(AllocationReleaseState::kQuarantined, 0);
  }
  return AllocationReleaseOutcome::complete({region.bytes, unmapped});
}

AllocationReleaseOutcome CudaVirtualAllocator::release(void* ptr, std::size_t bytes, std::size_t align) noexcept {
  const detail::LockGuard lock(state_->mutex);
  CudaRegion* region = state_->regions.find_live(as_address(ptr), bytes, align);
  if (region == nullptr) return vmm::release_of_no_live_allocation();
  auto outcome = state_->release(*region);
  if (outcome.is_complete()) state_->regions.erase(region->address);
  return outcome;
}

void CudaVirtualAllocator::deallocate(void* ptr, std::size_t bytes, std::size_t align) noexcept {
  (void)release(ptr, bytes, align);
}

Expected<std::unique_ptr<SharedDevicePrefix>, MemoryError> CudaVirtualAllocator::create_shared_prefix(
    std::size_t bytes) noexcept {
  if (bytes == 0) return fail(state_->invalid(0, "a shared prefix of zero bytes shares nothing"));
  const auto span = vmm::round_up(bytes, granularity_);
  if (!span) return fail(state_->invalid(bytes, "the size overflows when rounded up to whole granules"));
  try {
    // Built up step by step; on any failure the memory's destructor undoes
    // exactly the steps that were taken.
    const std::shared_ptr<VmmDriver>& driver = state_->driver;
    auto memory = std::make_shared<PrefixMemory>(driver, granularity_);
    const std::size_t count = *span / granularity_;
    memory->handles.reserve(count);
    for (std::size_t g = 0; g < count; ++g) {
      auto handle = driver->create(granularity_);
      if (!handle) return fail(state_->driver_failed(bytes, handle.error(), "no prefix was created"));
      memory->handles.push_back(*handle);
    }
    auto window = driver->reserve(*span, granularity_);
    if (!window) return fail(state_->driver_failed(bytes, window.error(), "no prefix was created"));
    memory->window = *window;
    for (std::size_t g = 0; g < count; ++g) {
      bool stuck = false;
      if (auto mapped = state_->map_granule(*window + g * granularity_, memory->handles[g], Access::kReadWrite, stuck);
          !mapped) {
        if (stuck) ++memory->mapped_granules;  // so the memory's teardown unmaps it too
        return fail(state_->driver_failed(bytes, mapped.error(), "no prefix was created"));
      }
      ++memory->mapped_granules;
    }
    return std::unique_ptr<SharedDevicePrefix>(std::make_unique<CudaSharedPrefix>(this, std::move(memory), bytes));
  } catch (const std::bad_alloc&) {
    return fail(MemoryError::allocation_failed(device_.tier, bytes, "out of host memory for the prefix record"));
  }
}

Expected<std::uint64_t, MemoryError> CudaVirtualAllocator::incremental_owned_bytes_for_shared_prefix(
    const SharedDevicePrefix& prefix) const noexcept {
  const auto* ours = dynamic_cast<const CudaSharedPrefix*>(&prefix);
  if (ours == nullptr || ours->owner() != this) {
    return fail(
        state_->invalid(prefix.mapped_bytes(), "the prefix was not created by this shared mapping (a foreign prefix)"));
  }
  return std::uint64_t{0};  // sharers map the prefix's handles: no new physical bytes
}

Expected<SharedPrefixCommitInfo, MemoryError> CudaVirtualAllocator::commit_shared_prefix(
    const SharedDevicePrefix& prefix, void* ptr, std::size_t allocation_bytes, std::size_t byte_offset) noexcept {
  return vmm::with_records(device_.tier, 0, [&]() -> Expected<SharedPrefixCommitInfo, MemoryError> {
    if (auto ours = incremental_owned_bytes_for_shared_prefix(prefix); !ours) return fail(ours.error());
    const auto& memory = static_cast<const CudaSharedPrefix&>(prefix).memory();
    const detail::LockGuard lock(state_->mutex);
    CudaRegion* region = state_->regions.find_live_of_size(as_address(ptr), allocation_bytes);
    if (region == nullptr) {
      return fail(state_->invalid(prefix.mapped_bytes(), "the target is not a live allocation of exactly " +
                                                             std::to_string(allocation_bytes) + " bytes"));
    }
    auto span = vmm::place_prefix(*region, prefix, byte_offset, granularity_, device_.tier,
                                  [](const Slot& slot) { return slot.state == Granule::kUnmapped; });
    if (!span) return fail(std::move(span.error()));
    for (std::size_t i = 0; i < span->count; ++i) {
      Slot& slot = region->slots[span->first + i];
      bool stuck = false;
      if (auto mapped = state_->map_granule(region->granule_address(span->first + i, granularity_), memory->handles[i],
                                            Access::kReadOnly, stuck);
          !mapped) {
        bool clean = !stuck;
        if (stuck) slot = Slot{Granule::kOrphaned, memory->handles[i], memory};
        // Take back, newest first, the granules of this prefix mapped so far.
        for (std::size_t j = i; j-- > 0;) {
          Slot& done = region->slots[span->first + j];
          if (state_->unmap(region->granule_address(span->first + j, granularity_), granularity_)) {
            done = Slot{};
          } else {
            done.state = Granule::kOrphaned;
            clean = false;
          }
        }
        return fail(state_->driver_failed(prefix.mapped_bytes(), mapped.error(),
                                          clean ? "the prefix was not mapped"
                                                : "a prefix granule could not be taken back: it stays mapped "
                                                  "without access until the allocation is released"));
      }
      slot = Slot{Granule::kShared, memory->handles[i], memory};
    }
    return SharedPrefixCommitInfo{0, memory->bytes(), span->count};
  });
}

}  // namespace ortmem::cuda
