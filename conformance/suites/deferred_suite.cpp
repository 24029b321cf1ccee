// Deferred release (DQ): the reference registry and an adapter's queue,
// context and allocator.
#include <algorithm>
#include <chrono>
#include <functional>
#include <thread>
#include <vector>

#include "support/binding_error_payload.hpp"
#include "support/calling_back_allocator.hpp"
#include "support/registry_harness.hpp"
#include "support/suite.hpp"

namespace ortmem::cts {
namespace {

class Deferred : public RequiringCapability<RegistrySuite, Capability::kDeferredQueue> {
 protected:
  void SetUp() override {
    RequiringCapability::SetUp();
    if (ended()) return;
    queue_ = adapter().make_queue(*harness_->context, {});
    ASSERT_NE(queue_, nullptr);
    // Work in flight from the start: a queue may run a request whose fence
    // has passed as soon as it is enqueued, and these tests need it pending.
    queue_->record_use();
  }

  // A fresh owner's release, enqueued on `target` itself (not through the
  // registry) with a pin of the queue's own, and the identity it carried:
  // what a check of the answer compares a handed-back request with.
  struct Enqueued {
    AllocationIdentity identity;
    Expected<DeferredEnqueued, DeferredEnqueueError> answer;
  };
  std::optional<Enqueued> enqueue_directly(QueueUnderTest& target) {
    ORTMEM_CTS_PRECONDITION();
    auto prepared = owner().prepare_release();
    EXPECT_TRUE(prepared);
    auto pin = target.queue().pin_context();
    EXPECT_TRUE(pin);
    if (!prepared || !pin) return std::nullopt;
    const AllocationIdentity identity = prepared->identity();
    return Enqueued{identity, target.queue().enqueue(std::move(*prepared), std::move(*pin))};
  }

  // Enqueues a fresh request with `pin`, which is no claim on the queue's
  // context, and judges the answer (see APinThatClaimsNothingIsRefusedOrReplaced).
  void expect_refused_or_pinned(ProviderContextPin pin) {
    ORTMEM_CTS_REQUIRE_CONTROL(Control::kFences);
    expect_teardown_observes_pins();
    if (HasFatalFailure()) return;
    auto prepared = owner().prepare_release();
    {
      ORTMEM_CTS_PRECONDITION();
      ASSERT_TRUE(prepared);
    }
    const AllocationIdentity identity = prepared->identity();
    auto answer = queue_->queue().enqueue(std::move(*prepared), std::move(pin));
    if (!answer) {
      ORTMEM_CTS_CHECKING("DQ-005");
      EXPECT_EQ(answer.error().request().identity(), identity) << "the request handed back is not the one given";
      const auto outcome = std::move(answer.error()).take_request().execute();
      EXPECT_TRUE(outcome.is_complete()) << "the handed-back request must still be executable: " << outcome.describe();
      return;
    }
    expect_the_queued_request_pins_the_context(
        "a request queued on a pin that is no claim on its context does not pin that context");
  }

  // DQ-009 for the one request queued: the retiring context's teardown cannot
  // finish while it waits (else `unobserved` is the failure), and finishes
  // once the request has run.
  void expect_the_queued_request_pins_the_context(const char* unobserved) {
    harness_->context->begin_retirement();
    {
      ORTMEM_CTS_CHECKING("DQ-009");
      EXPECT_FALSE(harness_->context->teardown(std::chrono::steady_clock::now())) << unobserved;
    }
    queue_->signal_fences();
    {
      ORTMEM_CTS_PRECONDITION();
      EXPECT_EQ(queue_->drain(), 1U);
    }
    EXPECT_TRUE(harness_->context->teardown(std::chrono::steady_clock::now() + std::chrono::seconds(5)));
  }

  std::unique_ptr<QueueUnderTest> queue_;
};

TEST_P(Deferred, ARequestWaitsForItsFenceThenRunsExactlyOnce) {
  covers("DQ-001", "DQ-008", "DQ-011");
  ORTMEM_CTS_REQUIRE_CONTROL(Control::kFences);
  queue_->record_use();
  auto disposition = owner().release_deferred(queue_->queue());
  {
    ORTMEM_CTS_CHECKING("DQ-008");
    ASSERT_TRUE(disposition) << disposition.error().error().message();
    ASSERT_TRUE(disposition->is_queued());
    EXPECT_EQ(disposition->state(), AllocationReleaseState::kQueued);
  }
  {
    ORTMEM_CTS_CHECKING("DQ-001");
    EXPECT_EQ(queue_->drain(), 0U) << "a request ran before its fence was observed";
  }
  ORTMEM_CTS_CHECKING("DQ-008");
  const MechanismSnapshot queued = harness_->snapshot();
  EXPECT_EQ(queued.live_allocations, 0U);
  EXPECT_EQ(queued.queued_releases, 1U);
  EXPECT_GE(queued.active_operations, 1U);
  EXPECT_TRUE(queued.retains_ownership());
  EXPECT_EQ(harness_->releases_run(*queue_), 0U) << "a queued request was released";
  {
    ORTMEM_CTS_CHECKING("DQ-011");
    EXPECT_EQ(queue_->queue().pending(), 1U);
  }

  queue_->signal_fences();
  {
    ORTMEM_CTS_CHECKING("DQ-001");
    EXPECT_EQ(queue_->drain(), 1U) << "a request whose fence passed did not run";
    EXPECT_EQ(queue_->drain(), 0U) << "a request ran twice";
    EXPECT_EQ(harness_->releases_run(*queue_), 1U);
  }
  const MechanismSnapshot settled = harness_->snapshot();
  EXPECT_EQ(settled.queued_releases, 0U);
  EXPECT_EQ(settled.active_operations, 0U);
  EXPECT_FALSE(settled.retains_ownership());
  ORTMEM_CTS_CHECKING("DQ-011");
  EXPECT_EQ(queue_->queue().pending(), 0U);
}

TEST_P(Deferred, RequestsRunInFifoOrder) {
  covers("DQ-002");
  std::vector<void*> enqueued;
  const std::size_t batch = std::min<std::size_t>(8, queue_->capacity().value_or(8));
  for (std::size_t i = 0; i < batch; ++i) {
    queue_->record_use();
    auto allocation = owner(64 + 64 * i);
    enqueued.push_back(allocation.data());
    ORTMEM_CTS_PRECONDITION();
    ASSERT_TRUE(std::move(allocation).release_deferred(queue_->queue()));
  }
  queue_->signal_fences();
  EXPECT_EQ(queue_->drain(), batch);
  EXPECT_EQ(queue_->drain(), 0U) << "a request ran twice";
  EXPECT_EQ(harness_->release_order(*queue_), enqueued) << "the queue did not release in FIFO order";
  EXPECT_EQ(RegistryHarness::protocol_violations(*queue_), "");
  {
    ORTMEM_CTS_CHECKING("ALLOC-017");
    EXPECT_EQ(RegistryHarness::misreported_completions(*queue_), "");
  }
  EXPECT_EQ(harness_->snapshot().quarantined_allocations, 0U);
}

TEST_P(Deferred, ARefusedEnqueueHandsBackTheExactRequest) {
  covers("DQ-005", "DQ-006");
  ORTMEM_CTS_REQUIRE_CONTROL(Control::kQueueClose);
  queue_->close();
  auto enqueued = enqueue_directly(*queue_);
  ASSERT_TRUE(enqueued);
  auto& [identity, refused] = *enqueued;
  ASSERT_FALSE(refused) << "a closed queue accepted a request";
  {
    ORTMEM_CTS_CHECKING("DQ-006");
    EXPECT_EQ(refused.error().rejection(), DeferredEnqueueRejection::kClosed);
  }
  ORTMEM_CTS_CHECKING("DQ-005");
  EXPECT_EQ(refused.error().request().identity(), identity) << "the request handed back is not the one given";
  auto request = std::move(refused.error()).take_request();
  const auto outcome = std::move(request).execute();
  EXPECT_TRUE(outcome.is_complete()) << "the handed-back request must still be executable: " << outcome.describe();
}

TEST_P(Deferred, AFullQueueHandsBackTheRequestItWasGivenNotAnother) {
  covers("DQ-005");
  ORTMEM_CTS_REQUIRE_CONTROL(Control::kQueueCapacity);
  auto bounded = adapter().make_queue(*harness_->context, {.capacity = 3});
  const auto capacity = bounded->capacity();
  if (!capacity) GTEST_SKIP() << std::string(kNotApplicable) << "the queue is unbounded, so it is never full";
  bounded->record_use();
  for (std::size_t i = 0; i < *capacity; ++i) {
    ORTMEM_CTS_PRECONDITION();
    ASSERT_TRUE(owner().release_deferred(bounded->queue())) << "enqueue " << i << " of " << *capacity;
  }
  // Several requests wait, so a queue could be tempted to make room.
  auto enqueued = enqueue_directly(*bounded);
  ASSERT_TRUE(enqueued);
  auto& [identity, refused] = *enqueued;
  {
    ORTMEM_CTS_PRECONDITION();
    ASSERT_FALSE(refused) << "a full queue accepted one request more than its capacity";
  }
  ORTMEM_CTS_CHECKING("DQ-005");
  EXPECT_EQ(refused.error().request().identity(), identity) << "the full queue handed back another request";
  bounded->signal_fences();
  (void)bounded->drain();
  auto request = std::move(refused.error()).take_request();
  EXPECT_TRUE(std::move(request).execute().is_complete());
}

TEST_P(Deferred, DeviceLossTakesPrecedenceOverClosedAndFull) {
  covers("DQ-006");
  ORTMEM_CTS_REQUIRE_CONTROL(Control::kQueueCapacity);
  ORTMEM_CTS_REQUIRE_CONTROL(Control::kQueueClose);
  ORTMEM_CTS_REQUIRE_CONTROL(Control::kQueueDeviceLoss);
  auto bounded = adapter().make_queue(*harness_->context, {.capacity = 1});
  bounded->record_use();
  {
    ORTMEM_CTS_PRECONDITION();
    ASSERT_TRUE(owner().release_deferred(bounded->queue()));
  }
  bounded->close();
  auto closed = owner().release_deferred(bounded->queue());
  ASSERT_TRUE(closed);
  EXPECT_EQ(closed->rejection(), DeferredEnqueueRejection::kClosed) << "closed must win over full";
  bounded->mark_device_lost();
  auto lost = owner().release_deferred(bounded->queue());
  ASSERT_TRUE(lost);
  EXPECT_EQ(lost->rejection(), DeferredEnqueueRejection::kDeviceLost) << "device-lost must win over closed";
}

TEST_P(Deferred, ARejectedReleaseIsQuarantinedNotFreed) {
  covers("DQ-007", "DQ-011", "DQ-006");
  ORTMEM_CTS_REQUIRE_CONTROL(Control::kFences);
  ORTMEM_CTS_REQUIRE_CONTROL(Control::kQueueCapacity);
  ORTMEM_CTS_REQUIRE_CONTROL(Control::kQueueClose);
  auto bounded = adapter().make_queue(*harness_->context, {.capacity = 2});
  bounded->record_use();
  // A bounded queue is filled and refuses as full; an unbounded one never
  // refuses for fullness (DQ-011 bounds only a bounded queue), so it is
  // closed and refuses as closed.
  const auto capacity = bounded->capacity();
  const auto rejection = capacity ? DeferredEnqueueRejection::kFull : DeferredEnqueueRejection::kClosed;
  if (capacity) {
    ORTMEM_CTS_PRECONDITION();
    for (std::size_t i = 0; i < *capacity; ++i) ASSERT_TRUE(owner().release_deferred(bounded->queue()));
  } else {
    bounded->close();
  }
  auto refused = owner(512).release_deferred(bounded->queue());
  ASSERT_TRUE(refused);
  {
    ORTMEM_CTS_CHECKING(capacity ? "DQ-011" : "DQ-006");
    ASSERT_FALSE(refused->is_queued()) << (capacity ? "a bounded queue took more than its capacity"
                                                    : "a closed queue took work");
    EXPECT_EQ(refused->rejection(), rejection);
  }
  if (capacity) {
    ORTMEM_CTS_CHECKING("DQ-011");
    EXPECT_LE(bounded->queue().pending(), *capacity) << "a bounded queue exceeded its capacity";
  }
  ORTMEM_CTS_CHECKING("DQ-007");
  ASSERT_TRUE(refused->outcome().has_value());
  ASSERT_NE(refused->outcome()->residual(), nullptr);
  EXPECT_EQ(refused->outcome()->residual()->reason, QuarantineReason::enqueue_rejected(rejection));
  const MechanismSnapshot snapshot = harness_->snapshot();
  EXPECT_EQ(snapshot.quarantined_allocations, 1U);
  EXPECT_EQ(snapshot.quarantined_bytes, 512U);
  EXPECT_EQ(harness_->releases_run(*bounded), 0U);
}

TEST_P(Deferred, AQueuedRequestPinsItsContext) {
  covers("DQ-009");
  ORTMEM_CTS_REQUIRE_CONTROL(Control::kFences);
  expect_teardown_observes_pins();
  if (HasFatalFailure()) return;
  {
    ORTMEM_CTS_PRECONDITION();
    ASSERT_TRUE(owner().release_deferred(queue_->queue()));
  }
  expect_the_queued_request_pins_the_context("the context was torn down under a queued request");
}

// DQ-009 with a pin that is no claim on the queue's context (one reset
// before it is handed over, or another context's): a queue that keeps the
// request on it holds a request its context's teardown cannot see. It must
// refuse, handing the request back whole (DQ-005), or queue it under a claim
// of its own that teardown observes.
TEST_P(Deferred, APinThatClaimsNothingIsRefusedOrReplaced) {
  covers("DQ-009", "DQ-005");
  auto pin = queue_->queue().pin_context();
  {
    ORTMEM_CTS_PRECONDITION();
    ASSERT_TRUE(pin) << pin.error().message();
  }
  pin->reset();
  expect_refused_or_pinned(std::move(*pin));
}

TEST_P(Deferred, AnotherContextsPinIsRefusedOrReplaced) {
  covers("DQ-009", "DQ-005");
  IdentityIssuer issuer = *IdentityIssuer::create();
  const auto other = adapter().make_context(*issuer.issue<ProviderContextIdentity>());
  {
    ORTMEM_CTS_PRECONDITION();
    ASSERT_NE(other, nullptr);
  }
  auto pin = other->pins().pin();
  {
    ORTMEM_CTS_PRECONDITION();
    ASSERT_TRUE(pin) << pin.error().message();
  }
  expect_refused_or_pinned(std::move(*pin));
}

TEST_P(Deferred, QueuedOwnershipBlocksRemoveAndConfirmation) {
  covers("DQ-010");
  ORTMEM_CTS_REQUIRE_CONTROL(Control::kFences);
  ORTMEM_CTS_REQUIRE_CONTROL(Control::kQueueDeviceLoss);
  {
    ORTMEM_CTS_PRECONDITION();
    ASSERT_TRUE(owner().release_deferred(queue_->queue()));
  }
  ASSERT_TRUE(harness_->registry.retire(harness_->mechanism));
  auto removed = harness_->registry.remove(harness_->mechanism);
  ASSERT_FALSE(removed) << "a mechanism with a queued release was removed";
  ASSERT_TRUE(harness_->registry.invalidate_device(info().device, "test: device lost"));
  auto confirmed = harness_->registry.confirm_context_terminated(harness_->context_registration);
  ASSERT_FALSE(confirmed);
  EXPECT_EQ(confirmed.error().kind(), BindingError::Kind::kContextNotQuiescent);
  EXPECT_EQ(confirmed.error().count(), 1U);
  ORTMEM_CTS_EXPECT_NAMES(confirmed.error(), {.kind = BindingError::Kind::kContextNotQuiescent,
                                              .context = harness_->context_registration.identity,
                                              .count = 1});
  queue_->mark_device_lost();
  EXPECT_TRUE(harness_->registry.confirm_context_terminated(harness_->context_registration));
}

TEST_P(Deferred, DeviceLossSettlesQueuedRequestsWithoutTheAllocator) {
  covers("DQ-012", "DQ-013");
  ORTMEM_CTS_REQUIRE_CONTROL(Control::kFences);
  ORTMEM_CTS_REQUIRE_CONTROL(Control::kQueueDeviceLoss);
  queue_->record_use();
  {
    ORTMEM_CTS_PRECONDITION();
    ASSERT_TRUE(owner().release_deferred(queue_->queue()));
    ASSERT_TRUE(owner().release_deferred(queue_->queue()));
  }
  queue_->mark_device_lost();
  ORTMEM_CTS_CHECKING("DQ-012");
  EXPECT_EQ(queue_->queue().pending(), 0U);
  EXPECT_EQ(harness_->releases_run(*queue_), 0U) << "a request held by its fence was released after device loss";
  const MechanismSnapshot snapshot = harness_->snapshot();
  EXPECT_EQ(snapshot.queued_releases, 0U);
  EXPECT_EQ(snapshot.quarantined_allocations, 2U);
  for (const auto& record : harness_->binding->quarantined()) {
    EXPECT_EQ(record.state, AllocationReleaseState::kDeviceLost);
    EXPECT_EQ(record.reason.kind, QuarantineReason::Kind::kDeviceLost);
  }
  // Only residuals remain: they must not keep the context from tearing down.
  ORTMEM_CTS_CHECKING("DQ-013");
  harness_->context->begin_retirement();
  EXPECT_TRUE(harness_->context->teardown(std::chrono::steady_clock::now() + std::chrono::seconds(5)));
}

TEST_P(Deferred, ALostDeviceRefusesADeferredReleaseAndHandsTheOwnerBack) {
  covers("OWN-007", "TEAR-004");
  auto allocation = owner();
  const AllocationIdentity identity = allocation.identity();
  ASSERT_TRUE(harness_->registry.invalidate_device(info().device, "test: lost before the release"));
  auto refused = std::move(allocation).release_deferred(queue_->queue());
  ASSERT_FALSE(refused) << "a release was queued for a lost device";
  EXPECT_EQ(refused.error().error().kind(), BindingError::Kind::kDeviceLost);
  EXPECT_EQ(refused.error().error().loss_reason(), "test: lost before the release");
  ORTMEM_CTS_CHECKING("OWN-007");
  EXPECT_TRUE(refused.error().allocation().owns()) << "the owner was not handed back";
  EXPECT_EQ(refused.error().allocation().identity(), identity);
  EXPECT_EQ(queue_->queue().pending(), 0U);
  EXPECT_EQ(harness_->snapshot().live_allocations, 1U);
}

TEST_P(Deferred, ARetiringContextRefusesWorkAndTheOwnerStaysLive) {
  covers("DQ-014", "DQ-015", "DQ-016");
  auto allocation = owner();
  const AllocationIdentity identity = allocation.identity();
  harness_->context->begin_retirement();
  auto refused = std::move(allocation).release_deferred(queue_->queue());
  if (refused) {
    // Queued is work taken (DQ-014); settled any other way, the owner was
    // not handed back live (DQ-015).
    ORTMEM_CTS_CHECKING(refused->is_queued() ? "DQ-014" : "DQ-015");
    FAIL() << (refused->is_queued() ? "a queue whose context is retiring took work"
                                    : "a refused pin settled the allocation instead of handing the owner back");
  }
  {
    ORTMEM_CTS_CHECKING("DQ-014");
    EXPECT_EQ(refused.error().error().kind(), BindingError::Kind::kDeferredRefused);
  }
  ORTMEM_CTS_EXPECT_NAMES(refused.error().error(), {.kind = BindingError::Kind::kDeferredRefused});
  {
    ORTMEM_CTS_CHECKING("DQ-016");
    const std::string message = refused.error().error().message();
    EXPECT_NE(message.find("no longer accepting work"), std::string::npos) << message;
    EXPECT_NE(message.find("stays live"), std::string::npos) << message;
  }
  ORTMEM_CTS_CHECKING("DQ-015");
  OwningAllocation back = std::move(refused.error()).take_allocation();
  EXPECT_EQ(back.identity(), identity);
  EXPECT_EQ(harness_->snapshot().live_allocations, 1U);
  auto outcome = std::move(back).release_now();
  ASSERT_TRUE(outcome);
  EXPECT_TRUE(outcome->is_complete());
}

// Forwards to the adapter's queue after calling back into the registry. Had
// the caller held the registry lock or the mechanism lock across enqueue, the
// re-entry would self-deadlock (both are plain, non-recursive mutexes).
class ReenteringQueue final : public DeferredReleaseQueue {
 public:
  ReenteringQueue(DeferredReleaseQueue& inner, RegistryHarness& harness) : inner_(inner), harness_(harness) {}
  Expected<ProviderContextPin, ProviderContextPinError> pin_context() noexcept override { return inner_.pin_context(); }
  Expected<DeferredEnqueued, DeferredEnqueueError> enqueue(PreparedAllocationRelease&& request,
                                                           ProviderContextPin pin) noexcept override {
    reentered_snapshot = harness_.snapshot().queued_releases == 1;
    reentered_registry = !harness_.registry.snapshots().empty();
    return inner_.enqueue(std::move(request), std::move(pin));
  }
  std::size_t pending() const noexcept override { return inner_.pending(); }

  bool reentered_snapshot = false;
  bool reentered_registry = false;

 private:
  DeferredReleaseQueue& inner_;
  RegistryHarness& harness_;
};

TEST_P(Deferred, AReleaseTheQueueRunsMayCallBackIntoTheQueue) {
  covers("DQ-017");
  ORTMEM_CTS_REQUIRE_CONTROL(Control::kFences);
  ORTMEM_CTS_REQUIRE_CONTROL(Control::kAllocatorInterposition);
  // The first request's release asks the queue how much waits and queues the
  // second; a queue that ran it under its own lock deadlocks there (the
  // watchdog ends the test). The second runs on the next drain.
  auto calling_back = std::make_shared<CallingBackAllocator>(harness_->allocator);
  auto mechanism = registry().register_allocator(harness_->context_registration, harness_->authority, calling_back);
  ASSERT_TRUE(mechanism) << mechanism.error().message();
  auto binding = registry().bind_registered(*mechanism);
  ASSERT_TRUE(binding) << binding.error().message();
  std::vector<OwningAllocation> owners;
  for (int i = 0; i < 2; ++i) {
    auto allocation = binding->allocate_owning(256, 64);
    if (!allocation) {
      stands_on_broken("the allocator refused 256 bytes: " + allocation.error().message());
      FAIL() << allocation.error().message();
    }
    owners.push_back(std::move(*allocation));
  }
  int calls = 0;
  bool second_answered = false;
  calling_back->on_release = [&] {
    if (++calls != 1) return;
    (void)queue_->queue().pending();
    // Queued or refused, the answer is what counts: it came back. A refused
    // owner comes back live and is released here instead.
    auto second = std::move(owners[1]).release_deferred(queue_->queue());
    second_answered = true;
    if (!second) (void)std::move(second.error()).take_allocation().release_now();
  };
  queue_->record_use();
  auto disposition = std::move(owners[0]).release_deferred(queue_->queue());
  {
    ORTMEM_CTS_PRECONDITION();
    ASSERT_TRUE(disposition) << disposition.error().error().message();
    ASSERT_TRUE(disposition->is_queued());
  }
  queue_->signal_fences();
  (void)queue_->drain();
  {
    ORTMEM_CTS_PRECONDITION();
    ASSERT_GE(calls, 1) << "the queue did not run the request whose fence had passed";
  }
  EXPECT_TRUE(second_answered);
  queue_->record_use();
  queue_->signal_fences();
  (void)queue_->drain();
  EXPECT_EQ(calls, 2) << "the second allocation, released from inside the first one's release, was never released";
}

TEST_P(Deferred, EnqueueIsCalledWithNoLockHeld) {
  covers("DQ-003", "LOCK-002");
  ReenteringQueue probe(queue_->queue(), *harness_);
  auto disposition = owner().release_deferred(probe);
  {
    ORTMEM_CTS_PRECONDITION();
    ASSERT_TRUE(disposition);
    EXPECT_TRUE(disposition->is_queued());
  }
  EXPECT_TRUE(probe.reentered_snapshot) << "the request was not counted as queued when enqueue ran";
  EXPECT_TRUE(probe.reentered_registry);
}

TEST_P(Deferred, EnqueueDoesNotWaitForTheDevice) {
  covers("DQ-004");
  // Work that never finishes: an enqueue that waited on it would never
  // return, and one that waits a while (back-pressure on a deep queue) shows
  // as a slow enqueue. The scheduler can delay any one enqueue, not one in
  // every round, so the slowest enqueue of the best of three rounds is the
  // queue's own cost.
  const std::size_t batch = std::min<std::size_t>(64, queue_->capacity().value_or(64));
  auto best_round = std::chrono::steady_clock::duration::max();
  for (int round = 0; round < 3; ++round) {
    queue_->record_use();
    auto slowest = std::chrono::steady_clock::duration::zero();
    for (std::size_t i = 0; i < batch; ++i) {
      auto request = owner(32);
      const auto begun = std::chrono::steady_clock::now();
      const bool accepted = static_cast<bool>(std::move(request).release_deferred(queue_->queue()));
      slowest = std::max(slowest, std::chrono::steady_clock::now() - begun);
      ORTMEM_CTS_PRECONDITION();
      ASSERT_TRUE(accepted) << "enqueue " << i << " of " << batch << " was refused";
    }
    best_round = std::min(best_round, slowest);
    if (!info().offers(Control::kFences)) {
      // Nothing keeps the requests waiting: they settle when the implementation says.
      (void)queue_->drain();
      continue;
    }
    {
      ORTMEM_CTS_CHECKING("DQ-011");
      EXPECT_EQ(queue_->queue().pending(), batch);
    }
    {
      ORTMEM_CTS_CHECKING("DQ-001");
      EXPECT_EQ(queue_->drain(), 0U);
      queue_->signal_fences();
      EXPECT_EQ(queue_->drain(), batch);
    }
  }
  ORTMEM_CTS_CHECKING("DQ-004");
  EXPECT_LT(best_round, std::chrono::milliseconds(50))
      << "with unfinished device work queued, some enqueue waited in every round";
}

ORTMEM_CTS_INSTANTIATE(Deferred);

}  // namespace
}  // namespace ortmem::cts
