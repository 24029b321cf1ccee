// Concurrency: racing releases, lifecycle churn and bounded queues under several threads.
//
// Sized to finish well under a second in the default build; the same tests run
// under the asan and tsan presets, where tsan also checks the lock order.
#include "ortmem/registry.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <latch>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <thread>
#include <vector>

#include "ortmem/deferred.hpp"
#include "ortmem/mechanism/fenced_deferred_queue.hpp"
#include "ortmem/mechanism/host_stream.hpp"
#include "ortmem/mechanism/provider_context.hpp"
#include "ortmem/owning_allocation.hpp"
#include "support/binding_fixture.hpp"
#include "support/requirements.hpp"

namespace ortmem {
namespace {

using test_support::BindingTest;
using test_support::CountingAllocator;
using test_support::Counts;
using test_support::covers;
using test_support::has_counts;
using test_support::is_kind;
using Kind = BindingError::Kind;

using ConcurrencyTest = BindingTest;

TEST_F(ConcurrencyTest, EightThreadsRacingToReleaseCopiesOfTheSameMetadataFreeEachAllocationExactlyOnce) {
  covers("REL-014", "REL-003");
  constexpr int kThreads = 8;
  constexpr int kAllocations = 48;
  const auto m = add();
  const auto binding = bind(m);
  std::vector<BoundAllocation> allocations;
  for (int i = 0; i < kAllocations; ++i) allocations.push_back(*binding.allocate(64, 16));
  std::vector<std::atomic<int>> wins(kAllocations);
  std::atomic<int> stale{0};
  std::atomic<int> other_errors{0};

  std::latch start(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    // Each thread holds its own copies and walks them in its own order.
    threads.emplace_back([&, t, copies = allocations] {
      start.arrive_and_wait();
      for (int k = 0; k < kAllocations; ++k) {
        const int i = (k * 7 + t * 5) % kAllocations;
        // Half the threads use the legacy release, half prepare and execute themselves.
        if (t % 2 == 0) {
          auto released = binding.release(copies[static_cast<std::size_t>(i)]);
          if (released) {
            wins[static_cast<std::size_t>(i)].fetch_add(1);
          } else if (released.error().error().kind() == Kind::kStaleAllocation) {
            stale.fetch_add(1);
          } else {
            other_errors.fetch_add(1);
          }
        } else {
          auto prepared = binding.prepare_release(copies[static_cast<std::size_t>(i)]);
          if (prepared) {
            wins[static_cast<std::size_t>(i)].fetch_add(1);
            EXPECT_TRUE(std::move(*prepared).execute().is_complete());
          } else if (prepared.error().error().kind() == Kind::kStaleAllocation) {
            stale.fetch_add(1);
          } else {
            other_errors.fetch_add(1);
          }
        }
      }
    });
  }
  for (auto& thread : threads) thread.join();

  for (int i = 0; i < kAllocations; ++i) EXPECT_EQ(wins[static_cast<std::size_t>(i)].load(), 1) << "allocation " << i;
  EXPECT_EQ(stale.load(), kAllocations * (kThreads - 1));
  EXPECT_EQ(other_errors.load(), 0);
  EXPECT_EQ(m.allocator->release_calls(), static_cast<std::size_t>(kAllocations));
  EXPECT_EQ(m.allocator->allocations(), static_cast<std::size_t>(kAllocations));
  EXPECT_EQ(m.allocator->failed_releases(), 0U) << "an allocation was released twice";
  EXPECT_TRUE(has_counts(snapshot(m), Counts{}));
}

// Live records are sharded by the thread that made them (record_table.hpp).
// Here every thread makes records in its own shard, across several chunk
// boundaries, while other threads validate and release them through their
// slots and a reader sums the shards: each allocation is released exactly
// once, by whichever thread wins, and the snapshot is exact once all settle.
TEST_F(ConcurrencyTest, RecordsMadeOnOneThreadAreFoundAndReleasedExactlyOnceFromOthers) {
  covers("REL-014", "REL-003", "LOCK-005");
  constexpr int kThreads = 4;
  constexpr int kPerThread = 1500;  // more than one chunk of slots per shard
  const auto m = add();
  const auto binding = bind(m);
  std::vector<std::vector<BoundAllocation>> made(kThreads);
  std::atomic<int> released{0};
  std::atomic<int> stale{0};
  std::atomic<int> other_errors{0};
  std::atomic<bool> reading{true};

  std::latch made_all(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      auto& mine = made[static_cast<std::size_t>(t)];
      for (int i = 0; i < kPerThread; ++i) {
        auto allocation = binding.allocate(16 + static_cast<std::size_t>(i % 5) * 16, 16);
        if (!allocation) {
          other_errors.fetch_add(1);
          continue;
        }
        mine.push_back(*allocation);
        // Free every third at once, so slots are reused while the shard grows.
        if (i % 3 == 2) {
          if (binding.release(mine.back()))
            released.fetch_add(1);
          else
            other_errors.fetch_add(1);
          mine.pop_back();
        }
      }
      made_all.arrive_and_wait();
      // Release the next thread's records, then race the one after that for
      // the same records: one wins, the other finds them stale.
      for (int round = 1; round <= 2; ++round) {
        const auto& theirs = made[static_cast<std::size_t>((t + round) % kThreads)];
        for (const BoundAllocation& allocation : theirs) {
          if (auto view = allocation.view(0, 8); view) {
            (void)binding.with_view(*view, [](ValidatedMemoryView validated) { EXPECT_NE(validated.data(), nullptr); });
          }
          auto prepared = binding.prepare_release(allocation);
          if (prepared) {
            EXPECT_TRUE(std::move(*prepared).execute().is_complete());
            released.fetch_add(1);
          } else if (prepared.error().error().kind() == Kind::kStaleAllocation) {
            stale.fetch_add(1);
          } else {
            other_errors.fetch_add(1);
          }
        }
      }
    });
  }
  std::thread reader([&] {
    while (reading.load()) {
      const MechanismSnapshot seen = snapshot(m);
      EXPECT_LE(seen.live_allocations + seen.queued_releases, static_cast<std::size_t>(kThreads * kPerThread));
      std::this_thread::yield();
    }
  });
  for (auto& thread : threads) thread.join();
  reading.store(false);
  reader.join();

  EXPECT_EQ(released.load(), kThreads * kPerThread);
  EXPECT_EQ(other_errors.load(), 0);
  EXPECT_EQ(m.allocator->release_calls(), static_cast<std::size_t>(kThreads * kPerThread));
  EXPECT_EQ(m.allocator->failed_releases(), 0U) << "an allocation was released twice";
  EXPECT_TRUE(has_counts(snapshot(m), Counts{}));
  // A slot freed above and reused by a newer allocation never makes old metadata current.
  for (const auto& mine : made) {
    for (const BoundAllocation& old : mine) {
      auto again = binding.prepare_release(old);
      ASSERT_FALSE(again);
      EXPECT_EQ(again.error().error().kind(), Kind::kStaleAllocation);
    }
  }
  auto fresh = binding.allocate(16, 16);
  ASSERT_TRUE(fresh);
  EXPECT_TRUE(has_counts(snapshot(m), Counts{.live = 1}));
  EXPECT_TRUE(binding.release(*fresh));
}

TEST_F(ConcurrencyTest, RetireRacingSelectNeverLeavesTheRetiredMechanismSelected) {
  covers("TEAR-006");
  for (std::uint32_t round = 0; round < 100; ++round) {
    const DeviceKey device = DeviceKey::device(100 + round);
    const auto first = add(device);  // auto-selected
    const auto racer = add(device);
    std::latch start(2);
    std::thread retiring([&] {
      start.arrive_and_wait();
      EXPECT_TRUE(registry_.retire(racer.mechanism));
    });
    std::thread selecting([&] {
      start.arrive_and_wait();
      (void)registry_.select(racer.mechanism);  // may win or lose the race
    });
    retiring.join();
    selecting.join();
    auto bound = registry_.bind(device);
    if (bound) {
      EXPECT_EQ(bound->identity().mechanism, first.mechanism.identity) << "round " << round;
    } else {
      EXPECT_TRUE(is_kind(bound.error(), Kind::kNoSelectedMechanism)) << "round " << round;
    }
    EXPECT_TRUE(is_kind(registry_.select(racer.mechanism).error(), Kind::kInactiveMechanism));
  }
}

TEST_F(ConcurrencyTest, ABoundedQueueNeverExceedsItsCapacityUnderConcurrentEnqueue) {
  covers("DQ-011");
  constexpr std::size_t kCapacity = 4;
  constexpr int kProducers = 4;
  constexpr int kPerProducer = 60;
  const auto m = add();
  const auto binding = bind(m);
  auto context = std::make_shared<mechanism::ProviderContext>(m.context.identity);
  auto stream = std::make_shared<mechanism::HostStream>();
  mechanism::FencedDeferredQueue queue(context, stream, {.capacity = kCapacity});

  std::atomic<bool> producing{true};
  std::atomic<std::size_t> queued{0};
  std::atomic<std::size_t> full{0};
  std::atomic<std::size_t> highest{0};
  std::atomic<std::size_t> other{0};
  std::thread sampler([&] {
    while (producing.load()) {
      const std::size_t pending = queue.pending();
      std::size_t seen = highest.load();
      while (pending > seen && !highest.compare_exchange_weak(seen, pending)) {
      }
    }
  });
  std::thread poller([&] {
    while (producing.load()) {
      stream->complete_all();
      (void)queue.poll();
      std::this_thread::yield();
    }
  });
  std::vector<std::thread> producers;
  for (int p = 0; p < kProducers; ++p) {
    producers.emplace_back([&] {
      for (int i = 0; i < kPerProducer; ++i) {
        (void)stream->submit();
        auto owner = binding.allocate_owning(32, 8);
        ASSERT_TRUE(owner);
        auto disposition = std::move(*owner).release_deferred(queue);
        if (!disposition) {
          other.fetch_add(1);
        } else if (disposition->is_queued()) {
          queued.fetch_add(1);
        } else if (disposition->rejection() == DeferredEnqueueRejection::kFull) {
          full.fetch_add(1);
        } else {
          other.fetch_add(1);
        }
        EXPECT_LE(queue.pending(), kCapacity);
      }
    });
  }
  for (auto& producer : producers) producer.join();
  producing.store(false);
  sampler.join();
  poller.join();
  stream->complete_all();
  (void)queue.poll();

  EXPECT_LE(highest.load(), kCapacity) << "pending() exceeded the capacity";
  EXPECT_EQ(other.load(), 0U);
  EXPECT_EQ(queued.load() + full.load(), static_cast<std::size_t>(kProducers * kPerProducer));
  EXPECT_EQ(queue.pending(), 0U);
  EXPECT_EQ(queue.executed(), queued.load());
  EXPECT_EQ(m.allocator->release_calls(), queued.load()) << "every accepted request freed exactly once";
  EXPECT_EQ(m.allocator->failed_releases(), 0U);
  EXPECT_EQ(context->outstanding_pins(), 0U);
  EXPECT_TRUE(has_counts(snapshot(m), Counts{.quarantined = full.load(), .quarantined_bytes = 32 * full.load()}));
}

// One worker's view of its own mechanism during the churn.
struct WorkerTally {
  std::shared_ptr<CountingAllocator> allocator;
  std::optional<MemoryBinding> binding;
  std::size_t allocated = 0;
  std::size_t released = 0;  // outcomes the worker saw as released
};

TEST_F(ConcurrencyTest, ChurnWhileAnotherThreadInvalidatesAndConfirmsKeepsEveryCountConsistent) {
  covers("LOCK-005", "LOCK-001", "REL-014");
  constexpr int kWorkers = 4;
  constexpr int kRounds = 3;
  constexpr int kOperations = 40;
  const DeviceKey lost_device = DeviceKey::device(1);
  const DeviceKey kept_device = DeviceKey::device(2);

  std::mutex contexts_mutex;
  std::vector<RegisteredProviderContext> lost_contexts;
  std::vector<WorkerTally> tallies(kWorkers * kRounds);
  std::atomic<int> progress{0};
  std::atomic<int> invalidations{0};
  std::atomic<bool> working{true};

  auto worker = [&](int w) {
    std::mt19937 random(static_cast<unsigned>(w) * 7919U + 17U);
    for (int round = 0; round < kRounds; ++round) {
      WorkerTally& tally = tallies[static_cast<std::size_t>(w * kRounds + round)];
      const DeviceKey device = (w + round) % 2 == 0 ? lost_device : kept_device;
      tally.allocator = std::make_shared<CountingAllocator>(device);
      const auto context = *registry_.register_provider_context(device);
      const auto authority = *registry_.register_authority(device);
      const auto mechanism = *registry_.register_allocator(context, authority, tally.allocator);
      if (device == lost_device) {
        const std::lock_guard lock(contexts_mutex);
        lost_contexts.push_back(context);
      }
      (void)registry_.select(mechanism);
      (void)registry_.bind(device);
      auto binding = registry_.bind_registered(mechanism);
      if (!binding) continue;  // lost before we could bind: nothing allocated, nothing to check
      tally.binding = *binding;
      auto pins = std::make_shared<mechanism::ProviderContext>(context.identity);
      auto stream = std::make_shared<mechanism::HostStream>();
      mechanism::FencedDeferredQueue queue(pins, stream, {.capacity = 4});
      std::vector<OwningAllocation> kept;

      for (int op = 0; op < kOperations; ++op) {
        progress.fetch_add(1);
        // Make sure the device is lost while the first round is still busy,
        // and let the threads interleave on a machine with few cores.
        if (round == 0 && op == kOperations / 2) {
          while (invalidations.load() == 0) std::this_thread::yield();
        }
        if (op % 3 == 0) std::this_thread::yield();
        auto owner = binding->allocate_owning(16 + static_cast<std::size_t>(op), 8);
        if (!owner) break;  // retired, lost or terminated under us
        ++tally.allocated;
        switch (random() % 5) {
          case 0: {
            auto outcome = std::move(*owner).release_now();
            if (outcome && outcome->state() == AllocationReleaseState::kReleased) ++tally.released;
            if (!outcome) kept.push_back(std::move(outcome.error()).take_allocation());
            break;
          }
          case 1: {
            auto bound = std::move(*owner).into_bound();
            ASSERT_TRUE(bound);
            const BoundAllocation copy = *bound;
            auto first = binding->release(*bound);
            if (first) ++tally.released;
            auto second = binding->release(copy);  // always stale or refused, never a second free
            EXPECT_FALSE(second);
            break;
          }
          case 2: {
            auto disposition = std::move(*owner).release_deferred(queue);
            if (!disposition) kept.push_back(std::move(disposition.error()).take_allocation());
            stream->complete_all();
            (void)queue.poll();
            break;
          }
          case 3: {
            auto view = owner->view(0, 8);
            if (view) (void)binding->with_view(*view, [](ValidatedMemoryView) {});
            break;  // the owner is dropped: quarantined, or left live if the device is gone
          }
          default: kept.push_back(std::move(*owner)); break;
        }
      }
      stream->complete_all();
      (void)queue.poll();
      for (auto& owner : kept) {
        auto outcome = std::move(owner).release_now();
        if (outcome && outcome->state() == AllocationReleaseState::kReleased) ++tally.released;
      }
      queue.mark_device_lost();  // whatever is still pending settles without the allocator
      (void)registry_.retire(mechanism);
      (void)registry_.remove(mechanism);
      (void)registry_.snapshots();
    }
  };

  std::thread invalidator([&] {
    while (progress.load() < kWorkers * kOperations / 4) std::this_thread::yield();
    EXPECT_TRUE(registry_.invalidate_device(lost_device, "lost mid-churn"));
    invalidations.fetch_add(1);
    for (int pass = 0; working.load(); ++pass) {
      std::vector<RegisteredProviderContext> contexts;
      {
        const std::lock_guard lock(contexts_mutex);
        contexts = lost_contexts;
      }
      for (const auto& context : contexts) (void)registry_.confirm_context_terminated(context);
      // Mechanisms registered on the device since then are lost in their turn.
      if (pass % 8 == 7) (void)registry_.invalidate_device(lost_device, "lost again");
      std::this_thread::yield();
    }
  });
  std::vector<std::thread> workers;
  for (int w = 0; w < kWorkers; ++w) workers.emplace_back(worker, w);
  for (auto& thread : workers) thread.join();
  working.store(false);
  invalidator.join();

  // Everything on the lost device is quiescent now, so confirmation must succeed.
  ASSERT_TRUE(registry_.invalidate_device(lost_device, "final"));
  for (const auto& context : lost_contexts) {
    auto confirmed = registry_.confirm_context_terminated(context);
    EXPECT_TRUE(confirmed) << confirmed.error().message();
  }

  std::size_t total_allocated = 0;
  for (const WorkerTally& tally : tallies) {
    if (!tally.allocator) continue;
    total_allocated += tally.allocated;
    EXPECT_EQ(tally.allocator->failed_releases(), 0U) << "a release was refused by the allocator (double free?)";
    EXPECT_EQ(tally.allocator->release_calls(), tally.allocator->complete_releases());
    EXPECT_EQ(tally.allocator->allocations(), tally.allocated);
    if (!tally.binding) continue;
    const MechanismSnapshot snapshot = tally.binding->mechanism_snapshot();
    EXPECT_EQ(snapshot.active_operations, 0U);
    EXPECT_EQ(snapshot.queued_releases, 0U);
    // Every released outcome the worker saw is exactly one allocator release.
    EXPECT_GE(tally.allocator->complete_releases(), tally.released);
    if (snapshot.lifecycle == MechanismLifecycle::kTerminated) {
      EXPECT_TRUE(has_counts(snapshot, Counts{})) << "termination left records behind";
      EXPECT_LE(tally.allocator->complete_releases(), tally.allocated);
    } else {
      // Conservation: each allocation is still live, quarantined, or freed exactly once.
      EXPECT_EQ(snapshot.live_allocations + snapshot.quarantined_allocations + tally.allocator->complete_releases(),
                tally.allocated)
          << "lifecycle " << lifecycle_name(snapshot.lifecycle);
    }
  }
  EXPECT_GT(total_allocated, 0U);
}

}  // namespace
}  // namespace ortmem
