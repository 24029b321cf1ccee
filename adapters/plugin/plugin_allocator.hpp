// adapters/plugin/plugin_allocator.hpp: an allocator a plugin's factory
// opened, seen through the kit's DeviceAllocator contract.
//
// The bridge does what the ABI makes the host's job and nothing more, so a
// verdict on it is a verdict on the plugin:
//  - the vtable is validated once, on a zeroed local copy of at most the
//    bytes the kit knows; the plugin's own bytes are never read again;
//  - allocation ids are the host's, per allocator from 1, never derived
//    from the address;
//  - the host's defensive filter: a release of an address the kit has no
//    live record of, or with another size or alignment, is answered Failed
//    without calling the plugin (probes that bypass it live in the ABI
//    checks);
//  - release goes through the structured slot when both sides agreed on
//    minor 1 and the plugin declares STRUCTURED_RELEASE, through deallocate
//    otherwise, and a plugin's answer maps onto an outcome without
//    embellishment (an unknown state is a whole-allocation quarantine).
//
// Destruction gives back whatever is still live, then releases the vtable
// exactly once. The allocator holds its module, so the library stays mapped
// while any vtable it handed out is alive.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "adapters/plugin/plugin_module.hpp"
#include "ortmem/allocator.hpp"

namespace ortmem::plugin {

class PluginAllocator final : public DeviceAllocator {
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

  // min(the vtable's abi_minor, the negotiated minor).
  [[nodiscard]] std::uint32_t effective_minor() const noexcept { return effective_minor_; }
  [[nodiscard]] bool uses_structured_release() const noexcept { return vtable_.release_allocation != nullptr; }
  [[nodiscard]] std::uint64_t capability_flags() const noexcept { return vtable_.capability_flags; }

 private:
  struct Record {
    std::uint64_t id;
    std::size_t bytes;
    std::size_t align;
  };

  PluginAllocator(std::shared_ptr<const PluginModule> module, const NxmemAllocatorVtable& vtable,
                  std::uint32_t effective_minor);

  [[nodiscard]] NxmemAllocation name_of(void* ptr, const Record& record) const noexcept;
  [[nodiscard]] AllocationReleaseOutcome structured_release(void* ptr, const Record& record) const;
  [[nodiscard]] AllocationReleaseOutcome legacy_release(void* ptr, const Record& record) const;

  std::shared_ptr<const PluginModule> module_;
  NxmemAllocatorVtable vtable_;  // the validated local copy
  std::uint32_t effective_minor_;
  DeviceKey device_;
  std::atomic<std::uint64_t> next_id_{1};
  std::mutex mutex_;
  // Live allocations by address. A plugin that hands out one address twice
  // gets both records kept, so the kit's overlap checks see what it did.
  std::unordered_multimap<std::uintptr_t, Record> live_;  // guarded by mutex_
};

}  // namespace ortmem::plugin
