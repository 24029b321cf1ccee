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
//    embellishment (an unknown state is a whole-allocation quarantine).
//
// Destruction gives back whatever is still live, then releases the vtable
// exactly once. The allocator holds its module, so the library stays mapped
// while any vtable it handed out is alive, and every shared prefix holds the
// allocator, so a prefix is never released into an allocator already gone.
//
// The implementation is split by capability: plugin_allocator.cpp (open,
// allocate, release), plugin_virtual_backing.cpp, plugin_shared_mapping.cpp.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include "adapters/plugin/plugin_module.hpp"
#include "adapters/plugin/plugin_status.hpp"
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


 private:
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

  PluginAllocator(std::shared_ptr<const PluginModule> module, const Vtables& vtables);

  using AllocateSlot = NxmemStatus (*)(void*, const NxmemAllocRequest*, NxmemAllocResult*);
  // allocate and allocate_committed: the request, the plugin's answer, the record.
  [[nodiscard]] Expected<void*, MemoryError> issue(AllocateSlot slot, void* ctx, const char* slot_name, std::size_t bytes,
                                                   std::size_t align, std::span<const ByteRange> committed) noexcept;
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
};

}  // namespace ortmem::plugin
