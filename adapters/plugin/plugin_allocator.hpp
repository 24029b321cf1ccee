// adapters/plugin/plugin_allocator.hpp: an allocator a plugin's factory
// opened, seen through the kit's DeviceAllocator contract and, when the
// plugin offers them, its VirtualBacking and SharedMapping capabilities.
//
// The bridge does what the ABI makes the host's job and nothing more, so a
// verdict on it is a verdict on the plugin:
//  - the vtables are validated once, on zeroed local copies of at most the
//    bytes the kit knows; the plugin's own bytes are never read again;
//  - allocation ids are the host's, per allocator from 1, never derived
//    from the address;
//  - the host's defensive filter: a call naming an address the kit has no
//    live record of, or with another size or alignment, is refused without
//    calling the plugin (probes that bypass it live in the ABI checks);
//  - release goes through the structured slot when both sides agreed on
//    minor 1 and the plugin declares STRUCTURED_RELEASE, through deallocate
//    otherwise, and a plugin's answer maps onto an outcome without
//    embellishment (an unknown state is a whole-allocation quarantine);
//  - deferred release (DEFERRED_RELEASE): the kit's record leaves before
//    enqueue_release is called, because the plugin may complete the ticket
//    inside the call; each completion is matched to the enqueue it answers,
//    and one that matches none, repeats, or overtakes an earlier ticket is
//    recorded as a violation instead of being trusted.
//
// Destruction gives back whatever is still live, then releases the vtable
// exactly once. The allocator holds its module, so the library stays mapped
// while any vtable it handed out is alive, and every shared prefix holds the
// allocator, so a prefix is never released into an allocator already gone.
//
// The implementation is split by capability: plugin_allocator.cpp (open,
// allocate, release), plugin_virtual_backing.cpp, plugin_shared_mapping.cpp,
// plugin_deferred_release.cpp.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "plugin/plugin_module.hpp"
#include "plugin/plugin_status.hpp"
#include "ortmem/allocator.hpp"
#include "ortmem/capability.hpp"

namespace ortmem::plugin {

// The kit's name for a device the ABI names (a tier the ABI does not know
// never gets this far: the loader refuses it).
[[nodiscard]] DeviceKey device_key_of(NxmemDeviceId device) noexcept;

class PluginAllocator final : public DeviceAllocator,
                              public VirtualBacking,
                              public SharedMapping,
                              public std::enable_shared_from_this<PluginAllocator> {
 public:
  // Opens an allocator from `factory` of `module` with `required` capability
  // bits. The error names the rule the plugin broke, or its refusal.
  [[nodiscard]] static Expected<std::shared_ptr<PluginAllocator>, std::string> open(
      std::shared_ptr<const PluginModule> module, const Factory& factory, std::uint64_t required = NXMEM_CAP_ALLOCATOR);

  PluginAllocator(const PluginAllocator&) = delete;
  PluginAllocator& operator=(const PluginAllocator&) = delete;
  ~PluginAllocator() override;

  Expected<void*, MemoryError> allocate(std::size_t bytes, std::size_t align) noexcept override;
  AllocationReleaseOutcome release(void* ptr, std::size_t bytes, std::size_t align) noexcept override;
  void deallocate(void* ptr, std::size_t bytes, std::size_t align) noexcept override;
  DeviceKey device() const noexcept override { return device_; }
  VirtualBacking* as_virtual_backing() noexcept override { return vtable_.virtual_backing != nullptr ? this : nullptr; }
  SharedMapping* as_shared_mapping() noexcept override { return vtable_.shared_mapping != nullptr ? this : nullptr; }

  // VirtualBacking, through the plugin's virtual-backing vtable.
  Expected<void*, MemoryError> allocate_committed(std::size_t bytes, std::size_t align,
                                                  std::span<const ByteRange> committed) noexcept override;
  Expected<void, MemoryError> commit_allocation_range(void* ptr, std::size_t allocation_bytes, std::size_t align,
                                                      std::size_t offset, std::size_t bytes) noexcept override;
  Expected<std::uint64_t, MemoryError> decommit_allocation_range(void* ptr, std::size_t allocation_bytes,
                                                                 std::size_t align, std::size_t offset,
                                                                 std::size_t bytes) noexcept override;
  Expected<std::uint64_t, MemoryError> mapped_bytes_for_allocation(std::size_t bytes,
                                                                   std::size_t align) const noexcept override;
  Expected<std::uint64_t, MemoryError> mapped_bytes_for_allocation_ranges(
      std::span<const AllocationCommitRange> ranges) const noexcept override;
  std::size_t allocation_committed_bytes(void* ptr, std::size_t allocation_bytes,
                                         std::size_t align) const noexcept override;

  // SharedMapping, through the plugin's shared-mapping vtable.
  Expected<std::unique_ptr<SharedDevicePrefix>, MemoryError> create_shared_prefix(std::size_t bytes) noexcept override;
  Expected<std::uint64_t, MemoryError> incremental_owned_bytes_for_shared_prefix(
      const SharedDevicePrefix& prefix) const noexcept override;
  Expected<SharedPrefixCommitInfo, MemoryError> commit_shared_prefix(const SharedDevicePrefix& prefix, void* ptr,
                                                                     std::size_t allocation_bytes,
                                                                     std::size_t byte_offset) noexcept override;

  // Deferred release through the plugin's own queue: present when the
  // allocator declares DEFERRED_RELEASE with its two slots. The plugin frees
  // a queued allocation itself and reports what it did through
  // release_completed, from any thread and possibly inside enqueue_release.
  // `by_device_loss`: the plugin settled the ticket as the control
  // extension says a lost device does (QUARANTINED for DEVICE_ERROR, nothing
  // unmapped), which only a queue that was told of the loss may read so.
  using Completion = std::function<void(AllocationReleaseOutcome outcome, bool by_device_loss)>;
  [[nodiscard]] bool releases_deferred() const noexcept { return vtable_.enqueue_release != nullptr; }
  // Hands the live allocation to the plugin's queue. `completed` is called
  // exactly once, with no lock of the kit's held, with the outcome the
  // plugin reported; on refusal the allocation stays live, nothing changed,
  // `completed` is never called, and the error is the plugin's answer (or,
  // for an allocation this allocator does not hold, INVALID_ARGUMENT from
  // the kit, which then never called the plugin).
  [[nodiscard]] Expected<void, PluginStatus> enqueue_release(void* ptr, std::size_t bytes, std::size_t align,
                                                             Completion completed);
  // Asks the plugin to retire every ticket it can now.
  [[nodiscard]] Expected<std::uint64_t, std::string> drain_releases();
  // Enqueued releases whose completion has not arrived.
  [[nodiscard]] std::size_t outstanding_releases() const;
  // Every completion that broke the ABI's rules, for people, in arrival order.
  [[nodiscard]] std::vector<std::string> completion_violations() const;
  // The allocator's identity at the boundary, for the control extension,
  // whose slots name an allocator by its vtable's ctx.
  [[nodiscard]] std::uint64_t mechanism_id() const noexcept { return vtable_.mechanism_id; }
  [[nodiscard]] void* plugin_ctx() const noexcept { return vtable_.ctx; }
  // Whether (ptr, bytes, align) is a live allocation of this allocator.
  [[nodiscard]] bool holds(void* ptr, std::size_t bytes, std::size_t align) const {
    return find(ptr, bytes, align).has_value();
  }

 private:
  class CompletionDesk;
  struct Record {
    std::uint64_t id;
    std::size_t bytes;
    std::size_t align;
  };

  class Prefix;
  struct Vtables {
    NxmemAllocatorVtable allocator{};
    NxmemVirtualBackingVtable virtual_backing{};  // meaningful when allocator.virtual_backing is set
    NxmemSharedMappingVtable shared_mapping{};    // meaningful when allocator.shared_mapping is set
  };

  PluginAllocator(std::shared_ptr<const PluginModule> module, const Vtables& vtables,
                  std::shared_ptr<CompletionDesk> desk);

  using AllocateSlot = NxmemStatus (*)(void*, const NxmemAllocRequest*, NxmemAllocResult*);
  // allocate and allocate_committed: the request, the plugin's answer, the record.
  [[nodiscard]] Expected<void*, MemoryError> issue(AllocateSlot slot, void* ctx, const char* slot_name,
                                                   std::size_t bytes, std::size_t align,
                                                   std::span<const ByteRange> committed) noexcept;
  using LiveMap = std::unordered_multimap<std::uintptr_t, Record>;
  // The live allocation at `ptr` with these bytes (and this alignment, when given).
  [[nodiscard]] std::optional<Record> find(void* ptr, std::size_t bytes, std::optional<std::size_t> align) const;
  // The same, as a position in live_; mutex_ is held.
  [[nodiscard]] LiveMap::const_iterator locate_locked(void* ptr, std::size_t bytes,
                                                      std::optional<std::size_t> align) const;
  [[nodiscard]] MemoryError not_live(void* ptr, std::size_t bytes) const;
  // `prefix` as one a plugin allocator made, or the refusal (for a request
  // of `bytes`) to pass it on.
  [[nodiscard]] Expected<const Prefix*, MemoryError> plugin_prefix(const SharedDevicePrefix& prefix,
                                                                   std::size_t bytes) const;
  [[nodiscard]] MemoryError refusal(std::size_t bytes, const char* slot, const PluginStatus& status) const;
  [[nodiscard]] NxmemAllocation name_of(void* ptr, const Record& record) const noexcept;
  [[nodiscard]] AllocationReleaseOutcome structured_release(void* ptr, const Record& record) const;
  [[nodiscard]] AllocationReleaseOutcome legacy_release(void* ptr, const Record& record) const;
  // The kit's reading of what the plugin's `slot` reported for the release of `record` at `ptr`.
  [[nodiscard]] static AllocationReleaseOutcome outcome_of(const NxmemReleaseOutcome& raw, void* ptr,
                                                           const Record& record, const char* slot);

  std::shared_ptr<const PluginModule> module_;
  NxmemAllocatorVtable vtable_;  // the validated local copies
  NxmemVirtualBackingVtable virtual_backing_;
  NxmemSharedMappingVtable shared_mapping_;
  DeviceKey device_;
  std::atomic<std::uint64_t> next_id_{1};
  mutable std::mutex mutex_;
  // Live allocations by address. A plugin that hands out one address twice
  // gets both records kept, so the kit's overlap checks see what it did.
  LiveMap live_;  // guarded by mutex_
  // The host side of release_completed: the callback table the plugin was
  // given at open lives in it, so it is shared with nobody else and lives at
  // least as long as this allocator.
  std::shared_ptr<CompletionDesk> desk_;
};

}  // namespace ortmem::plugin
