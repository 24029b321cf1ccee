// Locking and re-entrancy: callbacks run with no lock held and count as active operations.
//
// Every re-entrant call below runs under test_support::within(), so a lock held
// across a callback shows up as a prompt "DEADLOCK" abort rather than a hang.
#include "ortmem/registry.hpp"

#include <gtest/gtest.h>

#include <future>
#include <memory>
#include <optional>
#include <thread>

#include "ortmem/bound_capability.hpp"
#include "ortmem/deferred.hpp"
#include "ortmem/mechanism/fenced_deferred_queue.hpp"
#include "ortmem/mechanism/host_stream.hpp"
#include "ortmem/mechanism/provider_context.hpp"
#include "ortmem/owning_allocation.hpp"
#include "support/binding_fixture.hpp"
#include "support/capability_allocator.hpp"
#include "support/requirements.hpp"

namespace ortmem {
namespace {

using test_support::BindingTest;
using test_support::CapabilityAllocator;
using test_support::Counts;
using test_support::covers;
using test_support::has_counts;
using test_support::is_kind;
using test_support::kDeadlockLimit;
using test_support::within;
using Kind = BindingError::Kind;

using LockingTest = BindingTest;

TEST_F(LockingTest, AnAllocatorCallbackMayReEnterTheRegistryThroughBothLockClasses) {
  covers("LOCK-002", "LOCK-001");
  const auto m = add();
  const auto other = add();
  const auto binding = bind(m);
  bool ran = false;
  m.allocator->on_next_allocate([&] {
    ran = true;
    // Mechanism lock of the mechanism whose callback is running.
    EXPECT_TRUE(has_counts(snapshot(m), Counts{.active = 1}));
    EXPECT_TRUE(registry_.quarantined(m.mechanism));
    // Registry lock, then mechanism locks, from inside the callback.
    EXPECT_EQ(registry_.snapshots().size(), 2U);
    ASSERT_TRUE(registry_.select(other.mechanism));
    ASSERT_TRUE(registry_.select(m.mechanism));
    EXPECT_TRUE(registry_.register_authority(DeviceKey::host()));
    auto nested_binding = registry_.bind(DeviceKey::host());
    ASSERT_TRUE(nested_binding);
    // Another allocation on the same mechanism, and its release, while the first is in flight.
    auto nested = nested_binding->allocate_owning(32, 8);
    ASSERT_TRUE(nested);
    EXPECT_TRUE(std::move(*nested).release_now());
  });
  within(kDeadlockLimit, "allocator callback re-entering the registry", [&] {
    auto allocation = binding.allocate(64, 8);
    ASSERT_TRUE(allocation);
    EXPECT_TRUE(binding.release(*allocation));
  });
  EXPECT_TRUE(ran);
  EXPECT_EQ(m.allocator->allocate_calls(), 2U);
  EXPECT_EQ(m.allocator->release_calls(), 2U);
  EXPECT_TRUE(has_counts(snapshot(m), Counts{}));
}

TEST_F(LockingTest, ACapabilityCallbackMayReEnterTheRegistry) {
  covers("LOCK-002");
  auto capability = std::make_shared<CapabilityAllocator>();
  const auto context = *registry_.register_provider_context(DeviceKey::host());
  const auto authority = *registry_.register_authority(DeviceKey::host());
  const auto mechanism = *registry_.register_allocator(context, authority, capability);
  const auto binding = *registry_.bind_registered(mechanism);
  auto allocation = binding.allocate(8192, 64);
  ASSERT_TRUE(allocation);
  auto vb = *binding.virtual_backing();
  bool ran = false;
  capability->on_next_capability_call([&] {
    ran = true;
    const auto during = *registry_.snapshot(mechanism);
    EXPECT_EQ(during.active_operations, 1U) << "a capability call is an active operation";
    auto nested = registry_.bind(DeviceKey::host())->allocate(64, 8);
    ASSERT_TRUE(nested);
    EXPECT_TRUE(binding.release(*binding.allocate(16, 8)));
    EXPECT_TRUE(nested->binding().release(*nested));
  });
  within(kDeadlockLimit, "capability callback re-entering the registry",
         [&] { EXPECT_TRUE(vb->commit(*allocation, 0, 4096)); });
  EXPECT_TRUE(ran);
  EXPECT_TRUE(binding.release(*allocation));
}

TEST_F(LockingTest, ExecuteCallsTheAllocatorWithNoLockHeldThroughAnActiveOrRetiredGate) {
  covers("REL-005");
  const auto m = add();
  const auto binding = bind(m);
  for (const bool retired : {false, true}) {
    auto owner = binding.allocate_owning(64, 8);
    ASSERT_TRUE(owner);
    if (retired) {
      ASSERT_TRUE(registry_.retire(m.mechanism));
    }
    bool ran = false;
    m.allocator->on_next_release([&] {
      ran = true;
      EXPECT_TRUE(has_counts(snapshot(m), Counts{.active = 1, .queued = 1}))
          << "the allocator is called after prepare, before the request settles";
      // Registry lock and another mechanism's work from inside release.
      const auto helper = add();
      auto nested = bind(helper).allocate_owning(8, 8);
      ASSERT_TRUE(nested);
      EXPECT_TRUE(std::move(*nested).release_now());
      EXPECT_TRUE(is_kind(registry_.confirm_context_terminated(m.context).error(), Kind::kInactiveMechanism));
      (void)binding.mechanism_snapshot();
    });
    within(kDeadlockLimit, "allocator release re-entering the registry", [&] {
      auto outcome = std::move(*owner).release_now();
      ASSERT_TRUE(outcome);
      EXPECT_EQ(outcome->state(), AllocationReleaseState::kReleased);
    });
    EXPECT_TRUE(ran) << (retired ? "retired" : "active");
  }
  EXPECT_EQ(m.allocator->release_calls(), 2U);
  EXPECT_TRUE(has_counts(snapshot(m), Counts{}));
}

TEST_F(LockingTest, WaitsInsideDeviceWorkDoNotStallOtherThreads) {
  covers("LOCK-003");
  const auto m = add();
  const auto binding = bind(m);
  const auto second = bind(m);
  auto held = binding.allocate(64, 8);
  ASSERT_TRUE(held);

  // A device operation that waits: the allocator blocks inside allocate until released.
  std::promise<void> entered;
  std::promise<void> release_device;
  auto device_done = release_device.get_future().share();
  m.allocator->on_next_allocate([&, device_done] {
    entered.set_value();
    device_done.wait();
  });
  std::thread waiting([&] { EXPECT_TRUE(binding.allocate(64, 8)); });
  entered.get_future().wait();
  within(kDeadlockLimit, "registry work while another thread waits inside the allocator", [&] {
    EXPECT_TRUE(has_counts(snapshot(m), Counts{.live = 1, .active = 1}));
    auto other = second.allocate_owning(32, 8);  // same mechanism, same allocator
    ASSERT_TRUE(other);
    EXPECT_TRUE(std::move(*other).release_now());
    EXPECT_TRUE(binding.release(*held));
    const auto extra = add();
    EXPECT_TRUE(registry_.select(extra.mechanism));
    EXPECT_TRUE(registry_.bind(DeviceKey::host()));
  });
  release_device.set_value();
  waiting.join();

  // The same while a queue executes a release that waits on the device.
  auto context = std::make_shared<mechanism::ProviderContext>(m.context.identity);
  auto stream = std::make_shared<mechanism::HostStream>();
  mechanism::FencedDeferredQueue queue(context, stream);
  ASSERT_TRUE(std::move(*binding.allocate_owning(16, 8)).release_deferred(queue));
  std::promise<void> executing;
  std::promise<void> finish;
  auto finished = finish.get_future().share();
  m.allocator->on_next_release([&, finished] {
    executing.set_value();
    finished.wait();
  });
  stream->complete_all();
  std::thread poller([&] { EXPECT_EQ(queue.poll(), 1U); });
  executing.get_future().wait();
  within(kDeadlockLimit, "enqueue and snapshot while the queue executes a waiting release", [&] {
    (void)stream->submit();  // the next request waits for new work, so the running poll leaves it
    EXPECT_TRUE(std::move(*second.allocate_owning(16, 8)).release_deferred(queue));
    EXPECT_EQ(queue.pending(), 1U);
    EXPECT_EQ(snapshot(m).queued_releases, 2U);
    EXPECT_EQ(queue.poll(), 0U) << "a second poller must not wait for the first";
  });
  finish.set_value();
  poller.join();
  stream->complete_all();
  EXPECT_EQ(queue.poll(), 1U);
  EXPECT_TRUE(has_counts(snapshot(m), Counts{.live = 1}));
}

TEST_F(LockingTest, AnInFlightAllocatorCallbackBlocksConfirmationUntilItReturns) {
  covers("LOCK-004", "LOCK-002", "TEAR-010", "TEAR-011", "TEAR-012");
  const auto m = add();
  const auto gpu = add(DeviceKey::device(1));
  const auto binding = bind(m);
  auto quarantined = binding.allocate_owning(40, 8);
  ASSERT_TRUE(quarantined);
  { auto dropped = std::move(*quarantined); }
  auto survivor = binding.allocate(24, 8);
  ASSERT_TRUE(survivor);

  bool ran = false;
  m.allocator->on_next_allocate([&] {
    ran = true;
    ASSERT_TRUE(registry_.invalidate_device(DeviceKey::host(), "lost during a callback"));
    auto confirmed = registry_.confirm_context_terminated(m.context);
    ASSERT_FALSE(confirmed) << "termination was confirmed under a running allocator callback";
    EXPECT_TRUE(is_kind(confirmed.error(), Kind::kContextNotQuiescent));
    EXPECT_EQ(confirmed.error().count(), 1U);
    const auto during = snapshot(m);
    EXPECT_EQ(during.lifecycle, MechanismLifecycle::kDeviceLost);
    EXPECT_EQ(during.active_operations, 1U);
    EXPECT_TRUE(is_kind(registry_.bind(DeviceKey::host()).error(), Kind::kNoSelectedMechanism));
    EXPECT_TRUE(is_kind(registry_.bind_registered(m.mechanism).error(), Kind::kDeviceLost));
    // Another device is unaffected, and can be used from inside the callback.
    auto elsewhere = registry_.bind(DeviceKey::device(1));
    ASSERT_TRUE(elsewhere);
    auto nested = elsewhere->allocate_owning(8, 8);
    ASSERT_TRUE(nested);
    EXPECT_TRUE(std::move(*nested).release_now());
  });
  within(kDeadlockLimit, "confirm, snapshot and bind from inside an allocator callback",
         [&] { EXPECT_TRUE(binding.allocate(16, 8)); });
  ASSERT_TRUE(ran);
  EXPECT_EQ(snapshot(m).active_operations, 0U);

  const std::size_t calls = m.allocator->total_calls();
  ASSERT_TRUE(registry_.confirm_context_terminated(m.context)) << "the callback has returned";
  const auto terminated = snapshot(m);
  EXPECT_EQ(terminated.lifecycle, MechanismLifecycle::kTerminated);
  EXPECT_TRUE(has_counts(terminated, Counts{})) << "live and quarantined records must be discharged";
  EXPECT_EQ(m.allocator->total_calls(), calls) << "confirmation called the allocator";
  EXPECT_EQ(m.allocator->release_calls(), 0U);
  EXPECT_TRUE(registry_.confirm_context_terminated(m.context));
  EXPECT_EQ(snapshot(m), terminated);
  EXPECT_EQ(snapshot(gpu).lifecycle, MechanismLifecycle::kActive);
  EXPECT_EQ(gpu.allocator->release_calls(), 1U);
}

}  // namespace
}  // namespace ortmem
