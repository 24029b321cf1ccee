#include "ortmem/host/host_virtual_allocator.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "ortmem/mechanism/vmm/byte_range_set.hpp"
#include "ortmem/mechanism/vmm/granules.hpp"
#include "ortmem/mechanism/vmm/mapped_bytes.hpp"

namespace ortmem::host {

using vmm::round_up;

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

}  // namespace

// Physical bytes of one prefix: a memfd and the owner's read-write window.
// Held by the prefix handle and by every mapping of it; the last holder
// unmaps the window and closes the file, exactly once.
struct HostVirtualAllocator::PrefixMemory {
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

struct HostVirtualAllocator::Region {
  std::uintptr_t address;  // the allocation, aligned to max(align, granularity)
  std::size_t bytes;
  std::size_t align;
  std::vector<Granule> granules;                        // covers round_up(max(bytes, 1), granularity)
  vmm::ByteRangeSet committed;                          // the bytes the caller committed
  std::vector<std::shared_ptr<PrefixMemory>> prefixes;  // one per shared mapping into this region
  bool retired = false;                                 // release failed part way: kept reserved, never live again
};

namespace {

// A shared prefix handle: identifies its allocator, holds the physical bytes.
class HostSharedPrefix final : public SharedDevicePrefix {
 public:
  HostSharedPrefix(const HostVirtualAllocator* owner, std::shared_ptr<HostVirtualAllocator::PrefixMemory> memory,
                   std::size_t requested)
      : owner_(owner), memory_(std::move(memory)), requested_(requested) {}
  std::uint64_t device_ptr() const noexcept override { return reinterpret_cast<std::uintptr_t>(memory_->owner_window); }
  std::uint64_t committed_physical_bytes() const noexcept override { return memory_->mapped_bytes; }
  std::size_t mapped_bytes() const noexcept override { return memory_->mapped_bytes; }
  std::size_t requested_bytes() const noexcept override { return requested_; }

  [[nodiscard]] const HostVirtualAllocator* owner() const noexcept { return owner_; }
  [[nodiscard]] const std::shared_ptr<HostVirtualAllocator::PrefixMemory>& memory() const noexcept { return memory_; }

 private:
  const HostVirtualAllocator* owner_;
  std::shared_ptr<HostVirtualAllocator::PrefixMemory> memory_;
  std::size_t requested_;
};

}  // namespace

bool HostVirtualAllocator::fails(Syscall kind) const noexcept {
  if (!faults_ || !faults_->should_fail(kind)) return false;
  errno = EIO;  // an injected failure reads like a real one
  return true;
}

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
    : granularity_(granularity), faults_(std::move(faults)),
      live_prefix_memories_(std::make_shared<std::atomic<std::size_t>>(0)) {}

// Unmaps nothing. A region still here is live (its owner never released it,
// or the registry quarantined it: owner dropped, enqueue refused, device lost)
// or retired after a release failed part way, and either way it may be
// quarantined, which the allocator cannot tell: its addresses stay reserved
// so that mmap never reissues them. Shared prefixes mapped into a region keep
// their file alive through the mapping itself.
HostVirtualAllocator::~HostVirtualAllocator() = default;

std::size_t HostVirtualAllocator::reclaim_all_after_context_destroyed() noexcept {
  std::map<std::uintptr_t, std::unique_ptr<Region>> reclaimed;
  {
    const std::lock_guard lock(mutex_);
    reclaimed.swap(regions_);
  }
  // Unmapping a whole region drops its prefix mappings with it; destroying
  // the records then ends this allocator's hold on each prefix's memory.
  for (const auto& [address, region] : reclaimed) {
    ::munmap(reinterpret_cast<void*>(address), region->granules.size() * granularity_);
  }
  return reclaimed.size();
}

std::size_t HostVirtualAllocator::live_allocations() const noexcept {
  const std::lock_guard lock(mutex_);
  std::size_t live = 0;
  for (const auto& [address, region] : regions_) live += region->retired ? 0 : 1;
  return live;
}

HostVirtualAllocator::Region* HostVirtualAllocator::find_live(void* ptr, std::size_t bytes, std::size_t align) const {
  const auto found = regions_.find(reinterpret_cast<std::uintptr_t>(ptr));
  if (found == regions_.end() || found->second->retired) return nullptr;
  Region* region = found->second.get();
  return region->bytes == bytes && region->align == align ? region : nullptr;
}

Expected<void*, MemoryError> HostVirtualAllocator::reserve(std::size_t bytes, std::size_t align) {
  if (!is_valid_alignment(align)) {
    return fail(invalid(bytes, "alignment " + std::to_string(align) + " is not a power of two"));
  }
  const std::size_t boundary = std::max(align, granularity_);
  const auto span = round_up(std::max<std::size_t>(bytes, 1), granularity_);
  if (!span || *span > SIZE_MAX - boundary) {
    return fail(invalid(bytes, "the size overflows when rounded up to whole granules of " +
                                   std::to_string(granularity_) + " bytes at alignment " + std::to_string(align)));
  }
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

  auto region = std::make_unique<Region>();
  region->address = aligned;
  region->bytes = bytes;
  region->align = align;
  region->granules.assign(*span / granularity_, Granule::kUnmapped);
  regions_.emplace(aligned, std::move(region));
  return reinterpret_cast<void*>(aligned);
}

Expected<void, MemoryError> HostVirtualAllocator::commit_locked(Region& region, std::size_t offset, std::size_t bytes) {
  if (offset > region.bytes || bytes > region.bytes - offset) {
    return fail(invalid(bytes, "range " + std::to_string(offset) + "+" + std::to_string(bytes) +
                                   " lies outside the allocation of " + std::to_string(region.bytes) + " bytes"));
  }
  if (bytes == 0) return {};
  const std::size_t first = offset / granularity_;
  const std::size_t last = (offset + bytes - 1) / granularity_;
  for (std::size_t g = first; g <= last; ++g) {
    if (region.granules[g] == Granule::kShared) {
      return fail(invalid(bytes, "the range overlaps a read-only shared prefix mapping"));
    }
  }
  std::vector<std::size_t> mapped_now;
  for (std::size_t g = first; g <= last; ++g) {
    if (region.granules[g] != Granule::kUnmapped) continue;
    void* granule = reinterpret_cast<void*>(region.address + g * granularity_);
    const bool failed = fails(Syscall::kMprotect) || ::mprotect(granule, granularity_, PROT_READ | PROT_WRITE) != 0;
    if (failed) {
      const int error = errno;
      // Transactional: take back what this call mapped.
      for (std::size_t done : mapped_now) {
        ::mprotect(reinterpret_cast<void*>(region.address + done * granularity_), granularity_, PROT_NONE);
        region.granules[done] = Granule::kUnmapped;
      }
      return fail(MemoryError::allocation_failed(
          Tier::kHost, bytes, "mprotect could not commit a granule (" + errno_text(error) + "); nothing was changed"));
    }
    region.granules[g] = Granule::kCommitted;
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
    Region& region = *regions_.at(reinterpret_cast<std::uintptr_t>(*ptr));
    for (const ByteRange& range : committed) {
      if (auto done = commit_locked(region, range.begin, range.size()); !done) {
        ::munmap(*ptr, region.granules.size() * granularity_);
        regions_.erase(reinterpret_cast<std::uintptr_t>(*ptr));
        return fail(done.error());
      }
    }
    return ptr;
  } catch (const std::bad_alloc&) {
    return fail(MemoryError::allocation_failed(Tier::kHost, bytes, "out of host memory for the allocator's records"));
  }
}

Expected<void, MemoryError> HostVirtualAllocator::commit_allocation_range(void* ptr, std::size_t allocation_bytes,
                                                                          std::size_t align, std::size_t offset,
                                                                          std::size_t bytes) noexcept {
  try {
    const std::lock_guard lock(mutex_);
    Region* region = find_live(ptr, allocation_bytes, align);
    if (region == nullptr)
      return fail(invalid(bytes, "the address is not a live allocation of this size and alignment"));
    return commit_locked(*region, offset, bytes);
  } catch (const std::bad_alloc&) {
    return fail(MemoryError::allocation_failed(Tier::kHost, bytes, "out of host memory for the allocator's records"));
  }
}

Expected<std::uint64_t, MemoryError> HostVirtualAllocator::decommit_allocation_range(
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
    const auto before = region->committed;
    region->committed.remove(offset, offset + bytes);
    // Only granules that no longer back any committed byte are unmapped.
    std::vector<std::size_t> victims;
    for (std::size_t g = offset / granularity_; g <= (offset + bytes - 1) / granularity_; ++g) {
      if (region->granules[g] != Granule::kCommitted) continue;
      if (!region->committed.intersects(g * granularity_, (g + 1) * granularity_)) victims.push_back(g);
    }
    const auto granule_at = [&](std::size_t g) { return reinterpret_cast<void*>(region->address + g * granularity_); };
    // Access first (reversible), then discard: a failure rolls everything back.
    std::size_t protected_count = 0;
    const auto roll_back = [&](int error, std::string_view call) {
      for (std::size_t i = 0; i < protected_count; ++i) {
        ::mprotect(granule_at(victims[i]), granularity_, PROT_READ | PROT_WRITE);
      }
      region->committed = before;
      return fail(MemoryError::allocation_failed(
          Tier::kHost, bytes,
          std::string(call) + " failed while decommitting (" + errno_text(error) + "); nothing was changed"));
    };
    for (std::size_t g : victims) {
      if (fails(Syscall::kMprotect) || ::mprotect(granule_at(g), granularity_, PROT_NONE) != 0) {
        return roll_back(errno, "mprotect");
      }
      ++protected_count;
    }
    for (std::size_t g : victims) {
      if (fails(Syscall::kMadvise) || ::madvise(granule_at(g), granularity_, MADV_DONTNEED) != 0) {
        return roll_back(errno, "madvise");
      }
    }
    for (std::size_t g : victims) region->granules[g] = Granule::kUnmapped;
    return static_cast<std::uint64_t>(victims.size() * granularity_);
  } catch (const std::bad_alloc&) {
    return fail(MemoryError::allocation_failed(Tier::kHost, bytes, "out of host memory for the allocator's records"));
  }
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
  const std::lock_guard lock(mutex_);
  const Region* region = find_live(ptr, allocation_bytes, align);
  if (region == nullptr) return 0;
  return static_cast<std::size_t>(std::count(region->granules.begin(), region->granules.end(), Granule::kCommitted)) *
         granularity_;
}

AllocationReleaseOutcome HostVirtualAllocator::release(void* ptr, std::size_t bytes, std::size_t align) noexcept {
  const std::lock_guard lock(mutex_);
  Region* region = find_live(ptr, bytes, align);
  if (region == nullptr) {
    return AllocationReleaseOutcome::failed(
        "the address is not a live allocation of this virtual allocator with this size and alignment "
        "(never allocated here, already released, or a mismatched size or alignment); nothing was changed");
  }
  const auto granule_at = [&](std::size_t g) { return reinterpret_cast<void*>(region->address + g * granularity_); };
  std::uint64_t unmapped = 0;
  std::uint64_t still_mapped = 0;
  for (Granule granule : region->granules) still_mapped += granule == Granule::kUnmapped ? 0 : granularity_;
  // One unmap step per contiguous run of mapped granules; a failed run stays
  // whole. The step is an mmap of a fresh inaccessible reservation over the
  // run (MAP_FIXED), which drops the run's pages and keeps its addresses ours
  // in one call: a munmap followed by a re-reservation leaves a moment in
  // which another thread's mmap (a prefix's owner window, made without this
  // allocator's lock) can be placed in the hole and then be clobbered.
  const auto runs = vmm::contiguous_runs(region->granules.size(),
                                         [&](std::size_t g) { return region->granules[g] != Granule::kUnmapped; });
  for (const vmm::GranuleSpan run : runs) {
    const std::size_t run_bytes = run.count * granularity_;
    if (fails(Syscall::kMunmap) ||
        ::mmap(granule_at(run.first), run_bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1,
               0) == MAP_FAILED) {
      if (unmapped == 0) {
        return AllocationReleaseOutcome::failed("unmapping the first mapped run failed; nothing was changed");
      }
      region->retired = true;  // never live again, never reissued
      return AllocationReleaseOutcome::quarantined(
          {bytes, unmapped},
          {AllocationReleaseState::kPartiallyUnmapped, QuarantineReason::of(QuarantineReason::Kind::kPartialRelease),
           still_mapped, region->address, align});
    }
    for (std::size_t i = run.first; i < run.end(); ++i) region->granules[i] = Granule::kUnmapped;
    unmapped += run_bytes;
    still_mapped -= run_bytes;
  }
  region->prefixes.clear();  // every shared mapping is gone; the prefixes' bookkeeping may end
  if (fails(Syscall::kMunmap) ||
      ::munmap(reinterpret_cast<void*>(region->address), region->granules.size() * granularity_) != 0) {
    region->retired = true;
    return AllocationReleaseOutcome::quarantined(
        {bytes, unmapped}, {AllocationReleaseState::kQuarantined,
                            QuarantineReason::of(QuarantineReason::Kind::kPartialRelease), 0, region->address, align});
  }
  regions_.erase(region->address);
  return AllocationReleaseOutcome::complete({bytes, unmapped});
}

void HostVirtualAllocator::deallocate(void* ptr, std::size_t bytes, std::size_t align) noexcept {
  (void)release(ptr, bytes, align);
}

Expected<std::unique_ptr<SharedDevicePrefix>, MemoryError> HostVirtualAllocator::create_shared_prefix(
    std::size_t bytes) noexcept {
  if (bytes == 0) return fail(invalid(0, "a shared prefix of zero bytes shares nothing"));
  const auto mapped = round_up(bytes, granularity_);
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
      fails(Syscall::kMmap) ? MAP_FAILED : ::mmap(nullptr, *mapped, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (window == MAP_FAILED) {
    ::close(fd);
    return fail(MemoryError::allocation_failed(Tier::kHost, bytes, "mmap of the prefix owner window failed"));
  }
  try {
    auto memory = std::make_shared<PrefixMemory>(fd, window, *mapped, live_prefix_memories_);
    return std::unique_ptr<SharedDevicePrefix>(std::make_unique<HostSharedPrefix>(this, std::move(memory), bytes));
  } catch (const std::bad_alloc&) {
    ::munmap(window, *mapped);
    ::close(fd);
    return fail(MemoryError::allocation_failed(Tier::kHost, bytes, "out of host memory for the prefix record"));
  }
}

Expected<void, MemoryError> HostVirtualAllocator::check_prefix(const SharedDevicePrefix& prefix,
                                                               std::size_t bytes_requested) const {
  const auto* ours = dynamic_cast<const HostSharedPrefix*>(&prefix);
  if (ours == nullptr || ours->owner() != this) {
    return fail(invalid(bytes_requested, "the prefix was not created by this shared mapping (a foreign prefix)"));
  }
  return {};
}

Expected<std::uint64_t, MemoryError> HostVirtualAllocator::incremental_owned_bytes_for_shared_prefix(
    const SharedDevicePrefix& prefix) const noexcept {
  // Refused exactly as commit would refuse it, before any cost is stated.
  if (auto ours = check_prefix(prefix, prefix.mapped_bytes()); !ours) return fail(ours.error());
  return std::uint64_t{0};
}

Expected<SharedPrefixCommitInfo, MemoryError> HostVirtualAllocator::commit_shared_prefix(
    const SharedDevicePrefix& prefix, void* ptr, std::size_t allocation_bytes, std::size_t byte_offset) noexcept {
  try {
    if (auto ours = check_prefix(prefix, prefix.mapped_bytes()); !ours) return fail(ours.error());
    const auto& memory = static_cast<const HostSharedPrefix&>(prefix).memory();
    const std::lock_guard lock(mutex_);
    const auto found = regions_.find(reinterpret_cast<std::uintptr_t>(ptr));
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
    const std::size_t span = region.granules.size() * granularity_;
    if (byte_offset > allocation_bytes || prefix.requested_bytes() > allocation_bytes - byte_offset ||
        memory->mapped_bytes > span - std::min(span, byte_offset)) {
      return fail(invalid(prefix.mapped_bytes(),
                          "the prefix does not fit in the allocation at offset " + std::to_string(byte_offset)));
    }
    const std::size_t first = byte_offset / granularity_;
    const std::size_t count = memory->mapped_bytes / granularity_;
    for (std::size_t g = first; g < first + count; ++g) {
      if (region.granules[g] != Granule::kUnmapped) {
        return fail(invalid(prefix.mapped_bytes(), "the target range is already committed"));
      }
    }
    region.prefixes.reserve(region.prefixes.size() + 1);  // the only step that can throw, before any mapping
    void* target = reinterpret_cast<void*>(region.address + byte_offset);
    // One MAP_FIXED call: either the whole range maps or none of it does.
    if (fails(Syscall::kMmap) ||
        ::mmap(target, memory->mapped_bytes, PROT_READ, MAP_SHARED | MAP_FIXED, memory->fd, 0) == MAP_FAILED) {
      // Keep the range reserved and inaccessible, as it was. Its result is not
      // read: MAP_FIXED over a range this allocator reserved fails only short
      // of memory, and then the failure below is still the one to report.
      // NOLINTNEXTLINE(bugprone-unused-return-value)
      ::mmap(target, memory->mapped_bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
      return fail(MemoryError::allocation_failed(Tier::kHost, prefix.mapped_bytes(),
                                                 "mmap of the prefix into the target failed; no mapping was made"));
    }
    for (std::size_t g = first; g < first + count; ++g) region.granules[g] = Granule::kShared;
    region.prefixes.push_back(memory);
    return SharedPrefixCommitInfo{0, memory->mapped_bytes, count};
  } catch (const std::bad_alloc&) {
    return fail(MemoryError::allocation_failed(Tier::kHost, 0, "out of host memory for the allocator's records"));
  }
}

}  // namespace ortmem::host
