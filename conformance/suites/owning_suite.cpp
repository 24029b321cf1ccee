// Owning release (OWN, REL), with the adapter's allocator underneath.
#include <atomic>
#include <thread>
#include <type_traits>
#include <vector>

#include "support/binding_error_payload.hpp"
#include "support/registry_harness.hpp"
#include "support/suite.hpp"

namespace ortmem::cts {
namespace {

using Owning = RegistrySuite;

TEST_P(Owning, OwnersAreMoveOnlyAndReleasedExactlyOnce) {
  covers("OWN-001", "OWN-002", "REL-008");
  static_assert(!std::is_copy_constructible_v<OwningAllocation>);
  static_assert(!std::is_copy_assignable_v<OwningAllocation>);
  auto allocation = owner(4096);
  adapter().memory().fill(allocation.data(), 4096, 0x5A);
  auto outcome = std::move(allocation).release_now();
  ASSERT_TRUE(outcome);
  ASSERT_TRUE(outcome->is_complete()) << outcome->describe();
  EXPECT_EQ(outcome->accounting()->allocation_bytes, 4096U);
  EXPECT_FALSE(allocation.owns()) << "a consumed owner still owns";
  EXPECT_EQ(releases(), 1U);
  EXPECT_FALSE(harness_->snapshot().retains_ownership());
}

TEST_P(Owning, DroppingAnOwnerQuarantinesWithoutCallingTheAllocator) {
  covers("OWN-003", "OWN-004", "OWN-008");
  AllocationIdentity identity;
  void* address = nullptr;
  {
    auto allocation = owner(300);
    identity = allocation.identity();
    address = allocation.data();
  }
  EXPECT_EQ(releases(), 0U) << "a destructor called the allocator";
  const MechanismSnapshot snapshot = harness_->snapshot();
  EXPECT_EQ(snapshot.live_allocations, 0U);
  EXPECT_EQ(snapshot.quarantined_allocations, 1U);
  EXPECT_EQ(snapshot.quarantined_bytes, 300U);
  const auto records = binding().quarantined();
  ASSERT_EQ(records.size(), 1U);
  EXPECT_EQ(records[0].identity, identity);
  EXPECT_EQ(records[0].address, reinterpret_cast<std::uintptr_t>(address));
  EXPECT_EQ(records[0].bytes, 300U);
  EXPECT_EQ(records[0].align, 64U);
  EXPECT_EQ(records[0].state, AllocationReleaseState::kQuarantined);
  EXPECT_EQ(records[0].reason.kind, QuarantineReason::Kind::kOwnerDropped);
  EXPECT_EQ(records[0].retained_bytes, 300U);
  // The registry lists the same records by the mechanism's handle.
  auto listed = registry().quarantined(harness_->mechanism);
  ASSERT_TRUE(listed) << listed.error().message();
  ASSERT_EQ(listed->size(), 1U) << "the registry's list disagrees with the binding's";
  EXPECT_EQ((*listed)[0].identity, identity);
  EXPECT_EQ((*listed)[0].retained_bytes, 300U);
}

TEST_P(Owning, AssigningOverAPreparedRequestAbandonsIt) {
  covers("OWN-003", "REL-004");
  auto target = owner(128).prepare_release();
  auto source = owner(256).prepare_release();
  ASSERT_TRUE(target && source);
  const AllocationIdentity abandoned = target->identity();
  const AllocationIdentity moved = source->identity();
  *target = std::move(*source);
  EXPECT_EQ(target->identity(), moved);
  EXPECT_EQ(target->state(), AllocationReleaseState::kQueued);
  {
    ORTMEM_CTS_CHECKING("OWN-003");
    const auto records = binding().quarantined();
    ASSERT_EQ(records.size(), 1U) << "the request assigned over was not quarantined";
    EXPECT_EQ(records[0].identity, abandoned);
    EXPECT_EQ(records[0].reason.kind, QuarantineReason::Kind::kAbandonedRequest);
    EXPECT_EQ(releases(), 0U) << "assigning over a prepared request freed it";
  }
  const AllocationReleaseOutcome outcome = std::move(*target).execute();
  EXPECT_TRUE(outcome.is_complete()) << outcome.describe();
  EXPECT_EQ(releases(), 1U);
  EXPECT_EQ(harness_->snapshot().queued_releases, 0U);
  EXPECT_EQ(harness_->snapshot().quarantined_allocations, 1U) << "the moved-from request settled something";
}

TEST_P(Owning, AnAbandonedPreparedRequestQuarantines) {
  covers("OWN-003", "OWN-004", "REL-004");
  {
    auto prepared = owner(128).prepare_release();
    ASSERT_TRUE(prepared);
    EXPECT_EQ(prepared->state(), AllocationReleaseState::kQueued) << "prepared but not enqueued is already queued";
    EXPECT_EQ(prepared->provider_context(), harness_->context_registration.identity);
    EXPECT_EQ(prepared->authority(), harness_->authority.identity);
    EXPECT_EQ(harness_->snapshot().queued_releases, 1U);
  }
  EXPECT_EQ(releases(), 0U);
  const auto records = binding().quarantined();
  ASSERT_EQ(records.size(), 1U);
  EXPECT_EQ(records[0].reason.kind, QuarantineReason::Kind::kAbandonedRequest);
  EXPECT_EQ(harness_->snapshot().queued_releases, 0U);
}

TEST_P(Owning, ViewsBlockReleaseAndTheOwnerComesBackLive) {
  covers("OWN-005", "OWN-007");
  auto allocation = owner(512);
  const AllocationIdentity identity = allocation.identity();
  auto lent = allocation.view(0, 256);
  ASSERT_TRUE(lent);
  std::optional<OwnedView> view(std::move(*lent));
  std::optional<OwnedView> clone(*view);
  auto refused = std::move(allocation).release_now();
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().error().kind(), BindingError::Kind::kOutstandingViews);
  EXPECT_EQ(refused.error().error().count(), 2U);
  ORTMEM_CTS_EXPECT_NAMES(refused.error().error(),
                          {.kind = BindingError::Kind::kOutstandingViews, .allocation = identity, .count = 2});
  EXPECT_EQ(refused.error().state(), AllocationReleaseState::kLive);
  EXPECT_EQ(releases(), 0U);
  OwningAllocation back = std::move(refused.error()).take_allocation();
  EXPECT_EQ(back.identity(), identity);
  EXPECT_EQ(harness_->snapshot().live_allocations, 1U);
  clone.reset();
  view.reset();
  EXPECT_EQ(back.outstanding_views(), 0U);
  auto outcome = std::move(back).release_now();
  ASSERT_TRUE(outcome);
  EXPECT_TRUE(outcome->is_complete());
}

TEST_P(Owning, EveryCopyMoveAndAssignmentOfAViewKeepsTheCountExact) {
  covers("OWN-005");
  auto allocation = owner(256);
  auto other = owner(64);
  EXPECT_EQ(allocation.outstanding_views(), 0U) << "an owner that never lent a view counts one";
  {
    auto refused = allocation.view(0, 257);
    ASSERT_FALSE(refused) << "an owner lent a view past its end";
    EXPECT_EQ(refused.error().kind(), BindingError::Kind::kViewOutOfBounds);
  }
  auto first = *allocation.view(0, 64);
  auto second = *allocation.view(64, 64);
  EXPECT_EQ(allocation.outstanding_views(), 2U);
  const auto address_of = [&](const OwnedView& view) {
    auto seen = binding().with_view(view, [](ValidatedMemoryView validated) { return validated.data(); });
    return seen ? *seen : nullptr;
  };
  first = second;  // the view it held goes, a copy of the other comes
  EXPECT_EQ(allocation.outstanding_views(), 2U);
  EXPECT_EQ(address_of(first), address_of(second)) << "a copy-assigned view still shows the range it held before";
  OwnedView& same = first;
  first = same;  // assigning a view to itself changes nothing
  EXPECT_EQ(allocation.outstanding_views(), 2U);
  first = std::move(same);
  EXPECT_EQ(allocation.outstanding_views(), 2U);
  OwnedView third(std::move(first));  // moved, not copied: still two
  EXPECT_EQ(allocation.outstanding_views(), 2U);
  OwnedView empty(first);  // a copy of a moved-from view counts nothing
  EXPECT_EQ(allocation.outstanding_views(), 2U);
  OwnedView spare(std::move(third));
  third = std::move(spare);  // a moved-from view assigned by move had nothing to let go: still two
  EXPECT_EQ(allocation.outstanding_views(), 2U);
  second = std::move(third);  // the view second held goes
  EXPECT_EQ(allocation.outstanding_views(), 1U);
  auto elsewhere = *other.view(0, 64);
  second = std::move(elsewhere);  // now a view of the other owner
  EXPECT_EQ(address_of(second), other.data()) << "a move-assigned view still shows the range it held before";
  EXPECT_EQ(allocation.outstanding_views(), 0U);
  EXPECT_EQ(other.outstanding_views(), 1U);
  EXPECT_TRUE(binding().with_view(second, [](ValidatedMemoryView) {})) << "a moved view stopped working";
  auto kept = std::move(other).into_bound();
  ASSERT_FALSE(kept) << "ownership was given up while a view was lent";
  EXPECT_EQ(kept.error().error().kind(), BindingError::Kind::kOutstandingViews);
  EXPECT_EQ(kept.error().error().count(), 1U);
  other = std::move(kept.error()).take_allocation();
  auto outcome = std::move(allocation).release_now();
  ASSERT_TRUE(outcome) << "released views still blocked release: " << outcome.error().error().message();
  EXPECT_TRUE(outcome->is_complete());
  auto refused = std::move(other).release_now();
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().error().count(), 1U);
}

TEST_P(Owning, AssigningOverALiveOwnerAbandonsItAndMovesTheViews) {
  covers("OWN-003", "OWN-005");
  auto target = owner(100);
  const AllocationIdentity abandoned = target.identity();
  auto source = owner(200);
  const AllocationIdentity moved = source.identity();
  auto view = *source.view(0, 200);
  target = std::move(source);
  {
    ORTMEM_CTS_CHECKING("OWN-003");
    EXPECT_FALSE(source.owns());
    ASSERT_TRUE(target.owns());
    EXPECT_EQ(target.identity(), moved);
    const auto records = binding().quarantined();
    ASSERT_EQ(records.size(), 1U) << "the owner assigned over was not quarantined";
    EXPECT_EQ(records[0].identity, abandoned);
    EXPECT_EQ(records[0].reason.kind, QuarantineReason::Kind::kOwnerDropped);
    EXPECT_EQ(releases(), 0U) << "assigning over an owner freed it";
  }
  ORTMEM_CTS_CHECKING("OWN-005");
  EXPECT_EQ(target.outstanding_views(), 1U) << "the views did not move with the allocation";
  auto blocked = std::move(target).release_now();
  ASSERT_FALSE(blocked) << "a view lent before the move did not block the release";
  target = std::move(blocked.error()).take_allocation();
  { auto gone = std::move(view); }
  auto outcome = std::move(target).release_now();
  ASSERT_TRUE(outcome);
  EXPECT_EQ(releases(), 1U);
}

TEST_P(Owning, AViewThatOutlivesItsOwnerIsStale) {
  covers("OWN-006");
  std::optional<OwnedView> survivor;
  {
    auto allocation = owner(64);
    auto view = allocation.view(0, 64);
    ASSERT_TRUE(view);
    survivor.emplace(std::move(*view));
  }
  bool called = false;
  auto used = binding().with_view(*survivor, [&](ValidatedMemoryView) { called = true; });
  ASSERT_FALSE(used);
  EXPECT_EQ(used.error().kind(), BindingError::Kind::kStaleAllocation);
  EXPECT_FALSE(called);
}

TEST_P(Owning, PrepareMatchesBindingAndGenerationExactlyOnce) {
  covers("REL-002", "REL-003", "REL-012");
  auto allocation = binding().allocate(96, 32);
  ASSERT_TRUE(allocation);
  const BoundAllocation copy = *allocation;
  auto first = binding().prepare_release(std::move(*allocation));
  ASSERT_TRUE(first);
  auto second = binding().prepare_release(copy);
  ASSERT_FALSE(second) << "the same allocation was prepared twice";
  EXPECT_EQ(second.error().error().kind(), BindingError::Kind::kStaleAllocation);
  EXPECT_FALSE(second.error().is_quarantined());
  EXPECT_TRUE(std::move(*first).execute().is_complete());
  EXPECT_EQ(releases(), 1U);
  auto again = binding().release(copy);
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error().error().kind(), BindingError::Kind::kStaleAllocation);
  EXPECT_EQ(releases(), 1U) << "released metadata reached the allocator again";
}

TEST_P(Owning, ExecuteAfterDeviceLossQuarantinesWithoutTheAllocator) {
  covers("REL-006", "REL-010", "TEAR-004");
  auto prepared = owner(640).prepare_release();
  ASSERT_TRUE(prepared);
  ASSERT_TRUE(harness_->registry.invalidate_device(info().device, "test: lost"));
  const auto outcome = std::move(*prepared).execute();
  EXPECT_FALSE(outcome.is_failed()) << "execute returned Failed";
  ASSERT_TRUE(outcome.is_quarantined());
  EXPECT_EQ(outcome.state(), AllocationReleaseState::kDeviceLost);
  EXPECT_EQ(outcome.residual()->reason.kind, QuarantineReason::Kind::kDeviceLost);
  EXPECT_EQ(outcome.residual()->retained_bytes, 640U);
  EXPECT_EQ(releases(), 0U);
  auto refused = binding().allocate_owning(64, 8);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().kind(), BindingError::Kind::kDeviceLost);
  EXPECT_NE(refused.error().message().find("test: lost"), std::string::npos);
  ORTMEM_CTS_EXPECT_NAMES(
      refused.error(),
      {.kind = BindingError::Kind::kDeviceLost, .actual_device = info().device, .loss_reason = "test: lost"});
  // The device was lost once, by the first invalidation: a later one changes nothing, its reason included.
  ASSERT_TRUE(harness_->registry.invalidate_device(info().device, "test: lost again"));
  auto again = binding().allocate_owning(64, 8);
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error().loss_reason(), "test: lost") << "a second invalidation rewrote why the device was lost";
}

TEST_P(Owning, DeviceLossBeforePrepareHandsTheOwnerBack) {
  covers("OWN-007", "TEAR-004");
  auto allocation = owner(64);
  ASSERT_TRUE(harness_->registry.invalidate_device(info().device, "lost"));
  auto refused = std::move(allocation).release_now();
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().error().kind(), BindingError::Kind::kDeviceLost);
  ORTMEM_CTS_EXPECT_NAMES(
      refused.error().error(),
      {.kind = BindingError::Kind::kDeviceLost, .actual_device = info().device, .loss_reason = "lost"});
  EXPECT_TRUE(refused.error().allocation().owns());
  // Prepare is refused the same way, and hands the same owner back still owning.
  auto prepared = std::move(refused.error()).take_allocation().prepare_release();
  ASSERT_FALSE(prepared) << "a release was prepared on a lost device";
  EXPECT_EQ(prepared.error().error().kind(), BindingError::Kind::kDeviceLost);
  EXPECT_TRUE(prepared.error().allocation().owns()) << "a refused prepare left the owner owning nothing";
  EXPECT_EQ(releases(), 0U);
  EXPECT_EQ(harness_->snapshot().live_allocations, 1U);
}

TEST_P(Owning, RacingReleasesFreeEachAllocationExactlyOnce) {
  covers("REL-014", "LOCK-005");
  constexpr int kAllocations = 64;
  constexpr int kThreads = 4;
  constexpr int kRounds = 8;
  // Rounds of threads released together by a start barrier: without it the
  // first thread can finish before the next starts, and nothing races.
  for (int round = 0; round < kRounds; ++round) {
    std::vector<BoundAllocation> allocations;
    for (int i = 0; i < kAllocations; ++i) allocations.push_back(*binding().allocate(32, 16));
    const std::size_t released_before = releases();
    std::atomic<int> succeeded{0};
    std::atomic<int> ready{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&] {
        ready.fetch_add(1);
        while (ready.load() < kThreads) std::this_thread::yield();
        for (const BoundAllocation& allocation : allocations) {
          if (binding().release(allocation)) ++succeeded;
        }
      });
    }
    for (auto& thread : threads) thread.join();
    EXPECT_EQ(succeeded.load(), kAllocations) << "round " << round;
    EXPECT_EQ(releases() - released_before, static_cast<std::size_t>(kAllocations))
        << "round " << round << ": an allocation was released twice";
  }
  EXPECT_FALSE(harness_->snapshot().retains_ownership());
}

TEST_P(Owning, QuarantineIsClearedOnlyByConfirmedTermination) {
  covers("OWN-009", "TEAR-011", "TEAR-014", "TEAR-016");
  { auto dropped = owner(100); }
  auto live = binding().allocate(50, 8);
  ASSERT_TRUE(live);
  ASSERT_TRUE(harness_->registry.retire(harness_->mechanism));
  auto removed = harness_->registry.remove(harness_->mechanism);
  ASSERT_FALSE(removed);
  EXPECT_EQ(removed.error().kind(), BindingError::Kind::kQuarantinedOwnership) << "quarantine must be reported first";
  EXPECT_EQ(removed.error().count(), 1U);
  ORTMEM_CTS_EXPECT_NAMES(
      removed.error(),
      {.kind = BindingError::Kind::kQuarantinedOwnership, .mechanism = harness_->mechanism.identity, .count = 1});
  ASSERT_TRUE(harness_->registry.invalidate_device(info().device, "gone"));
  ASSERT_TRUE(harness_->registry.confirm_context_terminated(harness_->context_registration));
  const MechanismSnapshot snapshot = harness_->snapshot();
  EXPECT_EQ(snapshot.lifecycle, MechanismLifecycle::kTerminated);
  EXPECT_EQ(snapshot.quarantined_allocations, 0U);
  EXPECT_EQ(snapshot.live_allocations, 0U);
  EXPECT_TRUE(binding().quarantined().empty()) << "the snapshot was cleared but the list still names the records";
  EXPECT_EQ(releases(), 0U) << "termination called the allocator";
  EXPECT_TRUE(harness_->registry.remove(harness_->mechanism));
}

ORTMEM_CTS_INSTANTIATE(Owning);

}  // namespace
}  // namespace ortmem::cts
