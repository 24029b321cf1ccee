// Identity and binding use (BIND), with the adapter's allocator registered in
// the reference registry.
#include <thread>

#include "support/registry_harness.hpp"
#include "support/suite.hpp"

namespace ortmem::cts {
namespace {

using Binding = RegistrySuite;

TEST_P(Binding, HandlesFromAnotherRegistryAreRefusedAsForeign) {
  covers("BIND-001");
  auto other = *BindingRegistry::create();
  const std::size_t calls = harness_->allocator->allocate_calls.load();
  for (const auto& result : {other.snapshot(harness_->mechanism).error(), other.retire(harness_->mechanism).error(),
                             other.bind_registered(harness_->mechanism).error()}) {
    EXPECT_EQ(result.kind(), BindingError::Kind::kForeignRegistry);
    EXPECT_EQ(result.subject(), "mechanism");
  }
  auto foreign_context = other.confirm_context_terminated(harness_->context_registration);
  ASSERT_FALSE(foreign_context);
  EXPECT_EQ(foreign_context.error().subject(), "provider context");
  EXPECT_EQ(harness_->allocator->allocate_calls.load(), calls);
}

TEST_P(Binding, RunningOutOfIdentitiesIsAnErrorNotAWrap) {
  covers("BIND-003");
  // Room for a context, an authority, a mechanism and one binding (id and generation).
  auto registry = *BindingRegistry::create({.first_serial = UINT64_MAX - 5});
  auto context = *registry.register_provider_context(info().device);
  auto authority = *registry.register_authority(info().device);
  auto mechanism = registry.register_allocator(context, authority, harness_->allocator);
  ASSERT_TRUE(mechanism);
  auto binding = registry.bind(info().device);
  ASSERT_TRUE(binding);
  const std::size_t calls = harness_->allocator->allocate_calls.load();
  auto exhausted = registry.bind(info().device);
  ASSERT_FALSE(exhausted) << "an identity was issued past the end of the space";
  EXPECT_EQ(exhausted.error().kind(), BindingError::Kind::kIdentityExhausted);
  auto allocation = binding->allocate(64, 8);
  ASSERT_FALSE(allocation) << "an allocation generation was issued past the end of the space";
  EXPECT_EQ(allocation.error().kind(), BindingError::Kind::kIdentityExhausted);
  EXPECT_EQ(harness_->allocator->release_calls.load(), harness_->allocator->allocate_calls.load() - calls)
      << "memory allocated before the refusal was not given back";
}

TEST_P(Binding, EachBindIsANewBindingWithANewGeneration) {
  covers("BIND-006", "BIND-007");
  auto second = harness_->registry.bind(info().device);
  ASSERT_TRUE(second);
  EXPECT_NE(second->identity().id, binding().identity().id);
  EXPECT_NE(second->identity().generation, binding().identity().generation);
  EXPECT_EQ(second->identity().mechanism, binding().identity().mechanism);
  EXPECT_EQ(second->identity().provider_context, harness_->context_registration.identity);
  EXPECT_EQ(second->identity().authority, harness_->authority.identity);
  EXPECT_EQ(second->identity().device, info().device);
}

TEST_P(Binding, AReusedAddressGetsANewGenerationAndOldMetadataStaysStale) {
  covers("BIND-002", "BIND-014");
  auto first = binding().allocate(64, 64);
  ASSERT_TRUE(first);
  const BoundAllocation stale = *first;
  auto view = stale.view(0, 64);
  ASSERT_TRUE(view);
  ASSERT_TRUE(binding().release(std::move(*first)));
  // Allocate until the allocator hands the same address out again (most do at once).
  std::vector<BoundAllocation> held;
  std::optional<BoundAllocation> reused;
  for (int i = 0; i < 64 && !reused; ++i) {
    auto next = binding().allocate(64, 64);
    ASSERT_TRUE(next);
    // Issued, never derived: a later allocation never carries the earlier
    // one's generation, whether or not the allocator reuses the address.
    EXPECT_NE(next->identity().generation, stale.identity().generation);
    if (next->data() == stale.data()) reused = *next;
    held.push_back(std::move(*next));
  }
  if (reused) {
    EXPECT_NE(reused->identity().generation, stale.identity().generation);
  }
  bool called = false;
  auto used = binding().with_view(*view, [&](ValidatedMemoryView) { called = true; });
  ASSERT_FALSE(used);
  EXPECT_EQ(used.error().kind(), BindingError::Kind::kStaleAllocation);
  EXPECT_FALSE(called) << "a stale view reached its callback";
  for (auto& allocation : held) ASSERT_TRUE(binding().release(std::move(allocation)));
}

TEST_P(Binding, CrossBindingUseIsBindingMismatchBeforeAnyCallback) {
  covers("BIND-011");
  auto other = harness_->registry.bind(info().device);
  ASSERT_TRUE(other);
  auto allocation = binding().allocate(128, 16);
  ASSERT_TRUE(allocation);
  auto view = allocation->view(0, 128);
  ASSERT_TRUE(view);
  const std::size_t releases = harness_->allocator->release_calls.load();
  bool called = false;
  auto used = other->with_view(*view, [&](ValidatedMemoryView) { called = true; });
  ASSERT_FALSE(used);
  EXPECT_EQ(used.error().kind(), BindingError::Kind::kBindingMismatch);
  EXPECT_FALSE(called);
  auto released = other->release(*allocation);
  ASSERT_FALSE(released);
  EXPECT_EQ(released.error().error().kind(), BindingError::Kind::kBindingMismatch);
  EXPECT_EQ(harness_->allocator->release_calls.load(), releases) << "a mismatched release reached the allocator";
  ASSERT_TRUE(binding().release(std::move(*allocation)));
}

TEST_P(Binding, ViewsAreValidatedAndBoundsChecked) {
  covers("BIND-012", "BIND-013", "BIND-015");
  auto allocation = binding().allocate(256, 64);
  ASSERT_TRUE(allocation);
  for (auto [offset, bytes] : {std::pair<std::size_t, std::size_t>{0, 257}, {200, 57}, {257, 0}, {1, SIZE_MAX}}) {
    auto view = allocation->view(offset, bytes);
    ASSERT_FALSE(view) << offset << "+" << bytes;
    EXPECT_EQ(view.error().kind(), BindingError::Kind::kViewOutOfBounds);
  }
  auto view = allocation->view(64, 128);
  ASSERT_TRUE(view);
  // The callback may re-enter the registry: no lock is held while it runs.
  auto seen = binding().with_view(*view, [&](ValidatedMemoryView validated) {
    EXPECT_EQ(harness_->snapshot().live_allocations, 1U);
    EXPECT_TRUE(harness_->registry.bind(info().device));
    return std::pair{validated.data(), validated.size()};
  });
  ASSERT_TRUE(seen);
  EXPECT_EQ(seen->first, static_cast<unsigned char*>(allocation->data()) + 64);
  EXPECT_EQ(seen->second, 128U);
  ASSERT_TRUE(binding().release(std::move(*allocation)));
}

TEST_P(Binding, RegistrationChecksTheDevice) {
  covers("BIND-004");
  const DeviceKey elsewhere = info().device == DeviceKey::device(7) ? DeviceKey::device(8) : DeviceKey::device(7);
  auto context = *harness_->registry.register_provider_context(elsewhere);
  auto authority = *harness_->registry.register_authority(elsewhere);
  auto mismatch = harness_->registry.register_allocator(context, authority, adapter().make_allocator());
  ASSERT_FALSE(mismatch);
  EXPECT_EQ(mismatch.error().kind(), BindingError::Kind::kDeviceMismatch);
  EXPECT_EQ(mismatch.error().subject(), "allocator");
  EXPECT_EQ(mismatch.error().actual_device(), info().device);
}

TEST_P(Binding, TheFirstMechanismIsSelectedAndLaterOnesOnlyBySelect) {
  covers("BIND-005", "BIND-006", "BIND-008");
  auto later = harness_->registry.register_trusted_composite(harness_->context_registration, harness_->authority,
                                                            adapter().make_allocator());
  ASSERT_TRUE(later);
  EXPECT_EQ(harness_->registry.bind(info().device)->identity().mechanism, harness_->mechanism.identity);
  ASSERT_TRUE(harness_->registry.select(*later));
  EXPECT_EQ(harness_->registry.bind(info().device)->identity().mechanism, later->identity);
  EXPECT_EQ(harness_->registry.snapshot(*later)->coherence, MechanismCoherence::kTrustedComposite);
  EXPECT_EQ(harness_->snapshot().coherence, MechanismCoherence::kSelfContained);
  auto direct = harness_->registry.bind_registered(harness_->mechanism);
  ASSERT_TRUE(direct);
  EXPECT_EQ(direct->identity().mechanism, harness_->mechanism.identity);
}

TEST_P(Binding, SnapshotsCountWithoutCallingTheProvider) {
  covers("BIND-009", "BIND-010");
  auto first = binding().allocate(100, 4);
  auto second = binding().allocate_owning(200, 8);
  ASSERT_TRUE(first && second);
  const std::size_t allocations = harness_->allocator->allocate_calls.load();
  const std::size_t releases = harness_->allocator->release_calls.load();
  const MechanismSnapshot snapshot = harness_->snapshot();
  EXPECT_EQ(harness_->allocator->allocate_calls.load(), allocations);
  EXPECT_EQ(harness_->allocator->release_calls.load(), releases);
  EXPECT_EQ(snapshot.identity, harness_->mechanism.identity);
  EXPECT_EQ(snapshot.device, info().device);
  EXPECT_EQ(snapshot.provider_context, harness_->context_registration.identity);
  EXPECT_EQ(snapshot.authority, harness_->authority.identity);
  EXPECT_EQ(snapshot.lifecycle, MechanismLifecycle::kActive);
  EXPECT_EQ(snapshot.live_allocations, 2U);
  EXPECT_EQ(snapshot.active_operations, 0U);
  EXPECT_EQ(snapshot.queued_releases, 0U);
  EXPECT_EQ(snapshot.quarantined_allocations, 0U);
  EXPECT_TRUE(snapshot.retains_ownership());
  EXPECT_EQ(harness_->registry.snapshots().size(), 1U);
  ASSERT_TRUE(binding().release(std::move(*first)));
  ASSERT_TRUE(std::move(*second).release_now());
  EXPECT_FALSE(harness_->snapshot().retains_ownership());
}

TEST_P(Binding, AdoptedMemoryBehavesLikeIssuedMemory) {
  covers("BIND-017");
  auto raw = harness_->allocator->allocate(512, 64);
  ASSERT_TRUE(raw);
  auto adopted = binding().adopt_allocation(*raw, 512, 64);
  ASSERT_TRUE(adopted);
  EXPECT_EQ(harness_->snapshot().live_allocations, 1U);
  {
    auto view = adopted->view(0, 512);
    ASSERT_TRUE(view) << "adopted memory must lend views like issued memory";
  }
  auto outcome = std::move(*adopted).release_now();
  ASSERT_TRUE(outcome);
  EXPECT_TRUE(outcome->is_complete()) << outcome->describe();
  EXPECT_EQ(outcome->accounting()->allocation_bytes, 512U);
}

ORTMEM_CTS_INSTANTIATE(Binding);

}  // namespace
}  // namespace ortmem::cts
