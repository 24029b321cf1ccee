// conformance/suites/support/registry_harness.hpp: the reference registry driving an adapter.
//
// Registry-side requirements (BIND, OWN, REL, DQ, LOCK, TEAR) are kept by the
// reference registry, but they are only worth certifying with the adapter's
// own objects underneath: its allocator (behind a counting decorator), its
// provider context and its queue. The harness registers them and binds once.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <stdexcept>
#include <string>

#include "ortmem/cts/adapter.hpp"
#include "support/counting_allocator.hpp"
#include "support/suite.hpp"
#include "ortmem/ortmem.hpp"

namespace ortmem::cts {

struct RegistryHarness {
  // Builds everything or records a fatal failure (check HasFatalFailure()).
  explicit RegistryHarness(Adapter& adapter)
      : registry(*BindingRegistry::create()), allocator(std::make_shared<CountingAllocator>(adapter.make_allocator())) {
    const DeviceKey device = adapter.info().device;
    auto registered_context = registry.register_provider_context(device);
    auto registered_authority = registry.register_authority(device);
    EXPECT_TRUE(registered_context && registered_authority);
    if (!registered_context || !registered_authority) return;
    context_registration = *registered_context;
    authority = *registered_authority;
    auto registered = registry.register_allocator(context_registration, authority, allocator);
    EXPECT_TRUE(registered) << (registered ? "" : registered.error().message());
    if (!registered) return;
    mechanism = *registered;
    context = adapter.make_context(context_registration.identity);
    auto bound = registry.bind(device);
    EXPECT_TRUE(bound) << (bound ? "" : bound.error().message());
    if (bound) binding.emplace(std::move(*bound));
  }

  [[nodiscard]] MechanismSnapshot snapshot() const { return *registry.snapshot(mechanism); }
  // The addresses whose release ran, in the order it ran: the allocator's
  // release calls, or for a queue that frees memory itself (an nxmem
  // plugin's) what it settled.
  [[nodiscard]] std::vector<void*> release_order(const QueueUnderTest& queue) const {
    auto settled = queue.settled_itself();
    return settled ? std::move(settled->order) : allocator->release_order();
  }
  // How many releases ran: the allocator's calls, and what a queue that
  // frees memory itself performed.
  [[nodiscard]] std::size_t releases_run(const QueueUnderTest& queue) const {
    const auto settled = queue.settled_itself();
    return allocator->release_calls.load() + (settled ? settled->order.size() : 0);
  }
  // How many releases ran after the queue was told of device loss, given
  // releases_run() read before it was told: a queue that executes through
  // the allocator runs nothing of its own accord, while one that frees
  // memory itself may until the moment it is told, and says which came after.
  [[nodiscard]] std::size_t releases_after_loss(const QueueUnderTest& queue, std::size_t run_before_loss) const {
    if (const auto settled = queue.settled_itself()) {
      return static_cast<std::size_t>(std::count(settled->after_loss.begin(), settled->after_loss.end(), true));
    }
    return releases_run(queue) - run_before_loss;
  }
  // The Complete settlements of a queue that frees memory itself whose
  // reported bytes are not the size released, for people; empty when none.
  [[nodiscard]] static std::string misreported_completions(const QueueUnderTest& queue) {
    std::string all;
    if (const auto settled = queue.settled_itself()) {
      for (const auto& each : settled->completed) {
        if (each.allocation_bytes == each.size) continue;
        all += (all.empty() ? "" : "; ") + std::string("a release of ") + std::to_string(each.size) +
               " bytes completed reporting " + std::to_string(each.allocation_bytes);
      }
    }
    return all;
  }
  // How a queue that frees memory itself broke its protocol, for people;
  // empty when it did not, or when the queue executes through the allocator.
  [[nodiscard]] static std::string protocol_violations(const QueueUnderTest& queue) {
    std::string all;
    if (const auto settled = queue.settled_itself()) {
      for (const std::string& violation : settled->violations) all += (all.empty() ? "" : "; ") + violation;
    }
    return all;
  }
  [[nodiscard]] bool ready() const { return binding.has_value() && context != nullptr; }

  BindingRegistry registry;
  std::shared_ptr<CountingAllocator> allocator;
  RegisteredProviderContext context_registration;
  RegisteredAuthority authority;
  RegisteredMechanism mechanism;
  std::unique_ptr<ContextUnderTest> context;
  std::optional<MemoryBinding> binding;
};

// A suite whose every test starts with the adapter registered and bound.
class RegistrySuite : public AdapterSuite {
 protected:
  void SetUp() override {
    AdapterSuite::SetUp();
    harness_ = std::make_unique<RegistryHarness>(adapter());
    watch(harness_->allocator);
    ASSERT_TRUE(harness_->ready());
    // Queues pin through the context: pins naming another context make every
    // request unusable, which is PIN-001's failure (the Pins suite's), not this test's.
    auto first = harness_->context->pins().pin();
    auto second = harness_->context->pins().pin();
    const auto names_it = [&](const auto& pin) {
      return pin && pin->context() == harness_->context_registration.identity;
    };
    if (!names_it(first) || !names_it(second)) {
      stands_on_broken("the adapter's context issues pins that do not name it (PIN-001)");
    }
  }
  [[nodiscard]] MemoryBinding& binding() { return *harness_->binding; }
  [[nodiscard]] BindingRegistry& registry() { return harness_->registry; }
  // Calls the registry made to the adapter allocator's release.
  [[nodiscard]] std::size_t releases() const { return harness_->allocator->release_calls.load(); }
  // A fresh owner through the harness's binding (a failure is recorded).
  // An owner of `bytes`. A test that takes one stands on it: when the
  // adapter's allocator refuses, the test ends here as a precondition (the
  // ALLOC tests judge the refusal), since going on would dereference the
  // error, crash the test process and charge every requirement it covers.
  OwningAllocation owner(std::size_t bytes = 256) {
    auto allocation = binding().allocate_owning(bytes, 64);
    if (!allocation) {
      const std::string what = "the registry could not allocate an owner of " + std::to_string(bytes) +
                               " bytes: " + allocation.error().message();
      stands_on_broken(what);
      throw std::runtime_error(what);
    }
    return std::move(*allocation);
  }

  std::unique_ptr<RegistryHarness> harness_;
};

}  // namespace ortmem::cts
