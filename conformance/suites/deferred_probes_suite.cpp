// Deterministic probes of the deferred queue between two protocol steps and
// with more work pending than one request: after a drain on refill, between
// a fence being signalled and the drain, with several requests pending when
// the device is lost or the queue fills or closes, batches longer than eight,
// and fill-drain-refill cycles of a bounded queue. pending() is read after
// every step.
#include <algorithm>
#include <chrono>
#include <string_view>
#include <vector>

#include "support/registry_harness.hpp"
#include "support/suite.hpp"

namespace ortmem::cts {
namespace {

class DeferredProbe : public RequiringCapability<RegistrySuite, Capability::kDeferredQueue> {
 protected:
  std::unique_ptr<QueueUnderTest> queue(std::optional<std::size_t> capacity = std::nullopt) {
    auto made = adapter().make_queue(*harness_->context, {.capacity = capacity});
    EXPECT_NE(made, nullptr);
    return made;
  }
  // Enqueues one release; a refusal here is a precondition failure.
  void enqueue(QueueUnderTest& target, std::size_t bytes = 64) {
    ORTMEM_CTS_PRECONDITION();
    auto disposition = owner(bytes).release_deferred(target.queue());
    ASSERT_TRUE(disposition);
    ASSERT_TRUE(disposition->is_queued()) << "refused: " << static_cast<int>(disposition->rejection().value());
  }
  [[nodiscard]] std::size_t releases(const QueueUnderTest& target) const { return harness_->releases_run(target); }
  // Up to `wanted` requests (no more than a bounded queue holds) left
  // waiting behind unfinished work; returns how many.
  std::size_t enqueue_behind_work(QueueUnderTest& target, std::size_t wanted) {
    target.record_use();
    const std::size_t count = std::min(wanted, target.capacity().value_or(wanted));
    for (std::size_t i = 0; i < count && !HasFatalFailure(); ++i) enqueue(target);
    return count;
  }
};

TEST_P(DeferredProbe, ARequestEnqueuedAfterADrainEmptiedTheQueueStillWaitsForItsFence) {
  covers("DQ-001");
  ORTMEM_CTS_REQUIRE_CONTROL(Control::kFences);
  auto target = queue();
  target->record_use();
  enqueue(*target);
  target->signal_fences();
  ASSERT_EQ(target->drain(), 1U);
  // The refill: new work, and a request behind it.
  target->record_use();
  enqueue(*target);
  ORTMEM_CTS_CHECKING("DQ-001");
  EXPECT_EQ(target->drain(), 0U) << "a request enqueued after a drain ran before its fence passed";
  EXPECT_EQ(releases(*target), 1U);
  target->signal_fences();
  EXPECT_EQ(target->drain(), 1U);
}

TEST_P(DeferredProbe, DeviceLossBetweenTheSignalAndTheDrainMakesNoAllocatorCall) {
  covers("DQ-012");
  ORTMEM_CTS_REQUIRE_CONTROL(Control::kFences);
  ORTMEM_CTS_REQUIRE_CONTROL(Control::kQueueDeviceLoss);
  auto target = queue();
  target->record_use();
  for (int i = 0; i < 3; ++i) enqueue(*target);
  target->signal_fences();
  // A queue with threads of its own may release a request whose fence
  // passed before it is told of the loss; from then on it may release none.
  const std::size_t before_loss = releases(*target);
  target->mark_device_lost();
  ORTMEM_CTS_CHECKING("DQ-012");
  (void)target->drain();
  EXPECT_EQ(harness_->releases_after_loss(*target, before_loss), 0U)
      << "requests whose fences had passed were released after device loss";
  EXPECT_EQ(target->queue().pending(), 0U);
  EXPECT_EQ(harness_->snapshot().quarantined_allocations + releases(*target), 3U)
      << "of 3 requests, " << releases(*target) << " released before the loss and "
      << harness_->snapshot().quarantined_allocations << " quarantined";
}

// DQ-013's probes: requests left waiting behind work settle without the
// allocator, on a queue whose fences and device loss the kit controls.
class SettledResiduals : public DeferredProbe {
 protected:
  void SetUp() override {
    DeferredProbe::SetUp();
    if (ended()) return;
    ORTMEM_CTS_REQUIRE_CONTROL(Control::kFences);
    ORTMEM_CTS_REQUIRE_CONTROL(Control::kQueueDeviceLoss);
  }

  // DQ-013: once `pending` requests settled without the allocator (`how`),
  // the queue holds only their residuals, which must not keep its context
  // from tearing down.
  void expect_context_tears_down(std::size_t pending, std::string_view how) {
    harness_->context->begin_retirement();
    ORTMEM_CTS_CHECKING("DQ-013");
    EXPECT_TRUE(harness_->context->teardown(std::chrono::steady_clock::now() + std::chrono::seconds(5)))
        << "a queue holding only the residuals of " << pending << " requests " << how << " kept its context";
  }
};

TEST_P(SettledResiduals, ManyPendingRequestsSettledByDeviceLossLeaveTheContextFreeToTearDown) {
  covers("DQ-013");
  auto target = queue();
  const std::size_t pending = enqueue_behind_work(*target, 6);
  target->mark_device_lost();
  expect_context_tears_down(pending, "settled by device loss");
}

// The other way requests settle without the allocator: the queue drains them
// into a mechanism the registry has already declared device-lost, so each
// settles as a device-lost residual, and the queue itself never saw a loss.
TEST_P(SettledResiduals, RequestsDrainedIntoALostMechanismLeaveTheContextFreeToTearDown) {
  covers("DQ-013");
  auto target = queue();
  const std::size_t pending = enqueue_behind_work(*target, 4);
  {
    ORTMEM_CTS_PRECONDITION();
    ASSERT_TRUE(harness_->registry.invalidate_device(adapter().info().device, "the kit declared the device lost"));
    target->signal_fences();
    (void)target->drain();
    ASSERT_EQ(target->queue().pending(), 0U) << "requests whose fences had passed were still waiting after a drain";
    ASSERT_EQ(harness_->allocator->release_calls.load(), 0U)
        << "the kit called the allocator of a device-lost mechanism";
  }
  expect_context_tears_down(pending, "settled at the device-lost gate");
}

TEST_P(DeferredProbe, ABatchOfThirtyTwoRunsInFifoOrder) {
  covers("DQ-002");
  auto target = queue();
  const std::size_t batch = std::min<std::size_t>(32, target->capacity().value_or(32));
  target->record_use();
  std::vector<void*> order;
  for (std::size_t i = 0; i < batch; ++i) {
    auto allocation = owner(64 + 16 * i);
    order.push_back(allocation.data());
    ORTMEM_CTS_PRECONDITION();
    ASSERT_TRUE(std::move(allocation).release_deferred(target->queue()));
  }
  target->signal_fences();
  ORTMEM_CTS_CHECKING("DQ-002");
  EXPECT_EQ(target->drain(), batch);
  EXPECT_EQ(harness_->release_order(*target), order) << "a batch of " << batch << " ran out of order";
  EXPECT_EQ(RegistryHarness::protocol_violations(*target), "");
  {
    ORTMEM_CTS_CHECKING("ALLOC-017");
    EXPECT_EQ(RegistryHarness::misreported_completions(*target), "");
  }
}

TEST_P(DeferredProbe, AFullQueueThatIsClosedOrLostAnswersByPrecedence) {
  covers("DQ-006");
  ORTMEM_CTS_REQUIRE_CONTROL(Control::kQueueCapacity);
  ORTMEM_CTS_REQUIRE_CONTROL(Control::kQueueClose);
  ORTMEM_CTS_REQUIRE_CONTROL(Control::kQueueDeviceLoss);
  auto target = queue(4);
  const auto capacity = target->capacity();
  if (!capacity) GTEST_SKIP() << kNotApplicable << "the queue is unbounded: it is never full";
  target->record_use();
  for (std::size_t i = 0; i < *capacity; ++i) enqueue(*target);
  {
    ORTMEM_CTS_PRECONDITION();
    auto full = owner().release_deferred(target->queue());
    ASSERT_TRUE(full);
    ASSERT_EQ(full->rejection(), DeferredEnqueueRejection::kFull);
  }
  ORTMEM_CTS_CHECKING("DQ-006");
  target->close();
  auto closed = owner().release_deferred(target->queue());
  ASSERT_TRUE(closed);
  EXPECT_EQ(closed->rejection(), DeferredEnqueueRejection::kClosed)
      << "with " << *capacity << " pending, closed must win over full";
  target->mark_device_lost();
  auto lost = owner().release_deferred(target->queue());
  ASSERT_TRUE(lost);
  EXPECT_EQ(lost->rejection(), DeferredEnqueueRejection::kDeviceLost) << "device-lost must win over closed and full";
}

TEST_P(DeferredProbe, PendingIsExactAfterEveryStepOfFillDrainRefillCycles) {
  covers("DQ-011");
  ORTMEM_CTS_REQUIRE_CONTROL(Control::kFences);
  auto target = queue(3);
  const std::size_t capacity = target->capacity().value_or(3);
  const bool bounded = target->capacity().has_value();
  for (int cycle = 0; cycle < 4 && !HasFatalFailure(); ++cycle) {
    target->record_use();
    for (std::size_t i = 0; i < capacity; ++i) {
      enqueue(*target);
      ORTMEM_CTS_CHECKING("DQ-011");
      EXPECT_EQ(target->queue().pending(), i + 1) << "cycle " << cycle;
    }
    if (bounded) {
      ORTMEM_CTS_CHECKING("DQ-011");
      auto over = owner().release_deferred(target->queue());
      ASSERT_TRUE(over);
      EXPECT_FALSE(over->is_queued()) << "cycle " << cycle << ": a full queue of " << capacity << " took one more";
      EXPECT_EQ(target->queue().pending(), capacity);
    }
    target->signal_fences();
    {
      ORTMEM_CTS_PRECONDITION();
      ASSERT_EQ(target->drain(), capacity);
    }
    ORTMEM_CTS_CHECKING("DQ-011");
    EXPECT_EQ(target->queue().pending(), 0U) << "cycle " << cycle;
  }
}

// The fences failing, where the adapter's fences are a test double the kit
// may fail (a simulated device's events): an event that cannot be recorded,
// and a device that reports an error instead of passing a fence.
class FenceFaultProbe : public DeferredProbe {
 protected:
  // The queue and its fence faults; skips where the fences are real.
  std::pair<std::unique_ptr<QueueUnderTest>, std::shared_ptr<FenceFaults>> faulty_queue() {
    auto target = queue();
    auto faults = target ? target->fence_faults() : nullptr;
    return {std::move(target), std::move(faults)};
  }
};

TEST_P(FenceFaultProbe, AFenceThatCannotBeRecordedRefusesTheRequestWithoutLosingIt) {
  covers("DQ-005", "DQ-007");
  auto [target, faults] = faulty_queue();
  if (!faults) GTEST_SKIP() << kNotApplicable << "the adapter's fences are real: the kit cannot make them fail";
  faults->refuse_records(true);
  auto allocation = owner(64);
  void* const data = allocation.data();
  auto refused = std::move(allocation).release_deferred(target->queue());
  ASSERT_TRUE(refused);
  ORTMEM_CTS_CHECKING("DQ-005");
  EXPECT_FALSE(refused->is_queued()) << "a request was accepted with no fence recorded for it";
  EXPECT_EQ(refused->rejection(), DeferredEnqueueRejection::kRefused);
  EXPECT_EQ(target->queue().pending(), 0U);
  ORTMEM_CTS_CHECKING("DQ-007");
  EXPECT_EQ(harness_->snapshot().quarantined_allocations, 1U) << "the refused request was not quarantined";
  EXPECT_EQ(harness_->releases_run(*target), 0U) << "a request refused for want of a fence was freed";
  // Recording again, the queue takes requests again, and this one runs.
  faults->refuse_records(false);
  enqueue(*target);
  target->signal_fences();
  (void)target->drain();
  ORTMEM_CTS_CHECKING("DQ-005");
  const std::vector<void*> order = harness_->release_order(*target);
  EXPECT_EQ(order.size(), 1U) << "once fences record again, the one request accepted must run, and only it";
  EXPECT_EQ(std::count(order.begin(), order.end(), data), 0) << "the refused request ran";
}

TEST_P(FenceFaultProbe, ABrokenFenceSettlesEveryPendingRequestAsDeviceLost) {
  covers("DQ-012");
  auto [target, faults] = faulty_queue();
  if (!faults) GTEST_SKIP() << kNotApplicable << "the adapter's fences are real: the kit cannot break them";
  target->record_use();
  for (int i = 0; i < 3; ++i) enqueue(*target);
  faults->break_fences();
  (void)target->drain();
  ORTMEM_CTS_CHECKING("DQ-012");
  EXPECT_EQ(target->queue().pending(), 0U) << "requests behind a broken fence were still waiting";
  EXPECT_EQ(harness_->releases_run(*target), 0U) << "a request behind a broken fence was released";
  EXPECT_EQ(harness_->snapshot().quarantined_allocations, 3U);
  for (const auto& record : harness_->binding->quarantined()) {
    EXPECT_EQ(record.reason.kind, QuarantineReason::Kind::kDeviceLost);
  }
  auto after = owner().release_deferred(target->queue());
  ASSERT_TRUE(after);
  EXPECT_EQ(after->rejection(), DeferredEnqueueRejection::kDeviceLost)
      << "a queue whose fence broke took another request";
}

TEST_P(FenceFaultProbe, AQueueToldOfDeviceLossMakesNoFenceCall) {
  covers("DQ-012");
  ORTMEM_CTS_REQUIRE_CONTROL(Control::kQueueDeviceLoss);
  auto [target, faults] = faulty_queue();
  if (!faults) GTEST_SKIP() << kNotApplicable << "the adapter's fences are real: the kit cannot count their calls";
  target->record_use();
  for (int i = 0; i < 3; ++i) enqueue(*target);
  // Settling the pending requests is the first thing the queue does on a
  // lost device: it may make no fence call from the moment it is told.
  const std::uint64_t calls = faults->calls();
  target->mark_device_lost();
  {
    ORTMEM_CTS_PRECONDITION();
    auto refused = owner().release_deferred(target->queue());
    ASSERT_TRUE(refused);
    ASSERT_EQ(refused->rejection(), DeferredEnqueueRejection::kDeviceLost);
  }
  target->signal_fences();
  (void)target->drain();
  target.reset();
  ORTMEM_CTS_CHECKING("DQ-012");
  EXPECT_EQ(faults->calls(), calls) << "the queue made " << faults->calls() - calls
                                    << " fence calls (a driver call each) once it was told the device was lost";
}

ORTMEM_CTS_INSTANTIATE(DeferredProbe);
ORTMEM_CTS_INSTANTIATE(SettledResiduals);
ORTMEM_CTS_INSTANTIATE(FenceFaultProbe);

}  // namespace
}  // namespace ortmem::cts
