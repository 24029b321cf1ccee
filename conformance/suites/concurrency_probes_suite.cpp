// Concurrency probes: eight threads released together by a start barrier,
// heavy reuse of the same objects, and totals checked exactly once the
// writers stop (and bounded while they run). A count kept with a plain
// read-modify-write drifts here; teardown, not the adapter's own count, is
// the observer, so an adapter that declines outstanding_pins() is judged the
// same way.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "support/kit_heap_allocator.hpp"
#include "support/registry_harness.hpp"
#include "support/sanitizers.hpp"
#include "support/together.hpp"
#include "support/suite.hpp"
#include "ortmem/capability.hpp"
#include "ortmem/identity.hpp"

namespace ortmem::cts {
namespace {

constexpr int kThreads = 8;

using PinConcurrency = AdapterSuite;

TEST_P(PinConcurrency, EightThreadsChurningPinsLeaveAnExactCountThatTeardownSees) {
  covers("PIN-009");
  ORTMEM_CTS_REQUIRE(Capability::kContextPins);
  expect_teardown_observes_pins();
  if (HasFatalFailure()) return;
  IdentityIssuer issuer = *IdentityIssuer::create();
  for (int round = 0; round < 3 && !HasFatalFailure(); ++round) {
    auto context = adapter().make_context(*issuer.issue<ProviderContextIdentity>());
    ASSERT_NE(context, nullptr);
    std::atomic<int> refused{0};
    together(kThreads, [&](int) {
      std::vector<ProviderContextPin> held;
      for (int i = 0; i < 4000; ++i) {
        auto pin = context->pins().pin();
        if (!pin) {
          ++refused;
          continue;
        }
        held.push_back(std::move(*pin));
        if (held.size() > 2) held.erase(held.begin());
      }
    });
    {
      ORTMEM_CTS_PRECONDITION();
      ASSERT_EQ(refused.load(), 0) << "an uncapped, accepting context refused pins";
    }
    ORTMEM_CTS_CHECKING("PIN-009");
    if (const auto outstanding = context->outstanding_pins()) {
      EXPECT_EQ(*outstanding, 0U) << "round " << round << ": the count drifted under 8 threads";
    }
    // One pin still held must keep teardown from finishing; none, must not.
    auto last = context->pins().pin();
    ASSERT_TRUE(last);
    context->begin_retirement();
    EXPECT_FALSE(context->teardown(std::chrono::steady_clock::now()))
        << "round " << round << ": after the churn, teardown finished with a pin held (the count drifted down)";
    last->reset();
    EXPECT_TRUE(context->teardown(std::chrono::steady_clock::now() + std::chrono::seconds(5)))
        << "round " << round << ": every pin was released, yet teardown did not finish (the count drifted up)";
  }
}

// PIN-009 when the last pin and its context go on two threads: a context may
// be destroyed the moment its count reads zero, while the thread that
// released the last pin is still inside that release. A pin source whose
// release touches its state after the count dropped (notifies a waiting
// teardown, unlocks a lock), with nothing ordering that touch before the
// destruction, frees memory still in use: a rare crash here, and a race
// ThreadSanitizer reports in every round. The destroying thread learns of
// the release through the count alone, so nothing else orders the two.
// Every other round retires the context first: a release that may have to
// wake a teardown often takes another path than one that need not.
TEST_P(PinConcurrency, AContextDestroyedAsItsLastPinIsReleasedElsewhereIsSafe) {
  covers("PIN-009");
  ORTMEM_CTS_REQUIRE(Capability::kContextPins);
  IdentityIssuer issuer = *IdentityIssuer::create();
  if (!adapter().make_context(*issuer.issue<ProviderContextIdentity>())->outstanding_pins()) {
    GTEST_SKIP() << kNotApplicable
                 << "the adapter does not report its pin count; teardown, the other observer, would order the threads";
  }
  for (int round = 0; round < probe_rounds(64) && !HasFatalFailure(); ++round) {
    auto context = adapter().make_context(*issuer.issue<ProviderContextIdentity>());
    ASSERT_NE(context, nullptr);
    auto pin = context->pins().pin();
    {
      ORTMEM_CTS_PRECONDITION();
      ASSERT_TRUE(pin) << "an accepting context refused a pin";
    }
    const bool retiring = round % 2 == 0;
    if (retiring) context->begin_retirement();
    std::atomic<bool> saw_zero{false};
    together(2, [&](int t) {
      if (t == 0) {
        spin((round / 2 % 16) * 4);
        pin->reset();
        return;
      }
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
      while (context->outstanding_pins() != std::optional<std::uint64_t>{0} &&
             std::chrono::steady_clock::now() < deadline) {
      }
      if (context->outstanding_pins() == std::optional<std::uint64_t>{0}) {
        saw_zero = true;
        context.reset();
      }
    });
    ORTMEM_CTS_CHECKING("PIN-009");
    ASSERT_TRUE(saw_zero.load()) << "round " << round << (retiring ? " (retiring)" : "")
                                 << ": its only pin was released, yet the count did not read 0";
  }
}

// BIND-012 and BIND-014 when views are used on one thread while another
// allocates and releases: the records the views are checked against sit in
// the allocating thread's part of the registry's bookkeeping, which that
// thread keeps changing. A live allocation's view exposes its own pointer
// every time, and a released allocation's view never does. A registry that
// looks a record up without the lock its writers hold reads a table being
// rebuilt under it: a missed or stale record here, a race ThreadSanitizer
// reports at the first lookup.
using BindingConcurrency = RegistrySuite;

TEST_P(BindingConcurrency, ViewsUsedWhileTheirAllocatingThreadChurnsAreCheckedExactly) {
  covers("BIND-012", "BIND-014");
  constexpr std::size_t kKept = 8;
  const int churn = probe_rounds(4000);
  std::vector<BoundAllocation> kept;
  std::vector<BoundMemoryView> live_views;
  std::vector<BoundMemoryView> stale_views;
  std::string refused;  // why the allocating thread could not set up, written before `published`
  std::atomic<bool> published{false};
  std::atomic<bool> churning{true};
  std::atomic<int> live_refused{0};
  std::atomic<int> live_misplaced{0};
  std::atomic<int> stale_exposed{0};
  together(2, [&](int t) {
    if (t == 0) {
      for (std::size_t i = 0; i < 2 * kKept && refused.empty(); ++i) {
        auto allocation = binding().allocate(64, 16);
        if (!allocation) {
          refused = allocation.error().message();
          break;
        }
        auto view = allocation->view(0, 64);
        if (!view) {
          refused = view.error().message();
        } else if (i < kKept) {
          live_views.push_back(std::move(*view));
          kept.push_back(std::move(*allocation));
        } else {
          stale_views.push_back(std::move(*view));
          if (!binding().release(std::move(*allocation))) refused = "releasing an allocation of the binding failed";
        }
      }
      published.store(true, std::memory_order_release);
      for (int i = 0; i < churn && refused.empty(); ++i) {
        auto allocation = binding().allocate(16 + static_cast<std::size_t>(i % 7) * 16, 16);
        if (allocation) (void)binding().release(std::move(*allocation));
      }
      churning = false;
      return;
    }
    while (!published.load(std::memory_order_acquire)) std::this_thread::yield();
    if (!refused.empty()) return;
    do {
      for (std::size_t i = 0; i < kKept; ++i) {
        void* seen = nullptr;
        if (!binding().with_view(live_views[i], [&](ValidatedMemoryView view) { seen = view.data(); })) {
          ++live_refused;
        } else if (seen != kept[i].data()) {
          ++live_misplaced;
        }
      }
      for (const BoundMemoryView& view : stale_views) {
        bool called = false;
        if (binding().with_view(view, [&](ValidatedMemoryView) { called = true; }) || called) ++stale_exposed;
      }
    } while (churning.load());
  });
  {
    ORTMEM_CTS_PRECONDITION();
    ASSERT_EQ(refused, "") << "the binding could not allocate, view and release on its own";
  }
  {
    ORTMEM_CTS_CHECKING("BIND-012");
    EXPECT_EQ(live_refused.load(), 0) << "views of live allocations were refused while their allocating thread churned";
    EXPECT_EQ(live_misplaced.load(), 0) << "views of live allocations exposed another pointer";
  }
  {
    ORTMEM_CTS_CHECKING("BIND-014");
    EXPECT_EQ(stale_exposed.load(), 0) << "views of released allocations were let through";
  }
  for (BoundAllocation& allocation : kept) {
    ORTMEM_CTS_PRECONDITION();
    ASSERT_TRUE(binding().release(std::move(allocation)));
  }
}

// BIND-010 under more threads than a registry is likely to keep shards or
// per-thread slots for, so that some threads share a part of its
// bookkeeping and race on its counts. Each thread allocates and releases on
// one binding; once they stop, the snapshot must read what it read before. A
// count raised or lowered without the lock its other writers hold loses
// updates here, and the snapshot then reports operations or allocations that
// no longer exist (or misses ones that do).
TEST_P(BindingConcurrency, ManyThreadsOnOneBindingLeaveTheSnapshotsCountsExact) {
  covers("BIND-010");
  constexpr int kMany = 40;
  const int cycles = probe_rounds(2000);
  const MechanismSnapshot before = *registry().snapshot(harness_->mechanism);
  // Checked after each round, so that drifts of opposite sign cannot cancel out.
  for (int round = 0; round < 3 && !HasFailure(); ++round) {
    std::atomic<int> refused{0};
    together(kMany, [&](int t) {
      for (int i = 0; i < cycles; ++i) {
        auto owner = binding().allocate_owning(16 + static_cast<std::size_t>((i + t) % 4) * 16, 16);
        if (!owner) {
          ++refused;
          continue;
        }
        auto released = std::move(*owner).release_now();
        if (!released || !released->is_complete()) ++refused;
      }
    });
    {
      ORTMEM_CTS_PRECONDITION();
      ASSERT_EQ(refused.load(), 0) << "the binding could not allocate and release on its own";
    }
    ORTMEM_CTS_CHECKING("BIND-010");
    const MechanismSnapshot after = *registry().snapshot(harness_->mechanism);
    EXPECT_EQ(after.live_allocations, before.live_allocations)
        << "round " << round << ": " << kMany << " threads left live allocations behind";
    EXPECT_EQ(after.active_operations, before.active_operations)
        << "round " << round << ": " << kMany << " threads left operations open";
    EXPECT_EQ(after.queued_releases, before.queued_releases)
        << "round " << round << ": " << kMany << " threads left releases queued";
    EXPECT_EQ(after.quarantined_allocations, before.quarantined_allocations) << "round " << round;
  }
}

// LOCK-005 when two removals of one retired mechanism meet: exactly one
// removes it, the other is refused as unregistered, and the mechanism
// registered after it stays registered. A registry that finds the entry under
// one hold of its lock and erases under the next, without looking again,
// either reports two removals of one mechanism or erases whatever now sits
// where the removed entry sat: its neighbour, which then vanishes from every
// snapshot although nobody removed it.
TEST_P(BindingConcurrency, RacingRemovalsOfOneMechanismRemoveItOnceAndNothingElse) {
  covers("LOCK-005");
  // The window is from one removal's lookup to its erase, a few hundred
  // nanoseconds, and threads leave a yielding barrier microseconds apart. So
  // they meet again at a spinning one (which yields only if the other never
  // comes, as on a machine with fewer free cores than threads), and each
  // round delays one of them by a different amount.
  for (int round = 0; round < probe_rounds(800) && !HasFailure(); ++round) {
    RegisteredMechanism removed;
    RegisteredMechanism neighbour;
    auto registry = BindingRegistry::create();
    {
      ORTMEM_CTS_PRECONDITION();
      ASSERT_TRUE(registry);
      auto context = registry->register_provider_context(info().device);
      auto authority = registry->register_authority(info().device);
      ASSERT_TRUE(context && authority);
      auto first = registry->register_allocator(*context, *authority, harness_->allocator);
      auto second = registry->register_allocator(*context, *authority, harness_->allocator);
      ASSERT_TRUE(first && second);
      removed = *first;
      neighbour = *second;
      ASSERT_TRUE(registry->retire(removed));
    }
    std::atomic<int> removals{0};
    std::atomic<int> unregistered{0};
    std::atomic<int> arrived{0};
    together(2, [&](int t) {
      arrived.fetch_add(1);
      for (int spins = 0; arrived.load() < 2; ++spins) {
        if (spins > (1 << 16)) std::this_thread::yield();
      }
      spin(t == round % 2 ? (round / 2) % 64 * 8 : 0);
      auto outcome = registry->remove(removed);
      if (outcome) {
        ++removals;
      } else if (outcome.error().kind() == BindingError::Kind::kUnregisteredMechanism) {
        ++unregistered;
      }
    });
    ORTMEM_CTS_CHECKING("LOCK-005");
    EXPECT_EQ(removals.load(), 1) << "round " << round << ": two removals of one mechanism, " << removals.load()
                                  << " reported removing it";
    EXPECT_EQ(unregistered.load(), 1) << "round " << round << ": the other removal was not refused as unregistered";
    auto still = registry->snapshot(neighbour);
    EXPECT_TRUE(still) << "round " << round
                       << ": removing one mechanism twice at once unregistered the one registered after it: "
                       << still.error().message();
  }
}

class QueueConcurrency : public RequiringCapability<RegistrySuite, Capability::kDeferredQueue> {
 protected:
  // Enqueues per_thread releases from each of kThreads threads, then drains.
  void fill_and_drain(QueueUnderTest& queue, int per_thread, std::size_t total);
};

TEST_P(QueueConcurrency, EightThreadsEnqueuingLeaveAnExactPendingCountAndEachRequestRunsOnce) {
  covers("DQ-011", "DQ-002");
  ORTMEM_CTS_REQUIRE_CONTROL(Control::kFences);
  auto queue = adapter().make_queue(*harness_->context, {});
  ASSERT_NE(queue, nullptr);
  const int per_thread = static_cast<int>(std::min<std::size_t>(200, queue->capacity().value_or(1600) / kThreads));
  if (per_thread == 0) GTEST_SKIP() << kNotApplicable << "the queue's capacity is below " << kThreads;
  const auto total = static_cast<std::size_t>(per_thread * kThreads);
  // Fill and drain several times: a count that drifts does so a little per
  // round, and a lost update needs two enqueues to meet inside one window, so
  // each round is long (50 per thread once let a racy count through a CI run
  // on a loaded machine) while the rounds stay few (a queue that waits once
  // per round for its head's fence must still finish within a mutant's deadline).
  for (int round = 0; round < probe_rounds(16) && !HasFatalFailure(); ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    fill_and_drain(*queue, per_thread, total);
  }
}

// DQ-002 when drains overlap: requests still run in the order they were
// enqueued, each once, and each drain counts only what it ran. A queue whose
// drains do not exclude one another runs two requests side by side, and the
// later one's release often reaches the allocator first; one that counts a
// drain it turned away as a run reports more runs than requests.
TEST_P(QueueConcurrency, OverlappingDrainsRunEachRequestOnceInEnqueueOrder) {
  covers("DQ-002");
  ORTMEM_CTS_REQUIRE_CONTROL(Control::kFences);
  auto queue = adapter().make_queue(*harness_->context, {});
  ASSERT_NE(queue, nullptr);
  const std::size_t total = std::min<std::size_t>(256, queue->capacity().value_or(256));
  for (int round = 0; round < 8 && !HasFatalFailure(); ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    const std::size_t ran_before = harness_->release_order(*queue).size();
    queue->record_use();
    std::vector<void*> enqueued;
    {
      ORTMEM_CTS_PRECONDITION();
      for (std::size_t i = 0; i < total; ++i) {
        auto allocation = binding().allocate_owning(48 + 16 * (i % 4), 16);
        ASSERT_TRUE(allocation) << allocation.error().message();
        enqueued.push_back(allocation->data());
        auto disposition = std::move(*allocation).release_deferred(queue->queue());
        ASSERT_TRUE(disposition && disposition->is_queued()) << "a queue with room refused request " << i;
      }
    }
    queue->signal_fences();
    std::atomic<std::size_t> counted{0};
    together(kThreads, [&](int) { counted.fetch_add(queue->drain()); });
    // A drain turned away while another ran may leave the rest to a later one.
    counted.fetch_add(queue->drain());
    ORTMEM_CTS_CHECKING("DQ-002");
    EXPECT_EQ(counted.load(), total) << kThreads << " drains at once counted " << counted.load() << " runs of " << total
                                     << " requests";
    const std::vector<void*> order = harness_->release_order(*queue);
    ASSERT_GE(order.size(), ran_before);
    EXPECT_EQ(std::vector<void*>(order.begin() + static_cast<std::ptrdiff_t>(ran_before), order.end()), enqueued)
        << "overlapping drains ran the requests out of enqueue order, or not each once";
  }
}

// DQ-011 when enqueues meet: a bounded queue never holds more than its
// capacity, even when eight threads find room at the same moment and only two
// can have it. A queue that checks for room, lets go of its lock to record the
// request's fence and then inserts without checking again overfills here. The
// requests and pins are made before the threads start, so the enqueues meet.
TEST_P(QueueConcurrency, EnqueuesThatMeetNeverOverfillABoundedQueue) {
  covers("DQ-011");
  ORTMEM_CTS_REQUIRE_CONTROL(Control::kFences);
  ORTMEM_CTS_REQUIRE_CONTROL(Control::kQueueCapacity);
  constexpr std::size_t kCapacity = 2;
  std::size_t most_accepted = 0;
  std::size_t most_pending = 0;
  // Rounds until the first overfill, at most 64: a sound queue runs them all.
  for (int round = 0; round < 64 && most_accepted <= kCapacity && most_pending <= kCapacity && !HasFatalFailure();
       ++round) {
    auto queue = adapter().make_queue(*harness_->context, {.capacity = kCapacity});
    ASSERT_NE(queue, nullptr);
    if (queue->capacity() != kCapacity) GTEST_SKIP() << kNotApplicable << "the queue does not keep the capacity asked";
    queue->record_use();
    std::vector<std::optional<PreparedAllocationRelease>> requests(kThreads);
    std::vector<std::optional<ProviderContextPin>> pins(kThreads);
    {
      ORTMEM_CTS_PRECONDITION();
      for (int t = 0; t < kThreads; ++t) {
        auto prepared = owner(48).prepare_release();
        ASSERT_TRUE(prepared) << "an owner of a live binding could not prepare its release";
        requests[static_cast<std::size_t>(t)].emplace(std::move(*prepared));
        auto pin = queue->queue().pin_context();
        ASSERT_TRUE(pin) << "an accepting context refused a pin";
        pins[static_cast<std::size_t>(t)].emplace(std::move(*pin));
      }
    }
    std::vector<std::optional<PreparedAllocationRelease>> refused(kThreads);
    std::atomic<std::size_t> accepted{0};
    together(kThreads, [&](int t) {
      const auto i = static_cast<std::size_t>(t);
      auto enqueued = queue->queue().enqueue(std::move(*requests[i]), std::move(*pins[i]));
      if (enqueued) {
        accepted.fetch_add(1);
      } else {
        refused[i].emplace(std::move(enqueued.error()).take_request());
      }
    });
    most_accepted = std::max(most_accepted, accepted.load());
    most_pending = std::max(most_pending, queue->queue().pending());
    queue->signal_fences();
    (void)queue->drain();
    for (auto& request : refused) {
      if (request) (void)std::move(*request).execute();
    }
  }
  ORTMEM_CTS_CHECKING("DQ-011");
  EXPECT_LE(most_accepted, kCapacity) << kThreads << " enqueues at once into a queue of capacity " << kCapacity
                                      << " were accepted " << most_accepted << " times in one round";
  EXPECT_LE(most_pending, kCapacity) << "pending() read " << most_pending << " in a queue of capacity " << kCapacity;
}

// DQ-005, DQ-006 and DQ-002 when enqueues meet a close: each enqueue is
// accepted, and runs at most once, or refused as closed with its own request
// handed back; once close() has returned, every enqueue is refused. A close
// that sets its flag outside the lock its enqueues read it under races every
// one of them (ThreadSanitizer reports it at the first meeting), and a queue
// that checks for a close, lets go of its lock, then inserts accepts a
// request after the close returned. The requests and pins are made before
// the threads start, so the enqueues and the close meet.
TEST_P(QueueConcurrency, EnqueuesMeetingACloseAreAcceptedOrHandedBackWhole) {
  covers("DQ-005", "DQ-006", "DQ-002");
  ORTMEM_CTS_REQUIRE_CONTROL(Control::kFences);
  ORTMEM_CTS_REQUIRE_CONTROL(Control::kQueueClose);
  constexpr int kEnqueuers = kThreads - 1;
  for (int round = 0; round < probe_rounds(32) && !HasFatalFailure(); ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    auto queue = adapter().make_queue(*harness_->context, {});
    ASSERT_NE(queue, nullptr);
    if (queue->capacity().value_or(kThreads) < kThreads) {
      GTEST_SKIP() << kNotApplicable << "the queue holds fewer than " << kThreads << " requests";
    }
    const std::size_t run_before = harness_->release_order(*queue).size();
    queue->record_use();
    std::vector<std::optional<PreparedAllocationRelease>> requests(kThreads);
    std::vector<std::optional<ProviderContextPin>> pins(kThreads);
    std::vector<AllocationIdentity> identities;
    {
      ORTMEM_CTS_PRECONDITION();
      // One request more than there are enqueuers: it is enqueued after the close.
      for (std::size_t i = 0; i < requests.size(); ++i) {
        auto prepared = owner(48).prepare_release();
        ASSERT_TRUE(prepared) << "an owner of a live binding could not prepare its release";
        identities.push_back(prepared->identity());
        requests[i].emplace(std::move(*prepared));
        auto pin = queue->queue().pin_context();
        ASSERT_TRUE(pin) << "an accepting context refused a pin";
        pins[i].emplace(std::move(*pin));
      }
    }
    std::vector<std::optional<DeferredEnqueueRejection>> rejections(kThreads);
    std::vector<std::optional<PreparedAllocationRelease>> handed_back(kThreads);
    std::atomic<std::size_t> accepted{0};
    const auto enqueue = [&](std::size_t i) {
      auto enqueued = queue->queue().enqueue(std::move(*requests[i]), std::move(*pins[i]));
      if (enqueued) {
        accepted.fetch_add(1);
        return;
      }
      rejections[i] = enqueued.error().rejection();
      handed_back[i].emplace(std::move(enqueued.error()).take_request());
    };
    together(kThreads, [&](int t) {
      if (t < kEnqueuers) return enqueue(static_cast<std::size_t>(t));
      spin((round % 8) * 16);
      queue->close();
    });
    enqueue(kEnqueuers);
    {
      ORTMEM_CTS_CHECKING("DQ-006");
      EXPECT_EQ(rejections[kEnqueuers], std::optional{DeferredEnqueueRejection::kClosed})
          << "an enqueue after close() returned was not refused as closed";
      for (int t = 0; t < kEnqueuers; ++t) {
        const auto& rejection = rejections[static_cast<std::size_t>(t)];
        EXPECT_TRUE(!rejection || *rejection == DeferredEnqueueRejection::kClosed)
            << "an enqueue meeting a close was refused as " << rejection_name(*rejection) << ", not closed";
      }
    }
    {
      ORTMEM_CTS_CHECKING("DQ-005");
      for (std::size_t i = 0; i < handed_back.size(); ++i) {
        if (handed_back[i]) {
          EXPECT_EQ(handed_back[i]->identity(), identities[i]) << "a refused enqueue handed back another request";
        }
      }
    }
    // The contract leaves a closed queue's pending requests to it (run, kept
    // or settled), so only more runs than acceptances is a deviation.
    queue->signal_fences();
    (void)queue->drain();
    {
      ORTMEM_CTS_CHECKING("DQ-002");
      EXPECT_LE(harness_->release_order(*queue).size() - run_before, accepted.load())
          << "a drain after a close ran more requests than the " << accepted.load() << " enqueues accepted";
    }
    for (auto& request : handed_back) {
      if (request) (void)std::move(*request).execute();
    }
  }
}

// DQ-012 when a drain and a device loss meet: every request settles once,
// released by the drain before the loss or quarantined by it, and the queue
// is empty after both. A queue whose drain reads its head's fence outside its
// lock and then pops without looking again pops from a queue the loss has
// just emptied (or takes a request it never checked). The loss comes after a
// spin of up to about a microsecond, which varies by round: a drain's first
// steps are where the sweep is dense, and a lost queue refuses any later.
TEST_P(QueueConcurrency, ADrainMeetingADeviceLossSettlesEachRequestOnce) {
  covers("DQ-012");
  ORTMEM_CTS_REQUIRE_CONTROL(Control::kFences);
  ORTMEM_CTS_REQUIRE_CONTROL(Control::kQueueDeviceLoss);
  // The window is a few instructions wide, so the rounds must be many. What
  // the loss settles stays quarantined to the end of the test, and the
  // adapter's memory may hold a file descriptor each (the simulated CUDA
  // driver; a test process may open 4096). So with allocator interposition
  // the requests release through a heap allocator registered beside the
  // adapter's; without it (a plugin's queue frees its own memory) they
  // release through the adapter's, in fewer rounds.
  const bool interposed = info().offers(Control::kAllocatorInterposition);
  const int rounds = interposed ? 2048 : 256;
  const std::size_t requests = interposed ? 8 : 4;
  std::shared_ptr<CountingAllocator> heap;
  RegisteredMechanism heap_mechanism;
  std::optional<MemoryBinding> heap_binding;
  if (interposed) {
    ORTMEM_CTS_PRECONDITION();
    heap = std::make_shared<CountingAllocator>(std::make_shared<KitHeapAllocator>(info().device));
    auto registered = registry().register_allocator(harness_->context_registration, harness_->authority, heap);
    ASSERT_TRUE(registered) << registered.error().message();
    heap_mechanism = *registered;
    auto bound = registry().bind_registered(heap_mechanism);
    ASSERT_TRUE(bound) << bound.error().message();
    heap_binding.emplace(std::move(*bound));
  }
  MemoryBinding& binding = interposed ? *heap_binding : this->binding();
  const auto release_order = [&](const QueueUnderTest& queue) {
    return interposed ? heap->release_order() : harness_->release_order(queue);
  };
  const auto quarantined_now = [&] {
    return (interposed ? *registry().snapshot(heap_mechanism) : harness_->snapshot()).quarantined_allocations;
  };
  for (int round = 0; round < rounds && !HasFatalFailure(); ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    auto queue = adapter().make_queue(*harness_->context, {});
    ASSERT_NE(queue, nullptr);
    if (queue->capacity().value_or(requests) < requests) {
      GTEST_SKIP() << kNotApplicable << "the queue holds fewer than " << requests << " requests";
    }
    const std::size_t run_before = release_order(*queue).size();
    const std::size_t quarantined_before = quarantined_now();
    queue->record_use();
    {
      ORTMEM_CTS_PRECONDITION();
      for (std::size_t i = 0; i < requests; ++i) {
        auto allocation = binding.allocate_owning(48 + 16 * (i % 4), 16);
        ASSERT_TRUE(allocation) << allocation.error().message();
        auto disposition = std::move(*allocation).release_deferred(queue->queue());
        ASSERT_TRUE(disposition && disposition->is_queued()) << "a queue with room refused request " << i;
      }
    }
    queue->signal_fences();
    std::atomic<int> ready{0};
    const auto start_together = [&] {
      ready.fetch_add(1);
      while (ready.load() < 2) std::this_thread::yield();
    };
    std::thread drainer([&] {
      start_together();
      (void)queue->drain();
    });
    std::thread loser([&] {
      start_together();
      spin((round % 16) * 4);
      queue->mark_device_lost();
    });
    drainer.join();
    loser.join();
    (void)queue->drain();
    ORTMEM_CTS_CHECKING("DQ-012");
    const std::vector<void*> order = release_order(*queue);
    const std::size_t run = order.size() - run_before;
    const std::size_t quarantined = quarantined_now() - quarantined_before;
    EXPECT_EQ(queue->queue().pending(), 0U) << "requests were left pending after the loss";
    EXPECT_EQ(run + quarantined, requests)
        << "of " << requests << " requests, " << run << " were released and " << quarantined << " quarantined";
    std::vector<void*> released(order.begin() + static_cast<std::ptrdiff_t>(run_before), order.end());
    std::sort(released.begin(), released.end());
    EXPECT_EQ(std::adjacent_find(released.begin(), released.end()), released.end()) << "a request was released twice";
  }
}

void QueueConcurrency::fill_and_drain(QueueUnderTest& queue_under_test, int per_thread, std::size_t total) {
  QueueUnderTest* const queue = &queue_under_test;
  const std::size_t released_before = harness_->releases_run(queue_under_test);
  queue->record_use();
  std::atomic<int> refused{0};
  std::atomic<std::size_t> seen_over{0};
  together(kThreads, [&](int) {
    for (int i = 0; i < per_thread; ++i) {
      auto allocation = binding().allocate_owning(48, 16);
      if (!allocation) {
        ++refused;
        continue;
      }
      auto disposition = std::move(*allocation).release_deferred(queue->queue());
      if (!disposition || !disposition->is_queued()) ++refused;
      // A total read while writers run is never more than was enqueued.
      if (queue->queue().pending() > total) seen_over.store(queue->queue().pending());
    }
  });
  {
    ORTMEM_CTS_PRECONDITION();
    ASSERT_EQ(refused.load(), 0) << "requests were refused by a queue with room";
  }
  {
    ORTMEM_CTS_CHECKING("DQ-011");
    EXPECT_EQ(seen_over.load(), 0U) << "pending() read " << seen_over.load() << " with at most " << total
                                    << " enqueued";
    EXPECT_EQ(queue->queue().pending(), total) << "pending() after 8 threads enqueued " << total;
  }
  queue->signal_fences();
  std::size_t ran = 0;
  {
    ORTMEM_CTS_CHECKING("DQ-002");
    ran = queue->drain();
    EXPECT_EQ(ran, total);
    EXPECT_EQ(queue->drain(), 0U) << "a request ran twice";
    EXPECT_EQ(harness_->releases_run(*queue) - released_before, total);
  }
  ORTMEM_CTS_CHECKING("DQ-011");
  EXPECT_EQ(queue->queue().pending(), 0U);
}

using AllocatorConcurrency = AdapterSuite;

// Releases that really overlap: every thread holds a batch, then all of them
// release theirs back to back at the same moment, round after round. In a
// mixed churn two releases seldom meet (each is a sliver between writes and
// checks); here, even on two cores, they meet on most calls.
TEST_P(AllocatorConcurrency, ReleasesMadeAtTheSameMomentAllComplete) {
  covers("ALLOC-016");
  constexpr std::size_t kBatch = 128;
  const auto allocator = adapter().make_allocator();
  // One round: kThreads batches allocated, then released (together, or one
  // batch after another); returns the releases that were not Complete. A
  // Failed one is retried so nothing leaks past the test.
  const auto round = [&](bool together_now) {
    std::vector<std::vector<std::pair<void*, std::size_t>>> batches(kThreads);
    for (auto& batch : batches) {
      for (std::size_t i = 0; i < kBatch; ++i) {
        const std::size_t bytes = 64 + 16 * (i % 8);
        auto ptr = allocator->allocate(bytes, 16);
        if (ptr) batch.emplace_back(*ptr, bytes);
      }
    }
    std::atomic<int> not_complete{0};
    const auto release_batch = [&](int t) {
      for (const auto& [ptr, bytes] : batches[static_cast<std::size_t>(t)]) {
        auto outcome = allocator->release(ptr, bytes, 16);
        if (outcome.is_complete()) continue;
        ++not_complete;
        for (int retry = 0; outcome.is_failed() && retry < 100; ++retry) outcome = allocator->release(ptr, bytes, 16);
      }
    };
    if (together_now) {
      together(kThreads, release_batch);
    } else {
      for (int t = 0; t < kThreads; ++t) release_batch(t);
    }
    return not_complete.load();
  };
  {
    // A release that is not Complete without any overlap is another rule's
    // failure (ALLOC-018, or a count-based bug), not this test's.
    ORTMEM_CTS_PRECONDITION();
    ASSERT_EQ(round(false), 0) << "releases made one at a time came back other than Complete";
  }
  int not_complete = 0;
  for (int repeat = 0; repeat < probe_rounds(8); ++repeat) not_complete += round(true);
  if (not_complete != 0) {
    ORTMEM_CTS_PRECONDITION();
    ASSERT_EQ(round(false), 0) << "after " << not_complete << " bad releases together, they go wrong alone too";
  }
  EXPECT_EQ(not_complete, 0) << "releases made at the same moment from " << kThreads
                             << " threads came back other than Complete";
}

// The capabilities from eight threads at once, each on allocations of its
// own, while the others allocate and release on the same allocator: the
// allocation table every call looks up is shared even when the allocations
// are not, so a call that reads it unguarded races another thread's insert or
// erase. Each thread's calls must return what they would return alone.
class CapabilityConcurrency : public AdapterSuite {
 protected:
  // What went wrong first, on any thread (checked once they have all stopped).
  struct FirstFailure {
    std::mutex mutex;
    std::string what;
    std::atomic<int> count{0};
    void add(const std::string& failure) {
      if (count.fetch_add(1) == 0) {
        const std::lock_guard lock(mutex);
        what = failure;
      }
    }
  };
  // `steps(thread, rounds, report)` run twice by one thread alone (what each
  // call must answer alone is other rules' to judge: the test stands on it),
  // then kRounds times by every thread at once, their failures into `failure`.
  // False when the steps went wrong alone.
  template <class Steps>
  bool alone_then_together(const Steps& steps, FirstFailure& failure) {
    bool alone = true;
    steps(0, 2, [&](const std::string& what) {
      if (alone) {
        stands_on_broken("alone, " + what);
        ADD_FAILURE() << "one thread alone: " << what;
      }
      alone = false;
    });
    if (!alone) return false;
    together(kThreads, [&](int t) { steps(t, kRounds, [&](const std::string& what) { failure.add(what); }); });
    return true;
  }
  static constexpr int kRounds = 24;
  static constexpr std::size_t kProbe = 64;  // bytes written and read back per granule
};

TEST_P(CapabilityConcurrency, CommitsAndDecommitsFromEightThreadsReturnWhatTheyWouldAlone) {
  covers("VB-010");
  ORTMEM_CTS_REQUIRE(Capability::kVirtualBacking);
  const auto allocator = adapter().make_allocator();
  VirtualBacking* backing = allocator->as_virtual_backing();
  std::size_t granule = 0;
  {
    // ALLOC-011 and VB-001 judge a missing capability and the granule.
    ORTMEM_CTS_PRECONDITION();
    ASSERT_NE(backing, nullptr) << "the adapter declares virtual backing but its allocator has none";
    const ByteRange one{0, 1};
    auto ptr = backing->allocate_committed(1, 64, std::span<const ByteRange>(&one, 1));
    ASSERT_TRUE(ptr) << ptr.error().message();
    granule = backing->allocation_committed_bytes(*ptr, 1, 64);
    ASSERT_TRUE(allocator->release(*ptr, 1, 64).is_complete());
    ASSERT_GE(granule, kProbe);
  }
  const std::size_t bytes = 3 * granule;
  FirstFailure failure;
  // One thread's steps; what each must answer alone is VB-001..VB-005's to
  // judge, so the same steps run alone first and the test stands on them.
  const auto steps = [&](int t, int rounds, const std::function<void(const std::string&)>& report) {
    MemoryAccess& memory = adapter().memory();
    const auto value = static_cast<std::uint8_t>(0x40 + t);
    for (int round = 0; round < rounds; ++round) {
      const auto fail = [&](const std::string& what) {
        report("thread " + std::to_string(t) + ", round " + std::to_string(round) + ": " + what);
      };
      const ByteRange first{0, 1};
      auto reserved = backing->allocate_committed(bytes, 64, std::span<const ByteRange>(&first, 1));
      if (!reserved) return fail("allocate_committed: " + reserved.error().message());
      void* ptr = *reserved;
      auto* third = static_cast<unsigned char*>(ptr) + 2 * granule;
      const auto committed = [&] { return backing->allocation_committed_bytes(ptr, bytes, 64); };
      if (auto done = backing->commit_allocation_range(ptr, bytes, 64, 2 * granule, granule); !done) {
        fail("commit of the third granule: " + done.error().message());
      } else if (committed() != 2 * granule) {
        // Not written: memory a commit reported but never mapped would fault.
        fail("committed bytes after two granules were committed: " + std::to_string(committed()));
      } else {
        memory.fill(third, kProbe, value);
        const auto unmapped = backing->decommit_allocation_range(ptr, bytes, 64, 0, granule);
        if (!unmapped || *unmapped != granule) {
          fail("decommit of the first granule: " +
               (unmapped ? std::to_string(*unmapped) + " bytes unmapped" : unmapped.error().message()));
        }
        if (committed() != granule)
          fail("committed bytes after the first granule's decommit: " + std::to_string(committed()));
        if (!reads_as(memory, third, kProbe, value)) fail("the third granule lost what this thread wrote");
      }
      if (!allocator->release(ptr, bytes, 64).is_complete()) fail("the release was not Complete");
    }
  };
  if (!alone_then_together(steps, failure)) return;
  ORTMEM_CTS_CHECKING("VB-010");
  EXPECT_EQ(failure.count.load(), 0) << failure.count.load() << " calls from " << kThreads
                                     << " threads went wrong; the first: " << failure.what;
}

TEST_P(CapabilityConcurrency, PrefixMappingsFromEightThreadsReturnWhatTheyWouldAlone) {
  covers("SM-010");
  ORTMEM_CTS_REQUIRE(Capability::kSharedMapping);
  const auto allocator = adapter().make_allocator();
  SharedMapping* mapping = allocator->as_shared_mapping();
  VirtualBacking* backing = allocator->as_virtual_backing();
  std::unique_ptr<SharedDevicePrefix> shared;
  {
    ORTMEM_CTS_PRECONDITION();
    ASSERT_NE(mapping, nullptr) << "the adapter declares shared mapping but its allocator has none";
    auto created = mapping->create_shared_prefix(1);
    ASSERT_TRUE(created) << created.error().message();
    shared = std::move(*created);
    ASSERT_GE(shared->mapped_bytes(), kProbe);
    adapter().memory().fill(reinterpret_cast<void*>(shared->device_ptr()), kProbe, 0x5A);
  }
  const std::size_t granule = shared->mapped_bytes();
  const std::size_t bytes = 3 * granule;
  FirstFailure failure;
  // As above: the steps run alone first, and the test stands on them.
  const auto steps = [&](int t, int rounds, const std::function<void(const std::string&)>& report) {
    MemoryAccess& memory = adapter().memory();
    for (int round = 0; round < rounds; ++round) {
      const auto fail = [&](const std::string& what) {
        report("thread " + std::to_string(t) + ", round " + std::to_string(round) + ": " + what);
      };
      // A prefix of this thread's own is made and dropped beside the shared one.
      auto own = mapping->create_shared_prefix(granule);
      if (!own) fail("create_shared_prefix: " + own.error().message());
      auto target = backing != nullptr ? backing->allocate_committed(bytes, 64, {}) : allocator->allocate(bytes, 64);
      if (!target) return fail("the target allocation: " + target.error().message());
      void* ptr = *target;
      auto info = mapping->commit_shared_prefix(*shared, ptr, bytes, granule);
      if (!info) {
        fail("commit_shared_prefix: " + info.error().message());
      } else {
        if (info->newly_mapped_bytes != granule || info->granules != 1) fail("the commit reported another geometry");
        if (!reads_as(memory, static_cast<unsigned char*>(ptr) + granule, kProbe, 0x5A)) {
          fail("the mapping does not show the prefix's bytes");
        }
      }
      if (own) {
        if (auto second = mapping->commit_shared_prefix(**own, ptr, bytes, 2 * granule); !second) {
          fail("commit_shared_prefix of the thread's own prefix: " + second.error().message());
        }
      }
      if (allocator->release(ptr, bytes, 64).is_failed()) fail("the release of the target Failed");
      if (own) own->reset();  // after its mapping: dropping a prefix first is SM-009's to judge
    }
  };
  if (!alone_then_together(steps, failure)) return;
  ORTMEM_CTS_CHECKING("SM-010");
  EXPECT_EQ(failure.count.load(), 0) << failure.count.load() << " calls from " << kThreads
                                     << " threads went wrong; the first: " << failure.what;
  EXPECT_TRUE(reads_as(adapter().memory(), reinterpret_cast<void*>(shared->device_ptr()), kProbe, 0x5A))
      << "the shared prefix's own bytes changed";
}

ORTMEM_CTS_INSTANTIATE(AllocatorConcurrency);
ORTMEM_CTS_INSTANTIATE(CapabilityConcurrency);
ORTMEM_CTS_INSTANTIATE(PinConcurrency);
ORTMEM_CTS_INSTANTIATE(BindingConcurrency);
ORTMEM_CTS_INSTANTIATE(QueueConcurrency);

}  // namespace
}  // namespace ortmem::cts
