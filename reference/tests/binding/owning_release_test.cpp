// Owning allocations and release execution: prepare, execute, abandonment, views.
#include "ortmem/owning_allocation.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <future>
#include <memory>
#include <type_traits>
#include <utility>

#include "ortmem/deferred.hpp"
#include "ortmem/mechanism/fenced_deferred_queue.hpp"
#include "ortmem/mechanism/host_stream.hpp"
#include "ortmem/mechanism/provider_context.hpp"
#include "ortmem/registry.hpp"
#include "support/binding_fixture.hpp"
#include "support/failing_new.hpp"
#include "support/forge.hpp"
#include "support/requirements.hpp"
#include "support/test_queue.hpp"

namespace ortmem {
namespace {

using test_support::BindingTest;
using test_support::CountingAllocator;
using test_support::Counts;
using test_support::covers;
using test_support::has_counts;
using test_support::is_kind;
using Kind = BindingError::Kind;
using State = AllocationReleaseState;
using Reason = QuarantineReason::Kind;
using ReleaseMode = CountingAllocator::ReleaseMode;

using OwningReleaseTest = BindingTest;

std::uintptr_t address_of(const void* ptr) { return reinterpret_cast<std::uintptr_t>(ptr); }

// The consuming calls exist only on an rvalue owner.
template <class T>
concept ReleasableAsLvalue = requires(T& owner) {
  owner.release_now();
}
|| requires(T& owner) { owner.prepare_release(); }
|| requires(T& owner, DeferredReleaseQueue& queue) { owner.release_deferred(queue); };
template <class T>
concept ExecutableAsLvalue = requires(T& request) {
  request.execute();
};

// OWN-005 counts views; it holds only if no uncounted view of an owned
// allocation can be had. An owner used to lend its plain metadata (bound(),
// whose view() counts nothing) and a counted view its inner BoundMemoryView
// (a copy of which counts nothing): both must stay impossible.
template <class T>
concept LendsPlainMetadata = requires(const T& owner) {
  owner.bound();
};
template <class T>
concept LendsUncountedView = requires(const T& view) {
  BoundMemoryView(view.view());
};
static_assert(!LendsPlainMetadata<OwningAllocation>, "an owner must not lend uncounted metadata (OWN-005)");
static_assert(!LendsUncountedView<OwnedView>, "a counted view must not yield an uncounted copy (OWN-005)");

TEST_F(OwningReleaseTest, OwnersMoveButNeverCopy) {
  covers("OWN-001");
  static_assert(!std::is_copy_constructible_v<OwningAllocation>);
  static_assert(!std::is_copy_assignable_v<OwningAllocation>);
  static_assert(std::is_nothrow_move_constructible_v<OwningAllocation>);
  static_assert(std::is_nothrow_move_assignable_v<OwningAllocation>);
  static_assert(!std::is_copy_constructible_v<PreparedAllocationRelease>);
  static_assert(!std::is_copy_assignable_v<PreparedAllocationRelease>);

  const auto m = add();
  const auto binding = bind(m);
  auto owner = binding.allocate_owning(64, 8);
  ASSERT_TRUE(owner);
  const AllocationIdentity identity = owner->identity();
  OwningAllocation moved = std::move(*owner);
  EXPECT_FALSE(owner->owns()) << "the source of a move must own nothing";
  EXPECT_TRUE(moved.owns());
  EXPECT_EQ(moved.identity(), identity);
  owner = binding.allocate_owning(8, 8);  // destroys nothing that was owned: the old value was moved from
  EXPECT_TRUE(has_counts(snapshot(m), Counts{.live = 2}));
  ASSERT_TRUE(std::move(moved).release_now());
  ASSERT_TRUE(std::move(*owner).release_now());
  EXPECT_TRUE(has_counts(snapshot(m), Counts{}));
  EXPECT_EQ(m.allocator->release_calls(), 2U);
}

// A handle keeps only its binding id and generations, and reads the rest of
// its identity from the mechanism it pins: that identity must still be the
// binding's, field for field, and a handle that gave its pin up must not
// read a mechanism it no longer keeps alive.
TEST_F(OwningReleaseTest, AnOwnersIdentityIsItsBindingsUntilItGivesItsPinUp) {
  covers("OWN-001");
  const auto m = add();
  const auto binding = bind(m);
  auto owner = binding.allocate_owning(64, 8);
  ASSERT_TRUE(owner);
  const AllocationIdentity identity = owner->identity();
  // Against what was registered, not only against the binding (whose identity the mechanism also makes).
  EXPECT_EQ(identity.binding.device, DeviceKey::host());
  EXPECT_EQ(identity.binding.mechanism, m.mechanism.identity);
  EXPECT_EQ(identity.binding.provider_context, m.context.identity);
  EXPECT_EQ(identity.binding.authority, m.authority.identity);
  EXPECT_EQ(identity.binding, binding.identity());
  EXPECT_TRUE(identity.generation.is_issued());
  EXPECT_EQ(owner->binding().identity(), binding.identity());
  auto second = binding.allocate_owning(64, 8);
  ASSERT_TRUE(second);
  EXPECT_NE(second->identity().generation, identity.generation);
  {
    auto view = owner->view(0, 8);  // dropped at the brace: a release is refused while a view lives
    ASSERT_TRUE(view);
    EXPECT_EQ(view->allocation_identity(), identity);
  }

  OwningAllocation moved = std::move(*owner);
  EXPECT_EQ(owner->identity(), AllocationIdentity{}) << "a moved-from owner still names the allocation";
  EXPECT_EQ(moved.identity(), identity);
  auto prepared = std::move(moved).prepare_release();
  ASSERT_TRUE(prepared);
  EXPECT_EQ(prepared->identity(), identity);
  EXPECT_EQ(prepared->binding_identity(), binding.identity());
  EXPECT_EQ(prepared->provider_context(), binding.identity().provider_context);
  EXPECT_EQ(prepared->authority(), binding.identity().authority);
  EXPECT_EQ(prepared->device(), binding.identity().device);
  EXPECT_EQ(moved.identity(), AllocationIdentity{}) << "an owner whose request took its pin still names the allocation";
  EXPECT_TRUE(std::move(*prepared).execute().is_complete());
  ASSERT_TRUE(std::move(*second).release_now());
  EXPECT_EQ(second->identity(), AllocationIdentity{}) << "a released owner still names the allocation";
}

TEST_F(OwningReleaseTest, AnOwnerEndsThroughExactlyOneConsumingRelease) {
  covers("OWN-002");
  static_assert(!ReleasableAsLvalue<OwningAllocation>, "a release must consume the owner");
  static_assert(!ExecutableAsLvalue<PreparedAllocationRelease>, "execute must consume the request");

  const auto m = add();
  const auto binding = bind(m);
  auto owner = binding.allocate_owning(64, 8);
  ASSERT_TRUE(owner);
  auto view = owner->view(0, 8);
  ASSERT_TRUE(view);
  // Refused before anything changed: the same owner comes back and can try again.
  auto refused = std::move(*owner).release_now();
  ASSERT_FALSE(refused);
  EXPECT_FALSE(owner->owns()) << "the call consumed the owner even though it handed it back";
  OwningAllocation back = std::move(refused.error()).take_allocation();
  { auto drop = std::move(*view); }
  auto outcome = std::move(back).release_now();
  ASSERT_TRUE(outcome);
  EXPECT_EQ(outcome->state(), State::kReleased);
  EXPECT_FALSE(back.owns());
  EXPECT_EQ(m.allocator->release_calls(), 1U);
  // The consumed owners' destructors change nothing.
  { auto consumed = std::move(back); }
  EXPECT_TRUE(has_counts(snapshot(m), Counts{}));
  EXPECT_EQ(m.allocator->release_calls(), 1U);
}

TEST_F(OwningReleaseTest, DroppingAnOwnerQuarantinesItWithoutCallingTheAllocator) {
  covers("OWN-003", "OWN-004", "OWN-008");
  const auto m = add();
  const auto binding = bind(m);
  AllocationIdentity identity;
  std::uintptr_t address = 0;
  {
    auto owner = binding.allocate_owning(100, 64);
    ASSERT_TRUE(owner);
    identity = owner->identity();
    address = address_of(owner->data());
  }
  EXPECT_EQ(m.allocator->release_calls() + m.allocator->deallocate_calls(), 0U) << "a destructor freed memory";
  EXPECT_TRUE(has_counts(snapshot(m), Counts{.quarantined = 1, .quarantined_bytes = 100}));
  const auto quarantined = *registry_.quarantined(m.mechanism);
  ASSERT_EQ(quarantined.size(), 1U);
  const QuarantinedAllocation& record = quarantined.front();
  EXPECT_EQ(record.identity, identity);
  EXPECT_EQ(record.address, address);
  EXPECT_EQ(record.bytes, 100U);
  EXPECT_EQ(record.align, 64U);
  EXPECT_EQ(record.state, State::kQuarantined);
  EXPECT_EQ(record.reason, QuarantineReason::of(Reason::kOwnerDropped));
  EXPECT_EQ(reason_name(record.reason), "owner-dropped");
  EXPECT_EQ(record.retained_bytes, 100U);
  EXPECT_EQ(binding.quarantined(), quarantined);

  // Assigning over a live owner abandons it the same way.
  auto first = binding.allocate_owning(10, 8);
  auto second = binding.allocate_owning(20, 8);
  ASSERT_TRUE(first && second);
  const AllocationIdentity overwritten = first->identity();
  *first = std::move(*second);
  EXPECT_TRUE(has_counts(snapshot(m), Counts{.live = 1, .quarantined = 2, .quarantined_bytes = 110}));
  const auto after = *registry_.quarantined(m.mechanism);
  EXPECT_EQ(std::count_if(after.begin(), after.end(), [&](const auto& r) { return r.identity == overwritten; }), 1);
  EXPECT_EQ(m.allocator->release_calls(), 0U);
}

TEST_F(OwningReleaseTest, DroppingAPreparedRequestQuarantinesItAsAbandoned) {
  covers("OWN-003", "OWN-004", "REL-004");
  const auto m = add();
  const auto binding = bind(m);
  auto owner = binding.allocate_owning(48, 16);
  ASSERT_TRUE(owner);
  const AllocationIdentity identity = owner->identity();
  {
    auto prepared = std::move(*owner).prepare_release();
    ASSERT_TRUE(prepared);
    EXPECT_EQ(prepared->state(), State::kQueued) << "a prepared request is queued before any queue saw it";
    EXPECT_TRUE(prepared->is_armed());
    EXPECT_EQ(prepared->identity(), identity);
    EXPECT_TRUE(has_counts(snapshot(m), Counts{.active = 1, .queued = 1}));
    EXPECT_TRUE(snapshot(m).retains_ownership());
    // Moving the request moves the one claim; the moved-from shell owns nothing.
    PreparedAllocationRelease moved = std::move(*prepared);
    EXPECT_FALSE(prepared->is_armed());
    EXPECT_EQ(moved.identity(), identity);
    // Reading a shell is outside the contract (the accessors require a request
    // not moved from), but it names nothing rather than reading a mechanism it no longer pins.
    EXPECT_EQ(prepared->identity(), AllocationIdentity{});
    EXPECT_EQ(prepared->binding_identity(), BindingIdentity{});
    EXPECT_EQ(prepared->device(), DeviceKey{});
    EXPECT_EQ(prepared->authority(), AuthorityIdentity{});
    EXPECT_EQ(prepared->provider_context(), ProviderContextIdentity{});
    EXPECT_TRUE(has_counts(snapshot(m), Counts{.active = 1, .queued = 1}));
  }
  EXPECT_EQ(m.allocator->release_calls(), 0U);
  EXPECT_TRUE(has_counts(snapshot(m), Counts{.quarantined = 1, .quarantined_bytes = 48}));
  const auto quarantined = *registry_.quarantined(m.mechanism);
  ASSERT_EQ(quarantined.size(), 1U);
  EXPECT_EQ(quarantined.front().identity, identity);
  EXPECT_EQ(quarantined.front().reason, QuarantineReason::of(Reason::kAbandonedRequest));
  EXPECT_EQ(quarantined.front().state, State::kQuarantined);
}

TEST_F(OwningReleaseTest, DroppingAnEnqueueErrorQuarantinesItsRequestAsAbandoned) {
  covers("OWN-003", "OWN-004");
  const auto m = add();
  const auto binding = bind(m);
  auto context = std::make_shared<mechanism::ProviderContext>(m.context.identity);
  mechanism::FencedDeferredQueue inner(context, std::make_shared<mechanism::HostStream>());
  test_support::RecordingQueue queue(inner);
  inner.close();

  auto owner = binding.allocate_owning(72, 8);
  ASSERT_TRUE(owner);
  const AllocationIdentity identity = owner->identity();
  auto prepared = std::move(*owner).prepare_release();
  ASSERT_TRUE(prepared);
  auto pin = queue.pin_context();
  ASSERT_TRUE(pin);
  {
    auto refused = queue.enqueue(std::move(*prepared), std::move(*pin));
    ASSERT_FALSE(refused);
    EXPECT_EQ(refused.error().rejection(), DeferredEnqueueRejection::kClosed);
    EXPECT_EQ(refused.error().request().identity(), identity);
    EXPECT_TRUE(has_counts(snapshot(m), Counts{.active = 1, .queued = 1}));
  }  // the error goes without anyone taking the request back
  EXPECT_EQ(queue.enqueue_calls(), 1U) << "a destructor enqueued";
  EXPECT_EQ(m.allocator->release_calls(), 0U);
  EXPECT_EQ(context->outstanding_pins(), 0U);
  EXPECT_TRUE(has_counts(snapshot(m), Counts{.quarantined = 1, .quarantined_bytes = 72}));
  const auto quarantined = *registry_.quarantined(m.mechanism);
  ASSERT_EQ(quarantined.size(), 1U);
  EXPECT_EQ(quarantined.front().identity, identity);
  EXPECT_EQ(quarantined.front().reason, QuarantineReason::of(Reason::kAbandonedRequest));
}

TEST_F(OwningReleaseTest, DestructorsNeitherCallAWedgedAllocatorNorWait) {
  covers("OWN-004");
  const auto m = add();
  const auto binding = bind(m);
  auto context = std::make_shared<mechanism::ProviderContext>(m.context.identity);
  mechanism::FencedDeferredQueue inner(context, std::make_shared<mechanism::HostStream>(), {.capacity = 0});
  test_support::RecordingQueue queue(inner);
  auto owner = binding.allocate_owning(16, 8);
  auto for_request = binding.allocate_owning(16, 8);
  auto for_error = binding.allocate_owning(16, 8);
  ASSERT_TRUE(owner && for_request && for_error);
  auto request = std::move(*for_request).prepare_release();
  auto error_request = std::move(*for_error).prepare_release();
  ASSERT_TRUE(request && error_request);
  auto refused = queue.enqueue(std::move(*error_request), *queue.pin_context());
  ASSERT_FALSE(refused);

  // Any release call would now block until the end of the test.
  std::promise<void> never;
  auto blocked = never.get_future().share();
  m.allocator->on_next_release([blocked] { blocked.wait(); });
  const std::size_t enqueues = queue.enqueue_calls();
  test_support::within(test_support::kDeadlockLimit, "destroying an owner, a prepared request and an enqueue error",
                       [&] {
                         { auto drop = std::move(*owner); }
                         { auto drop = std::move(*request); }
                         { auto drop = std::move(refused.error()); }
                       });
  EXPECT_EQ(m.allocator->release_calls() + m.allocator->deallocate_calls(), 0U);
  EXPECT_EQ(queue.enqueue_calls(), enqueues);
  EXPECT_EQ(inner.pending(), 0U);
  EXPECT_TRUE(has_counts(snapshot(m), Counts{.quarantined = 3, .quarantined_bytes = 48}));
  never.set_value();
  m.allocator->on_next_release(nullptr);
}

TEST_F(OwningReleaseTest, LiveViewsBlockReleaseAndTheOwnerComesBackUntouched) {
  covers("OWN-005", "OWN-007");
  const auto m = add();
  const auto binding = bind(m);
  auto context = std::make_shared<mechanism::ProviderContext>(m.context.identity);
  mechanism::FencedDeferredQueue queue(context, std::make_shared<mechanism::HostStream>());
  auto created = binding.allocate_owning(256, 32);
  ASSERT_TRUE(created);
  const AllocationIdentity identity = created->identity();
  void* const data = created->data();
  OwningAllocation owner = std::move(*created);

  auto view = owner.view(0, 128);
  ASSERT_TRUE(view);
  std::optional<OwnedView> clone = *view;  // a clone counts as a view of its own
  EXPECT_EQ(owner.outstanding_views(), 2U);

  auto expect_handed_back = [&](auto result, std::size_t views) {
    ASSERT_FALSE(result);
    EXPECT_TRUE(is_kind(result.error().error(), Kind::kOutstandingViews));
    EXPECT_EQ(result.error().error().count(), views);
    EXPECT_EQ(result.error().error().allocation(), identity);
    EXPECT_EQ(result.error().state(), State::kLive);
    owner = std::move(result.error()).take_allocation();
    EXPECT_TRUE(owner.owns());
    EXPECT_EQ(owner.identity(), identity);
    EXPECT_EQ(owner.data(), data);
    EXPECT_EQ(owner.state(), State::kLive);
    EXPECT_EQ(owner.outstanding_views(), views) << "the views must still count against the owner handed back";
  };
  expect_handed_back(std::move(owner).release_now(), 2);
  expect_handed_back(std::move(owner).prepare_release(), 2);
  expect_handed_back(std::move(owner).release_deferred(queue), 2);
  expect_handed_back(std::move(owner).into_bound(), 2);
  EXPECT_EQ(context->outstanding_pins(), 0U) << "a refused deferred release kept a pin";
  EXPECT_EQ(queue.pending(), 0U);
  EXPECT_EQ(m.allocator->release_calls(), 0U);
  EXPECT_TRUE(has_counts(snapshot(m), Counts{.live = 1}));

  clone.reset();
  expect_handed_back(std::move(owner).release_now(), 1);
  // The remaining view still reads the live bytes.
  EXPECT_TRUE(binding.with_view(*view, [&](ValidatedMemoryView v) { EXPECT_EQ(v.data(), data); }));
  { auto drop = std::move(*view); }
  EXPECT_EQ(owner.outstanding_views(), 0U);
  auto released = std::move(owner).release_now();
  ASSERT_TRUE(released);
  EXPECT_EQ(released->state(), State::kReleased);
  EXPECT_EQ(m.allocator->release_calls(), 1U);
}

TEST_F(OwningReleaseTest, AViewThatOutlivesItsOwnerIsStale) {
  covers("OWN-006");
  const auto m = add();
  const auto binding = bind(m);
  std::optional<OwnedView> survivor;
  {
    auto owner = binding.allocate_owning(64, 8);
    ASSERT_TRUE(owner);
    auto view = owner->view(8, 8);
    ASSERT_TRUE(view);
    survivor = *view;
  }  // the owner is dropped (quarantined) while a view is still alive
  int calls = 0;
  auto used = binding.with_view(*survivor, [&](ValidatedMemoryView) { ++calls; });
  ASSERT_FALSE(used);
  EXPECT_TRUE(is_kind(used.error(), Kind::kStaleAllocation));
  EXPECT_EQ(calls, 0);
  EXPECT_TRUE(has_counts(snapshot(m), Counts{.quarantined = 1, .quarantined_bytes = 64}));
  EXPECT_EQ(m.allocator->release_calls(), 0U);
}

TEST_F(OwningReleaseTest, ADeviceLossBeforePrepareHandsTheOwnerBackUnchanged) {
  covers("OWN-007");
  const auto m = add();
  const auto binding = bind(m);
  auto owner = binding.allocate_owning(128, 16);
  ASSERT_TRUE(owner);
  const AllocationIdentity identity = owner->identity();
  ASSERT_TRUE(registry_.invalidate_device(DeviceKey::host(), "Xid 79: fell off the bus"));
  const auto before = snapshot(m);

  auto refused = std::move(*owner).release_now();
  ASSERT_FALSE(refused);
  EXPECT_TRUE(is_kind(refused.error().error(), Kind::kDeviceLost));
  EXPECT_EQ(refused.error().error().loss_reason(), "Xid 79: fell off the bus");
  EXPECT_EQ(refused.error().state(), State::kLive);
  OwningAllocation back = std::move(refused.error()).take_allocation();
  EXPECT_EQ(back.identity(), identity);
  EXPECT_EQ(back.size(), 128U);
  EXPECT_EQ(back.alignment(), 16U);
  EXPECT_EQ(snapshot(m), before) << "a refused release changed a record or count";
  EXPECT_EQ(m.allocator->release_calls(), 0U);
  auto prepared = std::move(back).prepare_release();
  ASSERT_FALSE(prepared);
  EXPECT_TRUE(is_kind(prepared.error().error(), Kind::kDeviceLost));
  EXPECT_EQ(prepared.error().allocation().identity(), identity);
  EXPECT_EQ(snapshot(m), before);
}

TEST_F(OwningReleaseTest, QuarantinedAllocationsAreListedWithEveryFieldAndAgreeWithTheSnapshot) {
  covers("OWN-008", "REL-009");
  const auto m = add();
  const auto binding = bind(m);
  { auto dropped = binding.allocate_owning(10, 2); }
  {
    auto owner = binding.allocate_owning(20, 4);
    auto prepared = std::move(*owner).prepare_release();
  }
  m.allocator->set_release_mode(ReleaseMode::kFail);
  auto refused = binding.allocate_owning(30, 8);
  ASSERT_TRUE(refused);
  const auto refused_identity = refused->identity();
  ASSERT_TRUE(std::move(*refused).release_now());
  m.allocator->set_release_mode(ReleaseMode::kQuarantine, State::kPartiallyUnmapped);
  auto partial = binding.allocate_owning(40, 16);
  ASSERT_TRUE(partial);
  const auto partial_identity = partial->identity();
  const auto partial_address = address_of(partial->data());
  ASSERT_TRUE(std::move(*partial).release_now());

  auto list = *registry_.quarantined(m.mechanism);
  ASSERT_EQ(list.size(), 4U);
  std::uint64_t retained = 0;
  for (const auto& record : list) retained += record.retained_bytes;
  const auto snap = snapshot(m);
  EXPECT_EQ(snap.quarantined_allocations, list.size());
  EXPECT_EQ(snap.quarantined_bytes, retained);
  EXPECT_EQ(retained, 10U + 20U + 30U + 20U) << "the partial release retained half of its 40 bytes";

  const auto find = [&](const AllocationIdentity& identity) {
    return *std::find_if(list.begin(), list.end(), [&](const auto& r) { return r.identity == identity; });
  };
  const auto refused_record = find(refused_identity);
  EXPECT_EQ(refused_record.reason, QuarantineReason::of(Reason::kAllocatorRefused));
  EXPECT_EQ(refused_record.state, State::kQuarantined);
  EXPECT_EQ(refused_record.bytes, 30U);
  EXPECT_EQ(refused_record.align, 8U);
  const auto partial_record = find(partial_identity);
  EXPECT_EQ(partial_record.state, State::kPartiallyUnmapped);
  EXPECT_EQ(partial_record.reason, QuarantineReason::of(Reason::kPartialRelease));
  EXPECT_EQ(partial_record.retained_bytes, 20U);
  EXPECT_EQ(partial_record.address, partial_address);
  EXPECT_EQ(partial_record.bytes, 40U);
  EXPECT_EQ(partial_record.align, 16U);
}

TEST_F(OwningReleaseTest, OnlyConfirmedTerminationClearsQuarantine) {
  covers("OWN-009");
  const auto m = add();
  const auto binding = bind(m);
  { auto dropped = binding.allocate_owning(64, 8); }
  const auto expect_still_quarantined = [&](const char* after) {
    EXPECT_EQ(snapshot(m).quarantined_allocations, 1U) << after;
    EXPECT_EQ(registry_.quarantined(m.mechanism)->size(), 1U) << after;
    auto removed = registry_.remove(m.mechanism);
    ASSERT_FALSE(removed) << after;
    EXPECT_TRUE(is_kind(removed.error(), Kind::kQuarantinedOwnership)) << after;
  };
  expect_still_quarantined("nothing");
  ASSERT_TRUE(std::move(*binding.allocate_owning(8, 8)).release_now());
  expect_still_quarantined("another release");
  ASSERT_TRUE(registry_.retire(m.mechanism));
  expect_still_quarantined("retire");
  ASSERT_TRUE(registry_.invalidate_device(DeviceKey::host(), "lost"));
  expect_still_quarantined("device loss");
  EXPECT_FALSE(registry_.remove_provider_context(m.context));
  expect_still_quarantined("a refused context removal");

  ASSERT_TRUE(registry_.confirm_context_terminated(m.context));
  EXPECT_TRUE(has_counts(snapshot(m), Counts{}));
  EXPECT_TRUE(registry_.quarantined(m.mechanism)->empty());
  EXPECT_TRUE(registry_.remove(m.mechanism));
  EXPECT_EQ(m.allocator->release_calls(), 1U) << "only the one explicit release reached the allocator";
}

TEST_F(OwningReleaseTest, ObservedStatesAgreeWithTheirPredicates) {
  covers("REL-001");
  const auto m = add();
  const auto binding = bind(m);
  auto owner = binding.allocate_owning(32, 8);
  ASSERT_TRUE(owner);
  const State live = owner->state();
  auto prepared = std::move(*owner).prepare_release();
  ASSERT_TRUE(prepared);
  const State queued = prepared->state();
  const State released = std::move(*prepared).execute().state();
  m.allocator->set_release_mode(ReleaseMode::kQuarantine, State::kPartiallyUnmapped);
  const State partial = (*std::move(*binding.allocate_owning(32, 8)).release_now()).state();
  m.allocator->set_release_mode(ReleaseMode::kFail);
  const State quarantined = (*std::move(*binding.allocate_owning(32, 8)).release_now()).state();
  auto pending = std::move(*binding.allocate_owning(32, 8)).prepare_release();
  ASSERT_TRUE(registry_.invalidate_device(DeviceKey::host(), "lost"));
  const State lost = std::move(*pending).execute().state();

  EXPECT_EQ(live, State::kLive);
  EXPECT_EQ(queued, State::kQueued);
  EXPECT_EQ(released, State::kReleased);
  EXPECT_EQ(partial, State::kPartiallyUnmapped);
  EXPECT_EQ(quarantined, State::kQuarantined);
  EXPECT_EQ(lost, State::kDeviceLost);
  for (const State state : {live, queued}) {
    EXPECT_TRUE(retains_ownership(state));
    EXPECT_TRUE(permits_allocator_call(state));
    EXPECT_FALSE(is_terminal(state));
  }
  EXPECT_FALSE(retains_ownership(released));
  EXPECT_FALSE(permits_allocator_call(released));
  EXPECT_TRUE(is_terminal(released));
  for (const State state : {partial, quarantined, lost}) {
    EXPECT_TRUE(retains_ownership(state)) << state_name(state);
    EXPECT_FALSE(permits_allocator_call(state)) << state_name(state);
    EXPECT_TRUE(is_terminal(state)) << state_name(state);
  }
}

TEST_F(OwningReleaseTest, PrepareMatchesBindingAndGenerationAndOtherwiseChangesNothing) {
  covers("REL-002");
  const auto m = add();
  const auto binding = bind(m);
  const auto other = bind(m);
  auto allocation = binding.allocate(64, 8);
  ASSERT_TRUE(allocation);
  const auto before = snapshot(m);

  auto mismatched = other.prepare_release(*allocation);
  ASSERT_FALSE(mismatched);
  EXPECT_TRUE(is_kind(mismatched.error().error(), Kind::kBindingMismatch));
  EXPECT_EQ(mismatched.error().allocation().identity(), allocation->identity());
  EXPECT_EQ(snapshot(m), before);

  const BoundAllocation spent = *allocation;
  auto prepared = binding.prepare_release(*allocation);
  ASSERT_TRUE(prepared);
  EXPECT_TRUE(std::move(*prepared).execute().is_complete());
  // A new allocation may sit at the same address; the spent generation still does not match.
  auto fresh = binding.allocate(64, 8);
  ASSERT_TRUE(fresh);
  const auto live = snapshot(m);
  auto stale = binding.prepare_release(spent);
  ASSERT_FALSE(stale);
  EXPECT_TRUE(is_kind(stale.error().error(), Kind::kStaleAllocation));
  EXPECT_EQ(snapshot(m), live);
  EXPECT_EQ(m.allocator->release_calls(), 1U);
  EXPECT_TRUE(binding.release(*fresh));
}

TEST_F(OwningReleaseTest, APreparedRequestPinsItsAllocatorAuthorityAndContextPastTheRegistry) {
  covers("REL-004", "TEAR-018");
  auto context_resource = std::make_shared<int>(1);
  auto authority_resource = std::make_shared<int>(2);
  std::weak_ptr<int> context_alive = context_resource;
  std::weak_ptr<int> authority_alive = authority_resource;
  auto allocator = std::make_shared<CountingAllocator>();
  std::weak_ptr<CountingAllocator> allocator_alive = allocator;
  std::optional<PreparedAllocationRelease> request;
  {
    auto registry = *BindingRegistry::create();
    const auto context = *registry.register_provider_context(DeviceKey::host(), std::move(context_resource));
    const auto authority = *registry.register_authority(DeviceKey::host(), std::move(authority_resource));
    const auto mechanism = *registry.register_allocator(context, authority, allocator);
    auto owner = registry.bind_registered(mechanism)->allocate_owning(64, 8);
    ASSERT_TRUE(owner);
    auto prepared = std::move(*owner).prepare_release();
    ASSERT_TRUE(prepared);
    request.emplace(std::move(*prepared));
    EXPECT_EQ(request->provider_context(), context.identity);
    EXPECT_EQ(request->authority(), authority.identity);
    EXPECT_EQ(request->device(), DeviceKey::host());
  }  // registry, binding and owner are all gone
  allocator.reset();
  EXPECT_FALSE(context_alive.expired());
  EXPECT_FALSE(authority_alive.expired());
  ASSERT_FALSE(allocator_alive.expired());
  EXPECT_EQ(request->state(), State::kQueued);

  const auto outcome = std::move(*request).execute();
  EXPECT_EQ(outcome.state(), State::kReleased);
  EXPECT_EQ(allocator_alive.lock()->release_calls(), 1U);
  request.reset();
  EXPECT_TRUE(allocator_alive.expired());
  EXPECT_TRUE(authority_alive.expired());
  EXPECT_TRUE(context_alive.expired());
}

TEST_F(OwningReleaseTest, ADeviceLostGateQuarantinesWithoutCallingTheAllocator) {
  covers("REL-006");
  const auto m = add();
  auto owner = bind(m).allocate_owning(96, 32);
  ASSERT_TRUE(owner);
  auto prepared = std::move(*owner).prepare_release();
  ASSERT_TRUE(prepared);
  ASSERT_TRUE(registry_.invalidate_device(DeviceKey::host(), "lost"));
  const auto outcome = std::move(*prepared).execute();
  ASSERT_TRUE(outcome.is_quarantined());
  EXPECT_EQ(outcome.state(), State::kDeviceLost);
  EXPECT_EQ(outcome.residual()->reason, QuarantineReason::of(Reason::kDeviceLost));
  EXPECT_EQ(outcome.residual()->retained_bytes, 96U);
  EXPECT_EQ(outcome.unmapped_bytes(), 0U);
  EXPECT_EQ(m.allocator->release_calls(), 0U);
  EXPECT_TRUE(has_counts(snapshot(m), Counts{.quarantined = 1, .quarantined_bytes = 96}));
  EXPECT_EQ(registry_.quarantined(m.mechanism)->front().state, State::kDeviceLost);
}

TEST_F(OwningReleaseTest, APoisonedGateQuarantinesAsStatePoisonedWithoutCallingTheAllocator) {
  covers("REL-007");
  const auto m = add();
  const auto binding = bind(m);
  auto first = binding.allocate_owning(16, 8);
  auto second = binding.allocate_owning(24, 8);
  ASSERT_TRUE(first && second);
  auto prepared = std::move(*first).prepare_release();
  ASSERT_TRUE(prepared);
  // Recording the quarantine runs out of host memory: the mechanism's bookkeeping is poisoned.
  test_support::fail_next_allocations_on_this_thread(1);
  const auto abandoned = std::move(*prepared).quarantine(QuarantineReason::of(Reason::kAbandonedRequest));
  const int unconsumed = test_support::unconsumed_allocation_failures();
  test_support::fail_next_allocations_on_this_thread(0);
  ASSERT_EQ(unconsumed, 0) << "the injected allocation failure was never reached";
  EXPECT_TRUE(abandoned.is_quarantined());
  EXPECT_EQ(snapshot(m).quarantined_allocations, 1U) << "the counts must still say ownership is retained";
  EXPECT_EQ(snapshot(m).quarantined_bytes, 16U);

  const auto outcome = *std::move(*second).release_now();
  ASSERT_TRUE(outcome.is_quarantined());
  EXPECT_EQ(outcome.state(), State::kQuarantined);
  EXPECT_EQ(outcome.residual()->reason, QuarantineReason::of(Reason::kStatePoisoned));
  EXPECT_EQ(reason_name(outcome.residual()->reason), "state-poisoned");
  EXPECT_EQ(m.allocator->release_calls(), 0U);
  EXPECT_TRUE(has_counts(snapshot(m), Counts{.quarantined = 2, .quarantined_bytes = 40}));
}

TEST_F(OwningReleaseTest, CompleteEndsReleasedAndCountsNothingAnyMore) {
  covers("REL-008");
  const auto m = add();
  const auto binding = bind(m);
  auto owner = binding.allocate_owning(500, 4);
  ASSERT_TRUE(owner);
  EXPECT_TRUE(has_counts(snapshot(m), Counts{.live = 1}));
  const auto outcome = *std::move(*owner).release_now();
  EXPECT_TRUE(outcome.is_complete());
  EXPECT_EQ(outcome.state(), State::kReleased);
  EXPECT_EQ(outcome.accounting()->allocation_bytes, 500U);
  EXPECT_TRUE(has_counts(snapshot(m), Counts{}));
  EXPECT_FALSE(snapshot(m).retains_ownership());
  EXPECT_TRUE(registry_.quarantined(m.mechanism)->empty());
  EXPECT_EQ(m.allocator->complete_releases(), 1U);
}

TEST_F(OwningReleaseTest, AnAllocatorQuarantineIsRecordedWithItsResidual) {
  covers("REL-009");
  const auto m = add();
  const auto binding = bind(m);
  m.allocator->set_release_mode(ReleaseMode::kQuarantine, State::kQuarantined);
  auto owner = binding.allocate_owning(64, 64);
  ASSERT_TRUE(owner);
  const auto identity = owner->identity();
  const auto outcome = *std::move(*owner).release_now();
  ASSERT_TRUE(outcome.is_quarantined());
  EXPECT_EQ(outcome.state(), State::kQuarantined);
  EXPECT_EQ(outcome.residual()->reason, QuarantineReason::of(Reason::kPartialRelease));
  EXPECT_EQ(outcome.residual()->retained_bytes, 64U);
  const auto list = *registry_.quarantined(m.mechanism);
  ASSERT_EQ(list.size(), 1U);
  EXPECT_EQ(list.front().identity, identity);
  EXPECT_EQ(list.front().state, State::kQuarantined);
  EXPECT_EQ(list.front().reason, QuarantineReason::of(Reason::kPartialRelease));
  EXPECT_EQ(list.front().retained_bytes, 64U);
  EXPECT_EQ(m.allocator->release_calls(), 1U);
}

TEST_F(OwningReleaseTest, AllocatorFailedAfterPrepareIsQuarantinedNeverReturnedAsFailed) {
  covers("REL-010");
  const auto m = add();
  const auto binding = bind(m);
  m.allocator->set_release_mode(ReleaseMode::kFail);
  auto owner = binding.allocate_owning(80, 16);
  ASSERT_TRUE(owner);
  auto prepared = std::move(*owner).prepare_release();
  ASSERT_TRUE(prepared);
  const auto outcome = std::move(*prepared).execute();
  EXPECT_FALSE(outcome.is_failed()) << "execute returned Failed: " << outcome.describe();
  ASSERT_TRUE(outcome.is_quarantined());
  EXPECT_EQ(outcome.state(), State::kQuarantined);
  EXPECT_EQ(outcome.residual()->reason, QuarantineReason::of(Reason::kAllocatorRefused));
  EXPECT_EQ(outcome.residual()->retained_bytes, 80U);
  EXPECT_EQ(m.allocator->release_calls(), 1U);
  EXPECT_TRUE(has_counts(snapshot(m), Counts{.quarantined = 1, .quarantined_bytes = 80}));
  EXPECT_EQ(registry_.quarantined(m.mechanism)->front().reason, QuarantineReason::of(Reason::kAllocatorRefused));
}

// A queue that frees the memory itself (an nxmem plugin's) settles with
// what its free reported: nothing is asked of the allocator again, and the
// gate does not overrule what already happened.
TEST_F(OwningReleaseTest, SettlingWithAPerformedOutcomeRecordsItWithoutCallingTheAllocator) {
  covers("REL-008", "REL-009", "REL-010");
  const auto m = add();
  const auto binding = bind(m);
  auto complete = binding.allocate_owning(48, 16);
  auto partial = binding.allocate_owning(64, 64);
  auto refused = binding.allocate_owning(80, 16);
  ASSERT_TRUE(complete && partial && refused);
  auto first = std::move(*complete).prepare_release();
  auto second = std::move(*partial).prepare_release();
  auto third = std::move(*refused).prepare_release();
  ASSERT_TRUE(first && second && third);
  EXPECT_TRUE(has_counts(snapshot(m), Counts{.active = 3, .queued = 3}));
  const std::uintptr_t partial_address = address_of(second->data());

  const auto released = std::move(*first).settle(AllocationReleaseOutcome::complete(ReleaseAccounting{48, 0}));
  EXPECT_TRUE(released.is_complete());
  const auto residual = std::move(*second).settle(AllocationReleaseOutcome::quarantined(
      ReleaseAccounting{64, 0},
      ResidualOwnership{State::kQuarantined, QuarantineReason::of(Reason::kPartialRelease), 32, partial_address, 64}));
  ASSERT_TRUE(residual.is_quarantined());
  EXPECT_EQ(residual.residual()->retained_bytes, 32U);
  const auto failed = std::move(*third).settle(AllocationReleaseOutcome::failed("the plugin's free failed"));
  ASSERT_TRUE(failed.is_quarantined()) << "a record already taken never comes back as Failed: " << failed.describe();
  EXPECT_EQ(failed.residual()->reason, QuarantineReason::of(Reason::kAllocatorRefused));

  EXPECT_EQ(m.allocator->release_calls(), 0U);
  EXPECT_TRUE(has_counts(snapshot(m), Counts{.quarantined = 2, .quarantined_bytes = 112}));
}

TEST_F(OwningReleaseTest, ALostDeviceDoesNotOverruleAReleaseThatAlreadyHappened) {
  covers("REL-006");
  const auto m = add();
  auto owner = bind(m).allocate_owning(96, 32);
  ASSERT_TRUE(owner);
  auto prepared = std::move(*owner).prepare_release();
  ASSERT_TRUE(prepared);
  ASSERT_TRUE(registry_.invalidate_device(DeviceKey::host(), "lost"));
  const auto outcome = std::move(*prepared).settle(AllocationReleaseOutcome::complete(ReleaseAccounting{96, 0}));
  EXPECT_TRUE(outcome.is_complete());
  EXPECT_EQ(m.allocator->release_calls(), 0U);
  EXPECT_TRUE(has_counts(snapshot(m), Counts{}));
}

TEST_F(OwningReleaseTest, ALegacyReleaseThatEndsInQuarantineReportsItAndLeavesTheMetadataDead) {
  covers("REL-011", "REL-012");
  const auto m = add();
  const auto binding = bind(m);
  auto allocation = binding.allocate(256, 64);
  ASSERT_TRUE(allocation);
  const BoundAllocation copy = *allocation;
  m.allocator->set_release_mode(ReleaseMode::kQuarantine, State::kPartiallyUnmapped);

  auto released = binding.release(*allocation);
  ASSERT_FALSE(released);
  const ExplicitReleaseError& error = released.error();
  EXPECT_TRUE(is_kind(error.error(), Kind::kReleaseQuarantined));
  EXPECT_TRUE(error.is_quarantined());
  EXPECT_EQ(error.state(), State::kPartiallyUnmapped);
  ASSERT_TRUE(error.outcome());
  EXPECT_EQ(error.outcome()->residual()->retained_bytes, 128U);
  EXPECT_EQ(error.error().residual().state, State::kPartiallyUnmapped);
  EXPECT_EQ(error.error().residual().reason, QuarantineReason::of(Reason::kPartialRelease));
  EXPECT_EQ(error.error().residual().retained_bytes, 128U);
  EXPECT_EQ(error.error().allocation(), copy.identity());
  EXPECT_TRUE(has_counts(snapshot(m), Counts{.quarantined = 1, .quarantined_bytes = 128}));
  EXPECT_EQ(m.allocator->release_calls(), 1U);

  // Dead from now on: every copy is stale, and a second release neither
  // quarantines again nor reaches the allocator.
  m.allocator->set_release_mode(ReleaseMode::kForward);
  for (const BoundAllocation& dead : {copy, error.allocation()}) {
    auto again = binding.release(dead);
    ASSERT_FALSE(again);
    EXPECT_TRUE(is_kind(again.error().error(), Kind::kStaleAllocation));
    EXPECT_FALSE(again.error().is_quarantined());
    EXPECT_TRUE(is_kind(dead.view(0, 1).error(), Kind::kStaleAllocation));
  }
  EXPECT_TRUE(has_counts(snapshot(m), Counts{.quarantined = 1, .quarantined_bytes = 128}));
  EXPECT_EQ(m.allocator->release_calls(), 1U);

  // The same gate applies: Failed after prepare is a quarantine, Complete is a plain success.
  m.allocator->set_release_mode(ReleaseMode::kFail);
  auto refused = binding.release(*binding.allocate(16, 8));
  ASSERT_FALSE(refused);
  EXPECT_TRUE(is_kind(refused.error().error(), Kind::kReleaseQuarantined));
  EXPECT_EQ(refused.error().error().residual().reason, QuarantineReason::of(Reason::kAllocatorRefused));
  m.allocator->set_release_mode(ReleaseMode::kForward);
  EXPECT_TRUE(binding.release(*binding.allocate(16, 8)));
  auto lost = binding.allocate(16, 8);
  ASSERT_TRUE(registry_.invalidate_device(DeviceKey::host(), "lost"));
  auto refused_lost = binding.release(*lost);
  ASSERT_FALSE(refused_lost);
  EXPECT_TRUE(is_kind(refused_lost.error().error(), Kind::kDeviceLost));
  EXPECT_FALSE(refused_lost.error().is_quarantined()) << "device loss before prepare changes nothing";
  EXPECT_EQ(m.allocator->release_calls(), 3U);
}

TEST_F(OwningReleaseTest, AReleaseWhoseSizeOrAlignmentDiffersFromTheRecordChangesNothing) {
  covers("REL-013");
  const auto m = add();
  const auto binding = bind(m);
  auto allocation = binding.allocate(64, 16);
  ASSERT_TRUE(allocation);
  const auto before = snapshot(m);
  for (const BoundAllocation& forged :
       {test_support::forge::with_size(*allocation, 32), test_support::forge::with_size(*allocation, 128),
        test_support::forge::with_alignment(*allocation, 8), test_support::forge::with_alignment(*allocation, 64)}) {
    auto released = binding.release(forged);
    ASSERT_FALSE(released);
    EXPECT_FALSE(released.error().is_quarantined());
    EXPECT_EQ(released.error().state(), State::kLive);
    EXPECT_TRUE(is_kind(released.error().error(), Kind::kStaleAllocation));
    EXPECT_EQ(snapshot(m), before) << "a mismatched release changed the records";
  }
  EXPECT_EQ(m.allocator->release_calls(), 0U);
  EXPECT_TRUE(binding.release(*allocation)) << "the allocation must still be live and releasable";
  EXPECT_EQ(m.allocator->release_calls(), 1U);
  EXPECT_EQ(m.allocator->failed_releases(), 0U);
}

}  // namespace
}  // namespace ortmem
