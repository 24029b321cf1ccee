// adapters/host/host_variant.hpp: the host reference adapter with one part
// swapped, under a name and vendor of its own.
//
// The known-bad adapters (adapters/mutants) and the known-good controls
// (adapters/controls) each replace exactly one object of the reference (the
// allocator, the provider context or the deferred queue) so that a verdict
// on them says something about that one object. These shells are the only
// place that knows how a swapped part is plugged in; each variant supplies
// the part and its registered name.
//
// Example:
//   register_variant<WithAllocator<Misaligned>>("mutant:misaligned", kKnownBad);
#pragma once

#include <memory>
#include <string>
#include <utility>

#include "host/host_adapter.hpp"
#include "ortmem/cts/adapter_registry.hpp"

namespace ortmem::adapters {

// The vendor string every known-bad adapter reports; a report naming it is
// never evidence about a real implementation.
inline constexpr const char* kKnownBad = "ortmem-cts known-bad";
// The vendor string every positive control reports.
inline constexpr const char* kKnownGood = "ortmem-cts known-good";

// The host reference adapter, renamed.
class RenamedHostAdapter : public HostAdapter {
 public:
  RenamedHostAdapter(std::string name, std::string vendor) : name_(std::move(name)), vendor_(std::move(vendor)) {}
  cts::AdapterInfo info() const override {
    auto info = HostAdapter::info();
    info.name = name_;
    info.vendor = vendor_;
    return info;
  }

 private:
  std::string name_;
  std::string vendor_;
};

// `Allocator` (default-constructible) in place of the host allocator.
template <class Allocator>
class WithAllocator final : public RenamedHostAdapter {
 public:
  using RenamedHostAdapter::RenamedHostAdapter;
  std::shared_ptr<DeviceAllocator> make_allocator() override { return std::make_shared<Allocator>(); }
};

// `Context`, constructed as HostContextUnderTest is, in place of the host context.
template <class Context>
class WithContext final : public RenamedHostAdapter {
 public:
  using RenamedHostAdapter::RenamedHostAdapter;
  std::unique_ptr<cts::ContextUnderTest> make_context(ProviderContextIdentity identity,
                                                      cts::ContextOptions options) override {
    return std::make_unique<Context>(identity, options);
  }
};

// `Queue`, built on the pins of the (host) context it is made for, in place of
// the host queue.
template <class Queue>
class WithQueue final : public RenamedHostAdapter {
 public:
  using RenamedHostAdapter::RenamedHostAdapter;
  std::unique_ptr<cts::QueueUnderTest> make_queue(cts::ContextUnderTest& context, cts::QueueOptions options) override {
    return std::make_unique<Queue>(dynamic_cast<HostContextUnderTest&>(context).shared_pins(), options);
  }
};

// Registers `Variant`, constructed from (name, vendor), under `name`.
template <class Variant>
void register_variant(const std::string& name, const std::string& vendor) {
  cts::register_adapter(name, [name, vendor] { return std::make_unique<Variant>(name, vendor); });
}

}  // namespace ortmem::adapters
