// Mechanism lifecycle: retire, invalidate_device, confirm_context_terminated and removal.
#include "ortmem/registry.hpp"

#include <gtest/gtest.h>

#include <memory>
#include <optional>

#include "ortmem/bound_capability.hpp"
#include "ortmem/deferred.hpp"
#include "ortmem/mechanism/fenced_deferred_queue.hpp"
#include "ortmem/mechanism/host_stream.hpp"
#include "ortmem/mechanism/provider_context.hpp"
#include "ortmem/owning_allocation.hpp"
#include "support/binding_fixture.hpp"
#include "support/capability_allocator.hpp"
#include "support/requirements.hpp"
#include "support/test_queue.hpp"

namespace ortmem {
namespace {

using test_support::BindingTest;
using test_support::CapabilityAllocator;
using test_support::CountingAllocator;
using test_support::Counts;
using test_support::covers;
using test_support::has_counts;
using test_support::is_kind;
using Kind = BindingError::Kind;
using Lifecycle = MechanismLifecycle;

using LifecycleTest = BindingTest;

TEST_F(LifecycleTest, TheLifecycleOnlyMovesForward) {
  covers("TEAR-001");
  const auto retiring = add();
  const auto direct = add();
  EXPECT_EQ(snapshot(retiring).lifecycle, Lifecycle::kActive);

  ASSERT_TRUE(registry_.retire(retiring.mechanism));
  EXPECT_EQ(snapshot(retiring).lifecycle, Lifecycle::kRetired);
  ASSERT_TRUE(registry_.retire(retiring.mechanism));
  EXPECT_EQ(snapshot(retiring).lifecycle, Lifecycle::kRetired);
  EXPECT_TRUE(is_kind(registry_.select(retiring.mechanism).error(), Kind::kInactiveMechanism))
      << "select brought a retired mechanism back";
  EXPECT_EQ(snapshot(retiring).lifecycle, Lifecycle::kRetired);

  ASSERT_TRUE(registry_.invalidate_device(DeviceKey::host(), "first loss"));
  EXPECT_EQ(snapshot(retiring).lifecycle, Lifecycle::kDeviceLost);
  EXPECT_EQ(snapshot(direct).lifecycle, Lifecycle::kDeviceLost) << "active -> device-lost directly";
  ASSERT_TRUE(registry_.retire(direct.mechanism));
  EXPECT_EQ(snapshot(direct).lifecycle, Lifecycle::kDeviceLost) << "retire moved a lost mechanism back";
  ASSERT_TRUE(registry_.invalidate_device(DeviceKey::host(), "second loss"));
  EXPECT_TRUE(is_kind(registry_.select(direct.mechanism).error(), Kind::kInactiveMechanism));
  // The first reason stands.
  EXPECT_EQ(registry_.bind_registered(direct.mechanism).error().loss_reason(), "first loss");

  ASSERT_TRUE(registry_.confirm_context_terminated(retiring.context));
  EXPECT_EQ(snapshot(retiring).lifecycle, Lifecycle::kTerminated);
  EXPECT_EQ(snapshot(direct).lifecycle, Lifecycle::kDeviceLost) << "another context's mechanism was terminated";
  ASSERT_TRUE(registry_.invalidate_device(DeviceKey::host(), "third loss"));
  ASSERT_TRUE(registry_.retire(retiring.mechanism));
  EXPECT_FALSE(registry_.select(retiring.mechanism));
  EXPECT_EQ(snapshot(retiring).lifecycle, Lifecycle::kTerminated) << "terminated is final";
}

TEST_F(LifecycleTest, ARetiredMechanismRefusesNewSelectionsBindsAndAllocations) {
  covers("TEAR-002", "TEAR-006");
  const auto m = add();
  const auto binding = bind(m);
  ASSERT_TRUE(registry_.retire(m.mechanism));
  const std::size_t allocate_calls = m.allocator->allocate_calls();

  auto selected = registry_.select(m.mechanism);
  ASSERT_FALSE(selected);
  EXPECT_TRUE(is_kind(selected.error(), Kind::kInactiveMechanism));
  EXPECT_EQ(selected.error().lifecycle(), Lifecycle::kRetired);
  EXPECT_EQ(selected.error().mechanism(), m.mechanism.identity);
  EXPECT_TRUE(is_kind(registry_.bind_registered(m.mechanism).error(), Kind::kInactiveMechanism));
  EXPECT_TRUE(is_kind(registry_.bind(DeviceKey::host()).error(), Kind::kNoSelectedMechanism))
      << "retire must drop the mechanism's selection";
  auto allocated = binding.allocate(64, 8);
  ASSERT_FALSE(allocated);
  EXPECT_TRUE(is_kind(allocated.error(), Kind::kInactiveMechanism));
  EXPECT_EQ(allocated.error().lifecycle(), Lifecycle::kRetired);
  EXPECT_TRUE(is_kind(binding.allocate_owning(64, 8).error(), Kind::kInactiveMechanism));
  EXPECT_EQ(m.allocator->allocate_calls(), allocate_calls) << "a retired mechanism's allocator was asked for memory";
  EXPECT_TRUE(has_counts(snapshot(m), Counts{}));
}

TEST_F(LifecycleTest, ARetiredMechanismStillReleasesWhatItAllocated) {
  covers("TEAR-003");
  const auto m = add();
  const auto binding = bind(m);
  auto context = std::make_shared<mechanism::ProviderContext>(m.context.identity);
  auto stream = std::make_shared<mechanism::HostStream>();
  mechanism::FencedDeferredQueue queue(context, stream);
  auto owner = binding.allocate_owning(64, 8);
  auto legacy = binding.allocate(32, 8);
  auto deferred = binding.allocate_owning(16, 8);
  ASSERT_TRUE(owner && legacy && deferred);
  ASSERT_TRUE(registry_.retire(m.mechanism));

  EXPECT_EQ((*std::move(*owner).release_now()).state(), AllocationReleaseState::kReleased);
  EXPECT_TRUE(binding.release(*legacy));
  EXPECT_TRUE(std::move(*deferred).release_deferred(queue)->is_queued());
  stream->complete_all();
  EXPECT_EQ(queue.poll(), 1U);
  EXPECT_EQ(m.allocator->release_calls(), 3U);
  EXPECT_EQ(m.allocator->complete_releases(), 3U);
  EXPECT_TRUE(has_counts(snapshot(m), Counts{}));
  EXPECT_TRUE(registry_.remove(m.mechanism)) << "a drained retired mechanism is removable";
}

TEST_F(LifecycleTest, ADeviceLostMechanismRefusesEverythingAndIsNeverCalledAgain) {
  covers("TEAR-004");
  auto capability = std::make_shared<CapabilityAllocator>();
  const auto context = *registry_.register_provider_context(DeviceKey::host());
  const auto authority = *registry_.register_authority(DeviceKey::host());
  const auto mechanism = *registry_.register_allocator(context, authority, capability);
  const auto binding = *registry_.bind_registered(mechanism);
  auto vb = *binding.virtual_backing();
  ASSERT_TRUE(vb);
  auto owner = binding.allocate_owning(8192, 64);
  auto bound = binding.allocate(8192, 64);
  ASSERT_TRUE(owner && bound);
  auto view = bound->view(0, 64);
  ASSERT_TRUE(view);
  auto pins = std::make_shared<mechanism::ProviderContext>(context.identity);
  mechanism::FencedDeferredQueue queue(pins, std::make_shared<mechanism::HostStream>());

  ASSERT_TRUE(registry_.invalidate_device(DeviceKey::host(), "NVLink fatal"));
  const std::size_t allocator_calls = capability->allocator_calls();
  const std::size_t capability_calls = capability->capability_calls();

  auto expect_lost = [](const BindingError& error, const char* what) {
    EXPECT_TRUE(is_kind(error, Kind::kDeviceLost)) << what;
    EXPECT_EQ(error.loss_reason(), "NVLink fatal") << what;
    EXPECT_EQ(error.actual_device(), DeviceKey::host()) << what;
    EXPECT_NE(error.message().find("NVLink fatal"), std::string::npos) << what;
  };
  expect_lost(registry_.bind_registered(mechanism).error(), "bind_registered");
  expect_lost(binding.allocate(64, 8).error(), "allocate");
  expect_lost(binding.allocate_owning(64, 8).error(), "allocate_owning");
  expect_lost(binding.adopt_allocation(bound->data(), 64, 8).error(), "adopt_allocation");
  expect_lost(binding.virtual_backing().error(), "virtual_backing");
  expect_lost(binding.shared_mapping().error(), "shared_mapping");
  expect_lost(bound->view(0, 8).error(), "view");
  expect_lost(owner->view(0, 8).error(), "owned view");
  int calls = 0;
  expect_lost(binding.with_view(*view, [&](ValidatedMemoryView) { ++calls; }).error(), "with_view");
  expect_lost(vb->commit(*bound, 0, 4096).error(), "commit");
  expect_lost(vb->decommit(*bound, 0, 4096).error(), "decommit");
  expect_lost(vb->committed_bytes(*bound).error(), "committed_bytes");
  expect_lost(vb->allocate_committed(4096, 64, {}).error(), "allocate_committed");
  expect_lost(binding.release(*bound).error().error(), "legacy release");
  expect_lost(binding.prepare_release(*bound).error().error(), "prepare_release");
  auto now = std::move(*owner).release_now();
  ASSERT_FALSE(now);
  expect_lost(now.error().error(), "release_now");
  auto deferred = std::move(now.error()).take_allocation().release_deferred(queue);
  ASSERT_FALSE(deferred);
  expect_lost(deferred.error().error(), "release_deferred");
  EXPECT_EQ(pins->outstanding_pins(), 0U) << "a refused deferred release kept its pin";
  EXPECT_EQ(queue.pending(), 0U);

  EXPECT_EQ(calls, 0);
  EXPECT_EQ(capability->allocator_calls(), allocator_calls) << "the allocator of a lost device was called";
  EXPECT_EQ(capability->capability_calls(), capability_calls) << "a capability of a lost device was called";
  EXPECT_TRUE(has_counts(*registry_.snapshot(mechanism), Counts{.live = 2}));
}

TEST_F(LifecycleTest, TerminationDischargesLiveAndQuarantinedRecordsWithoutAnAllocatorCall) {
  covers("TEAR-005", "TEAR-011");
  const auto m = add();
  const auto binding = bind(m);
  auto owner = binding.allocate_owning(64, 8);
  auto bound = binding.allocate(32, 8);
  ASSERT_TRUE(owner && bound);
  { auto dropped = binding.allocate_owning(16, 8); }
  EXPECT_TRUE(has_counts(snapshot(m), Counts{.live = 2, .quarantined = 1, .quarantined_bytes = 16}));
  ASSERT_TRUE(registry_.invalidate_device(DeviceKey::host(), "lost"));
  const std::size_t calls = m.allocator->total_calls();

  ASSERT_TRUE(registry_.confirm_context_terminated(m.context));
  EXPECT_EQ(m.allocator->total_calls(), calls) << "termination called the allocator";
  const auto after = snapshot(m);
  EXPECT_EQ(after.lifecycle, Lifecycle::kTerminated);
  EXPECT_TRUE(has_counts(after, Counts{}));
  EXPECT_FALSE(after.retains_ownership());
  EXPECT_TRUE(registry_.quarantined(m.mechanism)->empty());

  // The metadata is terminal: every later use is refused, nothing reaches the allocator.
  auto legacy = binding.release(*bound);
  ASSERT_FALSE(legacy);
  EXPECT_TRUE(is_kind(legacy.error().error(), Kind::kInactiveMechanism));
  EXPECT_EQ(legacy.error().error().lifecycle(), Lifecycle::kTerminated);
  EXPECT_FALSE(bound->view(0, 1));
  auto now = std::move(*owner).release_now();
  ASSERT_FALSE(now);
  EXPECT_EQ(now.error().error().lifecycle(), Lifecycle::kTerminated);
  { auto dropped = std::move(now.error()).take_allocation(); }
  EXPECT_TRUE(has_counts(snapshot(m), Counts{})) << "an owner dropped after termination was re-recorded";
  EXPECT_EQ(m.allocator->total_calls(), calls);
}

TEST_F(LifecycleTest, InvalidateDeviceLosesEveryMechanismOfThatDeviceAndNothingElse) {
  covers("TEAR-007");
  const auto first = add(DeviceKey::device(0));
  const auto second = add(DeviceKey::device(0));
  const auto neighbour = add(DeviceKey::device(1));
  const auto host = add(DeviceKey::host());
  ASSERT_TRUE(registry_.select(second.mechanism));

  ASSERT_TRUE(registry_.invalidate_device(DeviceKey::device(0), "lost"));
  EXPECT_EQ(snapshot(first).lifecycle, Lifecycle::kDeviceLost);
  EXPECT_EQ(snapshot(second).lifecycle, Lifecycle::kDeviceLost);
  EXPECT_EQ(snapshot(neighbour).lifecycle, Lifecycle::kActive);
  EXPECT_EQ(snapshot(host).lifecycle, Lifecycle::kActive);
  EXPECT_TRUE(is_kind(registry_.bind(DeviceKey::device(0)).error(), Kind::kNoSelectedMechanism));
  EXPECT_EQ(registry_.bind(DeviceKey::device(1))->identity().mechanism, neighbour.mechanism.identity);
  EXPECT_EQ(registry_.bind(DeviceKey::host())->identity().mechanism, host.mechanism.identity);

  // A mechanism registered on the device afterwards is a new, active registration.
  const auto replacement = add(DeviceKey::device(0));
  EXPECT_EQ(snapshot(replacement).lifecycle, Lifecycle::kActive);
  EXPECT_EQ(registry_.bind(DeviceKey::device(0))->identity().mechanism, replacement.mechanism.identity);
  // Invalidating a device with no mechanisms changes nobody.
  ASSERT_TRUE(registry_.invalidate_device(DeviceKey::device(9), "never there"));
  EXPECT_EQ(registry_.bind(DeviceKey::device(1))->identity().mechanism, neighbour.mechanism.identity);
}

TEST_F(LifecycleTest, InvalidateDeviceCallsNoProviderAndFreesNothing) {
  covers("TEAR-008");
  const auto m = add();
  auto capability = std::make_shared<CapabilityAllocator>();
  const auto capable = *registry_.register_allocator(m.context, m.authority, capability);
  const auto binding = bind(m);
  auto capable_owner = registry_.bind_registered(capable)->allocate_owning(4096, 64);
  auto live = binding.allocate_owning(64, 8);
  ASSERT_TRUE(capable_owner && live);
  auto source = std::make_shared<test_support::ObservingPinSource>(m.context.identity);
  auto stream = std::make_shared<mechanism::HostStream>();
  mechanism::FencedDeferredQueue inner(source, stream);
  test_support::RecordingQueue queue(inner);
  (void)stream->submit();
  ASSERT_TRUE(std::move(*binding.allocate_owning(32, 8)).release_deferred(queue));

  const std::size_t allocator_calls = m.allocator->total_calls();
  const std::size_t capability_allocator_calls = capability->allocator_calls() + capability->capability_calls();
  const std::size_t queue_calls = queue.total_calls();
  const auto pin_calls = source->pin_calls();
  ASSERT_TRUE(registry_.invalidate_device(DeviceKey::host(), "lost"));
  EXPECT_EQ(m.allocator->total_calls(), allocator_calls);
  EXPECT_EQ(capability->allocator_calls() + capability->capability_calls(), capability_allocator_calls);
  EXPECT_EQ(queue.total_calls(), queue_calls);
  EXPECT_EQ(source->pin_calls(), pin_calls);
  EXPECT_EQ(source->outstanding(), 1U) << "invalidation released the queued request's pin";
  EXPECT_EQ(inner.pending(), 1U) << "invalidation settled or dropped queued work";
  EXPECT_TRUE(has_counts(snapshot(m), Counts{.live = 1, .active = 1, .queued = 1}));
  EXPECT_EQ(registry_.snapshot(capable)->live_allocations, 1U);
  inner.mark_device_lost();
}

TEST_F(LifecycleTest, ConfirmIsRefusedWhileAMechanismOfTheContextIsActiveOrRetired) {
  covers("TEAR-009");
  const auto m = add();
  const auto binding = bind(m);
  auto owner = binding.allocate_owning(64, 8);
  ASSERT_TRUE(owner);
  { auto dropped = binding.allocate_owning(8, 8); }

  auto active = registry_.confirm_context_terminated(m.context);
  ASSERT_FALSE(active);
  EXPECT_TRUE(is_kind(active.error(), Kind::kInactiveMechanism));
  EXPECT_EQ(active.error().lifecycle(), Lifecycle::kActive);
  ASSERT_TRUE(registry_.retire(m.mechanism));
  auto retired = registry_.confirm_context_terminated(m.context);
  ASSERT_FALSE(retired);
  EXPECT_EQ(retired.error().lifecycle(), Lifecycle::kRetired);
  auto after = snapshot(m);
  EXPECT_TRUE(has_counts(after, Counts{.live = 1, .quarantined = 1, .quarantined_bytes = 8}))
      << "a refused confirmation discharged records";

  // One lost and one active mechanism on the same context: refused, and the lost one is not terminated.
  ASSERT_TRUE(registry_.invalidate_device(DeviceKey::host(), "lost"));
  auto late = std::make_shared<CountingAllocator>();
  const auto late_mechanism = *registry_.register_allocator(m.context, m.authority, late);
  auto mixed = registry_.confirm_context_terminated(m.context);
  ASSERT_FALSE(mixed);
  EXPECT_EQ(mixed.error().mechanism(), late_mechanism.identity);
  EXPECT_EQ(snapshot(m).lifecycle, Lifecycle::kDeviceLost);
  EXPECT_TRUE(has_counts(snapshot(m), Counts{.live = 1, .quarantined = 1, .quarantined_bytes = 8}));
}

TEST_F(LifecycleTest, ConfirmRequiresQuiescenceAndReportsTheOutstandingCount) {
  covers("TEAR-010");
  const auto m = add();
  const auto binding = bind(m);
  auto first = std::move(*binding.allocate_owning(8, 8)).prepare_release();
  auto second = std::move(*binding.allocate_owning(8, 8)).prepare_release();
  ASSERT_TRUE(first && second);
  ASSERT_TRUE(registry_.invalidate_device(DeviceKey::host(), "lost"));

  auto refused = registry_.confirm_context_terminated(m.context);
  ASSERT_FALSE(refused);
  EXPECT_TRUE(is_kind(refused.error(), Kind::kContextNotQuiescent));
  EXPECT_EQ(refused.error().count(), 2U);
  EXPECT_EQ(refused.error().context(), m.context.identity);
  EXPECT_NE(refused.error().message().find("2 active"), std::string::npos) << refused.error().message();
  EXPECT_EQ(snapshot(m).lifecycle, Lifecycle::kDeviceLost);

  (void)std::move(*first).execute();  // device-lost gate: settles without the allocator
  EXPECT_EQ(registry_.confirm_context_terminated(m.context).error().count(), 1U);
  (void)std::move(*second).execute();
  EXPECT_TRUE(registry_.confirm_context_terminated(m.context));
  EXPECT_EQ(m.allocator->release_calls(), 0U);
}

TEST_F(LifecycleTest, ConfirmIsIdempotentOnceTerminated) {
  covers("TEAR-012");
  const auto m = add();
  ASSERT_TRUE(registry_.invalidate_device(DeviceKey::host(), "lost"));
  ASSERT_TRUE(registry_.confirm_context_terminated(m.context));
  const auto once = snapshot(m);
  EXPECT_EQ(once.lifecycle, Lifecycle::kTerminated);
  EXPECT_TRUE(registry_.confirm_context_terminated(m.context));
  EXPECT_TRUE(registry_.confirm_context_terminated(m.context));
  EXPECT_EQ(snapshot(m), once);
}

TEST_F(LifecycleTest, RemoveIsRefusedWhileLiveAllocationsQueuedReleasesOrCallbacksRemain) {
  covers("TEAR-013");
  const auto m = add();
  const auto binding = bind(m);
  auto owner = binding.allocate_owning(64, 8);
  ASSERT_TRUE(owner);
  // During an allocator callback: an active operation, even though nothing is live yet.
  std::optional<BindingError> during_callback;
  auto second = add();
  second.allocator->on_next_allocate([&] {
    ASSERT_TRUE(registry_.retire(second.mechanism));
    auto removed = registry_.remove(second.mechanism);
    if (!removed) during_callback = removed.error();
  });
  test_support::within(test_support::kDeadlockLimit, "remove from inside an allocator callback",
                       [&] { (void)bind(second).allocate(8, 8); });
  ASSERT_TRUE(during_callback) << "removed while an allocator callback was running";
  EXPECT_TRUE(is_kind(*during_callback, Kind::kInactiveMechanism));

  ASSERT_TRUE(registry_.retire(m.mechanism));
  auto live = registry_.remove(m.mechanism);
  ASSERT_FALSE(live);
  EXPECT_TRUE(is_kind(live.error(), Kind::kInactiveMechanism));
  EXPECT_EQ(live.error().lifecycle(), Lifecycle::kRetired);
  auto prepared = std::move(*owner).prepare_release();
  ASSERT_TRUE(prepared);
  EXPECT_FALSE(registry_.remove(m.mechanism)) << "removed with a queued release";
  EXPECT_TRUE(std::move(*prepared).execute().is_complete());
  EXPECT_TRUE(registry_.remove(m.mechanism));
  EXPECT_TRUE(is_kind(registry_.snapshot(m.mechanism).error(), Kind::kUnregisteredMechanism));
  EXPECT_TRUE(is_kind(registry_.remove(m.mechanism).error(), Kind::kUnregisteredMechanism));
}

TEST_F(LifecycleTest, RemoveReportsQuarantinedOwnershipBeforeTheLifecycle) {
  covers("TEAR-014");
  const auto m = add();
  const auto binding = bind(m);
  { auto a = binding.allocate_owning(8, 8); }
  { auto b = binding.allocate_owning(8, 8); }
  // Still active, which would also refuse: the quarantine is reported first.
  auto active = registry_.remove(m.mechanism);
  ASSERT_FALSE(active);
  EXPECT_TRUE(is_kind(active.error(), Kind::kQuarantinedOwnership));
  EXPECT_EQ(active.error().count(), 2U);
  EXPECT_EQ(active.error().mechanism(), m.mechanism.identity);
  EXPECT_NE(active.error().message().find("2 quarantined"), std::string::npos) << active.error().message();
  ASSERT_TRUE(registry_.retire(m.mechanism));
  auto retired = registry_.remove(m.mechanism);
  ASSERT_FALSE(retired);
  EXPECT_TRUE(is_kind(retired.error(), Kind::kQuarantinedOwnership));
  EXPECT_EQ(retired.error().count(), 2U);
}

TEST_F(LifecycleTest, RemoveIsRefusedForAnActiveMechanism) {
  covers("TEAR-015");
  const auto m = add();
  auto removed = registry_.remove(m.mechanism);
  ASSERT_FALSE(removed);
  EXPECT_TRUE(is_kind(removed.error(), Kind::kInactiveMechanism));
  EXPECT_EQ(removed.error().lifecycle(), Lifecycle::kActive);
  EXPECT_TRUE(registry_.snapshot(m.mechanism)) << "a refused removal removed the mechanism";
  EXPECT_EQ(registry_.bind(DeviceKey::host())->identity().mechanism, m.mechanism.identity);
}

TEST_F(LifecycleTest, AfterDeviceLossAndConfirmedTerminationRemoveNeedsNoRetire) {
  covers("TEAR-016");
  const auto m = add();
  const auto binding = bind(m);
  auto owner = binding.allocate_owning(64, 8);
  { auto dropped = binding.allocate_owning(8, 8); }
  ASSERT_TRUE(registry_.invalidate_device(DeviceKey::host(), "lost"));
  EXPECT_FALSE(registry_.remove(m.mechanism)) << "quarantined ownership must still block";
  ASSERT_TRUE(registry_.confirm_context_terminated(m.context));
  EXPECT_TRUE(registry_.remove(m.mechanism));
  EXPECT_TRUE(registry_.remove_provider_context(m.context));
  EXPECT_TRUE(registry_.remove_authority(m.authority));
  EXPECT_EQ(m.allocator->release_calls(), 0U);
}

TEST_F(LifecycleTest, ContextsAndAuthoritiesStayRegisteredWhileAMechanismUsesThem) {
  covers("TEAR-017");
  const auto m = add();
  auto shared = std::make_shared<CountingAllocator>();
  const auto sibling = *registry_.register_allocator(m.context, m.authority, shared);

  auto context = registry_.remove_provider_context(m.context);
  ASSERT_FALSE(context);
  EXPECT_TRUE(is_kind(context.error(), Kind::kProviderContextInUse));
  EXPECT_EQ(context.error().context(), m.context.identity);
  auto authority = registry_.remove_authority(m.authority);
  ASSERT_FALSE(authority);
  EXPECT_TRUE(is_kind(authority.error(), Kind::kAuthorityInUse));
  EXPECT_EQ(authority.error().authority(), m.authority.identity);

  ASSERT_TRUE(registry_.retire(m.mechanism));
  ASSERT_TRUE(registry_.remove(m.mechanism));
  EXPECT_TRUE(is_kind(registry_.remove_provider_context(m.context).error(), Kind::kProviderContextInUse))
      << "the sibling mechanism still uses the context";
  EXPECT_TRUE(is_kind(registry_.remove_authority(m.authority).error(), Kind::kAuthorityInUse));
  ASSERT_TRUE(registry_.retire(sibling));
  ASSERT_TRUE(registry_.remove(sibling));
  EXPECT_TRUE(registry_.remove_provider_context(m.context));
  EXPECT_TRUE(registry_.remove_authority(m.authority));
  EXPECT_TRUE(is_kind(registry_.remove_provider_context(m.context).error(), Kind::kUnregisteredProviderContext));
  EXPECT_TRUE(is_kind(registry_.remove_authority(m.authority).error(), Kind::kUnregisteredAuthority));
  EXPECT_TRUE(is_kind(registry_.register_allocator(m.context, m.authority, shared).error(),
                      Kind::kUnregisteredProviderContext));
}

TEST_F(LifecycleTest, AContextOrAuthorityRemovedDuringRegistrationIsNeverLeftInUse) {
  covers("TEAR-017", "BIND-004");
  for (const bool remove_context : {true, false}) {
    const auto context = *registry_.register_provider_context(DeviceKey::host());
    const auto authority = *registry_.register_authority(DeviceKey::host());
    auto allocator = std::make_shared<CountingAllocator>();
    // Registration asks the allocator for its device with no lock held; the
    // context (or authority) is removed right then, while nothing uses it yet.
    std::optional<Expected<void, BindingError>> removed;
    allocator->on_next_device_query([&] {
      removed = remove_context ? registry_.remove_provider_context(context) : registry_.remove_authority(authority);
    });
    auto registered = registry_.register_allocator(context, authority, allocator);
    ASSERT_TRUE(removed);
    ASSERT_TRUE(*removed) << "nothing used it yet, so the removal itself is allowed";
    ASSERT_FALSE(registered) << "a mechanism was registered against a "
                             << (remove_context ? "provider context" : "authority") << " that is no longer registered";
    EXPECT_TRUE(is_kind(registered.error(),
                        remove_context ? Kind::kUnregisteredProviderContext : Kind::kUnregisteredAuthority));
    EXPECT_TRUE(registry_.snapshots().empty());
    EXPECT_TRUE(is_kind(registry_.bind(DeviceKey::host()).error(), Kind::kNoSelectedMechanism));
  }
}

}  // namespace
}  // namespace ortmem
