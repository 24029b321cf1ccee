// Lifetime pins: handles keep allocator, authority and context alive, and the
// three are destroyed in a fixed order when the last holder goes.
#include "ortmem/registry.hpp"

#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "ortmem/bound_capability.hpp"
#include "ortmem/deferred.hpp"
#include "ortmem/owning_allocation.hpp"
#include "support/binding_fixture.hpp"
#include "support/capability_allocator.hpp"
#include "support/counting_allocator.hpp"
#include "support/requirements.hpp"

namespace ortmem {
namespace {

using test_support::CapabilityAllocator;
using test_support::CountingAllocator;
using test_support::covers;
using test_support::is_kind;
using Kind = BindingError::Kind;

// A provider resource (context or authority) that logs its own destruction.
struct LoggedResource {
  LoggedResource(std::string name, std::vector<std::string>& log, bool& alive)
      : name_(std::move(name)), log_(log), alive_(alive) {
    alive_ = true;
  }
  ~LoggedResource() {
    alive_ = false;
    log_.push_back(name_);
  }
  std::string name_;
  std::vector<std::string>& log_;
  bool& alive_;
};

TEST(Lifetime, EveryHandleMadeThroughABindingPinsAllocatorAuthorityAndContextPastTheRegistry) {
  covers("TEAR-018");
  auto context_resource = std::make_shared<int>(1);
  auto authority_resource = std::make_shared<int>(2);
  const std::weak_ptr<int> context_alive = context_resource;
  const std::weak_ptr<int> authority_alive = authority_resource;
  auto capability = std::make_shared<CapabilityAllocator>();
  const std::weak_ptr<CapabilityAllocator> allocator_alive = capability;
  auto all_alive = [&] { return !context_alive.expired() && !authority_alive.expired() && !allocator_alive.expired(); };

  std::optional<OwningAllocation> owner;
  std::optional<BoundAllocation> bound;
  std::optional<BoundMemoryView> view;
  std::optional<PreparedAllocationRelease> prepared;
  std::optional<BoundVirtualBacking> backing;
  {
    auto registry = *BindingRegistry::create();
    const auto context = *registry.register_provider_context(DeviceKey::host(), std::move(context_resource));
    const auto authority = *registry.register_authority(DeviceKey::host(), std::move(authority_resource));
    const auto mechanism = *registry.register_allocator(context, authority, capability);
    const auto binding = *registry.bind_registered(mechanism);
    owner.emplace(*binding.allocate_owning(8192, 64));
    bound.emplace(*binding.allocate(8192, 64));
    view.emplace(*bound->view(0, 64));
    prepared.emplace(*std::move(*binding.allocate_owning(64, 8)).prepare_release());
    backing = *binding.virtual_backing();
  }  // the registry and the binding are gone
  capability.reset();
  ASSERT_TRUE(all_alive());

  // Each handle still works on its own, and each keeps the three alive.
  EXPECT_TRUE(backing->commit(*bound, 0, 4096));
  backing.reset();
  ASSERT_TRUE(all_alive());
  EXPECT_EQ(std::move(*prepared).execute().state(), AllocationReleaseState::kReleased);
  prepared.reset();
  ASSERT_TRUE(all_alive());
  EXPECT_TRUE(view->binding().with_view(*view, [](ValidatedMemoryView v) { EXPECT_NE(v.data(), nullptr); }));
  view.reset();
  ASSERT_TRUE(all_alive());
  EXPECT_TRUE(bound->binding().release(*bound));
  bound.reset();
  ASSERT_TRUE(all_alive());
  EXPECT_EQ(allocator_alive.lock()->release_calls(), 2U);
  // The owner is the last holder: its release consumes it, and with it the last pin.
  EXPECT_EQ((*std::move(*owner).release_now()).state(), AllocationReleaseState::kReleased);
  EXPECT_TRUE(allocator_alive.expired());
  EXPECT_TRUE(authority_alive.expired());
  EXPECT_TRUE(context_alive.expired());
}

TEST(Lifetime, ABindingPinsItsDependenciesAfterTheirRegistryEntriesAreRemoved) {
  covers("TEAR-018");
  auto registry = *BindingRegistry::create();
  auto context_resource = std::make_shared<int>(1);
  const std::weak_ptr<int> context_alive = context_resource;
  auto allocator = std::make_shared<CountingAllocator>();
  const std::weak_ptr<CountingAllocator> allocator_alive = allocator;
  const auto context = *registry.register_provider_context(DeviceKey::host(), std::move(context_resource));
  const auto authority = *registry.register_authority(DeviceKey::host());
  const auto mechanism = *registry.register_allocator(context, authority, std::move(allocator));
  std::optional<MemoryBinding> binding = *registry.bind_registered(mechanism);

  ASSERT_TRUE(registry.retire(mechanism));
  ASSERT_TRUE(registry.remove(mechanism));
  ASSERT_TRUE(registry.remove_provider_context(context));
  ASSERT_TRUE(registry.remove_authority(authority));
  EXPECT_TRUE(registry.snapshots().empty());
  EXPECT_FALSE(context_alive.expired());
  EXPECT_FALSE(allocator_alive.expired());
  const auto seen = binding->mechanism_snapshot();
  EXPECT_EQ(seen.identity, mechanism.identity);
  EXPECT_EQ(seen.lifecycle, MechanismLifecycle::kRetired);
  EXPECT_TRUE(is_kind(binding->allocate(8, 8).error(), Kind::kInactiveMechanism));
  binding.reset();
  EXPECT_TRUE(allocator_alive.expired());
  EXPECT_TRUE(context_alive.expired());
}

class DestructionOrder : public ::testing::Test {
 protected:
  // Registers a mechanism whose allocator checks, as it dies, that its context
  // and authority are still alive.
  RegisteredMechanism register_logged(const BindingRegistry& registry) {
    auto context = std::make_shared<LoggedResource>("context", log_, context_alive_);
    auto authority = std::make_shared<LoggedResource>("authority", log_, authority_alive_);
    auto allocator = std::make_shared<CountingAllocator>();
    allocator->on_destroy([this] {
      allocator_saw_context_ = context_alive_;
      allocator_saw_authority_ = authority_alive_;
      log_.push_back("allocator");
    });
    const auto registered_context = *registry.register_provider_context(DeviceKey::host(), std::move(context));
    const auto registered_authority = *registry.register_authority(DeviceKey::host(), std::move(authority));
    return *registry.register_allocator(registered_context, registered_authority, std::move(allocator));
  }
  void expect_order() {
    EXPECT_EQ(log_, (std::vector<std::string>{"allocator", "authority", "context"}));
    EXPECT_TRUE(allocator_saw_context_) << "the allocator's destructor ran after its context";
    EXPECT_TRUE(allocator_saw_authority_) << "the allocator's destructor ran after its authority";
  }

  std::vector<std::string> log_;
  bool context_alive_ = false;
  bool authority_alive_ = false;
  bool allocator_saw_context_ = false;
  bool allocator_saw_authority_ = false;
};

TEST_F(DestructionOrder, WithTheRegistryDroppedFirstTheLastHandleDestroysAllocatorThenAuthorityThenContext) {
  covers("TEAR-019", "TEAR-018");
  std::optional<MemoryBinding> binding;
  std::optional<OwningAllocation> owner;
  {
    auto registry = *BindingRegistry::create();
    const auto mechanism = register_logged(registry);
    binding = *registry.bind_registered(mechanism);
    owner.emplace(*binding->allocate_owning(64, 8));
  }
  EXPECT_TRUE(log_.empty()) << "dropping the registry destroyed something a handle still needs";
  binding.reset();
  EXPECT_TRUE(log_.empty()) << "the owner alone must keep all three alive";
  // The owner is the last holder; releasing it consumes it (the allocator is still reachable).
  EXPECT_TRUE(std::move(*owner).release_now());
  expect_order();
}

TEST_F(DestructionOrder, WithTheRegistryAsTheLastHolderTheOrderIsTheSame) {
  covers("TEAR-019");
  {
    auto registry = *BindingRegistry::create();
    const auto mechanism = register_logged(registry);
    auto owner = registry.bind_registered(mechanism)->allocate_owning(64, 8);
    ASSERT_TRUE(owner);
    ASSERT_TRUE(std::move(*owner).release_now());
  }
  expect_order();
}

// One owner per thread: each thread records in a shard of its own, so each
// owner holds the mechanism through a different shard's anchor.
std::vector<OwningAllocation> owners_made_on_their_own_threads(const MemoryBinding& binding, std::size_t count) {
  std::vector<std::optional<OwningAllocation>> made(count);
  std::vector<std::thread> threads;
  for (auto& slot : made) threads.emplace_back([&binding, &slot] { slot.emplace(*binding.allocate_owning(64, 8)); });
  for (std::thread& thread : threads) thread.join();
  std::vector<OwningAllocation> owners;
  for (auto& slot : made) owners.push_back(std::move(*slot));
  return owners;
}

TEST_F(DestructionOrder, OwnersMadeOnSeveralThreadsEachKeepEverythingAliveUntilTheLastIsReleased) {
  covers("TEAR-019", "TEAR-018");
  std::vector<OwningAllocation> owners;
  {
    auto registry = *BindingRegistry::create();
    const auto binding = *registry.bind_registered(register_logged(registry));
    owners = owners_made_on_their_own_threads(binding, 4);
  }
  while (!owners.empty()) {
    EXPECT_TRUE(log_.empty()) << owners.size() << " owners are left, yet something they need was destroyed";
    EXPECT_TRUE(std::move(owners.back()).release_now());
    owners.pop_back();
  }
  expect_order();
}

TEST_F(DestructionOrder, TheLastHoldersLettingGoOnDifferentThreadsAtOnceDestroyEverythingOnce) {
  covers("TEAR-019");
  for (int round = 0; round < 20; ++round) {
    log_.clear();
    std::optional<MemoryBinding> binding;
    std::vector<OwningAllocation> owners;
    {
      auto registry = *BindingRegistry::create();
      binding = *registry.bind_registered(register_logged(registry));
      owners = owners_made_on_their_own_threads(*binding, 2);
    }
    // The binding's reference and both owners' go at the same moment; whichever
    // is last destroys the allocator, then the authority, then the context.
    std::thread first([&owners] { EXPECT_TRUE(std::move(owners[0]).release_now()); });
    std::thread second([&owners] { EXPECT_TRUE(std::move(owners[1]).release_now()); });
    binding.reset();
    first.join();
    second.join();
    expect_order();
  }
}

}  // namespace
}  // namespace ortmem
