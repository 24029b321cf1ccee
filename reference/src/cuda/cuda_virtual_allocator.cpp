#include "ortmem/cuda/cuda_virtual_allocator.hpp"

#include <algorithm>
#include <new>
#include <string>
#include <vector>

#include "ortmem/mechanism/vmm/byte_range_set.hpp"
#include "ortmem/mechanism/vmm/granules.hpp"
#include "ortmem/mechanism/vmm/mapped_bytes.hpp"

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

}  // namespace

// The physical bytes of one prefix: a handle per granule, and the owner's
// read-write window. Held by the prefix handle and by every mapping of it;
// the last holder tears it down, exactly once.
struct CudaVirtualAllocator::PrefixMemory {
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

struct CudaVirtualAllocator::Region {
  struct Slot {
    Granule state = Granule::kUnmapped;
    PhysicalHandle handle = 0;             // the prefix's when `prefix` is set, else this region's own
    std::shared_ptr<PrefixMemory> prefix;  // set for granules of a shared prefix
  };
  DevicePtr address = 0;  // aligned to max(align, granularity)
  std::size_t bytes = 0;
  std::size_t align = 0;
  std::vector<Slot> slots;      // covers round_up(max(bytes, 1), granularity)
  vmm::ByteRangeSet committed;  // the bytes the caller committed
  // Handles unmapped from this region that could be neither remapped nor
  // released: still owned, never reused. Their presence makes release quarantine.
  std::vector<PhysicalHandle> stranded;
  bool retired = false;  // release stopped part way: kept reserved, never live again

  [[nodiscard]] DevicePtr granule_address(std::size_t g, std::size_t granularity) const noexcept {
    return address + g * granularity;
  }
};

namespace {

// A shared prefix handle: identifies its allocator, holds the physical bytes.
class CudaSharedPrefix final : public SharedDevicePrefix {
 public:
  CudaSharedPrefix(const CudaVirtualAllocator* owner, std::shared_ptr<CudaVirtualAllocator::PrefixMemory> memory,
                   std::size_t requested)
      : owner_(owner), memory_(std::move(memory)), requested_(requested) {}
  std::uint64_t device_ptr() const noexcept override { return memory_->window; }
  std::uint64_t committed_physical_bytes() const noexcept override { return memory_->bytes(); }
  std::size_t mapped_bytes() const noexcept override { return memory_->bytes(); }
  std::size_t requested_bytes() const noexcept override { return requested_; }

  [[nodiscard]] const CudaVirtualAllocator* owner() const noexcept { return owner_; }
  [[nodiscard]] const std::shared_ptr<CudaVirtualAllocator::PrefixMemory>& memory() const noexcept { return memory_; }

 private:
  const CudaVirtualAllocator* owner_;
  std::shared_ptr<CudaVirtualAllocator::PrefixMemory> memory_;
  std::size_t requested_;
};

void* as_pointer(DevicePtr address) noexcept { return reinterpret_cast<void*>(static_cast<std::uintptr_t>(address)); }
DevicePtr as_address(const void* ptr) noexcept { return reinterpret_cast<std::uintptr_t>(ptr); }

}  // namespace

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
    : driver_(std::move(driver)), granularity_(driver_->granularity()), device_(options.device),
      faults_(std::move(options.faults)) {}

// Gives nothing back. A region still here was either never released by its
// owner or is quarantined by the registry (owner dropped, enqueue refused,
// device lost), and the allocator cannot tell which: quarantined memory must
// never be freed, and after device loss the driver must not be called. The
// driver reclaims what is left with the context.
CudaVirtualAllocator::~CudaVirtualAllocator() = default;

bool CudaVirtualAllocator::fails(DriverCall call) const noexcept { return faults_ && faults_->should_fail(call); }

MemoryError CudaVirtualAllocator::invalid(std::uint64_t requested, std::string reason) const {
  return MemoryError::invalid_request(device_.tier, requested, std::move(reason));
}

MemoryError CudaVirtualAllocator::driver_failed(std::uint64_t requested, const DriverFault& fault,
                                                std::string_view what) const {
  return MemoryError::allocation_failed(device_.tier, requested, fault.message() + "; " + std::string(what));
}

Expected<void, DriverFault> CudaVirtualAllocator::unmap(DevicePtr address, std::size_t bytes) {
  if (fails(DriverCall::kMemUnmap)) return fail(injected(DriverCall::kMemUnmap));
  return driver_->unmap(address, bytes);
}

Expected<void, DriverFault> CudaVirtualAllocator::release_handle(PhysicalHandle handle) {
  if (fails(DriverCall::kMemRelease)) return fail(injected(DriverCall::kMemRelease));
  return driver_->release(handle);
}

Expected<void, DriverFault> CudaVirtualAllocator::map_granule(DevicePtr address, PhysicalHandle handle, Access access,
                                                              bool& stuck) {
  stuck = false;
  if (fails(DriverCall::kMemMap)) return fail(injected(DriverCall::kMemMap));
  if (auto mapped = driver_->map(address, granularity_, handle); !mapped) return mapped;
  auto accessible = fails(DriverCall::kMemSetAccess)
                        ? Expected<void, DriverFault>(fail(injected(DriverCall::kMemSetAccess)))
                        : driver_->set_access(address, granularity_, access);
  // A mapping nobody may access is still a mapping: take it back. If even
  // that fails, the caller must record the granule as still mapped.
  if (!accessible && !unmap(address, granularity_)) stuck = true;
  return accessible;
}

std::size_t CudaVirtualAllocator::live_allocations() const noexcept {
  const std::lock_guard lock(mutex_);
  return static_cast<std::size_t>(
      std::count_if(regions_.begin(), regions_.end(), [](const auto& entry) { return !entry.second->retired; }));
}

std::size_t CudaVirtualAllocator::stranded_handles() const noexcept {
  const std::lock_guard lock(mutex_);
  std::size_t stranded = 0;
  for (const auto& [address, region] : regions_) stranded += region->stranded.size();
  return stranded;
}

CudaVirtualAllocator::Region* CudaVirtualAllocator::find_live(void* ptr, std::size_t bytes, std::size_t align) const {
  const auto found = regions_.find(as_address(ptr));
  if (found == regions_.end() || found->second->retired) return nullptr;
  Region* region = found->second.get();
  return region->bytes == bytes && region->align == align ? region : nullptr;
}

Expected<void*, MemoryError> CudaVirtualAllocator::reserve(std::size_t bytes, std::size_t align) {
  if (!is_valid_alignment(align)) {
    return fail(invalid(bytes, "alignment " + std::to_string(align) + " is not a power of two"));
  }
  // The reservation is aligned to the larger of the two, so a size that
  // overflows when rounded up to either is a bad request, not a driver's refusal.
  const auto span = vmm::round_up(std::max<std::size_t>(bytes, 1), granularity_);
  if (!span || !vmm::round_up(*span, std::max(align, granularity_))) {
    return fail(invalid(bytes, "the size overflows when rounded up to whole granules of " +
                                   std::to_string(std::max(align, granularity_)) + " bytes"));
  }
  auto address = driver_->reserve(*span, std::max(align, granularity_));
  if (!address) return fail(driver_failed(bytes, address.error(), "no address range was reserved"));
  auto region = std::make_unique<Region>();
  region->address = *address;
  region->bytes = bytes;
  region->align = align;
  region->slots.resize(*span / granularity_);
  regions_.emplace(*address, std::move(region));
  return as_pointer(*address);
}

Expected<void, MemoryError> CudaVirtualAllocator::commit_locked(Region& region, std::size_t offset, std::size_t bytes) {
  if (offset > region.bytes || bytes > region.bytes - offset) {
    return fail(invalid(bytes, "range " + std::to_string(offset) + "+" + std::to_string(bytes) +
                                   " lies outside the allocation of " + std::to_string(region.bytes) + " bytes"));
  }
  const vmm::GranuleSpan span = vmm::granules_holding(offset, bytes, granularity_);
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
    Region::Slot& slot = region.slots[g];
    if (slot.state != Granule::kUnmapped) continue;
    auto handle = driver_->create(granularity_);
    bool stuck = false;
    Expected<void, DriverFault> mapped =
        handle ? map_granule(region.granule_address(g, granularity_), *handle, Access::kReadWrite, stuck)
               : Expected<void, DriverFault>(fail(handle.error()));
    if (!mapped) {
      bool clean = !stuck;
      if (stuck) {
        slot = Region::Slot{Granule::kOrphaned, *handle, nullptr};
      } else if (handle && !release_handle(*handle)) {
        region.stranded.push_back(*handle);
      }
      // Transactional: take back, newest first, what this call mapped.
      for (auto it = mapped_now.rbegin(); it != mapped_now.rend(); ++it) {
        Region::Slot& done = region.slots[*it];
        if (!unmap(region.granule_address(*it, granularity_), granularity_)) {
          done.state = Granule::kOrphaned;
          clean = false;
          continue;
        }
        if (!release_handle(done.handle)) region.stranded.push_back(done.handle);
        done = Region::Slot{};
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
  try {
    const std::lock_guard lock(mutex_);
    for (const ByteRange& range : committed) {
      if (range.begin > range.end || range.end > bytes) {
        return fail(invalid(bytes, "committed range " + std::to_string(range.begin) + ".." + std::to_string(range.end) +
                                       " lies outside the allocation"));
      }
    }
    auto ptr = reserve(bytes, align);
    if (!ptr) return ptr;
    Region& region = *regions_.at(as_address(*ptr));
    for (const ByteRange& range : committed) {
      if (auto done = commit_locked(region, range.begin, range.size()); !done) {
        // Nothing of this allocation may outlive the failure: undo every range.
        if (release_locked(region).is_complete()) {
          regions_.erase(region.address);
        } else {
          region.retired = true;  // whatever could not be undone stays owned, never reissued
        }
        return fail(done.error());
      }
    }
    return ptr;
  } catch (const std::bad_alloc&) {
    return fail(MemoryError::allocation_failed(device_.tier, bytes, "out of host memory for the allocator's records"));
  }
}

Expected<void, MemoryError> CudaVirtualAllocator::commit_allocation_range(void* ptr, std::size_t allocation_bytes,
                                                                          std::size_t align, std::size_t offset,
                                                                          std::size_t bytes) noexcept {
  try {
    const std::lock_guard lock(mutex_);
    Region* region = find_live(ptr, allocation_bytes, align);
    if (region == nullptr)
      return fail(invalid(bytes, "the address is not a live allocation of this size and alignment"));
    return commit_locked(*region, offset, bytes);
  } catch (const std::bad_alloc&) {
    return fail(MemoryError::allocation_failed(device_.tier, bytes, "out of host memory for the allocator's records"));
  }
}

Expected<std::uint64_t, MemoryError> CudaVirtualAllocator::decommit_allocation_range(
    void* ptr, std::size_t allocation_bytes, std::size_t align, std::size_t offset, std::size_t bytes) noexcept {
  try {
    const std::lock_guard lock(mutex_);
    Region* region = find_live(ptr, allocation_bytes, align);
    if (region == nullptr)
      return fail(invalid(bytes, "the address is not a live allocation of this size and alignment"));
    if (offset > region->bytes || bytes > region->bytes - offset) {
      return fail(invalid(bytes, "range " + std::to_string(offset) + "+" + std::to_string(bytes) +
                                     " lies outside the allocation of " + std::to_string(region->bytes) + " bytes"));
    }
    if (bytes == 0) return std::uint64_t{0};
    vmm::ByteRangeSet remaining = region->committed;
    remaining.remove(offset, offset + bytes);
    // Only granules that no longer hold any committed byte are unmapped.
    std::vector<std::size_t> victims;
    const vmm::GranuleSpan span = vmm::granules_holding(offset, bytes, granularity_);
    for (std::size_t g = span.first; g < span.end(); ++g) {
      if (region->slots[g].state != Granule::kCommitted) continue;
      if (!remaining.intersects(g * granularity_, (g + 1) * granularity_)) victims.push_back(g);
    }
    for (std::size_t i = 0; i < victims.size(); ++i) {
      auto unmapped = unmap(region->granule_address(victims[i], granularity_), granularity_);
      if (unmapped) continue;
      // Roll back, newest first: remap what this call unmapped. A granule
      // that cannot be remapped leaves the allocation damaged.
      bool rolled_back = true;
      for (std::size_t j = i; j-- > 0;) {
        Region::Slot& slot = region->slots[victims[j]];
        bool stuck = false;
        if (map_granule(region->granule_address(victims[j], granularity_), slot.handle, Access::kReadWrite, stuck))
          continue;
        rolled_back = false;
        if (stuck) {
          slot.state = Granule::kOrphaned;
          continue;
        }
        region->stranded.push_back(slot.handle);
        slot = Region::Slot{};
      }
      return fail(driver_failed(bytes, unmapped.error(),
                                rolled_back ? "nothing was changed"
                                            : "a granule could not be mapped back; the allocation is damaged and "
                                              "its release will be quarantined"));
    }
    // Every victim is unmapped: the decommit has happened. A handle the
    // driver will not take back stays owned (stranded), not reused.
    for (std::size_t g : victims) {
      Region::Slot& slot = region->slots[g];
      if (!release_handle(slot.handle)) region->stranded.push_back(slot.handle);
      slot = Region::Slot{};
    }
    region->committed = std::move(remaining);
    return static_cast<std::uint64_t>(victims.size() * granularity_);
  } catch (const std::bad_alloc&) {
    return fail(MemoryError::allocation_failed(device_.tier, bytes, "out of host memory for the allocator's records"));
  }
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
  const std::lock_guard lock(mutex_);
  const Region* region = find_live(ptr, allocation_bytes, align);
  if (region == nullptr) return 0;
  return static_cast<std::size_t>(
             std::count_if(region->slots.begin(), region->slots.end(),
                           [](const Region::Slot& slot) { return slot.state == Granule::kCommitted; })) *
         granularity_;
}

AllocationReleaseOutcome CudaVirtualAllocator::release_locked(Region& region) {
  const auto mapped = [&](std::size_t g) { return region.slots[g].state != Granule::kUnmapped; };
  const auto runs = vmm::contiguous_runs(region.slots.size(), mapped);
  std::uint64_t unmapped = 0;
  std::uint64_t still_mapped = 0;
  for (const vmm::GranuleSpan run : runs) still_mapped += run.count * granularity_;
  const auto quarantine = [&](AllocationReleaseState state, std::uint64_t retained) {
    region.retired = true;  // never live again, never reissued
    return AllocationReleaseOutcome::quarantined(
        {region.bytes, unmapped},
        {state, QuarantineReason::of(QuarantineReason::Kind::kPartialRelease), retained, region.address, region.align});
  };
  const auto stranded_bytes = [&] { return static_cast<std::uint64_t>(region.stranded.size() * granularity_); };

  for (const vmm::GranuleSpan run : runs) {
    const std::size_t run_bytes = run.count * granularity_;
    if (!unmap(region.granule_address(run.first, granularity_), run_bytes)) {
      // The failed run is untouched: still mapped, still owned.
      if (unmapped == 0) {
        return AllocationReleaseOutcome::failed("cuMemUnmap of the first mapped run failed; nothing was changed");
      }
      return quarantine(AllocationReleaseState::kPartiallyUnmapped, still_mapped + stranded_bytes());
    }
    unmapped += run_bytes;
    still_mapped -= run_bytes;
    for (std::size_t g = run.first; g < run.end(); ++g) {
      Region::Slot& slot = region.slots[g];
      // A prefix granule's handle belongs to the prefix, freed with its last holder.
      if (!slot.prefix && !release_handle(slot.handle)) region.stranded.push_back(slot.handle);
      slot = Region::Slot{};
    }
  }
  if (!region.stranded.empty()) return quarantine(AllocationReleaseState::kQuarantined, stranded_bytes());
  if (!driver_->free_reservation(region.address, region.slots.size() * granularity_)) {
    return quarantine(AllocationReleaseState::kQuarantined, 0);
  }
  return AllocationReleaseOutcome::complete({region.bytes, unmapped});
}

AllocationReleaseOutcome CudaVirtualAllocator::release(void* ptr, std::size_t bytes, std::size_t align) noexcept {
  const std::lock_guard lock(mutex_);
  Region* region = find_live(ptr, bytes, align);
  if (region == nullptr) {
    return AllocationReleaseOutcome::failed(
        "the address is not a live allocation of this virtual allocator with this size and alignment "
        "(never allocated here, already released, or a mismatched size or alignment); nothing was changed");
  }
  auto outcome = release_locked(*region);
  if (outcome.is_complete()) regions_.erase(region->address);
  return outcome;
}

void CudaVirtualAllocator::deallocate(void* ptr, std::size_t bytes, std::size_t align) noexcept {
  (void)release(ptr, bytes, align);
}

Expected<std::unique_ptr<SharedDevicePrefix>, MemoryError> CudaVirtualAllocator::create_shared_prefix(
    std::size_t bytes) noexcept {
  if (bytes == 0) return fail(invalid(0, "a shared prefix of zero bytes shares nothing"));
  const auto span = vmm::round_up(bytes, granularity_);
  if (!span) return fail(invalid(bytes, "the size overflows when rounded up to whole granules"));
  try {
    // Built up step by step; on any failure the memory's destructor undoes
    // exactly the steps that were taken.
    auto memory = std::make_shared<PrefixMemory>(driver_, granularity_);
    const std::size_t count = *span / granularity_;
    memory->handles.reserve(count);
    for (std::size_t g = 0; g < count; ++g) {
      auto handle = driver_->create(granularity_);
      if (!handle) return fail(driver_failed(bytes, handle.error(), "no prefix was created"));
      memory->handles.push_back(*handle);
    }
    auto window = driver_->reserve(*span, granularity_);
    if (!window) return fail(driver_failed(bytes, window.error(), "no prefix was created"));
    memory->window = *window;
    for (std::size_t g = 0; g < count; ++g) {
      bool stuck = false;
      if (auto mapped = map_granule(*window + g * granularity_, memory->handles[g], Access::kReadWrite, stuck);
          !mapped) {
        if (stuck) ++memory->mapped_granules;  // so the memory's teardown unmaps it too
        return fail(driver_failed(bytes, mapped.error(), "no prefix was created"));
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
    return fail(invalid(prefix.mapped_bytes(), "the prefix was not created by this shared mapping (a foreign prefix)"));
  }
  return std::uint64_t{0};  // sharers map the prefix's handles: no new physical bytes
}

Expected<SharedPrefixCommitInfo, MemoryError> CudaVirtualAllocator::commit_shared_prefix(
    const SharedDevicePrefix& prefix, void* ptr, std::size_t allocation_bytes, std::size_t byte_offset) noexcept {
  try {
    if (auto ours = incremental_owned_bytes_for_shared_prefix(prefix); !ours) return fail(ours.error());
    const auto& memory = static_cast<const CudaSharedPrefix&>(prefix).memory();
    const std::lock_guard lock(mutex_);
    const auto found = regions_.find(as_address(ptr));
    if (found == regions_.end() || found->second->retired || found->second->bytes != allocation_bytes) {
      return fail(invalid(prefix.mapped_bytes(), "the target is not a live allocation of exactly " +
                                                     std::to_string(allocation_bytes) + " bytes"));
    }
    Region& region = *found->second;
    if (byte_offset % granularity_ != 0) {
      return fail(invalid(prefix.mapped_bytes(), "offset " + std::to_string(byte_offset) +
                                                     " is not a multiple of the granularity " +
                                                     std::to_string(granularity_)));
    }
    const std::size_t span = region.slots.size() * granularity_;
    if (byte_offset > allocation_bytes || prefix.requested_bytes() > allocation_bytes - byte_offset ||
        memory->bytes() > span - std::min(span, byte_offset)) {
      return fail(invalid(prefix.mapped_bytes(),
                          "the prefix does not fit in the allocation at offset " + std::to_string(byte_offset)));
    }
    const std::size_t first = byte_offset / granularity_;
    const std::size_t count = memory->handles.size();
    for (std::size_t g = first; g < first + count; ++g) {
      if (region.slots[g].state != Granule::kUnmapped) {
        return fail(invalid(prefix.mapped_bytes(), "the target range is already committed"));
      }
    }
    for (std::size_t i = 0; i < count; ++i) {
      Region::Slot& slot = region.slots[first + i];
      bool stuck = false;
      if (auto mapped = map_granule(region.granule_address(first + i, granularity_), memory->handles[i],
                                    Access::kReadOnly, stuck);
          !mapped) {
        bool clean = !stuck;
        if (stuck) slot = Region::Slot{Granule::kOrphaned, memory->handles[i], memory};
        // Take back, newest first, the granules of this prefix mapped so far.
        for (std::size_t j = i; j-- > 0;) {
          Region::Slot& done = region.slots[first + j];
          if (unmap(region.granule_address(first + j, granularity_), granularity_)) {
            done = Region::Slot{};
          } else {
            done.state = Granule::kOrphaned;
            clean = false;
          }
        }
        return fail(driver_failed(prefix.mapped_bytes(), mapped.error(),
                                  clean ? "the prefix was not mapped"
                                        : "a prefix granule could not be taken back: it stays mapped without "
                                          "access until the allocation is released"));
      }
      slot = Region::Slot{Granule::kShared, memory->handles[i], memory};
    }
    return SharedPrefixCommitInfo{0, memory->bytes(), count};
  } catch (const std::bad_alloc&) {
    return fail(MemoryError::allocation_failed(device_.tier, 0, "out of host memory for the allocator's records"));
  }
}

}  // namespace ortmem::cuda
