// The fenced queue's event paths, with fault-injecting fences (a test double
// of CUDA events): what a device does only when it fails — an event that
// cannot be recorded, a fence the device reports broken — which fences go
// back, and polling under contention. Ordering and refusal rules are
// certified by the kit's deferred suite through the host adapters (fences on
// a host stream) and cuda-vmm-simulated (these fences).
#include "ortmem/mechanism/fenced_deferred_queue.hpp"
#include "ortmem/mechanism/host_stream.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "ortmem/mechanism/provider_context.hpp"
#include "ortmem/mechanism/testing/fault_injecting_fences.hpp"
#include "support/binding_fixture.hpp"
#include "support/requirements.hpp"

namespace ortmem::mechanism {
namespace {

using ortmem::test_support::BindingTest;
using ortmem::test_support::Counts;
using ortmem::test_support::covers;
using ortmem::test_support::has_counts;
using State = AllocationReleaseState;

class FencedDeferredQueueTest : public BindingTest {
 protected:
  void SetUp() override {
    m_ = add();
    binding_.emplace(bind(m_));
    context_ = std::make_shared<ProviderContext>(m_.context.identity);
    queue_ = std::make_unique<FencedDeferredQueue>(context_, fences_);
  }
  OwningAllocation owner() {
    auto created = binding_->allocate_owning(64, 8);
    EXPECT_TRUE(created);
    return std::move(*created);
  }

  ortmem::test_support::Registered m_;
  std::optional<MemoryBinding> binding_;
  std::shared_ptr<ProviderContext> context_;
  std::shared_ptr<HostStream> stream_ = std::make_shared<HostStream>();
  std::shared_ptr<testing::FaultInjectingFences> fences_ = std::make_shared<testing::FaultInjectingFences>(stream_);
  std::unique_ptr<FencedDeferredQueue> queue_;
};

TEST_F(FencedDeferredQueueTest, AFenceThatCannotBeRecordedHandsTheRequestBackRefused) {
  covers("DQ-005", "DQ-007");
  fences_->refuse_records(true);
  auto disposition = owner().release_deferred(*queue_);
  ASSERT_TRUE(disposition);
  EXPECT_FALSE(disposition->is_queued());
  EXPECT_EQ(disposition->rejection(), DeferredEnqueueRejection::kRefused);
  EXPECT_EQ(queue_->pending(), 0U);
  EXPECT_EQ(m_.allocator->release_calls(), 0U) << "a refused request must not be freed";
  EXPECT_EQ(context_->outstanding_pins(), 0U) << "the refused request's pin was kept";
}

TEST_F(FencedDeferredQueueTest, ABrokenFenceSettlesEverythingAsDeviceLostWithoutTheAllocator) {
  covers("DQ-012", "DQ-013");
  (void)stream_->submit();
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(owner().release_deferred(*queue_));
  EXPECT_EQ(context_->outstanding_pins(), 3U);
  fences_->break_fences();
  EXPECT_EQ(queue_->poll(), 0U);
  EXPECT_EQ(queue_->pending(), 0U);
  EXPECT_EQ(m_.allocator->release_calls(), 0U) << "the allocator was called after device loss";
  EXPECT_EQ(context_->outstanding_pins(), 0U) << "settled residuals still pin the context";
  EXPECT_EQ(fences_->discarded(), 0U) << "a fence of a lost device was handed back to the driver";
  const auto counts = snapshot(m_);
  EXPECT_EQ(counts.quarantined_allocations, 3U);
  const auto records = binding_->quarantined();
  ASSERT_EQ(records.size(), 3U);
  for (const auto& record : records) EXPECT_EQ(record.state, State::kDeviceLost);
  auto after = owner().release_deferred(*queue_);
  ASSERT_TRUE(after);
  EXPECT_EQ(after->rejection(), DeferredEnqueueRejection::kDeviceLost);
}

TEST_F(FencedDeferredQueueTest, PassedFencesAreDiscardedAndPendingOnesAreOnlyQueried) {
  covers("DQ-001", "DQ-004");
  const std::uint64_t first = stream_->submit();
  ASSERT_TRUE(owner().release_deferred(*queue_));
  (void)stream_->submit();
  ASSERT_TRUE(owner().release_deferred(*queue_));
  EXPECT_EQ(fences_->recorded(), 2U);
  stream_->complete_through(first);
  EXPECT_EQ(queue_->poll(), 1U);
  EXPECT_EQ(fences_->discarded(), 1U);
  EXPECT_EQ(queue_->pending(), 1U);
  stream_->complete_all();
  EXPECT_EQ(queue_->poll(), 1U);
  EXPECT_EQ(fences_->discarded(), 2U);
  EXPECT_TRUE(has_counts(snapshot(m_), Counts{}));
}

TEST_F(FencedDeferredQueueTest, ADestroyedQueueAbandonsItsRequestsAndReturnsTheirFences) {
  covers("DQ-013");
  (void)stream_->submit();
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(owner().release_deferred(*queue_));
  queue_.reset();
  EXPECT_EQ(fences_->discarded(), 2U) << "the pending requests' events were not handed back";
  EXPECT_EQ(m_.allocator->release_calls(), 0U) << "an abandoned request was freed";
  EXPECT_EQ(context_->outstanding_pins(), 0U);
  EXPECT_EQ(snapshot(m_).quarantined_allocations, 2U);
}

TEST_F(FencedDeferredQueueTest, ConcurrentEnqueueAndPollRunEachRequestOnce) {
  covers("DQ-002", "DQ-011");
  constexpr int kPerThread = 200;
  std::atomic<bool> done{false};
  std::atomic<std::size_t> ran{0};
  std::thread poller([&] {
    while (!done.load()) {
      stream_->complete_all();
      ran += queue_->poll();
    }
  });
  std::vector<std::thread> producers;
  for (int t = 0; t < 2; ++t) {
    producers.emplace_back([&] {
      for (int i = 0; i < kPerThread; ++i) {
        (void)stream_->submit();
        auto disposition = owner().release_deferred(*queue_);
        EXPECT_TRUE(disposition && disposition->is_queued());
      }
    });
  }
  for (auto& producer : producers) producer.join();
  done = true;
  poller.join();
  stream_->complete_all();
  ran += queue_->poll();
  EXPECT_EQ(ran.load(), 2U * kPerThread);
  EXPECT_EQ(m_.allocator->release_calls(), 2U * kPerThread);
  EXPECT_TRUE(has_counts(snapshot(m_), Counts{}));
}

}  // namespace
}  // namespace ortmem::mechanism
