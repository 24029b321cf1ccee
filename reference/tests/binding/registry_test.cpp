// The binding registry: identities, registration, selection, binding and snapshots.
#include "ortmem/registry.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <future>
#include <memory>
#include <thread>

#include "ortmem/deferred.hpp"
#include "ortmem/owning_allocation.hpp"
#include "support/binding_fixture.hpp"
#include "support/counting_allocator.hpp"
#include "support/forge.hpp"
#include "support/requirements.hpp"

namespace ortmem {
namespace {

using test_support::BindingTest;
using test_support::CountingAllocator;
using test_support::Counts;
using test_support::covers;
using test_support::has_counts;
using test_support::is_kind;
using test_support::RecyclingAllocator;
using Kind = BindingError::Kind;

using RegistryTest = BindingTest;

TEST_F(RegistryTest, EveryBindIssuesAFreshIdAndGenerationAndNamesWhereItCameFrom) {
  covers("BIND-007");
  const auto m = add();
  const auto other = add(DeviceKey::device(0));
  auto first = registry_.bind_registered(m.mechanism);
  auto second = registry_.bind_registered(m.mechanism);
  auto selected = registry_.bind(DeviceKey::host());
  auto elsewhere = registry_.bind_registered(other.mechanism);
  ASSERT_TRUE(first && second && selected && elsewhere);

  const BindingIdentity ids[] = {first->identity(), second->identity(), selected->identity(), elsewhere->identity()};
  for (std::size_t i = 0; i < std::size(ids); ++i) {
    EXPECT_TRUE(ids[i].id.is_issued());
    EXPECT_TRUE(ids[i].generation.is_issued());
    for (std::size_t j = i + 1; j < std::size(ids); ++j) {
      EXPECT_NE(ids[i].id, ids[j].id) << i << " and " << j << " share a binding id";
      EXPECT_NE(ids[i].generation, ids[j].generation) << i << " and " << j << " share a generation";
    }
  }
  for (const auto& binding : {*first, *second, *selected}) {
    EXPECT_EQ(binding.identity().device, DeviceKey::host());
    EXPECT_EQ(binding.identity().mechanism, m.mechanism.identity);
    EXPECT_EQ(binding.identity().provider_context, m.context.identity);
    EXPECT_EQ(binding.identity().authority, m.authority.identity);
  }
  EXPECT_EQ(elsewhere->identity().device, DeviceKey::device(0));
  EXPECT_EQ(elsewhere->identity().mechanism, other.mechanism.identity);
  EXPECT_EQ(elsewhere->identity().provider_context, other.context.identity);
  EXPECT_EQ(elsewhere->identity().authority, other.authority.identity);
}

TEST_F(RegistryTest, AReusedAddressGetsANewGenerationAndTheOldMetadataAndViewStayStale) {
  covers("BIND-002", "BIND-014");
  auto allocator = std::make_shared<CountingAllocator>(DeviceKey::host(), std::make_unique<RecyclingAllocator>());
  const auto m = add(DeviceKey::host(), allocator);
  const auto binding = bind(m);

  auto first = binding.allocate(64, 16);
  ASSERT_TRUE(first) << first.error().message();
  auto first_view = first->view(0, 64);
  ASSERT_TRUE(first_view);
  const BoundAllocation stale_copy = *first;
  ASSERT_TRUE(binding.release(*first));

  auto second = binding.allocate(64, 16);
  ASSERT_TRUE(second);
  ASSERT_EQ(second->data(), stale_copy.data()) << "the recycling test double must hand the address out again";
  EXPECT_NE(second->identity().generation, stale_copy.identity().generation);
  EXPECT_EQ(second->identity().binding, stale_copy.identity().binding);

  const std::size_t releases = allocator->release_calls();
  auto again = binding.release(stale_copy);
  ASSERT_FALSE(again);
  EXPECT_TRUE(is_kind(again.error().error(), Kind::kStaleAllocation));
  EXPECT_EQ(again.error().error().allocation(), stale_copy.identity());
  EXPECT_EQ(allocator->release_calls(), releases) << "stale metadata reached the allocator";
  EXPECT_TRUE(has_counts(snapshot(m), Counts{.live = 1}));

  int calls = 0;
  auto viewed = binding.with_view(*first_view, [&](ValidatedMemoryView) { ++calls; });
  ASSERT_FALSE(viewed);
  EXPECT_TRUE(is_kind(viewed.error(), Kind::kStaleAllocation));
  EXPECT_EQ(calls, 0) << "a stale view reached its callback";
  auto stale_view = stale_copy.view(0, 8);
  ASSERT_FALSE(stale_view);
  EXPECT_TRUE(is_kind(stale_view.error(), Kind::kStaleAllocation));

  // The new allocation at the same address is untouched and still works.
  auto fresh_view = second->view(0, 64);
  ASSERT_TRUE(fresh_view);
  EXPECT_TRUE(binding.with_view(*fresh_view, [&](ValidatedMemoryView view) {
    ++calls;
    EXPECT_EQ(view.data(), second->data());
  }));
  EXPECT_EQ(calls, 1);
  EXPECT_TRUE(binding.release(*second));
  EXPECT_EQ(allocator->failed_releases(), 0U);
}

TEST_F(RegistryTest, RegistryHandlesOfAnotherRegistryAreRefusedAsForeignNamingTheirKind) {
  covers("BIND-001");
  const auto local = add();
  auto other_registry = *BindingRegistry::create();
  const auto foreign_context = *other_registry.register_provider_context(DeviceKey::host());
  const auto foreign_authority = *other_registry.register_authority(DeviceKey::host());
  auto foreign_allocator = std::make_shared<CountingAllocator>();
  const auto foreign_mechanism =
      *other_registry.register_allocator(foreign_context, foreign_authority, foreign_allocator);

  auto expect_foreign = [](const BindingError& error, const char* kind) {
    EXPECT_TRUE(is_kind(error, Kind::kForeignRegistry));
    EXPECT_EQ(error.subject(), kind);
    EXPECT_NE(error.message().find("another binding registry"), std::string::npos) << error.message();
  };

  auto allocator = std::make_shared<CountingAllocator>();
  auto with_foreign_context = registry_.register_allocator(foreign_context, local.authority, allocator);
  ASSERT_FALSE(with_foreign_context);
  expect_foreign(with_foreign_context.error(), "provider context");
  auto with_foreign_authority = registry_.register_allocator(local.context, foreign_authority, allocator);
  ASSERT_FALSE(with_foreign_authority);
  expect_foreign(with_foreign_authority.error(), "authority");
  EXPECT_EQ(allocator->total_calls(), 0U) << "refused as foreign only after asking the allocator";

  expect_foreign(registry_.select(foreign_mechanism).error(), "mechanism");
  expect_foreign(registry_.bind_registered(foreign_mechanism).error(), "mechanism");
  expect_foreign(registry_.retire(foreign_mechanism).error(), "mechanism");
  expect_foreign(registry_.remove(foreign_mechanism).error(), "mechanism");
  expect_foreign(registry_.snapshot(foreign_mechanism).error(), "mechanism");
  expect_foreign(registry_.quarantined(foreign_mechanism).error(), "mechanism");
  expect_foreign(registry_.confirm_context_terminated(foreign_context).error(), "provider context");
  expect_foreign(registry_.remove_provider_context(foreign_context).error(), "provider context");
  expect_foreign(registry_.remove_authority(foreign_authority).error(), "authority");

  // Nothing changed on either side, and nobody's allocator was asked anything.
  EXPECT_EQ(registry_.snapshots().size(), 1U);
  const auto foreign_snapshot = *other_registry.snapshot(foreign_mechanism);
  EXPECT_EQ(foreign_snapshot.lifecycle, MechanismLifecycle::kActive);
  EXPECT_TRUE(other_registry.bind(DeviceKey::host()));
  EXPECT_EQ(foreign_allocator->allocate_calls() + foreign_allocator->release_calls(), 0U);
}

TEST_F(RegistryTest, AllocationsAndViewsOfAnotherRegistryAreRefusedAsForeignBeforeAnyCallback) {
  covers("BIND-001");
  const auto local = add();
  const auto binding = bind(local);
  auto other_registry = *BindingRegistry::create();
  const auto context = *other_registry.register_provider_context(DeviceKey::host());
  const auto authority = *other_registry.register_authority(DeviceKey::host());
  auto foreign_allocator = std::make_shared<CountingAllocator>();
  const auto mechanism = *other_registry.register_allocator(context, authority, foreign_allocator);
  const auto foreign_binding = *other_registry.bind_registered(mechanism);
  auto foreign = foreign_binding.allocate(64, 16);
  ASSERT_TRUE(foreign);
  auto foreign_view = foreign->view(0, 64);
  ASSERT_TRUE(foreign_view);

  auto released = binding.release(*foreign);
  ASSERT_FALSE(released);
  EXPECT_TRUE(is_kind(released.error().error(), Kind::kForeignRegistry));
  EXPECT_EQ(released.error().error().subject(), "allocation");
  EXPECT_FALSE(released.error().is_quarantined()) << "a foreign handle is refused before any mutation";
  auto prepared = binding.prepare_release(*foreign);
  ASSERT_FALSE(prepared);
  EXPECT_TRUE(is_kind(prepared.error().error(), Kind::kForeignRegistry));

  int calls = 0;
  auto viewed = binding.with_view(*foreign_view, [&](ValidatedMemoryView) { ++calls; });
  ASSERT_FALSE(viewed);
  EXPECT_TRUE(is_kind(viewed.error(), Kind::kForeignRegistry));
  EXPECT_EQ(viewed.error().subject(), "view");
  EXPECT_EQ(calls, 0);

  EXPECT_EQ(local.allocator->release_calls() + foreign_allocator->release_calls(), 0U);
  EXPECT_TRUE(has_counts(*other_registry.snapshot(mechanism), Counts{.live = 1}));
  EXPECT_TRUE(foreign_binding.release(*foreign)) << "the foreign allocation must be untouched and still releasable";
}

TEST_F(RegistryTest, AnExhaustedIdentitySpaceIsAnErrorNeverAWrap) {
  covers("BIND-003");
  // A registry whose serials run out right after `last`: five go to the
  // context, authority, mechanism and binding (id and generation), one to
  // `earlier`.
  constexpr std::uint64_t kLast = ~std::uint64_t{0} - 1;
  registry_ = *BindingRegistry::create({.first_serial = kLast - 6});
  const auto m = add();
  const auto binding = bind(m);
  auto earlier = binding.allocate(32, 8);
  ASSERT_TRUE(earlier);
  auto last = binding.allocate(64, 8);
  ASSERT_TRUE(last);
  EXPECT_EQ(last->identity().generation.opaque().serial(), kLast);

  const std::size_t allocations = m.allocator->allocations();
  auto refused = binding.allocate(64, 8);
  ASSERT_FALSE(refused);
  EXPECT_TRUE(is_kind(refused.error(), Kind::kIdentityExhausted));
  EXPECT_NE(refused.error().message().find("create a new registry"), std::string::npos) << refused.error().message();
  // The allocator already produced memory for it; it must go straight back, not leak.
  EXPECT_EQ(m.allocator->allocations(), allocations + 1);
  EXPECT_EQ(m.allocator->complete_releases(), 1U);
  EXPECT_TRUE(is_kind(binding.allocate_owning(8, 8).error(), Kind::kIdentityExhausted));
  EXPECT_TRUE(is_kind(registry_.bind_registered(m.mechanism).error(), Kind::kIdentityExhausted));
  EXPECT_TRUE(is_kind(registry_.bind(DeviceKey::host()).error(), Kind::kIdentityExhausted));
  EXPECT_TRUE(is_kind(registry_.register_provider_context(DeviceKey::host()).error(), Kind::kIdentityExhausted));
  EXPECT_TRUE(is_kind(registry_.register_authority(DeviceKey::host()).error(), Kind::kIdentityExhausted));
  EXPECT_TRUE(
      is_kind(registry_.register_allocator(m.context, m.authority, std::make_shared<CountingAllocator>()).error(),
              Kind::kIdentityExhausted));
  EXPECT_EQ(registry_.snapshots().size(), 1U);
  EXPECT_TRUE(has_counts(snapshot(m), Counts{.live = 2})) << "a refused allocation left a record or an operation";

  // Existing metadata keeps working: releasing needs no new identity.
  EXPECT_TRUE(binding.release(*last));
  EXPECT_TRUE(binding.release(*earlier));
  EXPECT_TRUE(is_kind(binding.allocate(8, 8).error(), Kind::kIdentityExhausted)) << "exhaustion is permanent";
  EXPECT_EQ(m.allocator->failed_releases(), 0U);
}

TEST_F(RegistryTest, RegistrationWithAMismatchingDeviceNamesTheSubjectAndRegistersNothing) {
  covers("BIND-004");
  const auto context = *registry_.register_provider_context(DeviceKey::host());
  const auto host_authority = *registry_.register_authority(DeviceKey::host());
  const auto gpu_authority = *registry_.register_authority(DeviceKey::device(0));

  auto host_allocator = std::make_shared<CountingAllocator>();
  auto wrong_authority = registry_.register_allocator(context, gpu_authority, host_allocator);
  ASSERT_FALSE(wrong_authority);
  EXPECT_TRUE(is_kind(wrong_authority.error(), Kind::kDeviceMismatch));
  EXPECT_EQ(wrong_authority.error().subject(), "authority");
  EXPECT_EQ(wrong_authority.error().expected_device(), DeviceKey::host());
  EXPECT_EQ(wrong_authority.error().actual_device(), DeviceKey::device(0));

  auto gpu_allocator = std::make_shared<CountingAllocator>(DeviceKey::device(1));
  auto wrong_allocator = registry_.register_trusted_composite(context, host_authority, gpu_allocator);
  ASSERT_FALSE(wrong_allocator);
  EXPECT_TRUE(is_kind(wrong_allocator.error(), Kind::kDeviceMismatch));
  EXPECT_EQ(wrong_allocator.error().subject(), "allocator");
  EXPECT_EQ(wrong_allocator.error().expected_device(), DeviceKey::host());
  EXPECT_EQ(wrong_allocator.error().actual_device(), DeviceKey::device(1));
  EXPECT_NE(wrong_allocator.error().message().find("device:1"), std::string::npos) << wrong_allocator.error().message();

  EXPECT_TRUE(registry_.snapshots().empty()) << "a refused registration left a mechanism behind";
  EXPECT_TRUE(is_kind(registry_.bind(DeviceKey::host()).error(), Kind::kNoSelectedMechanism));
  EXPECT_TRUE(is_kind(registry_.bind(DeviceKey::device(1)).error(), Kind::kNoSelectedMechanism));
  EXPECT_EQ(host_allocator->allocate_calls() + gpu_allocator->allocate_calls(), 0U);

  // The same context and authority still register a matching allocator.
  EXPECT_TRUE(registry_.register_allocator(context, host_authority, host_allocator));
}

TEST_F(RegistryTest, TheFirstMechanismOfADeviceIsSelectedAndLaterOnesOnlyBySelect) {
  covers("BIND-005", "BIND-006");
  EXPECT_TRUE(is_kind(registry_.bind(DeviceKey::host()).error(), Kind::kNoSelectedMechanism));
  auto none = registry_.bind(DeviceKey::device(7));
  ASSERT_FALSE(none);
  EXPECT_TRUE(is_kind(none.error(), Kind::kNoSelectedMechanism));
  EXPECT_EQ(none.error().actual_device(), DeviceKey::device(7));

  const auto first = add();
  const auto second = add();
  const auto gpu = add(DeviceKey::device(0));
  EXPECT_EQ(registry_.bind(DeviceKey::host())->identity().mechanism, first.mechanism.identity);
  EXPECT_EQ(registry_.bind(DeviceKey::device(0))->identity().mechanism, gpu.mechanism.identity);
  const auto third = add();
  EXPECT_EQ(registry_.bind(DeviceKey::host())->identity().mechanism, first.mechanism.identity)
      << "registering another mechanism redirected the device's binds";

  ASSERT_TRUE(registry_.select(second.mechanism));
  EXPECT_EQ(registry_.bind(DeviceKey::host())->identity().mechanism, second.mechanism.identity);
  EXPECT_EQ(registry_.bind(DeviceKey::device(0))->identity().mechanism, gpu.mechanism.identity)
      << "selecting on one device changed another";
  // bind_registered binds exactly the mechanism named, whatever the selection.
  EXPECT_EQ(registry_.bind_registered(first.mechanism)->identity().mechanism, first.mechanism.identity);
  EXPECT_EQ(registry_.bind_registered(third.mechanism)->identity().mechanism, third.mechanism.identity);
  EXPECT_EQ(registry_.bind(DeviceKey::host())->identity().mechanism, second.mechanism.identity);
}

TEST_F(RegistryTest, SelectionUsesTheRegisteredDeviceNotTheHandlesCopyOfIt) {
  covers("BIND-006", "TEAR-006");
  const auto host_first = add();
  const auto host_second = add();
  const auto gpu = add(DeviceKey::device(0));
  // A handle whose device field was altered after registration.
  RegisteredMechanism altered = host_second.mechanism;
  altered.device = DeviceKey::device(0);
  ASSERT_TRUE(registry_.select(altered));
  EXPECT_EQ(registry_.bind(DeviceKey::device(0))->identity().mechanism, gpu.mechanism.identity)
      << "bind(device:0) now binds a host mechanism";
  EXPECT_EQ(registry_.bind(DeviceKey::host())->identity().mechanism, host_second.mechanism.identity);

  RegisteredMechanism altered_again = host_second.mechanism;
  altered_again.device = DeviceKey::device(5);
  ASSERT_TRUE(registry_.retire(altered_again));
  auto after_retire = registry_.bind(DeviceKey::host());
  ASSERT_FALSE(after_retire) << "a retired mechanism is still selected for its own device";
  EXPECT_TRUE(is_kind(after_retire.error(), Kind::kNoSelectedMechanism));
  EXPECT_EQ(registry_.bind(DeviceKey::device(0))->identity().mechanism, gpu.mechanism.identity);
  (void)host_first;
}

TEST_F(RegistryTest, ATrustedCompositeIsReportedAsSuchAndEverythingElseAsSelfContained) {
  covers("BIND-008");
  const auto plain = add();
  const auto composite = add(DeviceKey::host(), nullptr, /*trusted_composite=*/true);
  EXPECT_EQ(plain.mechanism.coherence, MechanismCoherence::kSelfContained);
  EXPECT_EQ(composite.mechanism.coherence, MechanismCoherence::kTrustedComposite);
  EXPECT_EQ(snapshot(plain).coherence, MechanismCoherence::kSelfContained);
  EXPECT_EQ(snapshot(composite).coherence, MechanismCoherence::kTrustedComposite);
  EXPECT_EQ(bind(composite).mechanism_snapshot().coherence, MechanismCoherence::kTrustedComposite);
  EXPECT_EQ(coherence_name(MechanismCoherence::kTrustedComposite), "trusted-composite");
  EXPECT_EQ(coherence_name(MechanismCoherence::kSelfContained), "self-contained");
  const auto all = registry_.snapshots();
  ASSERT_EQ(all.size(), 2U);
  for (const auto& entry : all) {
    EXPECT_EQ(entry.coherence, entry.identity == composite.mechanism.identity ? MechanismCoherence::kTrustedComposite
                                                                              : MechanismCoherence::kSelfContained);
  }
}

TEST_F(RegistryTest, SnapshotsNeverCallTheProviderEvenWhileItIsWedged) {
  covers("BIND-009");
  const auto m = add();
  const auto binding = bind(m);
  auto owner = binding.allocate_owning(32, 8);
  ASSERT_TRUE(owner);

  // Wedge the allocator inside a callback on another thread; snapshots must still answer.
  std::promise<void> entered;
  std::promise<void> unwedge;
  auto unwedged = unwedge.get_future().share();
  m.allocator->on_next_allocate([&, unwedged] {
    entered.set_value();
    unwedged.wait();
  });
  std::thread wedged([&] { EXPECT_TRUE(binding.allocate(16, 8)); });
  entered.get_future().wait();

  const std::size_t calls = m.allocator->total_calls();
  test_support::within(test_support::kDeadlockLimit, "snapshot while the allocator is wedged", [&] {
    for (int i = 0; i < 10; ++i) {
      EXPECT_TRUE(registry_.snapshot(m.mechanism));
      EXPECT_EQ(registry_.snapshots().size(), 1U);
      EXPECT_TRUE(registry_.quarantined(m.mechanism));
      (void)binding.mechanism_snapshot();
    }
  });
  EXPECT_EQ(m.allocator->total_calls(), calls) << "a snapshot called into the allocator";
  EXPECT_TRUE(has_counts(snapshot(m), Counts{.live = 1, .active = 1}));
  unwedge.set_value();
  wedged.join();

  // A lost device is exactly when snapshots are needed.
  ASSERT_TRUE(registry_.invalidate_device(DeviceKey::host(), "lost"));
  const std::size_t after_loss = m.allocator->total_calls();
  EXPECT_EQ(snapshot(m).lifecycle, MechanismLifecycle::kDeviceLost);
  EXPECT_EQ(registry_.snapshots().size(), 1U);
  EXPECT_EQ(m.allocator->total_calls(), after_loss);
}

TEST_F(RegistryTest, ASnapshotReportsEveryFieldAndRetainsOwnershipExactlyWhenSomethingIsOwned) {
  covers("BIND-010");
  const auto m = add(DeviceKey::device(2));
  const auto binding = bind(m);
  auto initial = snapshot(m);
  EXPECT_EQ(initial.identity, m.mechanism.identity);
  EXPECT_EQ(initial.device, DeviceKey::device(2));
  EXPECT_EQ(initial.provider_context, m.context.identity);
  EXPECT_EQ(initial.authority, m.authority.identity);
  EXPECT_EQ(initial.coherence, MechanismCoherence::kSelfContained);
  EXPECT_EQ(initial.lifecycle, MechanismLifecycle::kActive);
  EXPECT_TRUE(has_counts(initial, Counts{}));
  EXPECT_FALSE(initial.retains_ownership());

  // An in-flight callback is active but owns nothing yet.
  MechanismSnapshot during{};
  m.allocator->on_next_allocate([&] { during = snapshot(m); });
  auto live = binding.allocate_owning(100, 4);
  ASSERT_TRUE(live);
  EXPECT_TRUE(has_counts(during, Counts{.active = 1}));
  EXPECT_FALSE(during.retains_ownership()) << "an active operation alone is not ownership";

  EXPECT_TRUE(has_counts(snapshot(m), Counts{.live = 1}));
  EXPECT_TRUE(snapshot(m).retains_ownership());

  auto queued = binding.allocate_owning(200, 8);
  ASSERT_TRUE(queued);
  auto prepared = std::move(*queued).prepare_release();
  ASSERT_TRUE(prepared);
  EXPECT_TRUE(has_counts(snapshot(m), Counts{.live = 1, .active = 1, .queued = 1}));

  { auto dropped = binding.allocate_owning(300, 16); }  // quarantined: owner-dropped
  EXPECT_TRUE(
      has_counts(snapshot(m), Counts{.live = 1, .active = 1, .queued = 1, .quarantined = 1, .quarantined_bytes = 300}));

  ASSERT_TRUE(std::move(*live).release_now());
  ASSERT_TRUE(std::move(*prepared).execute().is_complete());
  const auto only_quarantine = snapshot(m);
  EXPECT_TRUE(has_counts(only_quarantine, Counts{.quarantined = 1, .quarantined_bytes = 300}));
  EXPECT_TRUE(only_quarantine.retains_ownership()) << "quarantined bytes are still owned";

  // snapshots() reports the same figures as snapshot(m).
  const auto all = registry_.snapshots();
  ASSERT_EQ(all.size(), 1U);
  EXPECT_EQ(all.front(), only_quarantine);
  EXPECT_EQ(binding.mechanism_snapshot(), only_quarantine);
}

}  // namespace
}  // namespace ortmem
