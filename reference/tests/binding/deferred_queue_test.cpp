// Deferred release through the reference host queue: fences, order, refusal, pins, device loss.
#include "ortmem/mechanism/fenced_deferred_queue.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "ortmem/deferred.hpp"
#include "ortmem/mechanism/host_stream.hpp"
#include "ortmem/mechanism/provider_context.hpp"
#include "ortmem/owning_allocation.hpp"
#include "ortmem/registry.hpp"
#include "support/binding_fixture.hpp"
#include "support/requirements.hpp"
#include "support/test_queue.hpp"

namespace ortmem {
namespace {

using mechanism::FencedDeferredQueue;
using mechanism::ProviderContext;
using mechanism::HostStream;
using test_support::BindingTest;
using test_support::Counts;
using test_support::covers;
using test_support::has_counts;
using test_support::is_kind;
using Kind = BindingError::Kind;
using Rejection = DeferredEnqueueRejection;
using State = AllocationReleaseState;
using Reason = QuarantineReason::Kind;

class DeferredQueueTest : public BindingTest {
 protected:
  void SetUp() override {
    m_ = add();
    binding_.emplace(bind(m_));
    context_ = std::make_shared<mechanism::ProviderContext>(m_.context.identity);
    stream_ = std::make_shared<mechanism::HostStream>();
    queue_ = make_queue({});
  }
  std::unique_ptr<mechanism::FencedDeferredQueue> make_queue(mechanism::FencedDeferredQueue::Options options) {
    return std::make_unique<mechanism::FencedDeferredQueue>(context_, stream_, options);
  }
  OwningAllocation owner(std::size_t bytes = 64) {
    auto created = binding_->allocate_owning(bytes, 8);
    EXPECT_TRUE(created);
    return std::move(*created);
  }
  PreparedAllocationRelease prepared(std::size_t bytes = 64) { return *owner(bytes).prepare_release(); }

  test_support::Registered m_;
  std::optional<MemoryBinding> binding_;
  std::shared_ptr<mechanism::ProviderContext> context_;
  std::shared_ptr<mechanism::HostStream> stream_;
  std::unique_ptr<mechanism::FencedDeferredQueue> queue_;
};

TEST_F(DeferredQueueTest, ARequestWaitsForTheFenceRecordedAtEnqueue) {
  covers("DQ-001");
  const std::uint64_t copy_in = stream_->submit();  // work that still reads the memory
  const std::uint64_t kernel = stream_->submit();   // the last such work when the release is deferred
  auto queued = owner().release_deferred(*queue_);
  ASSERT_TRUE(queued);
  EXPECT_TRUE(queued->is_queued());
  EXPECT_EQ(queued->state(), State::kQueued);
  EXPECT_EQ(queue_->poll(), 0U) << "executed before its fence was observed";
  stream_->complete_through(copy_in);
  EXPECT_EQ(queue_->poll(), 0U) << "executed before the last work submitted at enqueue completed";
  EXPECT_EQ(m_.allocator->release_calls(), 0U);
  const std::uint64_t unrelated = stream_->submit();  // submitted after enqueue: not waited for
  stream_->complete_through(kernel);
  EXPECT_LT(stream_->completed(), unrelated);
  EXPECT_EQ(queue_->poll(), 1U);
  EXPECT_EQ(m_.allocator->release_calls(), 1U);
  EXPECT_TRUE(has_counts(snapshot(m_), Counts{}));
}

TEST_F(DeferredQueueTest, RequestsExecuteInEnqueueOrderExactlyOnce) {
  covers("DQ-002");
  std::vector<void*> order;
  std::vector<std::uint64_t> tickets;
  for (int i = 0; i < 5; ++i) {
    tickets.push_back(stream_->submit());
    auto next = owner();
    order.push_back(next.data());
    ASSERT_TRUE(std::move(next).release_deferred(*queue_));
  }
  EXPECT_EQ(queue_->pending(), 5U);
  stream_->complete_through(tickets[1]);
  EXPECT_EQ(queue_->poll(), 2U);
  EXPECT_EQ(queue_->pending(), 3U);
  stream_->complete_all();
  EXPECT_EQ(queue_->poll(), 3U);
  EXPECT_EQ(queue_->poll(), 0U) << "a request ran twice";
  EXPECT_EQ(queue_->executed(), 5U);
  EXPECT_EQ(m_.allocator->released_addresses(), order);
  EXPECT_EQ(m_.allocator->release_calls(), 5U);
  EXPECT_EQ(m_.allocator->failed_releases(), 0U);
  EXPECT_TRUE(has_counts(snapshot(m_), Counts{}));
}

TEST_F(DeferredQueueTest, PollersRacingEachOtherKeepTheOrderAndRunEachRequestOnce) {
  covers("DQ-002");
  // Every request has its own fence, completed one at a time while three
  // threads poll: a poller that ran a later request before an earlier one
  // was done would show as a release out of order.
  constexpr int kRequests = 20000;
  std::vector<void*> order;
  std::vector<std::uint64_t> tickets;
  for (int i = 0; i < kRequests; ++i) {
    tickets.push_back(stream_->submit());
    auto next = owner();
    order.push_back(next.data());
    ASSERT_TRUE(std::move(next).release_deferred(*queue_));
  }
  std::atomic<std::size_t> ran{0};
  std::vector<std::thread> pollers;
  for (int t = 0; t < 3; ++t) {
    pollers.emplace_back([&] {
      while (ran.load() < kRequests) ran += queue_->poll();
    });
  }
  for (const std::uint64_t ticket : tickets) stream_->complete_through(ticket);
  for (auto& poller : pollers) poller.join();
  EXPECT_EQ(ran.load(), std::size_t{kRequests}) << "a request ran twice";
  EXPECT_EQ(queue_->executed(), std::size_t{kRequests});
  EXPECT_EQ(m_.allocator->released_addresses(), order);
  EXPECT_TRUE(has_counts(snapshot(m_), Counts{}));
}

TEST_F(DeferredQueueTest, EnqueueIsCalledWithNoRegistryOrMechanismLockHeld) {
  covers("DQ-003");
  test_support::RecordingQueue queue(*queue_);
  bool ran = false;
  queue.on_next_enqueue([&](const PreparedAllocationRelease& request) {
    ran = true;
    const auto during = snapshot(m_);  // mechanism lock
    EXPECT_TRUE(has_counts(during, Counts{.active = 1, .queued = 1})) << "the request is prepared before enqueue";
    auto another = registry_.bind(DeviceKey::host());  // registry lock
    ASSERT_TRUE(another);
    EXPECT_TRUE(registry_.register_provider_context(DeviceKey::host()));
    auto nested = another->allocate_owning(8, 8);  // a whole allocate/release cycle on the same mechanism
    ASSERT_TRUE(nested);
    EXPECT_TRUE(std::move(*nested).release_now());
    EXPECT_EQ(request.state(), State::kQueued);
  });
  test_support::within(test_support::kDeadlockLimit, "re-entering the registry from enqueue", [&] {
    auto queued = owner().release_deferred(queue);
    EXPECT_TRUE(queued && queued->is_queued());
  });
  EXPECT_TRUE(ran);
  EXPECT_EQ(queue.enqueue_calls(), 1U);
  EXPECT_EQ(queue.pending(), 1U);
}

TEST_F(DeferredQueueTest, EnqueueNeverWaitsForTheDevice) {
  covers("DQ-004");
  for (int i = 0; i < 3; ++i) (void)stream_->submit();  // never completed during this test
  test_support::within(test_support::kDeadlockLimit, "enqueue while the stream never completes", [&] {
    for (int i = 0; i < 4; ++i) EXPECT_TRUE(owner().release_deferred(*queue_));
  });
  EXPECT_EQ(stream_->completed(), 0U);
  EXPECT_EQ(queue_->pending(), 4U);
  EXPECT_EQ(queue_->poll(), 0U);
  EXPECT_TRUE(has_counts(snapshot(m_), Counts{.active = 4, .queued = 4}));
}

TEST_F(DeferredQueueTest, ARefusalHandsBackTheExactRequestForEveryRejection) {
  covers("DQ-005");
  auto other_source =
      std::make_shared<mechanism::ProviderContext>(registry_.register_provider_context(DeviceKey::host())->identity);
  auto full = make_queue({.capacity = 1});
  ASSERT_TRUE(full->enqueue(prepared(), *full->pin_context()));
  auto closed = make_queue({});
  closed->close();
  auto lost = make_queue({});
  lost->mark_device_lost();

  struct Case {
    mechanism::FencedDeferredQueue* queue;
    bool foreign_pin;
    Rejection expected;
  };
  for (const Case& c :
       {Case{full.get(), false, Rejection::kFull}, Case{closed.get(), false, Rejection::kClosed},
        Case{lost.get(), false, Rejection::kDeviceLost}, Case{queue_.get(), true, Rejection::kRefused}}) {
    auto request = prepared(48);
    const AllocationIdentity identity = request.identity();
    void* const data = request.data();
    auto pin = c.foreign_pin ? other_source->pin() : c.queue->pin_context();
    ASSERT_TRUE(pin);
    auto refused = c.queue->enqueue(std::move(request), std::move(*pin));
    ASSERT_FALSE(refused) << rejection_name(c.expected);
    EXPECT_EQ(refused.error().rejection(), c.expected);
    EXPECT_NE(refused.error().message().find(rejection_name(c.expected)), std::string::npos);
    const PreparedAllocationRelease& back = refused.error().request();
    EXPECT_TRUE(back.is_armed()) << "the request came back disarmed";
    EXPECT_EQ(back.identity(), identity);
    EXPECT_EQ(back.data(), data);
    EXPECT_EQ(back.size(), 48U);
    EXPECT_EQ(back.state(), State::kQueued);
    // Taken back, it is a working request: nothing was dropped or rebuilt.
    auto taken = std::move(refused.error()).take_request();
    EXPECT_EQ(std::move(taken).execute().state(), State::kReleased) << rejection_name(c.expected);
  }
  EXPECT_EQ(m_.allocator->release_calls(), 4U);
  EXPECT_TRUE(has_counts(snapshot(m_), Counts{.active = 1, .queued = 1})) << "only the full queue's own entry";
  EXPECT_EQ(other_source->outstanding_pins(), 0U);
}

TEST_F(DeferredQueueTest, DeviceLostBeatsClosedAndClosedBeatsFull) {
  covers("DQ-006");
  auto queue = make_queue({.capacity = 0});  // always full
  auto attempt = [&] {
    auto refused = queue->enqueue(prepared(), *context_->pin());
    EXPECT_FALSE(refused);
    return refused ? Rejection::kRefused : refused.error().rejection();
  };
  EXPECT_EQ(attempt(), Rejection::kFull);
  queue->close();
  EXPECT_EQ(attempt(), Rejection::kClosed);
  queue->mark_device_lost();
  EXPECT_EQ(attempt(), Rejection::kDeviceLost);
  EXPECT_EQ(m_.allocator->release_calls(), 0U);
}

TEST_F(DeferredQueueTest, ARejectedDeferredReleaseIsQuarantinedAsEnqueueRejected) {
  covers("DQ-007");
  auto full = make_queue({.capacity = 0});
  auto first = owner(100);
  const AllocationIdentity identity = first.identity();
  auto disposition = std::move(first).release_deferred(*full);
  ASSERT_TRUE(disposition);
  EXPECT_FALSE(disposition->is_queued());
  EXPECT_EQ(disposition->identity(), identity);
  EXPECT_EQ(disposition->state(), State::kQuarantined);
  EXPECT_EQ(disposition->rejection(), std::optional{Rejection::kFull});
  ASSERT_TRUE(disposition->outcome());
  EXPECT_EQ(disposition->outcome()->residual()->reason, QuarantineReason::enqueue_rejected(Rejection::kFull));
  EXPECT_EQ(disposition->outcome()->residual()->retained_bytes, 100U);

  auto closed = make_queue({});
  closed->close();
  ASSERT_TRUE(owner(50).release_deferred(*closed));
  EXPECT_EQ(m_.allocator->release_calls(), 0U) << "a rejected request was freed";
  EXPECT_EQ(context_->outstanding_pins(), 0U) << "a rejected request kept its pin";
  EXPECT_TRUE(has_counts(snapshot(m_), Counts{.quarantined = 2, .quarantined_bytes = 150}));
  auto list = *registry_.quarantined(m_.mechanism);
  ASSERT_EQ(list.size(), 2U);
  for (const auto& record : list) {
    EXPECT_EQ(record.state, State::kQuarantined);
    EXPECT_EQ(record.reason,
              QuarantineReason::enqueue_rejected(record.identity == identity ? Rejection::kFull : Rejection::kClosed));
  }
}

TEST_F(DeferredQueueTest, AQueuedAllocationCountsAsQueuedAndIsNotFreed) {
  covers("DQ-008");
  (void)stream_->submit();
  ASSERT_TRUE(owner().release_deferred(*queue_));
  const auto during = snapshot(m_);
  EXPECT_EQ(during.live_allocations, 0U);
  EXPECT_EQ(during.queued_releases, 1U);
  EXPECT_GE(during.active_operations, 1U);
  EXPECT_TRUE(during.retains_ownership());
  EXPECT_EQ(m_.allocator->release_calls(), 0U);
  EXPECT_EQ(queue_->poll(), 0U);
  EXPECT_EQ(m_.allocator->release_calls(), 0U);
}

TEST_F(DeferredQueueTest, AQueuedRequestPinsItsContextUntilItSettles) {
  covers("DQ-009");
  (void)stream_->submit();
  ASSERT_TRUE(owner().release_deferred(*queue_));
  ASSERT_TRUE(owner().release_deferred(*queue_));
  EXPECT_EQ(context_->outstanding_pins(), 2U);
  auto busy = context_->try_teardown();
  ASSERT_FALSE(busy) << "teardown finished with queued requests";
  EXPECT_EQ(busy.error().outstanding_pins, 2U);
  stream_->complete_all();
  EXPECT_EQ(queue_->poll(), 2U) << "a retiring context still drains what it accepted";
  EXPECT_EQ(context_->outstanding_pins(), 0U);
  EXPECT_TRUE(context_->try_teardown());
  EXPECT_EQ(context_->state(), mechanism::ProviderContext::State::kTerminated);
  EXPECT_EQ(m_.allocator->release_calls(), 2U);
}

TEST_F(DeferredQueueTest, AQueueRefusesARequestOfAnotherContext) {
  covers("DQ-009", "DQ-005");
  // Another mechanism with its own context: its request cannot be pinned by this queue.
  const auto other = add();
  auto foreign_request = *std::move(*bind(other).allocate_owning(64, 8)).prepare_release();
  const AllocationIdentity identity = foreign_request.identity();
  auto refused = queue_->enqueue(std::move(foreign_request), *queue_->pin_context());
  ASSERT_FALSE(refused) << "a request was queued holding a pin on a context that is not its own";
  EXPECT_EQ(refused.error().rejection(), Rejection::kRefused);
  EXPECT_EQ(refused.error().request().identity(), identity);
  EXPECT_EQ(context_->outstanding_pins(), 0U);
  EXPECT_EQ(std::move(refused.error()).take_request().execute().state(), State::kReleased);
}

TEST_F(DeferredQueueTest, QueuedReleasesBlockRemovalAndTerminationConfirmation) {
  covers("DQ-010");
  (void)stream_->submit();
  ASSERT_TRUE(owner().release_deferred(*queue_));
  ASSERT_TRUE(registry_.retire(m_.mechanism));
  auto removed = registry_.remove(m_.mechanism);
  ASSERT_FALSE(removed);
  EXPECT_TRUE(is_kind(removed.error(), Kind::kInactiveMechanism));

  ASSERT_TRUE(registry_.invalidate_device(DeviceKey::host(), "lost"));
  auto confirmed = registry_.confirm_context_terminated(m_.context);
  ASSERT_FALSE(confirmed);
  EXPECT_TRUE(is_kind(confirmed.error(), Kind::kContextNotQuiescent));
  EXPECT_EQ(confirmed.error().count(), 1U);
  EXPECT_EQ(confirmed.error().context(), m_.context.identity);
  EXPECT_FALSE(registry_.remove(m_.mechanism));
  EXPECT_EQ(snapshot(m_).lifecycle, MechanismLifecycle::kDeviceLost) << "a refused confirmation changed the state";

  stream_->complete_all();
  EXPECT_EQ(queue_->poll(), 1U);  // settles device-lost, no allocator call
  EXPECT_EQ(m_.allocator->release_calls(), 0U);
  EXPECT_TRUE(registry_.confirm_context_terminated(m_.context));
  EXPECT_TRUE(registry_.remove(m_.mechanism));
}

TEST_F(DeferredQueueTest, PendingIsExactAndABoundedQueueStopsAtItsCapacity) {
  covers("DQ-011");
  auto bounded = make_queue({.capacity = 3});
  EXPECT_EQ(bounded->capacity(), std::optional<std::size_t>{3});
  (void)stream_->submit();
  std::size_t full = 0;
  for (std::size_t i = 0; i < 6; ++i) {
    auto disposition = owner().release_deferred(*bounded);
    ASSERT_TRUE(disposition);
    if (!disposition->is_queued()) {
      ++full;
      EXPECT_EQ(disposition->rejection(), std::optional{Rejection::kFull});
    }
    EXPECT_EQ(bounded->pending(), std::min<std::size_t>(i + 1, 3));
  }
  EXPECT_EQ(full, 3U);
  EXPECT_EQ(queue_->pending(), 0U) << "another queue's pending() moved";
  stream_->complete_all();
  EXPECT_EQ(bounded->poll(), 3U);
  EXPECT_EQ(bounded->pending(), 0U);
  // Space freed by execution is usable again.
  EXPECT_TRUE(owner().release_deferred(*bounded)->is_queued());
  EXPECT_EQ(bounded->pending(), 1U);
}

TEST_F(DeferredQueueTest, MarkDeviceLostSettlesPendingRequestsWithoutTheAllocatorAndPinsLastUntilSettled) {
  covers("DQ-012", "DQ-013");
  auto source = std::make_shared<test_support::ObservingPinSource>(m_.context.identity);
  mechanism::FencedDeferredQueue queue(source, stream_);
  (void)stream_->submit();
  ASSERT_TRUE(owner(10).release_deferred(queue));
  ASSERT_TRUE(owner(20).release_deferred(queue));
  EXPECT_EQ(source->outstanding(), 2U);

  // At the moment each pin is given back, its request must already have settled.
  std::vector<MechanismSnapshot> at_release;
  source->on_release([&] { at_release.push_back(snapshot(m_)); });
  EXPECT_EQ(queue.mark_device_lost(), 2U);
  source->on_release(nullptr);
  ASSERT_EQ(at_release.size(), 2U);
  for (std::size_t i = 0; i < at_release.size(); ++i) {
    // The i-th pin goes only after at least i + 1 requests have settled.
    EXPECT_GE(at_release[i].quarantined_allocations, i + 1) << "a pin was released before its request settled";
    EXPECT_EQ(at_release[i].queued_releases + at_release[i].quarantined_allocations, 2U);
  }
  EXPECT_EQ(source->outstanding(), 0U) << "a queue of settled residuals still pins its context";
  EXPECT_EQ(queue.pending(), 0U);
  EXPECT_EQ(m_.allocator->release_calls(), 0U);
  EXPECT_TRUE(has_counts(snapshot(m_), Counts{.quarantined = 2, .quarantined_bytes = 30}));
  const auto settled = *registry_.quarantined(m_.mechanism);
  ASSERT_EQ(settled.size(), 2U);
  for (const auto& record : settled) {
    EXPECT_EQ(record.state, State::kDeviceLost);
    EXPECT_EQ(record.reason, QuarantineReason::of(Reason::kDeviceLost));
  }
  // Later work is refused as device-lost and the queue does not execute anything.
  auto late = owner().release_deferred(queue);
  ASSERT_TRUE(late);
  EXPECT_EQ(late->rejection(), std::optional{Rejection::kDeviceLost});
  stream_->complete_all();
  EXPECT_EQ(queue.poll(), 0U);
  EXPECT_EQ(m_.allocator->release_calls(), 0U);
}

TEST_F(DeferredQueueTest, ADeviceInvalidatedWhileQueuedSettlesAtPollWithoutTheAllocator) {
  covers("DQ-012", "DQ-009");
  (void)stream_->submit();
  ASSERT_TRUE(owner(10).release_deferred(*queue_));
  ASSERT_TRUE(owner(20).release_deferred(*queue_));
  ASSERT_TRUE(registry_.invalidate_device(DeviceKey::host(), "lost"));
  context_->mark_device_lost();
  EXPECT_EQ(context_->outstanding_pins(), 2U) << "invalidation must not drop the pins of unsettled requests";
  EXPECT_FALSE(context_->try_teardown());
  stream_->complete_all();
  EXPECT_EQ(queue_->poll(), 2U);
  EXPECT_EQ(context_->outstanding_pins(), 0U);
  EXPECT_EQ(m_.allocator->release_calls(), 0U);
  EXPECT_TRUE(has_counts(snapshot(m_), Counts{.quarantined = 2, .quarantined_bytes = 30}));
  const auto settled = *registry_.quarantined(m_.mechanism);
  ASSERT_EQ(settled.size(), 2U);
  for (const auto& record : settled) EXPECT_EQ(record.state, State::kDeviceLost);
  EXPECT_TRUE(context_->try_teardown());
}

TEST_F(DeferredQueueTest, AQueueHoldingOnlyResidualsDoesNotKeepItsContextAlive) {
  covers("DQ-013");
  (void)stream_->submit();
  ASSERT_TRUE(owner().release_deferred(*queue_));
  ASSERT_TRUE(owner().release_deferred(*queue_));
  queue_->mark_device_lost();
  // The queue object is still here, holding nothing but settled residuals.
  EXPECT_EQ(context_->outstanding_pins(), 0U);
  EXPECT_TRUE(context_->try_teardown()) << "the residual-only queue kept its own context from tearing down";
  EXPECT_TRUE(has_counts(snapshot(m_), Counts{.quarantined = 2, .quarantined_bytes = 128}));
}

TEST_F(DeferredQueueTest, TheQueueRefusesNewWorkOnceItsContextIsRetiring) {
  covers("DQ-014");
  context_->begin_retirement();
  auto pin = queue_->pin_context();
  ASSERT_FALSE(pin);
  EXPECT_EQ(pin.error().kind, ProviderContextPinError::Kind::kContextUnavailable);
  EXPECT_EQ(pin.error().context, m_.context.identity);
  EXPECT_EQ(queue_->pending(), 0U);
}

TEST_F(DeferredQueueTest, ARefusedPinLeavesTheOwnerLiveAndSaysWhatToDo) {
  covers("DQ-015", "DQ-016");
  test_support::RecordingQueue queue(*queue_);
  auto created = owner(64);
  const AllocationIdentity identity = created.identity();
  context_->begin_retirement();

  auto refused = std::move(created).release_deferred(queue);
  ASSERT_FALSE(refused);
  const BindingError& error = refused.error().error();
  EXPECT_TRUE(is_kind(error, Kind::kDeferredRefused));
  ASSERT_TRUE(error.pin_error());
  EXPECT_EQ(error.pin_error()->kind, ProviderContextPinError::Kind::kContextUnavailable);
  EXPECT_EQ(error.context(), m_.context.identity);
  const std::string message = error.message();
  EXPECT_NE(message.find("no longer accepting work"), std::string::npos) << message;
  EXPECT_NE(message.find("stays live"), std::string::npos) << message;
  EXPECT_NE(message.find("normal path"), std::string::npos) << message;

  EXPECT_EQ(refused.error().state(), State::kLive);
  EXPECT_EQ(queue.enqueue_calls(), 0U) << "a release whose pin was refused was queued";
  EXPECT_TRUE(has_counts(snapshot(m_), Counts{.live = 1})) << "a refused pin must not quarantine";
  OwningAllocation back = std::move(refused.error()).take_allocation();
  EXPECT_EQ(back.identity(), identity);
  auto released = std::move(back).release_now();
  ASSERT_TRUE(released);
  EXPECT_EQ(released->state(), State::kReleased);
  EXPECT_EQ(m_.allocator->release_calls(), 1U);
  EXPECT_TRUE(has_counts(snapshot(m_), Counts{}));
}

}  // namespace
}  // namespace ortmem
