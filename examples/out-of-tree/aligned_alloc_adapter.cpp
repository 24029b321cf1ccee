// An allocator nobody in the kit wrote, certified from outside the kit's
// tree: C's aligned_alloc behind the ortmem allocator contract. It declares
// no optional capability, so it is judged on the core profile only.
#include <cstdlib>
#include <limits>
#include <memory>
#include <mutex>
#include <new>
#include <unordered_map>

#include <ortmem/allocator.hpp>
#include <ortmem/cts/adapter.hpp>
#include <ortmem/cts/adapter_registry.hpp>
#include <ortmem/cts/reference_parts.hpp>

namespace example {
namespace {

using ortmem::AllocationReleaseOutcome;
using ortmem::DeviceKey;
using ortmem::MemoryError;
using ortmem::Tier;

// The contract's release names the exact (pointer, size, alignment) of a live
// allocation; aligned_alloc remembers none of it, so the adapter keeps a
// table to tell a wrong or repeated release from a good one.
class AlignedAllocAllocator final : public ortmem::DeviceAllocator {
 public:
  ortmem::Expected<void*, MemoryError> allocate(std::size_t bytes, std::size_t align) noexcept override {
    if (align == 0 || (align & (align - 1)) != 0) {
      return ortmem::fail(MemoryError::invalid_request(Tier::kHost, bytes, "alignment is not a power of two"));
    }
    const std::size_t alignment = align < sizeof(void*) ? sizeof(void*) : align;
    const std::size_t wanted = bytes == 0 ? 1 : bytes;  // a distinct address even for zero bytes
    if (wanted > std::numeric_limits<std::size_t>::max() - (alignment - 1)) {
      return ortmem::fail(MemoryError::invalid_request(Tier::kHost, bytes, "size overflows its alignment"));
    }
    // aligned_alloc wants a size that is a multiple of the alignment.
    void* ptr = std::aligned_alloc(alignment, (wanted + alignment - 1) & ~(alignment - 1));
    if (ptr == nullptr) {
      return ortmem::fail(MemoryError::allocation_failed(Tier::kHost, bytes, "aligned_alloc returned null"));
    }
    try {
      const std::lock_guard lock(mutex_);
      live_.emplace(ptr, Block{bytes, align});
    } catch (const std::bad_alloc&) {  // the table could not grow: nothing is left allocated
      std::free(ptr);
      return ortmem::fail(MemoryError::allocation_failed(Tier::kHost, bytes, "no memory for the live table"));
    }
    return ptr;
  }

  AllocationReleaseOutcome release(void* ptr, std::size_t bytes, std::size_t align) noexcept override {
    {
      const std::lock_guard lock(mutex_);
      const auto found = live_.find(ptr);
      if (found == live_.end() || found->second.bytes != bytes || found->second.align != align) {
        return AllocationReleaseOutcome::failed("no live allocation with this address, size and alignment");
      }
      live_.erase(found);
    }
    std::free(ptr);
    return AllocationReleaseOutcome::complete(ortmem::ReleaseAccounting::eager(bytes));
  }

  void deallocate(void* ptr, std::size_t bytes, std::size_t align) noexcept override {
    (void)release(ptr, bytes, align);
  }

  [[nodiscard]] DeviceKey device() const noexcept override { return DeviceKey::host(); }

 private:
  struct Block {
    std::size_t bytes;
    std::size_t align;
  };
  std::mutex mutex_;
  std::unordered_map<void*, Block> live_;
};

class AlignedAllocAdapter final : public ortmem::cts::Adapter {
 public:
  [[nodiscard]] ortmem::cts::AdapterInfo info() const override {
    return {.name = "aligned-alloc",
            .version = "1.0.0",
            .vendor = "ortmem-cts example",
            .device = DeviceKey::host(),
            .capabilities = {}};
  }
  [[nodiscard]] ortmem::cts::Availability available() const override { return {}; }
  [[nodiscard]] std::shared_ptr<ortmem::DeviceAllocator> make_allocator() override {
    return std::make_shared<AlignedAllocAllocator>();
  }
  // aligned_alloc has no provider contexts: the core checks bind it over the
  // kit's reference context. No pins or queue capability is declared, so
  // nothing of the reference is certified in its name.
  [[nodiscard]] std::unique_ptr<ortmem::cts::ContextUnderTest> make_context(
      ortmem::ProviderContextIdentity identity, ortmem::cts::ContextOptions options) override {
    return ortmem::cts::make_reference_context(identity, options);
  }
  [[nodiscard]] std::unique_ptr<ortmem::cts::QueueUnderTest> make_queue(ortmem::cts::ContextUnderTest& context,
                                                                        ortmem::cts::QueueOptions options) override {
    return ortmem::cts::make_reference_queue(context, options);
  }
  [[nodiscard]] ortmem::cts::MemoryAccess& memory() override { return ortmem::cts::host_memory_access(); }
};

}  // namespace

void register_aligned_alloc_adapter() {
  ortmem::cts::register_adapter("aligned-alloc", [] { return std::make_unique<AlignedAllocAdapter>(); });
}

}  // namespace example
