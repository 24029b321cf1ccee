// Identity and binding use (BIND), with the adapter's allocator registered in
// the reference registry.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <thread>
#include <tuple>
#include <vector>

#include "support/binding_error_payload.hpp"
#include "support/elsewhere_allocator.hpp"
#include "support/registry_harness.hpp"
#include "support/suite.hpp"

namespace ortmem::cts {
namespace {

using Binding = RegistrySuite;

TEST_P(Binding, HandlesFromAnotherRegistryAreRefusedAsForeign) {
  covers("BIND-001", "BIND-018");
  auto other = *BindingRegistry::create();
  const std::size_t calls = harness_->allocator->allocate_calls.load();
  for (const auto& result :
       {other.snapshot(harness_->mechanism).error(), other.retire(harness_->mechanism).error(),
        other.bind_registered(harness_->mechanism).error(), other.select(harness_->mechanism).error(),
        other.remove(harness_->mechanism).error(), other.quarantined(harness_->mechanism).error()}) {
    EXPECT_EQ(result.kind(), BindingError::Kind::kForeignRegistry);
    EXPECT_EQ(result.subject(), "mechanism");
    ORTMEM_CTS_EXPECT_NAMES(result, {.kind = BindingError::Kind::kForeignRegistry, .subject = "mechanism"});
  }
  // Allocations and views of another registry's binding, handed to this one.
  auto other_context = *other.register_provider_context(info().device);
  auto other_authority = *other.register_authority(info().device);
  ASSERT_TRUE(other.register_allocator(other_context, other_authority, adapter().make_allocator()));
  auto other_binding = *other.bind(info().device);
  auto theirs = other_binding.allocate(64, 8);
  ASSERT_TRUE(theirs);
  auto their_view = theirs->view(0, 64);
  ASSERT_TRUE(their_view);
  bool called = false;
  auto viewed = binding().with_view(*their_view, [&](ValidatedMemoryView) { called = true; });
  ASSERT_FALSE(viewed);
  EXPECT_FALSE(called) << "a view of another registry reached its callback";
  ORTMEM_CTS_EXPECT_NAMES(viewed.error(), {.kind = BindingError::Kind::kForeignRegistry, .subject = "view"});
  EXPECT_EQ(viewed.error().kind(), BindingError::Kind::kForeignRegistry);
  auto released = binding().release(*theirs);
  ASSERT_FALSE(released);
  EXPECT_EQ(released.error().error().kind(), BindingError::Kind::kForeignRegistry);
  ORTMEM_CTS_EXPECT_NAMES(released.error().error(),
                          {.kind = BindingError::Kind::kForeignRegistry, .subject = "allocation"});
  auto prepared = binding().prepare_release(*theirs);
  ASSERT_FALSE(prepared);
  EXPECT_EQ(prepared.error().error().kind(), BindingError::Kind::kForeignRegistry);
  EXPECT_EQ(other_binding.mechanism_snapshot().live_allocations, 1U) << "a refused foreign release changed its record";
  {
    ORTMEM_CTS_PRECONDITION();
    ASSERT_TRUE(other_binding.release(std::move(*theirs)));
  }
  ORTMEM_CTS_ASSERT_REFUSED(other.confirm_context_terminated(harness_->context_registration),
                            "another registry confirmed our context terminated",
                            {.kind = BindingError::Kind::kForeignRegistry, .subject = "provider context"});
  // A context or authority of this registry, handed to another: foreign, not
  // merely unregistered there (its serial may even name one of theirs).
  ORTMEM_CTS_ASSERT_REFUSED(
      other.register_allocator(harness_->context_registration, other_authority, adapter().make_allocator()),
      "another registry registered an allocator against our context",
      {.kind = BindingError::Kind::kForeignRegistry, .subject = "provider context"});
  ORTMEM_CTS_ASSERT_REFUSED(other.register_allocator(other_context, harness_->authority, adapter().make_allocator()),
                            "another registry registered an allocator against our authority",
                            {.kind = BindingError::Kind::kForeignRegistry, .subject = "authority"});
  ORTMEM_CTS_ASSERT_REFUSED(other.remove_provider_context(harness_->context_registration),
                            "another registry removed our context",
                            {.kind = BindingError::Kind::kForeignRegistry, .subject = "provider context"});
  ORTMEM_CTS_ASSERT_REFUSED(other.remove_authority(harness_->authority), "another registry removed our authority",
                            {.kind = BindingError::Kind::kForeignRegistry, .subject = "authority"});
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
  // Every other path that names something refuses too.
  auto another_context = registry.register_provider_context(info().device);
  ASSERT_FALSE(another_context) << "a context identity was issued past the end of the space";
  EXPECT_EQ(another_context.error().kind(), BindingError::Kind::kIdentityExhausted);
  auto another_authority = registry.register_authority(info().device);
  ASSERT_FALSE(another_authority) << "an authority identity was issued past the end of the space";
  EXPECT_EQ(another_authority.error().kind(), BindingError::Kind::kIdentityExhausted);
  auto another_mechanism = registry.register_allocator(context, authority, adapter().make_allocator());
  ASSERT_FALSE(another_mechanism) << "a mechanism identity was issued past the end of the space";
  EXPECT_EQ(another_mechanism.error().kind(), BindingError::Kind::kIdentityExhausted);
}

TEST_P(Binding, ABindingNeedsBothItsIdAndItsGeneration) {
  covers("BIND-003");
  // Room for a context, an authority, a mechanism and a binding id, but not
  // the binding's generation: the bind fails whole.
  auto registry = *BindingRegistry::create({.first_serial = UINT64_MAX - 4});
  auto context = *registry.register_provider_context(info().device);
  auto authority = *registry.register_authority(info().device);
  ASSERT_TRUE(registry.register_allocator(context, authority, adapter().make_allocator()));
  auto half = registry.bind(info().device);
  ASSERT_FALSE(half) << "a binding was issued without a generation of its own";
  EXPECT_EQ(half.error().kind(), BindingError::Kind::kIdentityExhausted);
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

// What a binding issues names it, whole: a handle that reported another
// binding, device, authority or context would be counted, checked and
// released against the wrong one. Read back from every kind of handle, on a
// second binding of the same mechanism so that a handle naming the first
// binding (or the mechanism's first binding) is caught.
TEST_P(Binding, EveryHandleNamesTheBindingThatIssuedIt) {
  covers("BIND-007", "BIND-012");
  auto second = harness_->registry.bind(info().device);
  ASSERT_TRUE(second);
  const BindingIdentity issuer = second->identity();
  auto allocation = second->allocate(96, 32);
  auto other = second->allocate(96, 32);
  ASSERT_TRUE(allocation && other);
  const AllocationIdentity identity = allocation->identity();
  EXPECT_EQ(identity.binding, issuer);
  EXPECT_NE(identity.generation, other->identity().generation);
  EXPECT_EQ(allocation->binding().identity(), issuer);

  auto view = allocation->view(32, 64);
  ASSERT_TRUE(view);
  EXPECT_EQ(view->allocation_identity(), identity);
  EXPECT_EQ(view->binding().identity(), issuer);

  auto owner = second->allocate_owning(48, 16);
  ASSERT_TRUE(owner);
  EXPECT_EQ(owner->identity().binding, issuer);
  {
    auto owned = owner->view(16, 32);  // given back at the end of the scope, before the release
    ASSERT_TRUE(owned);
    EXPECT_EQ(owned->allocation_identity(), owner->identity());
  }

  auto prepared = second->prepare_release(*allocation);
  ASSERT_TRUE(prepared);
  EXPECT_EQ(prepared->identity(), identity);
  EXPECT_EQ(prepared->binding_identity(), issuer);
  EXPECT_EQ(prepared->device(), info().device);
  EXPECT_EQ(prepared->authority(), harness_->authority.identity);
  EXPECT_EQ(prepared->provider_context(), harness_->context_registration.identity);
  EXPECT_TRUE(std::move(*prepared).execute().is_complete());
  auto owner_request = std::move(*owner).prepare_release();
  ASSERT_TRUE(owner_request);
  EXPECT_EQ(owner_request->binding_identity(), issuer);
  EXPECT_TRUE(std::move(*owner_request).execute().is_complete());
  EXPECT_TRUE(second->release(*other));
}

TEST_P(Binding, AReusedAddressGetsANewGenerationAndOldMetadataStaysStale) {
  covers("BIND-002", "BIND-014", "BIND-018");
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
  ORTMEM_CTS_ASSERT_REFUSED(binding().with_view(*view, [&](ValidatedMemoryView) { called = true; }),
                            "a view of a released allocation was used",
                            {.kind = BindingError::Kind::kStaleAllocation, .allocation = stale.identity()});
  EXPECT_FALSE(called) << "a stale view reached its callback";
  for (auto& allocation : held) ASSERT_TRUE(binding().release(std::move(allocation)));
}

// BIND-002 across record shards: a registry may hand generations out from
// blocks of serials that each shard reserves, and then a block's end is all
// that keeps one shard's generations apart from the next block's. Threads
// that allocate one after another take shards of their own; each allocates
// past any block of a few hundred, so every block boundary is crossed, and no
// two allocations may carry the same generation.
TEST_P(Binding, GenerationsIssuedOnEveryShardAreNeverIssuedTwice) {
  covers("BIND-002");
  constexpr int kThreads = 3;
  constexpr int kPerThread = 600;
  std::vector<std::uint64_t> serials;
  std::atomic<int> refused{0};
  for (int t = 0; t < kThreads; ++t) {
    std::thread([&] {
      std::vector<BoundAllocation> held;
      for (int i = 0; i < kPerThread; ++i) {
        auto allocation = binding().allocate(32, 16);
        if (!allocation) {
          ++refused;
          continue;
        }
        serials.push_back(allocation->identity().generation.opaque().serial());
        held.push_back(std::move(*allocation));
      }
      for (auto& allocation : held) {
        if (!binding().release(std::move(allocation))) ++refused;
      }
    }).join();
  }
  {
    ORTMEM_CTS_PRECONDITION();
    ASSERT_EQ(refused.load(), 0) << "the adapter's allocator refused or failed small allocations";
  }
  std::sort(serials.begin(), serials.end());
  const auto twice = std::adjacent_find(serials.begin(), serials.end());
  EXPECT_TRUE(twice == serials.end()) << "generation serial " << (twice == serials.end() ? 0 : *twice)
                                      << " was issued to two allocations of " << serials.size();
}

TEST_P(Binding, CrossBindingUseIsBindingMismatchBeforeAnyCallback) {
  covers("BIND-011", "BIND-018");
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
  const ExpectedBindingError mismatch{.kind = BindingError::Kind::kBindingMismatch,
                                      .expected_binding = other->identity().id,
                                      .actual_binding = binding().identity().id};
  ORTMEM_CTS_EXPECT_NAMES(used.error(), mismatch);
  EXPECT_FALSE(called);
  auto released = other->release(*allocation);
  ASSERT_FALSE(released);
  EXPECT_EQ(released.error().error().kind(), BindingError::Kind::kBindingMismatch);
  ORTMEM_CTS_EXPECT_NAMES(released.error().error(), mismatch);
  EXPECT_EQ(harness_->allocator->release_calls.load(), releases) << "a mismatched release reached the allocator";
  ASSERT_TRUE(binding().release(std::move(*allocation)));
}

TEST_P(Binding, ViewsAreValidatedAndBoundsChecked) {
  covers("BIND-012", "BIND-013", "BIND-015", "BIND-018");
  auto allocation = binding().allocate(256, 64);
  ASSERT_TRUE(allocation);
  // (offset, bytes, the end the refusal reports: past SIZE_MAX it says SIZE_MAX)
  for (auto [offset, bytes, end] : {std::tuple<std::size_t, std::size_t, std::size_t>{0, 257, 257},
                                    {200, 57, 257},
                                    {257, 0, 257},
                                    {1, SIZE_MAX, SIZE_MAX},
                                    {2, SIZE_MAX - 1, SIZE_MAX}}) {
    auto view = allocation->view(offset, bytes);
    ASSERT_FALSE(view) << offset << "+" << bytes;
    EXPECT_EQ(view.error().kind(), BindingError::Kind::kViewOutOfBounds);
    ORTMEM_CTS_EXPECT_NAMES(view.error(), {.kind = BindingError::Kind::kViewOutOfBounds,
                                           .allocation_bytes = 256,
                                           .view_offset = offset,
                                           .view_end = end});
  }
  // Ranges that end exactly at the end of the allocation, empty ones included, are inside it.
  for (auto [offset, bytes] : {std::pair<std::size_t, std::size_t>{0, 256}, {256, 0}, {255, 1}, {0, 0}}) {
    EXPECT_TRUE(allocation->view(offset, bytes)) << offset << "+" << bytes << " is inside a 256-byte allocation";
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
  covers("BIND-004", "BIND-018");
  const DeviceKey elsewhere = info().device == DeviceKey::device(7) ? DeviceKey::device(8) : DeviceKey::device(7);
  auto context = *harness_->registry.register_provider_context(elsewhere);
  auto authority = *harness_->registry.register_authority(elsewhere);
  auto mismatch = harness_->registry.register_allocator(context, authority, adapter().make_allocator());
  ASSERT_FALSE(mismatch);
  EXPECT_EQ(mismatch.error().kind(), BindingError::Kind::kDeviceMismatch);
  EXPECT_EQ(mismatch.error().subject(), "allocator");
  EXPECT_EQ(mismatch.error().actual_device(), info().device);
  ORTMEM_CTS_EXPECT_NAMES(mismatch.error(), {.kind = BindingError::Kind::kDeviceMismatch,
                                             .subject = "allocator",
                                             .expected_device = elsewhere,
                                             .actual_device = info().device});
  // An authority of another device than the context's is refused the same way.
  auto here = *harness_->registry.register_provider_context(info().device);
  auto split = harness_->registry.register_allocator(here, authority, adapter().make_allocator());
  ASSERT_FALSE(split) << "a mechanism was registered with an authority of another device";
  EXPECT_EQ(split.error().kind(), BindingError::Kind::kDeviceMismatch);
  EXPECT_EQ(split.error().subject(), "authority");
  ORTMEM_CTS_EXPECT_NAMES(split.error(), {.kind = BindingError::Kind::kDeviceMismatch,
                                          .subject = "authority",
                                          .expected_device = info().device,
                                          .actual_device = elsewhere});
  EXPECT_EQ(harness_->registry.snapshots().size(), 1U) << "a refused registration registered a mechanism";
}

TEST_P(Binding, RefusalsNameTheDeviceAndPassTheMechanismsErrorOn) {
  covers("BIND-018");
  const DeviceKey elsewhere = DeviceKey::device(9);
  const DeviceKey unused = DeviceKey::device(11);
  auto registry = *BindingRegistry::create();
  auto here = *registry.register_provider_context(info().device);
  auto here_authority = *registry.register_authority(info().device);
  ORTMEM_CTS_ASSERT_REFUSED(
      registry.register_allocator(here, here_authority, std::make_shared<ElsewhereAllocator>(elsewhere)),
      "an allocator of another device was registered",
      {.kind = BindingError::Kind::kDeviceMismatch,
       .subject = "allocator",
       .expected_device = info().device,
       .actual_device = elsewhere});
  ORTMEM_CTS_ASSERT_REFUSED(registry.bind(unused), "a device with no mechanism was bound",
                            {.kind = BindingError::Kind::kNoSelectedMechanism, .actual_device = unused});

  auto context = *registry.register_provider_context(elsewhere);
  auto authority = *registry.register_authority(elsewhere);
  ASSERT_TRUE(registry.register_allocator(context, authority, std::make_shared<ElsewhereAllocator>(elsewhere)));
  auto binding = registry.bind(elsewhere);
  ASSERT_TRUE(binding);
  auto refused = binding->allocate(4096, 64);
  ASSERT_FALSE(refused);
  ORTMEM_CTS_CHECKING("BIND-018");
  EXPECT_EQ(refused.error().kind(), BindingError::Kind::kMemory) << refused.error().message();
  ASSERT_TRUE(refused.error().memory_error().has_value());
  EXPECT_EQ(refused.error().memory_error()->reason(), ElsewhereAllocator::kReason);
  ORTMEM_CTS_EXPECT_NAMES(refused.error(), {.kind = BindingError::Kind::kMemory});
  ASSERT_TRUE(registry.invalidate_device(elsewhere, "test: device 9 reset"));
  auto lost = binding->allocate(64, 8);
  ASSERT_FALSE(lost);
  EXPECT_EQ(lost.error().kind(), BindingError::Kind::kDeviceLost);
  ORTMEM_CTS_EXPECT_NAMES(
      lost.error(),
      {.kind = BindingError::Kind::kDeviceLost, .actual_device = elsewhere, .loss_reason = "test: device 9 reset"});
}

TEST_P(Binding, IdentitiesAreNamedApartInMessages) {
  covers("BIND-018");
  // A message names which context it refused only if two contexts print
  // differently, and an identity never issued prints as neither.
  auto first = *harness_->registry.register_provider_context(info().device);
  auto second = *harness_->registry.register_provider_context(info().device);
  EXPECT_NE(to_string(first.identity), to_string(second.identity));
  EXPECT_NE(to_string(first.identity), to_string(ProviderContextIdentity{}));
  auto authority = *harness_->registry.register_authority(info().device);
  EXPECT_NE(to_string(authority.identity), to_string(harness_->authority.identity));
  EXPECT_NE(to_string(authority.identity), to_string(AuthorityIdentity{}));
  auto other = harness_->registry.bind(info().device);
  ASSERT_TRUE(other);
  EXPECT_NE(to_string(other->identity().id), to_string(binding().identity().id));
  EXPECT_NE(to_string(binding().identity().id), to_string(BindingId{}));
  EXPECT_NE(to_string(harness_->mechanism.identity), to_string(MechanismIdentity{}));
}

TEST_P(Binding, RemovedHandlesAreRefusedAsUnregisteredByName) {
  covers("BIND-018");
  auto registry = *BindingRegistry::create();
  auto context = *registry.register_provider_context(info().device);
  auto authority = *registry.register_authority(info().device);
  auto mechanism = *registry.register_allocator(context, authority, adapter().make_allocator());
  ASSERT_TRUE(registry.retire(mechanism));
  ASSERT_TRUE(registry.remove(mechanism));
  const ExpectedBindingError gone{.kind = BindingError::Kind::kUnregisteredMechanism, .mechanism = mechanism.identity};
  ORTMEM_CTS_CHECKING("BIND-018");
  for (const BindingError& error :
       {registry.snapshot(mechanism).error(), registry.select(mechanism).error(), registry.retire(mechanism).error(),
        registry.bind_registered(mechanism).error(), registry.quarantined(mechanism).error()}) {
    EXPECT_EQ(error.kind(), BindingError::Kind::kUnregisteredMechanism) << error.message();
    ORTMEM_CTS_EXPECT_NAMES(error, gone);
  }
  ASSERT_TRUE(registry.remove_provider_context(context));
  ORTMEM_CTS_ASSERT_REFUSED(registry.register_allocator(context, authority, adapter().make_allocator()),
                            "a mechanism was registered against a removed context",
                            {.kind = BindingError::Kind::kUnregisteredProviderContext, .context = context.identity});
  ORTMEM_CTS_ASSERT_REFUSED(registry.confirm_context_terminated(context),
                            "termination of a removed context was confirmed",
                            {.kind = BindingError::Kind::kUnregisteredProviderContext, .context = context.identity});
  auto fresh = *registry.register_provider_context(info().device);
  ASSERT_TRUE(registry.remove_authority(authority));
  ORTMEM_CTS_ASSERT_REFUSED(registry.register_allocator(fresh, authority, adapter().make_allocator()),
                            "a mechanism was registered against a removed authority",
                            {.kind = BindingError::Kind::kUnregisteredAuthority, .authority = authority.identity});
  EXPECT_TRUE(registry.snapshots().empty());
}

TEST_P(Binding, TheFirstMechanismIsSelectedAndLaterOnesOnlyBySelect) {
  covers("BIND-005", "BIND-006", "BIND-008");
  auto later = harness_->registry.register_trusted_composite(harness_->context_registration, harness_->authority,
                                                             adapter().make_allocator());
  ASSERT_TRUE(later);
  EXPECT_EQ(harness_->registry.bind(info().device)->identity().mechanism, harness_->mechanism.identity);
  ASSERT_TRUE(harness_->registry.select(*later));
  EXPECT_EQ(harness_->registry.bind(info().device)->identity().mechanism, later->identity);
  {
    // The coherence by value and by the name reports print.
    ORTMEM_CTS_CHECKING("BIND-008");
    EXPECT_EQ(harness_->registry.snapshot(*later)->coherence, MechanismCoherence::kTrustedComposite);
    EXPECT_EQ(harness_->snapshot().coherence, MechanismCoherence::kSelfContained);
    EXPECT_EQ(coherence_name(harness_->registry.snapshot(*later)->coherence), "trusted-composite");
    EXPECT_EQ(coherence_name(harness_->snapshot().coherence), "self-contained");
  }
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

TEST_P(Binding, CapabilitiesAreOfferedExactlyWhenTheAllocatorHasThem) {
  covers("BIND-016");
  auto allocator = adapter().make_allocator();
  auto vb = binding().virtual_backing();
  auto sm = binding().shared_mapping();
  ASSERT_TRUE(vb && sm);
  EXPECT_EQ(vb->has_value(), allocator->as_virtual_backing() != nullptr)
      << "the binding offers virtual backing exactly when its allocator has it";
  EXPECT_EQ(sm->has_value(), allocator->as_shared_mapping() != nullptr)
      << "the binding offers shared mapping exactly when its allocator has it";
}

TEST_P(Binding, ThousandsOfLiveAllocationsAreEachCountedAndReleasable) {
  covers("BIND-010", "BIND-012");
  // Past the sizes a registry's record table grows in (a few thousand live
  // records from one thread), every record is still found, counted and released.
  constexpr std::size_t kLive = 3000;
  std::vector<BoundAllocation> live;
  live.reserve(kLive);
  for (std::size_t i = 0; i < kLive; ++i) {
    auto allocation = binding().allocate(16, 16);
    ORTMEM_CTS_PRECONDITION();
    ASSERT_TRUE(allocation) << "allocation " << i << ": " << allocation.error().message();
    live.push_back(std::move(*allocation));
  }
  {
    ORTMEM_CTS_CHECKING("BIND-010");
    EXPECT_EQ(harness_->snapshot().live_allocations, kLive);
  }
  for (std::size_t i = 0; i < kLive; i += 97) {
    ORTMEM_CTS_CHECKING("BIND-012");
    auto view = live[i].view(0, 16);
    ASSERT_TRUE(view) << "allocation " << i << " of " << kLive << ": " << view.error().message();
    EXPECT_TRUE(binding().with_view(*view, [](ValidatedMemoryView) {})) << "allocation " << i;
  }
  for (auto& allocation : live) ASSERT_TRUE(binding().release(std::move(allocation)));
  ORTMEM_CTS_CHECKING("BIND-010");
  EXPECT_EQ(harness_->snapshot().live_allocations, 0U);
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
