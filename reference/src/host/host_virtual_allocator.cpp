#include "ortmem/host/host_virtual_allocator.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "ortmem/detail/lock_guard.hpp"
#include "ortmem/detail/mutex.hpp"
#include "ortmem/detail/thread_annotations.hpp"
#include "ortmem/mechanism/vmm/mapped_bytes.hpp"
#include "ortmem/mechanism/vmm/regions.hpp"

namespace ortmem::host {

std::string_view syscall_name(Syscall kind) noexcept {
  switch (kind) {
    case Syscall::kMmap: return "mmap";
    case Syscall::kMunmap: return "munmap";
    case Syscall::kMprotect: return "mprotect";
    case Syscall::kMadvise: return "madvise";
  }
  return "unknown";
}

std::optional<Syscall> syscall_named(std::string_view name) noexcept {
  for (Syscall kind : {Syscall::kMmap, Syscall::kMunmap, Syscall::kMprotect, Syscall::kMadvise}) {
    if (syscall_name(kind) == name) return kind;
  }
  return std::nullopt;
}

namespace {

enum class Granule : std::uint8_t { kUnmapped, kCommitted, kShared };

std::size_t page_size() noexcept { return static_cast<std::size_t>(sysconf(_SC_PAGESIZE)); }

MemoryError invalid(std::uint64_t requested, std::string reason) {
  return MemoryError::invalid_request(Tier::kHost, requested, std::move(reason));
}

std::string errno_text(int error) { return std::string(std::strerror(error)); }

// Drops the pages of [address, address + bytes) and keeps the addresses
// reserved, in one call (see release).
bool reserve_over(std::uintptr_t address, std::size_t bytes) noexcept {
  return ::mmap(reinterpret_cast<void*>(address), bytes, PROT_NONE,
                MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0) != MAP_FAILED;
}

// Physical bytes of one prefix: a memfd and the owner's read-write window.
// Held by the prefix handle and by every mapping of it; the last holder
// unmaps the window and closes the file, exactly once.
struct PrefixMemory {
  PrefixMemory(int descriptor, void* window, std::size_t bytes, std::shared_ptr<std::atomic<std::size_t>> live)
      : fd(descriptor), owner_window(window), mapped_bytes(bytes), live_count(std::move(live)) {
    live_count->fetch_add(1, std::memory_order_acq_rel);
  }
  PrefixMemory(const PrefixMemory&) = delete;
  ~PrefixMemory() {
    ::munmap(owner_window, mapped_bytes);
    ::close(fd);
    live_count->fetch_sub(1, std::memory_order_acq_rel);
  }
  const int fd;
  void* const owner_window;
  const std::size_t mapped_bytes;
  const std::shared_ptr<std::atomic<std::size_t>> live_count;
};

struct HostRegion : vmm::Region<Granule> {
  std::vector<std::shared_ptr<PrefixMemory>> prefixes;  // one per shared mapping into this region
};

// A shared prefix handle: identifies its allocator, holds the physical bytes.
class HostSharedPrefix final : public SharedDevicePrefix {
 public:
  HostSharedPrefix(const HostVirtualAllocator* owner, std::shared_ptr<PrefixMemory> memory, std::size_t requested)
      : owner_(owner), memory_(std::move(memory)), requested_(requested) {}
  std::uint64_t device_ptr() const noexcept override { return reinterpret_cast<std::uintptr_t>(memory_->owner_window); }
  std::uint64_t committed_physical_bytes() const noexcept override { return memory_->mapped_bytes; }
  std::size_t mapped_bytes() const noexcept override { return memory_->mapped_bytes; }
  std::size_t requested_bytes() const noexcept override { return requested_; }

  [[nodiscard]] const HostVirtualAllocator* owner() const noexcept { return owner_; }
  [[nodiscard]] const std::shared_ptr<PrefixMemory>& memory() const noexcept { return memory_; }

 private:
  const HostVirtualAllocator* owner_;
  std::shared_ptr<PrefixMemory> memory_;
  std::size_t requested_;
};

// The prefix as this allocator's own, or null for a foreign one.
const HostSharedPrefix* own_prefix(const HostVirtualAllocator* self, const SharedDevicePrefix& prefix) noexcept {
  const auto* ours = dynamic_cast<const HostSharedPrefix*>(&prefix);
  return ours != nullptr && ours->owner() == self ? ours : nullptr;
}

MemoryError foreign_prefix(const SharedDevicePrefix& prefix) {
  return invalid(prefix.mapped_bytes(), "the prefix was not created by this shared mapping (a foreign prefix)");
}

}  // namespace

struct HostVirtualAllocator::State {
  State(std::size_t granule_bytes, std::shared_ptr<SyscallFaults> plan)
      : granularity(granule_bytes), faults(std::move(plan)) {}

  [[nodiscard]] bool fails(Syscall kind) const noexcept {
    if (!faults || !faults->should_fail(kind)) return false;
    errno = EIO;  // an injected failure reads like a real one
    return true;
  }
  [[nodiscard]] void* granule_at(const HostRegion& region, std::size_t g) const noexcept {
    return reinterpret_cast<void*>(region.granule_address(g, granularity));
  }
  [[nodiscard]] Expected<HostRegion*, MemoryError> reserve(std::size_t bytes, std::size_t align) ORTMEM_REQUIRES(mutex);
  [[nodiscard]] Expected<void, MemoryError> commit(HostRegion& region, std::size_t offset, std::size_t bytes)
      ORTMEM_REQUIRES(mutex);

  const std::size_t granularity;
  const std::shared_ptr<SyscallFaults> faults;
  const std::shared_ptr<std::atomic<std::size_t>> live_prefix_memories = std::make_shared<std::atomic<std::size_t>>(0);
  mutable detail::Mutex mutex;
  vmm::RegionTable<HostRegion> regions ORTMEM_GUARDED_BY(mutex);
};

Expected<std::shared_ptr<HostVirtualAllocator>, MemoryError> HostVirtualAllocator::create(Options options) {
  const std::size_t page = page_size();
  const std::size_t granularity = options.granularity == 0 ? page : options.granularity;
  if (!is_valid_alignment(granularity) || granularity < page) {
    return fail(invalid(0, "granularity " + std::to_string(granularity) +
                               " is not a power-of-two multiple of the page size (" + std::to_string(page) + ")"));
  }
  return std::shared_ptr<HostVirtualAllocator>(new HostVirtualAllocator(granularity, std::move(options.faults)));
}

HostVirtualAllocator::HostVirtualAllocator(std::size_t granularity, std::shared_ptr<SyscallFaults> faults)
    : granularity_(granularity), state_(std::make_unique<State>(granularity, std::move(faults))) {}

// Unmaps nothing. A region still here is live (its owner never released it,
// or the registry quarantined it: owner dropped, enqueue refused, device lost)
// or retired after a release failed part way, and either way it may be
// quarantined, which the allocator cannot tell: its addresses stay reserved
// so that mmap never reissues them. Shared prefixes mapped into a region keep
// their file alive through the mapping itself.
HostVirtualAllocator::~HostVirtualAllocator() = default;

std::size_t HostVirtualAllocator::reclaim_all_after_context_destroyed() noexcept {
  vmm::RegionTable<HostRegion>::Map reclaimed;
  {
    const detail::LockGuard lock(state_->mutex);
    reclaimed = state_->regions.take_all();
  }
  // Unmapping a whole region drops its prefix mappings with it; destroying
  // the records then ends this allocator's hold on each prefix's memory.
  for (const auto& [address, region] : reclaimed) {
    ::munmap(reinterpret_cast<void*>(address), region->reserved_bytes(granularity_));
  }
  return reclaimed.size();
}

std::size_t HostVirtualAllocator::live_allocations() const noexcept {
  const detail::LockGuard lock(state_->mutex);
  return state_->regions.live_count();
}

std::size_t HostVirtualAllocator::live_prefix_memories() const noexcept {
  return state_->live_prefix_memories->load(std::memory_order_acquire);
}

Expected<HostRegion*, MemoryError> HostVirtualAllocator::State::reserve(std::size_t bytes, std::size_t align) {
  auto span = vmm::reservation_bytes(bytes, align, granularity, Tier::kHost);
  if (!span) return fail(std::move(span.error()));
  const std::size_t boundary = std::max(align, granularity);
  // Over-reserve by the alignment, then trim both ends back to the aligned
  // span. mmap promises only a page-aligned start: a kernel that does not
  // align large anonymous mappings (Linux before 6.7) returns starts that are
  // not granule-aligned, so the slack is the boundary less one page, not less
  // one granule, or the region would run past its own reservation.
  const std::size_t reserved = *span + boundary - page_size();
  if (fails(Syscall::kMmap)) {
    return fail(MemoryError::allocation_failed(Tier::kHost, bytes, "mmap (reserve): injected failure"));
  }
  void* raw = ::mmap(nullptr, reserved, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (raw == MAP_FAILED) {
    return fail(MemoryError::allocation_failed(
        Tier::kHost, bytes,
        "mmap could not reserve " + std::to_string(reserved) + " bytes of address space: " + errno_text(errno)));
  }
  const auto start = reinterpret_cast<std::uintptr_t>(raw);
  const std::uintptr_t aligned = (start + boundary - 1) & ~(boundary - 1);
  if (aligned > start) ::munmap(raw, aligned - start);
  const std::uintptr_t end = start + reserved;
  if (end > aligned + *span) ::munmap(reinterpret_cast<void*>(aligned + *span), end - (aligned + *span));

  auto region = std::make_unique<HostRegion>();
  region->address = aligned;
  region->bytes = bytes;
  region->align = align;
  region->slots.assign(*span / granularity, Granule::kUnmapped);
  return &regions.insert(std::move(region));
}

Expected<void, MemoryError> HostVirtualAllocator::State::commit(HostRegion& region, std::size_t offset,
                                                                std::size_t bytes) {
  if (auto outside = vmm::check_inside(region.bytes, offset, bytes, Tier::kHost)) return fail(std::move(*outside));
  const vmm::GranuleSpan span = vmm::granules_holding(offset, bytes, granularity);
  for (std::size_t g = span.first; g < span.end(); ++g) {
    if (region.slots[g] == Granule::kShared) {
      return fail(invalid(bytes, "the range overlaps a read-only shared prefix mapping"));
    }
  }
  std::vector<std::size_t> mapped_now;
  for (std::size_t g = span.first; g < span.end(); ++g) {
    if (region.slots[g] != Granule::kUnmapped) continue;
    if (fails(Syscall::kMprotect) || ::mprotect(granule_at(region, g), granularity, PROT_READ | PROT_WRITE) != 0) {
      const int error = errno;
      // Transactional: take back what this call mapped.
      for (std::size_t done : mapped_now) {
        ::mprotect(granule_at(region, done), granularity, PROT_NONE);
        region.slots[done] = Granule::kUnmapped;
      }
      return fail(MemoryError::allocation_failed(
          Tier::kHost, bytes, "mprotect could not commit a granule (" + errno_text(error) + "); nothing was changed"));
    }
    region.slots[g] = Granule::kCommitted;
    mapped_now.push_back(g);
  }
  region.committed.add(offset, offset + bytes);
  return {};
}

Expected<void*, MemoryError> HostVirtualAllocator::allocate(std::size_t bytes, std::size_t align) noexcept {
  const ByteRange whole{0, bytes};
  return allocate_committed(bytes, align, std::span<const ByteRange>(&whole, bytes == 0 ? 0 : 1));
}

Expected<void*, MemoryError> HostVirtualAllocator::allocate_committed(std::size_t bytes, std::size_t align,
                                                                      std::span<const ByteRange> committed) noexcept {
  return vmm::with_records(Tier::kHost, bytes, [&]() -> Expected<void*, MemoryError> {
    if (auto refused = vmm::check_committed_ranges(bytes, committed, Tier::kHost)) return fail(std::move(*refused));
    const detail::LockGuard lock(state_->mutex);
    auto region = state_->reserve(bytes, align);
    if (!region) return fail(std::move(region.error()));
    for (const ByteRange& range : committed) {
      if (auto done = state_->commit(**region, range.begin, range.size()); !done) {
        ::munmap(reinterpret_cast<void*>((*region)->address), (*region)->reserved_bytes(granularity_));
        state_->regions.erase((*region)->address);
        return fail(done.error());
      }
    }
    return reinterpret_cast<void*>((*region)->address);
  });
}

Expected<void, MemoryError> HostVirtualAllocator::commit_allocation_range(void* ptr, std::size_t allocation_bytes,
                                                                          std::size_t align, std::size_t offset,
                                                                          std::size_t bytes) noexcept {
  return vmm::with_records(Tier::kHost, bytes, [&]() -> Expected<void, MemoryError> {
    const detail::LockGuard lock(state_->mutex);
    HostRegion* region = state_->regions.find_live(reinterpret_cast<std::uintptr_t>(ptr), allocation_bytes, align);
    if (region == nullptr) return fail(vmm::not_live(Tier::kHost, bytes));
    return state_->commit(*region, offset, bytes);
  });
}

Expected<std::uint64_t, MemoryError> HostVirtualAllocator::decommit_allocation_range(
    void* ptr, std::size_t allocation_bytes, std::size_t align, std::size_t offset, std::size_t bytes) noexcept {
  return vmm::with_records(Tier::kHost, bytes, [&]() -> Expected<std::uint64_t, MemoryError> {
    const detail::LockGuard lock(state_->mutex);
    HostRegion* region = state_->regions.find_live(reinterpret_cast<std::uintptr_t>(ptr), allocation_bytes, align);
    if (region == nullptr) return fail(vmm::not_live(Tier::kHost, bytes));
    if (auto outside = vmm::check_inside(region->bytes, offset, bytes, Tier::kHost)) return fail(std::move(*outside));
    vmm::ByteRangeSet remaining = region->committed;
    remaining.remove(offset, offset + bytes);
    const std::vector<std::size_t> victims = vmm::granules_to_decommit(
        remaining, offset, bytes, granularity_, [&](std::size_t g) { return region->slots[g] == Granule::kCommitted; });
    // Access first (reversible), then discard: a failure rolls everything back.
    std::size_t protected_count = 0;
    const auto roll_back = [&](int error, std::string_view call) {
      for (std::size_t i = 0; i < protected_count; ++i) {
        ::mprotect(state_->granule_at(*region, victims[i]), granularity_, PROT_READ | PROT_WRITE);
      }
      return fail(MemoryError::allocation_failed(
          Tier::kHost, bytes,
          std::string(call) + " failed while decommitting (" + errno_text(error) + "); nothing was changed"));
    };
    for (std::size_t g : victims) {
      if (state_->fails(Syscall::kMprotect) ||
          ::mprotect(state_->granule_at(*region, g), granularity_, PROT_NONE) != 0) {
        return roll_back(errno, "mprotect");
      }
      ++protected_count;
    }
    // Then discard, in one call over the victims' span: a call per granule
    // could fail after discarding some, whose bytes no rollback brings back,
    // and "nothing was changed" would be false (VB-008). The span may hold
    // granules that are not victims: a shared prefix's, whose bytes live in
    // its file and come back from it, or unmapped ones, with nothing to drop.
    if (!victims.empty()) {
      const std::size_t span = (victims.back() - victims.front() + 1) * granularity_;
      if (state_->fails(Syscall::kMadvise) ||
          ::madvise(state_->granule_at(*region, victims.front()), span, MADV_DONTNEED) != 0) {
        return roll_back(errno, "madvise");
      }
    }
    for (std::size_t g : victims) region->slots[g] = Granule::kUnmapped;
    region->committed = std::move(remaining);
    return static_cast<std::uint64_t>(victims.size() * granularity_);
  });
}

Expected<std::uint64_t, MemoryError> HostVirtualAllocator::mapped_bytes_for_allocation(
    std::size_t bytes, std::size_t align) const noexcept {
  return vmm::mapped_bytes_for_allocation(bytes, align, granularity_, Tier::kHost);
}

Expected<std::uint64_t, MemoryError> HostVirtualAllocator::mapped_bytes_for_allocation_ranges(
    std::span<const AllocationCommitRange> ranges) const noexcept {
  return vmm::mapped_bytes_for_ranges(ranges, granularity_, Tier::kHost);
}

std::size_t HostVirtualAllocator::allocation_committed_bytes(void* ptr, std::size_t allocation_bytes,
                                                             std::size_t align) const noexcept {
  const detail::LockGuard lock(state_->mutex);
  const HostRegion* region = state_->regions.find_live(reinterpret_cast<std::uintptr_t>(ptr), allocation_bytes, align);
  if (region == nullptr) return 0;
  return region->bytes_of_granules(granularity_, [](Granule g) { return g == Granule::kCommitted; });
}

AllocationReleaseOutcome HostVirtualAllocator::release(void* ptr, std::size_t bytes, std::size_t align) noexcept {
  const detail::LockGuard lock(state_->mutex);
  HostRegion* region = state_->regions.find_live(reinterpret_cast<std::uintptr_t>(ptr), bytes, align);
  if (region == nullptr) return vmm::release_of_no_live_allocation();
  std::uint64_t unmapped = 0;
  std::uint64_t still_mapped =
      region->bytes_of_granules(granularity_, [](Granule g) { return g != Granule::kUnmapped; });
  // One unmap step per contiguous run of mapped granules; a failed run stays
  // whole. The step is an mmap of a fresh inaccessible reservation over the
  // run (MAP_FIXED), which drops the run's pages and keeps its addresses ours
  // in one call: a munmap followed by a re-reservation leaves a moment in
  // which another thread's mmap (a prefix's owner window, made without this
  // allocator's lock) can be placed in the hole and then be clobbered.
  const auto runs =
      vmm::contiguous_runs(region->slots.size(), [&](std::size_t g) { return region->slots[g] != Granule::kUnmapped; });
  for (const vmm::GranuleSpan run : runs) {
    const std::size_t run_bytes = run.count * granularity_;
    if (state_->fails(Syscall::kMunmap) || !reserve_over(region->granule_address(run.first, granularity_), run_bytes)) {
      if (unmapped == 0) {
        return AllocationReleaseOutcome::failed("unmapping the first mapped run failed; nothing was changed");
      }
      region->retired = true;  // never live again, never reissued
      return AllocationReleaseOutcome::quarantined(
          {bytes, unmapped},
          {AllocationReleaseState::kPartiallyUnmapped, QuarantineReason::of(QuarantineReason::Kind::kPartialRelease),
           still_mapped, region->address, align});
    }
    for (std::size_t i = run.first; i < run.end(); ++i) region->slots[i] = Granule::kUnmapped;
    unmapped += run_bytes;
    still_mapped -= run_bytes;
  }
  region->prefixes.clear();  // every shared mapping is gone; the prefixes' bookkeeping may end
  if (state_->fails(Syscall::kMunmap) ||
      ::munmap(reinterpret_cast<void*>(region->address), region->reserved_bytes(granularity_)) != 0) {
    region->retired = true;
    return AllocationReleaseOutcome::quarantined(
        {bytes, unmapped}, {AllocationReleaseState::kQuarantined,
                            QuarantineReason::of(QuarantineReason::Kind::kPartialRelease), 0, region->address, align});
  }
  state_->regions.erase(region->address);
  return AllocationReleaseOutcome::complete({bytes, unmapped});
}

void HostVirtualAllocator::deallocate(void* ptr, std::size_t bytes, std::size_t align) noexcept {
  (void)release(ptr, bytes, align);
}

Expected<std::unique_ptr<SharedDevicePrefix>, MemoryError> HostVirtualAllocator::create_shared_prefix(
    std::size_t bytes) noexcept {
  if (bytes == 0) return fail(invalid(0, "a shared prefix of zero bytes shares nothing"));
  const auto mapped = vmm::round_up(bytes, granularity_);
  if (!mapped) return fail(invalid(bytes, "the size overflows when rounded up to whole granules"));
  const int fd = ::memfd_create("ortmem-shared-prefix", MFD_CLOEXEC);
  if (fd < 0) return fail(MemoryError::allocation_failed(Tier::kHost, bytes, "memfd_create: " + errno_text(errno)));
  if (::ftruncate(fd, static_cast<off_t>(*mapped)) != 0) {
    const int error = errno;
    ::close(fd);
    return fail(
        MemoryError::allocation_failed(Tier::kHost, bytes, "ftruncate of the prefix memfd: " + errno_text(error)));
  }
  void* window =
      state_->fails(Syscall::kMmap) ? MAP_FAILED : ::mmap(nullptr, *mapped, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (window == MAP_FAILED) {
    ::close(fd);
    return fail(MemoryError::allocation_failed(Tier::kHost, bytes, "mmap of the prefix owner window failed"));
  }
  try {
    auto memory = std::make_shared<PrefixMemory>(fd, window, *mapped, state_->live_prefix_memories);
    return std::unique_ptr<SharedDevicePrefix>(std::make_unique<HostSharedPrefix>(this, std::move(memory), bytes));
  } catch (const std::bad_alloc&) {
    ::munmap(window, *mapped);
    ::close(fd);
    return fail(MemoryError::allocation_failed(Tier::kHost, bytes, "out of host memory for the prefix record"));
  }
}

Expected<std::uint64_t, MemoryError> HostVirtualAllocator::incremental_owned_bytes_for_shared_prefix(
    const SharedDevicePrefix& prefix) const noexcept {
  // Refused exactly as commit would refuse it, before any cost is stated.
  if (own_prefix(this, prefix) == nullptr) return fail(foreign_prefix(prefix));
  return std::uint64_t{0};
}

Expected<SharedPrefixCommitInfo, MemoryError> HostVirtualAllocator::commit_shared_prefix(
    const SharedDevicePrefix& prefix, void* ptr, std::size_t allocation_bytes, std::size_t byte_offset) noexcept {
  return vmm::with_records(Tier::kHost, 0, [&]() -> Expected<SharedPrefixCommitInfo, MemoryError> {
    const HostSharedPrefix* ours = own_prefix(this, prefix);
    if (ours == nullptr) return fail(foreign_prefix(prefix));
    const std::shared_ptr<PrefixMemory>& memory = ours->memory();
    const detail::LockGuard lock(state_->mutex);
    HostRegion* region = state_->regions.find_live_of_size(reinterpret_cast<std::uintptr_t>(ptr), allocation_bytes);
    if (region == nullptr) {
      return fail(invalid(prefix.mapped_bytes(), "the target is not a live allocation of exactly " +
                                                     std::to_string(allocation_bytes) + " bytes"));
    }
    auto span = vmm::place_prefix(*region, prefix, byte_offset, granularity_, Tier::kHost,
                                  [](Granule g) { return g == Granule::kUnmapped; });
    if (!span) return fail(std::move(span.error()));
    region->prefixes.reserve(region->prefixes.size() + 1);  // the only step that can throw, before any mapping
    const std::uintptr_t target = region->granule_address(span->first, granularity_);
    // One MAP_FIXED call: either the whole range maps or none of it does.
    if (state_->fails(Syscall::kMmap) || ::mmap(reinterpret_cast<void*>(target), memory->mapped_bytes, PROT_READ,
                                                MAP_SHARED | MAP_FIXED, memory->fd, 0) == MAP_FAILED) {
      // Keep the range reserved and inaccessible, as it was. Its result is not
      // read: MAP_FIXED over a range this allocator reserved fails only short
      // of memory, and then the failure below is still the one to report.
      (void)reserve_over(target, memory->mapped_bytes);
      return fail(MemoryError::allocation_failed(Tier::kHost, prefix.mapped_bytes(),
                                                 "mmap of the prefix into the target failed; no mapping was made"));
    }
    for (std::size_t g = span->first; g < span->end(); ++g) region->slots[g] = Granule::kShared;
    region->prefixes.push_back(memory);
    return SharedPrefixCommitInfo{0, memory->mapped_bytes, span->count};
  });
}

}  // namespace ortmem::host
