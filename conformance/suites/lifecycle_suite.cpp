// Mechanism lifecycle and teardown (TEAR) and locking (LOCK), with the
// adapter's allocator underneath the reference registry.
#include <atomic>
#include <functional>
#include <thread>
#include <vector>

#include "support/registry_harness.hpp"
#include "support/suite.hpp"

namespace ortmem::cts {
namespace {

using Lifecycle = RegistrySuite;

TEST_P(Lifecycle, RetiredRefusesNewWorkButReleasesExistingAllocations) {
  covers("TEAR-002", "TEAR-003", "TEAR-006");
  auto existing = binding().allocate_owning(128, 16);
  ASSERT_TRUE(existing);
  ASSERT_TRUE(registry().retire(harness_->mechanism));
  auto refused = binding().allocate(64, 8);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().kind(), BindingError::Kind::kInactiveMechanism);
  EXPECT_EQ(refused.error().lifecycle(), MechanismLifecycle::kRetired);
  auto unbound = registry().bind(info().device);
  ASSERT_FALSE(unbound) << "a retired mechanism stayed selected";
  EXPECT_EQ(unbound.error().kind(), BindingError::Kind::kNoSelectedMechanism);
  EXPECT_FALSE(registry().select(harness_->mechanism)) << "a retired mechanism was selected again";
  auto outcome = std::move(*existing).release_now();
  ASSERT_TRUE(outcome);
  EXPECT_TRUE(outcome->is_complete()) << outcome->describe();
  EXPECT_EQ(releases(), 1U);
}

TEST_P(Lifecycle, InvalidateLosesEveryMechanismOfTheDeviceAndCallsNothing) {
  covers("TEAR-007", "TEAR-008", "TEAR-001");
  auto second = registry().register_allocator(harness_->context_registration, harness_->authority,
                                              std::make_shared<CountingAllocator>(adapter().make_allocator()));
  ASSERT_TRUE(second);
  auto live = binding().allocate_owning(64, 8);
  ASSERT_TRUE(live);
  const std::size_t allocations = harness_->allocator->allocate_calls.load();
  ASSERT_TRUE(registry().invalidate_device(info().device, "test: device reset"));
  EXPECT_EQ(harness_->snapshot().lifecycle, MechanismLifecycle::kDeviceLost);
  EXPECT_EQ(registry().snapshot(*second)->lifecycle, MechanismLifecycle::kDeviceLost);
  EXPECT_EQ(harness_->allocator->allocate_calls.load(), allocations);
  EXPECT_EQ(releases(), 0U);
  EXPECT_EQ(harness_->snapshot().live_allocations, 1U) << "invalidation freed a record";
  EXPECT_FALSE(registry().bind(info().device)) << "the lost mechanism stayed selected";
  ASSERT_TRUE(registry().retire(harness_->mechanism));
  EXPECT_EQ(harness_->snapshot().lifecycle, MechanismLifecycle::kDeviceLost) << "lifecycle moved backwards";
}

TEST_P(Lifecycle, ConfirmationNeedsDeviceLossAndIsIdempotent) {
  covers("TEAR-009", "TEAR-012", "TEAR-005");
  auto early = registry().confirm_context_terminated(harness_->context_registration);
  ASSERT_FALSE(early) << "termination was confirmed before device loss";
  EXPECT_EQ(harness_->snapshot().lifecycle, MechanismLifecycle::kActive);
  auto live = binding().allocate(64, 8);
  ASSERT_TRUE(live);
  ASSERT_TRUE(registry().invalidate_device(info().device, "lost"));
  ASSERT_TRUE(registry().confirm_context_terminated(harness_->context_registration));
  EXPECT_TRUE(registry().confirm_context_terminated(harness_->context_registration));
  EXPECT_EQ(releases(), 0U);
  EXPECT_EQ(harness_->snapshot().live_allocations, 0U);
}

TEST_P(Lifecycle, RemoveIsRefusedWhileAnythingRemains) {
  covers("TEAR-013", "TEAR-015", "TEAR-017");
  auto active = registry().remove(harness_->mechanism);
  ASSERT_FALSE(active) << "an active mechanism was removed";
  EXPECT_EQ(active.error().kind(), BindingError::Kind::kInactiveMechanism);
  auto live = binding().allocate(64, 8);
  ASSERT_TRUE(live);
  ASSERT_TRUE(registry().retire(harness_->mechanism));
  EXPECT_FALSE(registry().remove(harness_->mechanism)) << "removed with a live allocation";
  auto context_in_use = registry().remove_provider_context(harness_->context_registration);
  ASSERT_FALSE(context_in_use);
  EXPECT_EQ(context_in_use.error().kind(), BindingError::Kind::kProviderContextInUse);
  auto authority_in_use = registry().remove_authority(harness_->authority);
  ASSERT_FALSE(authority_in_use);
  EXPECT_EQ(authority_in_use.error().kind(), BindingError::Kind::kAuthorityInUse);
  ASSERT_TRUE(binding().release(std::move(*live)));
  ASSERT_TRUE(registry().remove(harness_->mechanism));
  EXPECT_TRUE(registry().remove_provider_context(harness_->context_registration));
  EXPECT_TRUE(registry().remove_authority(harness_->authority));
}

// Resources that log their destruction, so the order is observable.
struct DestructionLog {
  std::vector<std::string> entries;
};
struct LoggedResource {
  LoggedResource(std::shared_ptr<DestructionLog> destination, std::string what)
      : log(std::move(destination)), name(std::move(what)) {}
  LoggedResource(const LoggedResource&) = delete;
  ~LoggedResource() { log->entries.push_back(name); }
  std::shared_ptr<DestructionLog> log;
  std::string name;
};
class LoggingAllocator final : public DeviceAllocator {
 public:
  LoggingAllocator(std::shared_ptr<DeviceAllocator> inner, std::shared_ptr<DestructionLog> log)
      : inner_(std::move(inner)), log_(std::move(log)) {}
  ~LoggingAllocator() override { log_->entries.push_back("allocator"); }
  Expected<void*, MemoryError> allocate(std::size_t bytes, std::size_t align) noexcept override {
    return inner_->allocate(bytes, align);
  }
  AllocationReleaseOutcome release(void* ptr, std::size_t bytes, std::size_t align) noexcept override {
    return inner_->release(ptr, bytes, align);
  }
  void deallocate(void* ptr, std::size_t bytes, std::size_t align) noexcept override {
    inner_->deallocate(ptr, bytes, align);
  }
  DeviceKey device() const noexcept override { return inner_->device(); }

 private:
  std::shared_ptr<DeviceAllocator> inner_;
  std::shared_ptr<DestructionLog> log_;
};

TEST_P(Lifecycle, BindingsOutliveTheRegistryAndTearDownInOrder) {
  covers("TEAR-018", "TEAR-019");
  auto log = std::make_shared<DestructionLog>();
  std::optional<OwningAllocation> survivor;
  {
    auto registry = *BindingRegistry::create();
    auto context = *registry.register_provider_context(
        info().device, std::make_shared<LoggedResource>(log, "context"));
    auto authority = *registry.register_authority(info().device,
                                                  std::make_shared<LoggedResource>(log, "authority"));
    auto mechanism =
        registry.register_allocator(context, authority, std::make_shared<LoggingAllocator>(watched_allocator(), log));
    ASSERT_TRUE(mechanism);
    auto binding = registry.bind(info().device);
    ASSERT_TRUE(binding);
    survivor.emplace(*binding->allocate_owning(64, 8));
  }
  EXPECT_TRUE(log->entries.empty()) << "the registry's destruction released pinned resources";
  auto outcome = std::move(*survivor).release_now();
  ASSERT_TRUE(outcome);
  EXPECT_TRUE(outcome->is_complete()) << "the allocator must still work after the registry is gone";
  survivor.reset();
  EXPECT_EQ(log->entries, (std::vector<std::string>{"allocator", "authority", "context"}));
}

// Calls back into the registry from inside allocate: with a lock held across
// the callback, this would self-deadlock.
class ReenteringAllocator final : public DeviceAllocator {
 public:
  explicit ReenteringAllocator(std::shared_ptr<DeviceAllocator> inner) : inner_(std::move(inner)) {}
  Expected<void*, MemoryError> allocate(std::size_t bytes, std::size_t align) noexcept override {
    if (inside) inside();
    return inner_->allocate(bytes, align);
  }
  AllocationReleaseOutcome release(void* ptr, std::size_t bytes, std::size_t align) noexcept override {
    return inner_->release(ptr, bytes, align);
  }
  void deallocate(void* ptr, std::size_t bytes, std::size_t align) noexcept override {
    inner_->deallocate(ptr, bytes, align);
  }
  DeviceKey device() const noexcept override { return inner_->device(); }

  std::function<void()> inside;

 private:
  std::shared_ptr<DeviceAllocator> inner_;
};

TEST_P(Lifecycle, AnInFlightCallbackIsAnActiveOperationAndMayReenter) {
  covers("LOCK-001", "LOCK-002", "LOCK-003", "LOCK-004", "TEAR-010");
  auto allocator = std::make_shared<ReenteringAllocator>(adapter().make_allocator());
  auto registry = *BindingRegistry::create();
  auto context = *registry.register_provider_context(info().device);
  auto authority = *registry.register_authority(info().device);
  auto mechanism = *registry.register_allocator(context, authority, allocator);
  auto binding = *registry.bind(info().device);
  std::optional<BindingError> during;
  allocator->inside = [&] {
    EXPECT_EQ(registry.snapshot(mechanism)->active_operations, 1U);
    EXPECT_TRUE(registry.bind(info().device));
    EXPECT_TRUE(registry.invalidate_device(info().device, "lost mid-call"));
    auto confirmed = registry.confirm_context_terminated(context);
    if (!confirmed) during = confirmed.error();
  };
  auto allocation = binding.allocate_owning(64, 8);
  ASSERT_TRUE(during.has_value()) << "termination was confirmed under an in-flight callback";
  EXPECT_EQ(during->kind(), BindingError::Kind::kContextNotQuiescent);
  EXPECT_EQ(during->count(), 1U);
  allocator->inside = nullptr;
  EXPECT_TRUE(registry.confirm_context_terminated(context)) << "confirmation must succeed once the callback returned";
}

TEST_P(Lifecycle, ConcurrentChurnKeepsCountsConsistent) {
  covers("LOCK-005", "REL-014");
  auto counting = harness_->allocator;
  std::atomic<bool> stop{false};
  std::atomic<int> problems{0};
  std::vector<std::thread> workers;
  for (int t = 0; t < 3; ++t) {
    workers.emplace_back([&] {
      for (int round = 0; round < 300 && !stop.load(); ++round) {
        auto allocation = binding().allocate_owning(32 + static_cast<std::size_t>(round % 7) * 16, 16);
        if (!allocation) continue;  // lost while we worked: allowed
        auto outcome = std::move(*allocation).release_now();
        if (!outcome) continue;  // handed back live after loss: its record stays until termination
        if (outcome->is_failed()) ++problems;
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_TRUE(registry().invalidate_device(info().device, "churn"));
  for (auto& worker : workers) worker.join();
  stop = true;
  EXPECT_EQ(problems.load(), 0);
  const MechanismSnapshot snapshot = harness_->snapshot();
  EXPECT_EQ(snapshot.active_operations, 0U);
  EXPECT_EQ(snapshot.queued_releases, 0U);
  // Every allocation the allocator granted was released by it exactly once,
  // or is still accounted for: live (refused after loss) or quarantined.
  EXPECT_EQ(counting->allocate_calls.load(),
            counting->release_calls.load() + snapshot.live_allocations + snapshot.quarantined_allocations);
  EXPECT_TRUE(registry().confirm_context_terminated(harness_->context_registration));
}

ORTMEM_CTS_INSTANTIATE(Lifecycle);

}  // namespace
}  // namespace ortmem::cts
