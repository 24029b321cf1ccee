// Binding use: cross-binding misuse, views, bound capabilities and adoption.
#include "ortmem/binding.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <memory>

#include "ortmem/bound_capability.hpp"
#include "ortmem/owning_allocation.hpp"
#include "ortmem/registry.hpp"
#include "support/binding_fixture.hpp"
#include "support/capability_allocator.hpp"
#include "support/forge.hpp"
#include "support/requirements.hpp"

namespace ortmem {
namespace {

using test_support::BindingTest;
using test_support::CapabilityAllocator;
using test_support::Counts;
using test_support::covers;
using test_support::has_counts;
using test_support::is_kind;
using Kind = BindingError::Kind;

class BindingUseTest : public BindingTest {
 protected:
  void SetUp() override {
    capability_ = std::make_shared<CapabilityAllocator>();
    context_ = *registry_.register_provider_context(DeviceKey::host());
    authority_ = *registry_.register_authority(DeviceKey::host());
    mechanism_ = *registry_.register_allocator(context_, authority_, capability_);
  }
  MemoryBinding bind_capable() { return *registry_.bind_registered(mechanism_); }

  std::shared_ptr<CapabilityAllocator> capability_;
  RegisteredProviderContext context_;
  RegisteredAuthority authority_;
  RegisteredMechanism mechanism_;
};

TEST_F(BindingUseTest, AnotherBindingsAllocationViewOrPrefixIsBindingMismatchBeforeAnyCallback) {
  covers("BIND-011");
  const auto mine = bind_capable();
  const auto theirs = bind_capable();  // the same mechanism, a different binding
  auto allocation = mine.allocate(8192, 64);
  auto their_allocation = theirs.allocate(8192, 64);
  ASSERT_TRUE(allocation && their_allocation);
  auto view = allocation->view(0, 64);
  ASSERT_TRUE(view);
  auto my_vb = *mine.virtual_backing();
  auto their_vb = *theirs.virtual_backing();
  auto my_sm = *mine.shared_mapping();
  auto their_sm = *theirs.shared_mapping();
  ASSERT_TRUE(my_vb && their_vb && my_sm && their_sm);
  auto my_prefix = my_sm->create_shared_prefix(4096);
  ASSERT_TRUE(my_prefix);
  const std::size_t allocator_calls = capability_->allocator_calls();
  const std::size_t capability_calls = capability_->capability_calls();

  auto expect_mismatch = [&](const BindingError& error) {
    EXPECT_TRUE(is_kind(error, Kind::kBindingMismatch));
    EXPECT_EQ(error.expected_binding(), theirs.identity().id);
    EXPECT_EQ(error.actual_binding(), mine.identity().id);
  };
  auto released = theirs.release(*allocation);
  ASSERT_FALSE(released);
  expect_mismatch(released.error().error());
  EXPECT_FALSE(released.error().is_quarantined());
  expect_mismatch(theirs.prepare_release(*allocation).error().error());
  int calls = 0;
  expect_mismatch(theirs.with_view(*view, [&](ValidatedMemoryView) { ++calls; }).error());
  expect_mismatch(their_vb->commit(*allocation, 0, 4096).error());
  expect_mismatch(their_vb->decommit(*allocation, 0, 4096).error());
  expect_mismatch(their_vb->committed_bytes(*allocation).error());
  expect_mismatch(their_sm->incremental_owned_bytes(*my_prefix).error());
  expect_mismatch(their_sm->commit_shared_prefix(*my_prefix, *their_allocation, 0).error());
  // The prefix is mine but the target allocation is theirs.
  auto wrong_target = my_sm->commit_shared_prefix(*my_prefix, *their_allocation, 0);
  ASSERT_FALSE(wrong_target);
  EXPECT_TRUE(is_kind(wrong_target.error(), Kind::kBindingMismatch));
  EXPECT_EQ(wrong_target.error().actual_binding(), theirs.identity().id);

  EXPECT_EQ(calls, 0);
  EXPECT_EQ(capability_->allocator_calls(), allocator_calls) << "a mismatched call reached the allocator";
  EXPECT_EQ(capability_->capability_calls(), capability_calls) << "a mismatched call reached a capability";
  EXPECT_TRUE(has_counts(*registry_.snapshot(mechanism_), Counts{.live = 2}));

  // Through the right binding every one of them works.
  EXPECT_TRUE(my_vb->commit(*allocation, 0, 4096));
  EXPECT_TRUE(my_sm->incremental_owned_bytes(*my_prefix));
  EXPECT_TRUE(my_sm->commit_shared_prefix(*my_prefix, *allocation, 4096));
  EXPECT_TRUE(mine.with_view(*view, [&](ValidatedMemoryView) { ++calls; }));
  EXPECT_EQ(calls, 1);
  EXPECT_TRUE(mine.release(*allocation));
  EXPECT_TRUE(theirs.release(*their_allocation));
}

TEST_F(BindingUseTest, CapabilitiesRefuseAnotherRegistrysAllocationOrPrefixAsForeign) {
  covers("BIND-001", "BIND-016");
  const auto mine = bind_capable();
  auto other_registry = *BindingRegistry::create();
  auto other_capability = std::make_shared<CapabilityAllocator>();
  const auto other_mechanism =
      *other_registry.register_allocator(*other_registry.register_provider_context(DeviceKey::host()),
                                         *other_registry.register_authority(DeviceKey::host()), other_capability);
  const auto foreign_binding = *other_registry.bind_registered(other_mechanism);
  auto foreign = foreign_binding.allocate(8192, 64);
  ASSERT_TRUE(foreign);
  auto foreign_prefix = (*foreign_binding.shared_mapping())->create_shared_prefix(4096);
  ASSERT_TRUE(foreign_prefix);
  auto own = mine.allocate(8192, 64);
  ASSERT_TRUE(own);
  auto vb = *mine.virtual_backing();
  auto sm = *mine.shared_mapping();
  const std::size_t calls = capability_->capability_calls() + other_capability->capability_calls();

  auto commit = vb->commit(*foreign, 0, 4096);
  ASSERT_FALSE(commit);
  EXPECT_TRUE(is_kind(commit.error(), Kind::kForeignRegistry));
  EXPECT_EQ(commit.error().subject(), "allocation");
  EXPECT_TRUE(is_kind(vb->committed_bytes(*foreign).error(), Kind::kForeignRegistry));
  auto priced = sm->incremental_owned_bytes(*foreign_prefix);
  ASSERT_FALSE(priced);
  EXPECT_TRUE(is_kind(priced.error(), Kind::kForeignRegistry));
  EXPECT_EQ(priced.error().subject(), "shared prefix");
  EXPECT_TRUE(is_kind(sm->commit_shared_prefix(*foreign_prefix, *own, 0).error(), Kind::kForeignRegistry));
  EXPECT_EQ(capability_->capability_calls() + other_capability->capability_calls(), calls);
  EXPECT_TRUE(foreign_binding.release(*foreign));
  EXPECT_TRUE(mine.release(*own));
}

TEST_F(BindingUseTest, AViewExposesItsPointerOnlyWhenBindingGenerationAddressSizeAndAlignmentMatch) {
  covers("BIND-012");
  const auto binding = bind_capable();
  auto allocation = binding.allocate(256, 64);
  auto neighbour = binding.allocate(256, 64);
  ASSERT_TRUE(allocation && neighbour);
  auto view = allocation->view(64, 32);
  ASSERT_TRUE(view);

  int calls = 0;
  auto expect_stale = [&](const BoundMemoryView& forged, const char* what) {
    auto result = binding.with_view(forged, [&](ValidatedMemoryView) { ++calls; });
    ASSERT_FALSE(result) << what << " was accepted";
    EXPECT_TRUE(is_kind(result.error(), Kind::kStaleAllocation)) << what;
  };
  // Same binding and generation, but the view lies about the live record.
  expect_stale(test_support::forge::with_ptr(*view, neighbour->data()), "another address");
  expect_stale(test_support::forge::with_size(*view, 512), "another size");
  expect_stale(test_support::forge::with_alignment(*view, 16), "another alignment");
  EXPECT_EQ(calls, 0);

  auto exposed = binding.with_view(*view, [&](ValidatedMemoryView validated) {
    ++calls;
    EXPECT_EQ(validated.data(), static_cast<unsigned char*>(allocation->data()) + 64);
    EXPECT_EQ(validated.size(), 32U);
    std::memset(validated.data(), 0x5A, validated.size());
    return validated.size();
  });
  ASSERT_TRUE(exposed);
  EXPECT_EQ(*exposed, 32U) << "with_view returns what fn returned";
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(static_cast<unsigned char*>(allocation->data())[64], 0x5A);
  EXPECT_EQ(static_cast<unsigned char*>(allocation->data())[95], 0x5A);
  EXPECT_TRUE(binding.release(*allocation));
  EXPECT_TRUE(binding.release(*neighbour));
}

// An error's fields live in one block its copies share; a move shares it
// too, so an error moved into a result still reads whole where it was.
TEST_F(BindingUseTest, AMovedFromRefusalStillReportsEveryFieldOfItsKind) {
  covers("BIND-018");
  const auto m = add();
  const auto binding = bind(m);
  auto allocation = binding.allocate(64, 8);
  ASSERT_TRUE(allocation);
  const BoundAllocation spent = *allocation;
  ASSERT_TRUE(binding.release(*allocation));
  auto stale = spent.view(0, 8);
  ASSERT_FALSE(stale);
  BindingError source = stale.error();
  const std::string message = source.message();
  const BindingError moved = std::move(source);
  for (const BindingError* error : std::initializer_list<const BindingError*>{&moved, &source}) {
    EXPECT_TRUE(is_kind(*error, Kind::kStaleAllocation));
    EXPECT_EQ(error->allocation(), spent.identity());
    EXPECT_EQ(error->message(), message);
  }
  BindingError assigned = BindingError::identity_exhausted();
  assigned = std::move(source);
  EXPECT_EQ(assigned.allocation(), spent.identity());
  EXPECT_TRUE(is_kind(source, Kind::kStaleAllocation)) << "a move-assignment emptied its source";
}

TEST_F(BindingUseTest, WithViewRunsItsCallbackWithNoLockHeld) {
  covers("BIND-013");
  const auto binding = bind_capable();
  auto allocation = binding.allocate(128, 16);
  ASSERT_TRUE(allocation);
  auto view = allocation->view(0, 128);
  ASSERT_TRUE(view);
  bool ran = false;
  test_support::within(test_support::kDeadlockLimit, "re-entering the registry from a with_view callback", [&] {
    auto result = binding.with_view(*view, [&](ValidatedMemoryView) {
      ran = true;
      // Registry lock: registration, selection and binding.
      EXPECT_TRUE(registry_.register_authority(DeviceKey::host()));
      auto other = registry_.bind(DeviceKey::host());
      ASSERT_TRUE(other);
      // Mechanism lock: snapshot, allocation and release through the same mechanism.
      const auto during = *registry_.snapshot(mechanism_);
      EXPECT_GE(during.active_operations, 1U) << "the view callback is an active operation";
      auto nested = other->allocate(64, 8);
      ASSERT_TRUE(nested);
      EXPECT_TRUE(other->release(*nested));
      EXPECT_TRUE(binding.with_view(*view, [](ValidatedMemoryView) {}));
      (void)binding.mechanism_snapshot();
    });
    EXPECT_TRUE(result);
  });
  EXPECT_TRUE(ran);
  EXPECT_TRUE(has_counts(*registry_.snapshot(mechanism_), Counts{.live = 1}));
  EXPECT_TRUE(binding.release(*allocation));
}

TEST_F(BindingUseTest, AStaleOrLostViewNeverReachesItsCallback) {
  covers("BIND-014");
  const auto binding = bind_capable();
  auto released = binding.allocate(64, 8);
  auto lost = binding.allocate(64, 8);
  ASSERT_TRUE(released && lost);
  auto released_view = released->view(0, 64);
  auto lost_view = lost->view(0, 64);
  ASSERT_TRUE(released_view && lost_view);
  ASSERT_TRUE(binding.release(*released));

  int calls = 0;
  auto stale = binding.with_view(*released_view, [&](ValidatedMemoryView) { ++calls; });
  ASSERT_FALSE(stale);
  EXPECT_TRUE(is_kind(stale.error(), Kind::kStaleAllocation));

  ASSERT_TRUE(registry_.invalidate_device(DeviceKey::host(), "ECC error"));
  auto gone = binding.with_view(*lost_view, [&](ValidatedMemoryView) { ++calls; });
  ASSERT_FALSE(gone);
  EXPECT_TRUE(is_kind(gone.error(), Kind::kDeviceLost));
  EXPECT_EQ(gone.error().loss_reason(), "ECC error");

  ASSERT_TRUE(registry_.confirm_context_terminated(context_));
  auto terminated = binding.with_view(*lost_view, [&](ValidatedMemoryView) { ++calls; });
  EXPECT_FALSE(terminated);
  EXPECT_EQ(calls, 0) << "a stale or lost view reached its callback";
}

TEST_F(BindingUseTest, ViewRangesBeyondTheAllocationAreOutOfBounds) {
  covers("BIND-015");
  const auto binding = bind_capable();
  auto allocation = binding.allocate_owning(100, 4);
  ASSERT_TRUE(allocation);
  auto plain = binding.allocate(100, 4);
  ASSERT_TRUE(plain);

  struct Case {
    std::size_t offset, bytes, end;
  };
  for (const Case& c : {Case{0, 101, 101}, Case{90, 11, 101}, Case{101, 0, 101}, Case{200, 1, 201},
                        Case{50, SIZE_MAX, SIZE_MAX}, Case{SIZE_MAX, 2, SIZE_MAX}}) {
    auto bound = plain->view(c.offset, c.bytes);
    ASSERT_FALSE(bound) << c.offset << "+" << c.bytes;
    EXPECT_TRUE(is_kind(bound.error(), Kind::kViewOutOfBounds));
    EXPECT_EQ(bound.error().offset(), c.offset);
    EXPECT_EQ(bound.error().end(), c.end);
    EXPECT_EQ(bound.error().allocation_bytes(), 100U);
    auto owned = allocation->view(c.offset, c.bytes);
    ASSERT_FALSE(owned);
    EXPECT_TRUE(is_kind(owned.error(), Kind::kViewOutOfBounds));
  }
  EXPECT_EQ(allocation->outstanding_views(), 0U) << "a refused view was counted";
  // The edges themselves are inside.
  EXPECT_TRUE(plain->view(0, 100));
  EXPECT_TRUE(plain->view(100, 0));
  EXPECT_TRUE(plain->view(99, 1));
  EXPECT_TRUE(std::move(*allocation).release_now());
  EXPECT_TRUE(binding.release(std::move(*plain)));
}

TEST_F(BindingUseTest, BoundCapabilitiesRevalidateBindingAndGenerationOnEveryCall) {
  covers("BIND-016");
  const auto binding = bind_capable();
  auto vb = *binding.virtual_backing();
  auto sm = *binding.shared_mapping();
  ASSERT_TRUE(vb && sm);
  auto first = binding.allocate(8192, 64);
  ASSERT_TRUE(first);
  const BoundAllocation spent = *first;

  // The same capability handle serves the live allocation...
  const std::size_t before = capability_->capability_calls();
  ASSERT_TRUE(vb->commit(*first, 0, 4096));
  EXPECT_EQ(*vb->committed_bytes(*first), 8192U);
  EXPECT_EQ(capability_->capability_calls(), before + 2);
  ASSERT_TRUE(binding.release(*first));

  // ...and refuses it once released, without asking the capability.
  const std::size_t after_release = capability_->capability_calls();
  EXPECT_TRUE(is_kind(vb->commit(spent, 0, 4096).error(), Kind::kStaleAllocation));
  EXPECT_TRUE(is_kind(vb->decommit(spent, 0, 4096).error(), Kind::kStaleAllocation));
  EXPECT_TRUE(is_kind(vb->committed_bytes(spent).error(), Kind::kStaleAllocation));
  auto prefix = sm->create_shared_prefix(4096);
  ASSERT_TRUE(prefix);
  EXPECT_TRUE(is_kind(sm->commit_shared_prefix(*prefix, spent, 0).error(), Kind::kStaleAllocation));
  // Metadata that lies about its size is refused as well.
  auto second = binding.allocate(8192, 64);
  ASSERT_TRUE(second);
  EXPECT_TRUE(
      is_kind(vb->commit(test_support::forge::with_size(*second, 4096), 0, 4096).error(), Kind::kStaleAllocation));
  EXPECT_EQ(capability_->capability_calls(), after_release + 1) << "only create_shared_prefix may have run";

  // A capability handle obtained before the device was lost re-checks as well.
  ASSERT_TRUE(registry_.invalidate_device(DeviceKey::host(), "gone"));
  const std::size_t after_loss = capability_->capability_calls();
  EXPECT_TRUE(is_kind(vb->commit(*second, 0, 4096).error(), Kind::kDeviceLost));
  EXPECT_TRUE(is_kind(vb->mapped_bytes_for_allocation(4096, 64).error(), Kind::kDeviceLost));
  EXPECT_TRUE(is_kind(sm->incremental_owned_bytes(*prefix).error(), Kind::kDeviceLost));
  EXPECT_TRUE(is_kind(sm->create_shared_prefix(4096).error(), Kind::kDeviceLost));
  EXPECT_EQ(capability_->capability_calls(), after_loss);
}

TEST_F(BindingUseTest, AdoptedMemoryBehavesExactlyLikeABindingIssuedAllocation) {
  covers("BIND-017");
  const auto binding = bind_capable();
  auto vb = *binding.virtual_backing();
  ASSERT_TRUE(vb);
  auto issued = binding.allocate_owning(8192, 64);
  ASSERT_TRUE(issued);

  // Reserved through the capability: adopted under a fresh generation.
  const ByteRange committed[] = {ByteRange{0, 4096}};
  auto reserved = vb->allocate_committed(8192, 64, committed);
  ASSERT_TRUE(reserved) << reserved.error().message();
  // Produced by the mechanism's specialised entry point directly, then adopted.
  auto raw = capability_->raw_reserve(4096, 64);
  ASSERT_TRUE(raw);
  auto adopted = binding.adopt_allocation(*raw, 4096, 64);
  ASSERT_TRUE(adopted);

  EXPECT_NE(reserved->identity().generation, issued->identity().generation);
  EXPECT_NE(adopted->identity().generation, issued->identity().generation);
  EXPECT_NE(adopted->identity().generation, reserved->identity().generation);
  EXPECT_EQ(reserved->identity().binding, binding.identity());
  EXPECT_TRUE(has_counts(*registry_.snapshot(mechanism_), Counts{.live = 3}));
  EXPECT_EQ(*vb->committed_bytes(*reserved), 4096U);

  // Views, view blocking and release work exactly as for an issued allocation.
  auto view = reserved->view(0, 4096);
  ASSERT_TRUE(view);
  EXPECT_TRUE(binding.with_view(*view, [](ValidatedMemoryView v) { std::memset(v.data(), 1, v.size()); }));
  auto blocked = std::move(*reserved).release_now();
  ASSERT_FALSE(blocked);
  EXPECT_TRUE(is_kind(blocked.error().error(), Kind::kOutstandingViews));
  OwningAllocation reserved_owner = std::move(blocked.error()).take_allocation();
  { auto drop = std::move(*view); }

  const std::size_t releases = capability_->release_calls();
  auto released = std::move(reserved_owner).release_now();
  ASSERT_TRUE(released);
  EXPECT_EQ(released->state(), AllocationReleaseState::kReleased);
  EXPECT_EQ(capability_->release_calls(), releases + 1) << "terminal release of adopted memory goes to the allocator";

  // An adopted owner dropped without release is quarantined like any other.
  const AllocationIdentity adopted_identity = adopted->identity();
  { auto drop = std::move(*adopted); }
  auto quarantined = *registry_.quarantined(mechanism_);
  ASSERT_EQ(quarantined.size(), 1U);
  EXPECT_EQ(quarantined.front().identity, adopted_identity);
  EXPECT_EQ(quarantined.front().reason, QuarantineReason::of(QuarantineReason::Kind::kOwnerDropped));
  EXPECT_EQ(capability_->release_calls(), releases + 1);
  EXPECT_TRUE(std::move(*issued).release_now());
  EXPECT_TRUE(has_counts(*registry_.snapshot(mechanism_), Counts{.quarantined = 1, .quarantined_bytes = 4096}));
}

}  // namespace
}  // namespace ortmem
