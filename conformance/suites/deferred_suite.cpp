// Deferred release (DQ): the reference registry and an adapter's queue,
// context and allocator.
#include <thread>
#include <vector>

#include "ortmem/cts/registry_harness.hpp"
#include "ortmem/cts/suite.hpp"

namespace ortmem::cts {
namespace {

class Deferred : public RegistrySuite {
 protected:
  void SetUp() override {
    RegistrySuite::SetUp();
    if (HasFatalFailure()) return;
    ORTMEM_CTS_REQUIRE(Capability::kDeferredQueue);
    queue_ = adapter().make_queue(*harness_->context, {});
    ASSERT_NE(queue_, nullptr);
  }

  std::unique_ptr<QueueUnderTest> queue_;
};

TEST_P(Deferred, ARequestWaitsForItsFenceThenRunsExactlyOnce) {
  covers("DQ-001", "DQ-008", "DQ-011");
  queue_->record_use();
  auto disposition = owner().release_deferred(queue_->queue());
  ASSERT_TRUE(disposition) << disposition.error().error().message();
  ASSERT_TRUE(disposition->is_queued());
  EXPECT_EQ(disposition->state(), AllocationReleaseState::kQueued);

  EXPECT_EQ(queue_->drain(), 0U) << "a request ran before its fence was observed";
  const MechanismSnapshot queued = harness_->snapshot();
  EXPECT_EQ(queued.live_allocations, 0U);
  EXPECT_EQ(queued.queued_releases, 1U);
  EXPECT_GE(queued.active_operations, 1U);
  EXPECT_TRUE(queued.retains_ownership());
  EXPECT_EQ(queue_->queue().pending(), 1U);
  EXPECT_EQ(harness_->allocator->release_calls.load(), 0U) << "the allocator was called while queued";

  queue_->signal_fences();
  EXPECT_EQ(queue_->drain(), 1U);
  EXPECT_EQ(queue_->drain(), 0U) << "a request ran twice";
  EXPECT_EQ(harness_->allocator->release_calls.load(), 1U);
  const MechanismSnapshot settled = harness_->snapshot();
  EXPECT_EQ(settled.queued_releases, 0U);
  EXPECT_EQ(settled.active_operations, 0U);
  EXPECT_FALSE(settled.retains_ownership());
  EXPECT_EQ(queue_->queue().pending(), 0U);
}

TEST_P(Deferred, RequestsRunInFifoOrder) {
  covers("DQ-002");
  std::vector<void*> enqueued;
  for (int i = 0; i < 8; ++i) {
    queue_->record_use();
    auto allocation = owner(64 + 64 * static_cast<std::size_t>(i));
    enqueued.push_back(allocation.data());
    ASSERT_TRUE(std::move(allocation).release_deferred(queue_->queue()));
  }
  queue_->signal_fences();
  EXPECT_EQ(queue_->drain(), 8U);
  EXPECT_EQ(queue_->drain(), 0U) << "a request ran twice";
  EXPECT_EQ(harness_->allocator->release_order(), enqueued) << "the queue did not release in FIFO order";
  EXPECT_EQ(harness_->snapshot().quarantined_allocations, 0U);
}

TEST_P(Deferred, ARefusedEnqueueHandsBackTheExactRequest) {
  covers("DQ-005", "DQ-006");
  queue_->close();
  auto prepared = owner().prepare_release();
  ASSERT_TRUE(prepared);
  const AllocationIdentity identity = prepared->identity();
  auto pin = queue_->queue().pin_context();
  ASSERT_TRUE(pin);
  auto refused = queue_->queue().enqueue(std::move(*prepared), std::move(*pin));
  ASSERT_FALSE(refused) << "a closed queue accepted a request";
  EXPECT_EQ(refused.error().rejection(), DeferredEnqueueRejection::kClosed);
  EXPECT_EQ(refused.error().request().identity(), identity) << "the request handed back is not the one given";
  auto request = std::move(refused.error()).take_request();
  const auto outcome = std::move(request).execute();
  EXPECT_TRUE(outcome.is_complete()) << "the handed-back request must still be executable: " << outcome.describe();
}

TEST_P(Deferred, DeviceLossTakesPrecedenceOverClosedAndFull) {
  covers("DQ-006");
  auto bounded = adapter().make_queue(*harness_->context, {.capacity = 1});
  ASSERT_TRUE(owner().release_deferred(bounded->queue()));
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
  covers("DQ-007", "DQ-011");
  auto bounded = adapter().make_queue(*harness_->context, {.capacity = 2});
  ASSERT_EQ(bounded->capacity(), std::optional<std::size_t>{2});
  ASSERT_TRUE(owner().release_deferred(bounded->queue()));
  ASSERT_TRUE(owner().release_deferred(bounded->queue()));
  auto full = owner(512).release_deferred(bounded->queue());
  ASSERT_TRUE(full);
  EXPECT_FALSE(full->is_queued());
  EXPECT_EQ(full->rejection(), DeferredEnqueueRejection::kFull);
  ASSERT_TRUE(full->outcome().has_value());
  ASSERT_NE(full->outcome()->residual(), nullptr);
  EXPECT_EQ(full->outcome()->residual()->reason, QuarantineReason::enqueue_rejected(DeferredEnqueueRejection::kFull));
  EXPECT_LE(bounded->queue().pending(), 2U) << "a bounded queue exceeded its capacity";
  const MechanismSnapshot snapshot = harness_->snapshot();
  EXPECT_EQ(snapshot.quarantined_allocations, 1U);
  EXPECT_EQ(snapshot.quarantined_bytes, 512U);
  EXPECT_EQ(harness_->allocator->release_calls.load(), 0U);
}

TEST_P(Deferred, AQueuedRequestPinsItsContext) {
  covers("DQ-009");
  ASSERT_TRUE(owner().release_deferred(queue_->queue()));
  harness_->context->begin_retirement();
  EXPECT_FALSE(harness_->context->teardown(std::chrono::steady_clock::now()))
      << "the context was torn down under a queued request";
  queue_->signal_fences();
  EXPECT_EQ(queue_->drain(), 1U);
  EXPECT_TRUE(harness_->context->teardown(std::chrono::steady_clock::now() + std::chrono::seconds(5)));
}

TEST_P(Deferred, QueuedOwnershipBlocksRemoveAndConfirmation) {
  covers("DQ-010");
  ASSERT_TRUE(owner().release_deferred(queue_->queue()));
  ASSERT_TRUE(harness_->registry.retire(harness_->mechanism));
  auto removed = harness_->registry.remove(harness_->mechanism);
  ASSERT_FALSE(removed) << "a mechanism with a queued release was removed";
  ASSERT_TRUE(harness_->registry.invalidate_device(info().device, "test: device lost"));
  auto confirmed = harness_->registry.confirm_context_terminated(harness_->context_registration);
  ASSERT_FALSE(confirmed);
  EXPECT_EQ(confirmed.error().kind(), BindingError::Kind::kContextNotQuiescent);
  EXPECT_EQ(confirmed.error().count(), 1U);
  queue_->mark_device_lost();
  EXPECT_TRUE(harness_->registry.confirm_context_terminated(harness_->context_registration));
}

TEST_P(Deferred, DeviceLossSettlesQueuedRequestsWithoutTheAllocator) {
  covers("DQ-012", "DQ-013");
  queue_->record_use();
  ASSERT_TRUE(owner().release_deferred(queue_->queue()));
  ASSERT_TRUE(owner().release_deferred(queue_->queue()));
  queue_->mark_device_lost();
  EXPECT_EQ(queue_->queue().pending(), 0U);
  EXPECT_EQ(harness_->allocator->release_calls.load(), 0U) << "the allocator was called after device loss";
  const MechanismSnapshot snapshot = harness_->snapshot();
  EXPECT_EQ(snapshot.queued_releases, 0U);
  EXPECT_EQ(snapshot.quarantined_allocations, 2U);
  for (const auto& record : harness_->binding->quarantined()) {
    EXPECT_EQ(record.state, AllocationReleaseState::kDeviceLost);
    EXPECT_EQ(record.reason.kind, QuarantineReason::Kind::kDeviceLost);
  }
  // Only residuals remain: they must not keep the context from tearing down.
  harness_->context->begin_retirement();
  EXPECT_TRUE(harness_->context->teardown(std::chrono::steady_clock::now() + std::chrono::seconds(5)));
}

TEST_P(Deferred, ARetiringContextRefusesWorkAndTheOwnerStaysLive) {
  covers("DQ-014", "DQ-015", "DQ-016");
  auto allocation = owner();
  const AllocationIdentity identity = allocation.identity();
  harness_->context->begin_retirement();
  auto refused = std::move(allocation).release_deferred(queue_->queue());
  ASSERT_FALSE(refused) << "a queue whose context is retiring took work";
  EXPECT_EQ(refused.error().error().kind(), BindingError::Kind::kDeferredRefused);
  const std::string message = refused.error().error().message();
  EXPECT_NE(message.find("no longer accepting work"), std::string::npos) << message;
  EXPECT_NE(message.find("stays live"), std::string::npos) << message;
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
  Expected<DeferredEnqueued, DeferredEnqueueError> enqueue(
      PreparedAllocationRelease&& request, ProviderContextPin pin) noexcept override {
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

TEST_P(Deferred, EnqueueIsCalledWithNoLockHeld) {
  covers("DQ-003", "LOCK-002");
  ReenteringQueue probe(queue_->queue(), *harness_);
  auto disposition = owner().release_deferred(probe);
  ASSERT_TRUE(disposition);
  EXPECT_TRUE(disposition->is_queued());
  EXPECT_TRUE(probe.reentered_snapshot) << "the request was not counted as queued when enqueue ran";
  EXPECT_TRUE(probe.reentered_registry);
}

TEST_P(Deferred, EnqueueDoesNotWaitForTheDevice) {
  covers("DQ-004");
  // Work that never finishes: an enqueue that waited on it would never return.
  queue_->record_use();
  for (int i = 0; i < 64; ++i) ASSERT_TRUE(owner(32).release_deferred(queue_->queue()));
  EXPECT_EQ(queue_->queue().pending(), 64U);
  EXPECT_EQ(queue_->drain(), 0U);
  queue_->signal_fences();
  EXPECT_EQ(queue_->drain(), 64U);
}

ORTMEM_CTS_INSTANTIATE(Deferred);

}  // namespace
}  // namespace ortmem::cts
