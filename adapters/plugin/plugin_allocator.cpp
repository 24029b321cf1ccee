#include "plugin/plugin_allocator.hpp"

#include <cstring>
#include <vector>

#include "plugin/plugin_completion_desk.hpp"
#include "plugin/plugin_status.hpp"

namespace ortmem::plugin {
namespace {

// The allocator vtable's fixed head: the bytes a reader needs before it can
// even learn which minor the vtable declares.
constexpr std::uint32_t kVtableHead = offsetof(NxmemAllocatorVtable, allocate);
constexpr std::uint32_t kVtableMinor0 = NXMEM_ALLOCATOR_VTABLE_SIZE_MINOR0;
constexpr std::uint32_t kVtableMinor1 = sizeof(NxmemAllocatorVtable);

// A capability vtable: readable, long enough, the allocator's mechanism;
// copied into `local`.
template <class Vtable>
Expected<void, std::string> copy_capability(const Vtable* raw, std::uint64_t mechanism_id, const char* what,
                                            Vtable& local) {
  if (!readable_struct(raw)) return fail(std::string(what) + " vtable: not 8-byte aligned (INVALID_ARGUMENT)");
  if (raw->struct_size < sizeof(Vtable)) {
    return fail(std::string(what) + " vtable: struct_size is " + std::to_string(raw->struct_size) + ", under " +
                std::to_string(sizeof(Vtable)) + " bytes (SHORT_STRUCT)");
  }
  std::memcpy(&local, raw, sizeof local);
  if (local.mechanism_id != mechanism_id) {
    return fail(std::string(what) + " vtable: mechanism_id differs from the allocator's (WRONG_MECHANISM)");
  }
  return {};
}

// Checks the vtables an OK open returned; fills `copies` from them.
template <class Vtables>
Expected<void, std::string> validate(const NxmemAllocatorVtable* raw, const PluginModule& module,
                                     const Factory& factory, std::uint64_t required, Vtables& copies) {
  NxmemAllocatorVtable& local = copies.allocator;
  if (!readable_struct(raw))
    return fail(std::string("allocator vtable: NULL or not 8-byte aligned (INVALID_ARGUMENT)"));
  const std::uint32_t size = raw->struct_size;
  if (size < kVtableHead) {
    return fail("allocator vtable: struct_size is " + std::to_string(size) + ", under the " +
                std::to_string(kVtableHead) + "-byte head (SHORT_STRUCT)");
  }
  const std::uint32_t declared = raw->abi_minor;
  const std::uint32_t needed = declared == 0 ? kVtableMinor0 : kVtableMinor1;
  if (size < needed) {
    return fail("allocator vtable: struct_size is " + std::to_string(size) + " at declared minor " +
                std::to_string(declared) + ", which needs " + std::to_string(needed) + " bytes (SHORT_STRUCT)");
  }
  // Bytes past what the kit knows never reach it; a minor-0 table's missing
  // tail reads as zero.
  local = NxmemAllocatorVtable{};
  std::memcpy(&local, raw, size < kVtableMinor1 ? size : kVtableMinor1);
  const std::uint32_t effective = declared < module.agreed_minor() ? declared : module.agreed_minor();
  if (effective < 1) local.release_allocation = nullptr;
  for (const auto& [slot, name] : {std::pair<bool, const char*>{local.allocate != nullptr, "allocate"},
                                   {local.deallocate != nullptr, "deallocate"},
                                   {local.retain != nullptr, "retain"},
                                   {local.release != nullptr, "release"}}) {
    if (!slot) return fail(std::string("allocator vtable: ") + name + " is NULL; it is a required slot (SHORT_STRUCT)");
  }
  if (local.mechanism_id == 0) return fail(std::string("allocator vtable: mechanism_id is 0 (INVALID_ARGUMENT)"));
  if (local.device.tier > NXMEM_TIER_DISK) {
    return fail("allocator vtable: device.tier is " + std::to_string(local.device.tier) +
                ", a tier the ABI does not know");
  }
  if (local.device.tier != factory.device.tier || local.device.index != factory.device.index) {
    return fail("allocator vtable: device is " + device_name(local.device) + ", not the factory's " +
                device_name(factory.device));
  }
  if ((local.capability_flags & ~NXMEM_CAP_KNOWN_MASK) != 0) {
    return fail("allocator vtable: capability_flags " + capability_names(local.capability_flags) +
                " has bits the ABI does not define");
  }
  if ((required & ~local.capability_flags) != 0) {
    return fail("allocator vtable: the open required " + capability_names(required) + " but the allocator offers " +
                capability_names(local.capability_flags) + "; refuse the open (UNSUPPORTED_CAPABILITY) instead");
  }
  const auto flag_matches_pointer = [&](std::uint64_t bit, const void* pointer,
                                        const char* field) -> Expected<void, std::string> {
    const bool flagged = (local.capability_flags & bit) != 0;
    if (flagged == (pointer != nullptr)) return {};
    return fail(std::string("allocator vtable: ") + field +
                (flagged ? " is NULL though the flag is set" : " is set though the flag is clear"));
  };
  if (auto ok = flag_matches_pointer(NXMEM_CAP_VIRTUAL_BACKING, local.virtual_backing, "virtual_backing"); !ok)
    return fail(ok.error());
  if (auto ok = flag_matches_pointer(NXMEM_CAP_SHARED_MAPPING, local.shared_mapping, "shared_mapping"); !ok)
    return fail(ok.error());
  if (local.virtual_backing != nullptr) {
    auto copied = copy_capability(local.virtual_backing, local.mechanism_id, "virtual-backing", copies.virtual_backing);
    if (!copied) return fail(copied.error());
    const NxmemVirtualBackingVtable& vb = copies.virtual_backing;
    if (vb.allocate_committed == nullptr || vb.commit_range == nullptr || vb.decommit_range == nullptr ||
        vb.mapped_bytes_for_ranges == nullptr || vb.mapped_bytes_for_allocation == nullptr ||
        vb.committed_bytes == nullptr) {
      return fail(std::string("virtual-backing vtable: a slot is NULL; all six are required (SHORT_STRUCT)"));
    }
  }
  if (local.shared_mapping != nullptr) {
    auto copied = copy_capability(local.shared_mapping, local.mechanism_id, "shared-mapping", copies.shared_mapping);
    if (!copied) return fail(copied.error());
    const NxmemSharedMappingVtable& sm = copies.shared_mapping;
    // retain_shared_prefix may be NULL: the host never calls it.
    if (sm.create_shared_prefix == nullptr || sm.release_shared_prefix == nullptr ||
        sm.incremental_owned_bytes == nullptr || sm.commit_shared_prefix == nullptr) {
      return fail(std::string(
          "shared-mapping vtable: create, release, incremental_owned_bytes and commit are required (SHORT_STRUCT)"));
    }
  }
  if ((local.capability_flags & NXMEM_CAP_DEFERRED_RELEASE) != 0 &&
      (local.enqueue_release == nullptr || local.drain_releases == nullptr)) {
    return fail(
        std::string("allocator vtable: DEFERRED_RELEASE is declared but enqueue_release or drain_releases is "
                    "NULL; deferred release needs the flag and both slots"));
  }
  // Deferred release is used only with the flag and the slots together.
  if ((local.capability_flags & NXMEM_CAP_DEFERRED_RELEASE) == 0) {
    local.enqueue_release = nullptr;
    local.drain_releases = nullptr;
    local.pending_release_count = nullptr;
  }
  // The structured slot is used only when both sides reached minor 1 and the
  // plugin declares it; otherwise deallocate is the release.
  const bool structured = effective >= 1 && (module.capability_flags() & NXMEM_CAP_STRUCTURED_RELEASE) != 0 &&
                          (local.capability_flags & NXMEM_CAP_STRUCTURED_RELEASE) != 0;
  if (!structured) local.release_allocation = nullptr;
  return {};
}

}  // namespace

DeviceKey device_key_of(NxmemDeviceId device) noexcept {
  const Tier tier = device.tier == NXMEM_TIER_DEVICE ? Tier::kDevice
                    : device.tier == NXMEM_TIER_DISK ? Tier::kDisk
                                                     : Tier::kHost;
  return DeviceKey{tier, device.index};
}

Expected<std::shared_ptr<PluginAllocator>, std::string> PluginAllocator::open(
    std::shared_ptr<const PluginModule> module, const Factory& factory, std::uint64_t required) {
  NxmemOpenRequest request{};
  request.struct_size = sizeof request;
  request.abi_minor = module->agreed_minor();
  request.device = factory.device;
  request.required_capability_flags = required;
  // The callback table goes only to a mechanism that can use it, so the
  // NULL path (no callbacks) is the one every other plugin is certified on.
  auto desk = std::make_shared<CompletionDesk>(module->agreed_minor());
  request.callbacks = (factory.capability_flags & NXMEM_CAP_DEFERRED_RELEASE) != 0 ? desk->callbacks() : nullptr;
  const NxmemAllocatorVtable* raw = nullptr;
  const PluginStatus status = read_status(factory.vtable.open_allocator(factory.vtable.ctx, &request, &raw));
  if (!status.ok()) return fail("open_allocator of '" + factory.name + "' answered " + status.describe());
  Vtables local{};
  auto valid = validate(raw, *module, factory, required, local);
  if (!valid) {
    // An OK open is owed exactly one release, even for a vtable the host
    // refuses, when the table is long enough to hold the slot.
    if (readable_struct(raw) && raw->struct_size >= offsetof(NxmemAllocatorVtable, virtual_backing) &&
        raw->release != nullptr) {
      raw->release(raw->ctx);
    }
    return fail(valid.error());
  }
  if (request.callbacks == nullptr) local.allocator.enqueue_release = nullptr;  // nowhere to complete
  desk->bind(local.allocator);
  return std::shared_ptr<PluginAllocator>(new PluginAllocator(std::move(module), local, std::move(desk)));
}

PluginAllocator::PluginAllocator(std::shared_ptr<const PluginModule> module, const Vtables& vtables,
                                 std::shared_ptr<CompletionDesk> desk)
    : module_(std::move(module)), vtable_(vtables.allocator), virtual_backing_(vtables.virtual_backing),
      shared_mapping_(vtables.shared_mapping), device_(device_key_of(vtables.allocator.device)),
      desk_(std::move(desk)) {}

PluginAllocator::~PluginAllocator() {
  // Swapped out, not copied: a destructor must not allocate.
  LiveMap left;
  {
    const std::lock_guard lock(mutex_);
    left.swap(live_);
  }
  for (const auto& [address, record] : left) (void)legacy_release(reinterpret_cast<void*>(address), record);
  // Every queued release holds its allocation's mechanism and so this
  // allocator: none is outstanding by now, and the desk (the callback table)
  // may go with it once the final release returns, which is where a plugin
  // still delivers the completions it owes.
  vtable_.release(vtable_.ctx);
}

NxmemAllocation PluginAllocator::name_of(void* ptr, const Record& record) const noexcept {
  NxmemAllocation allocation{};
  allocation.struct_size = sizeof allocation;
  allocation.mechanism_id = vtable_.mechanism_id;
  allocation.allocation_id = record.id;
  allocation.device = vtable_.device;
  allocation.ptr = static_cast<std::uint8_t*>(ptr);
  allocation.bytes = record.bytes;
  allocation.align = record.align;
  return allocation;
}

Expected<void*, MemoryError> PluginAllocator::allocate(std::size_t bytes, std::size_t align) noexcept {
  return issue(vtable_.allocate, vtable_.ctx, "allocate", bytes, align, {});
}

Expected<void*, MemoryError> PluginAllocator::issue(AllocateSlot slot, void* ctx, const char* slot_name,
                                                    std::size_t bytes, std::size_t align,
                                                    std::span<const ByteRange> committed) noexcept {
  const Tier tier = device_.tier;
  if (!is_valid_alignment(align)) {
    return fail(
        MemoryError::invalid_request(tier, bytes, "alignment " + std::to_string(align) + " is not a power of two"));
  }
  std::vector<NxmemByteRange> ranges;
  try {
    for (const ByteRange& range : committed) {
      if (range.end < range.begin) {
        return fail(MemoryError::invalid_request(tier, bytes, "a committed range ends before it begins"));
      }
      ranges.push_back(NxmemByteRange{range.begin, range.size()});
    }
  } catch (const std::bad_alloc&) {
    return fail(MemoryError::allocation_failed(tier, bytes, "the host is out of memory for the committed ranges"));
  }
  const std::uint64_t id = next_id_.fetch_add(1, std::memory_order_relaxed);
  NxmemAllocRequest request{};
  request.struct_size = sizeof request;
  request.mechanism_id = vtable_.mechanism_id;
  request.allocation_id = id;
  request.device = vtable_.device;
  request.bytes = bytes;
  request.align = align;
  request.committed_ranges = ranges.empty() ? nullptr : ranges.data();
  request.committed_range_count = ranges.size();
  NxmemAllocResult result{};
  result.struct_size = sizeof result;
  const PluginStatus status = read_status(slot(ctx, &request, &result));
  if (!status.ok()) return fail(refusal(bytes, slot_name, status));
  void* ptr = result.ptr;
  const Record record{id, bytes, align};
  if (ptr == nullptr || reinterpret_cast<std::uintptr_t>(ptr) % align != 0) {
    // The plugin thinks it holds this allocation; give it back.
    if (ptr != nullptr) (void)legacy_release(ptr, record);
    return fail(MemoryError::allocation_failed(
        tier, bytes,
        ptr == nullptr ? "the plugin answered OK with a NULL pointer"
                       : "the plugin answered OK with an address not aligned to " + std::to_string(align)));
  }
  try {
    const std::lock_guard lock(mutex_);
    live_.emplace(reinterpret_cast<std::uintptr_t>(ptr), record);
  } catch (const std::bad_alloc&) {
    (void)legacy_release(ptr, record);
    return fail(MemoryError::allocation_failed(tier, bytes, "the host is out of memory for the allocation's record"));
  }
  return ptr;
}

PluginAllocator::LiveMap::const_iterator PluginAllocator::locate_locked(void* ptr, std::size_t bytes,
                                                                        std::optional<std::size_t> align) const {
  const auto [first, last] = live_.equal_range(reinterpret_cast<std::uintptr_t>(ptr));
  for (auto found = first; found != last; ++found) {
    if (found->second.bytes == bytes && (!align || found->second.align == *align)) return found;
  }
  return live_.end();
}

std::optional<PluginAllocator::Record> PluginAllocator::find(void* ptr, std::size_t bytes,
                                                             std::optional<std::size_t> align) const {
  const std::lock_guard lock(mutex_);
  const auto found = locate_locked(ptr, bytes, align);
  if (found == live_.end()) return std::nullopt;
  return found->second;
}

MemoryError PluginAllocator::not_live(void* ptr, std::size_t bytes) const {
  return MemoryError::invalid_request(
      device_.tier, bytes,
      "no live allocation of this plugin allocator has address " +
          std::to_string(reinterpret_cast<std::uintptr_t>(ptr)) +
          " with this size and alignment; the plugin was not called and nothing was changed");
}

MemoryError PluginAllocator::refusal(std::size_t bytes, const char* slot, const PluginStatus& status) const {
  const std::string why = std::string("the plugin's ") + slot + " answered " + status.describe();
  switch (status.code) {
    case NXMEM_STATUS_INVALID_ARGUMENT:
    case NXMEM_STATUS_WRONG_DEVICE:
    case NXMEM_STATUS_WRONG_MECHANISM:
    case NXMEM_STATUS_UNKNOWN_ALLOCATION:
    case NXMEM_STATUS_UNSUPPORTED_CAPABILITY: return MemoryError::invalid_request(device_.tier, bytes, why);
    default: return MemoryError::allocation_failed(device_.tier, bytes, why);
  }
}

AllocationReleaseOutcome PluginAllocator::release(void* ptr, std::size_t bytes, std::size_t align) noexcept {
  // The record is claimed before the plugin is called, so two racing
  // releases of one allocation never both reach it.
  Record record{};
  {
    const std::lock_guard lock(mutex_);
    const auto found = locate_locked(ptr, bytes, align);
    if (found == live_.end()) {
      return AllocationReleaseOutcome::failed(
          "no live allocation of this plugin allocator has this address, size and alignment (never allocated, "
          "already released, or another size); the plugin was not called and nothing was changed");
    }
    record = found->second;
    live_.erase(found);
  }
  auto outcome = vtable_.release_allocation != nullptr ? structured_release(ptr, record) : legacy_release(ptr, record);
  if (outcome.is_failed()) {
    const std::lock_guard lock(mutex_);
    live_.emplace(reinterpret_cast<std::uintptr_t>(ptr), record);  // failed changed nothing
  }
  return outcome;
}

void PluginAllocator::deallocate(void* ptr, std::size_t bytes, std::size_t align) noexcept {
  (void)release(ptr, bytes, align);
}

AllocationReleaseOutcome PluginAllocator::legacy_release(void* ptr, const Record& record) const {
  const NxmemAllocation allocation = name_of(ptr, record);
  std::uint64_t unmapped = 0;
  const PluginStatus status = read_status(vtable_.deallocate(vtable_.ctx, &allocation, &unmapped));
  if (!status.ok()) return AllocationReleaseOutcome::failed("the plugin's deallocate answered " + status.describe());
  return AllocationReleaseOutcome::complete(ReleaseAccounting{record.bytes, unmapped});
}

AllocationReleaseOutcome PluginAllocator::structured_release(void* ptr, const Record& record) const {
  const NxmemAllocation allocation = name_of(ptr, record);
  NxmemReleaseOutcome raw{};
  raw.struct_size = sizeof raw;
  const PluginStatus status = read_status(vtable_.release_allocation(vtable_.ctx, &allocation, &raw));
  if (!status.ok())
    return AllocationReleaseOutcome::failed("the plugin's release_allocation answered " + status.describe());
  return outcome_of(raw, ptr, record, "release_allocation");
}

AllocationReleaseOutcome PluginAllocator::outcome_of(const NxmemReleaseOutcome& raw, void* ptr, const Record& record,
                                                     const char* slot) {
  const ReleaseAccounting accounting{raw.allocation_bytes, raw.unmapped_bytes};
  const auto address = reinterpret_cast<std::uintptr_t>(ptr);
  using Kind = QuarantineReason::Kind;
  switch (raw.state) {
    case NXMEM_RELEASE_COMPLETE: return AllocationReleaseOutcome::complete(accounting);
    case NXMEM_RELEASE_FAILED: {
      const PluginStatus failure = read_status(raw.failure);
      return AllocationReleaseOutcome::failed("the plugin's " + std::string(slot) +
                                              " reported FAILED: " + failure.describe());
    }
    case NXMEM_RELEASE_QUARANTINED: {
      const AllocationReleaseState state =
          raw.unmapped_bytes > 0 ? AllocationReleaseState::kPartiallyUnmapped : AllocationReleaseState::kQuarantined;
      return AllocationReleaseOutcome::quarantined(
          accounting, ResidualOwnership{state, QuarantineReason::of(Kind::kPartialRelease), raw.residual_owned_bytes,
                                        address, record.align});
    }
    default:
      // A state the kit does not know: keep the whole allocation, claim nothing unmapped.
      return AllocationReleaseOutcome::quarantined(
          ReleaseAccounting{record.bytes, 0},
          ResidualOwnership{AllocationReleaseState::kQuarantined, QuarantineReason::of(Kind::kAllocatorRefused),
                            record.bytes, address, record.align});
  }
}

}  // namespace ortmem::plugin
