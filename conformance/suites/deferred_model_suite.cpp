// The deferred release queue as a state machine (RapidCheck rc::state):
// random interleavings of enqueue (through the queue, with another context's
// pin, or through the registry), device work, fence signals, drains, close,
// device loss and context retirement over the adapter's own queue, context
// and allocator (behind the counting decorator), each step reconciled with a
// model of the queue.
//
// The model is the FIFO of waiting requests, each with its fence: unpassed
// (enqueued behind work not yet signalled: it must not run), maybe (enqueued
// with nothing in flight: it may run at once or wait for the next signal) or
// passed (signalled since: a drain must run it). What the queue did in a
// call is read from what it cannot hide: the allocator's releases, in call
// order, and the registry's quarantine records. Every release must be the
// oldest waiting request, with its fence not unpassed, and never after device
// loss; every quarantine must be a settlement the contract allows. Then, after
// every step, pending() must equal the model, a bounded queue must hold no
// more than its capacity, and the registry's queued count must agree.
//
// When a queue is closed, lost or its context retires, the sequence goes on
// with a fresh context and queue, so one sequence passes through many queue
// lifetimes, bounded and unbounded.
//
// The adapter contract leaves choices open, and the model allows each:
//   - a queue may run requests whose fences passed inside enqueue (or any
//     other call), not only in drain: when it does is learned from the
//     releases, never assumed;
//   - close() may run, keep or settle what is pending: a request pending at
//     close is free to go any way, except early, out of order or twice;
//   - a queue may refuse for reasons of its own (refused), and may refuse a
//     pin once it has seen device loss;
//   - a full queue may run ready work inside enqueue and so make room;
//   - capacity() is trusted over the capacity asked for; an unbounded queue
//     never refuses as full.
// GoogleTest first: rapidcheck/gtest.h uses its macros.
#include "support/registry_harness.hpp"
#include "support/model_check.hpp"
#include "support/suite.hpp"
#include "support/watchdog.hpp"

#include <rapidcheck.h>
#include <rapidcheck/gtest.h>
#include <rapidcheck/state.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "ortmem/identity.hpp"

namespace ortmem::cts {
namespace {

using Clock = std::chrono::steady_clock;
using Rejection = DeferredEnqueueRejection;

constexpr std::size_t kAlign = 64;
// A teardown with nothing left to wait for completes "now or on a later
// call" (adapter.hpp); these are the later calls it gets.
constexpr int kTeardownRetries = 3;
// Sequences this many times RapidCheck's length, so that one default run
// passes hundreds of enqueues, refusals of each kind, drains and probes.
constexpr double kLength = 3.0;
// An enqueue with device work in flight that takes this long has waited for it.
constexpr auto kSlowEnqueue = std::chrono::milliseconds(50);

// Unbounded (-1), the smallest bounds a sequence fills, drains and refills
// over and over, and bounds above a batch of eight. Drawn as a number so that
// a counterexample prints it.
rc::Gen<int> edge_biased_capacity() {
  return rc::gen::weightedOneOf<int>({
      {3, rc::gen::just(-1)},
      {4, rc::gen::inRange(1, 5)},
      {2, rc::gen::elementOf(std::vector<int>{9, 12})},
  });
}

std::optional<std::size_t> as_capacity(int drawn) {
  return drawn < 0 ? std::nullopt : std::optional<std::size_t>(static_cast<std::size_t>(drawn));
}

enum class Fence : std::uint8_t { kUnpassed, kMaybe, kPassed };

// How a request reaches the queue.
enum Path : int {
  kOwnPin,           // prepare, the queue's own pin, enqueue: the refusal is seen whole
  kForeignPin,       // the same with another context's pin, which a queue may refuse
  kThroughRegistry,  // release_deferred: the registry pins, enqueues, quarantines a rejection
};
// What the test does with a request the queue handed back.
enum Handling : int {
  kExecute,     // the normal path: it must still be the live request
  kQuarantine,  // enqueue-rejected quarantine
  kDrop,        // destroying the error abandons it (OWN-003)
};

struct Spec {
  std::size_t bytes;
  int path;
  int handling;
};

// The steps of a sequence, as far as the generator needs them. What is
// waiting in the queue is not here: it depends on choices the adapter makes
// (when ready work runs, what close does), so the System learns it from
// each call (the Ledger) rather than predicting it.
struct Model {
  bool in_flight = false;  // device work recorded since the last signal
  bool closed = false;
  bool lost = false;
  bool retiring = false;  // the queue's context
  // Whether requests are still offered once the context retires (the
  // retirement test); otherwise retirement only leads to teardown probes.
  bool offers_after_retirement = false;
};

Spec any_spec(const Model& model) {
  Spec spec{};
  spec.bytes = *rc::gen::weightedOneOf<std::size_t>({
      {2, rc::gen::elementOf(std::vector<std::size_t>{1, 64, 65, 4096})},
      {1, rc::gen::inRange<std::size_t>(1, 2048)},
  });
  // Another context's pin is offered only while the queue's own context
  // accepts work: once it retires, the refused pin is what refuses (DQ-014).
  spec.path = model.retiring ? *rc::gen::elementOf(std::vector<int>{kOwnPin, kThroughRegistry})
                             : *rc::gen::weightedOneOf<int>({{4, rc::gen::just(static_cast<int>(kOwnPin))},
                                                             {1, rc::gen::just(static_cast<int>(kForeignPin))},
                                                             {3, rc::gen::just(static_cast<int>(kThroughRegistry))}});
  spec.handling = *rc::gen::inRange(0, 3);
  return spec;
}

void show_spec(std::ostream& os, const Spec& spec) {
  os << spec.bytes << " B ";
  switch (spec.path) {
    case kOwnPin: os << "with the queue's pin"; break;
    case kForeignPin: os << "with another context's pin"; break;
    default: os << "through the registry"; return;
  }
  os << (spec.handling == kExecute      ? ", executed"
         : spec.handling == kQuarantine ? ", quarantined"
                                        : ", dropped")
     << " if refused";
}

// A check of something the test does itself, charged to `ids`, or, without
// ids, a precondition: the kit's own plumbing, which other tests judge.
// (The message is the one ORTMEM_CTS_RC_ASSERT and _PRECONDITION write.)
void expect(const char* ids, bool holds, const char* what) {
  if (holds) return;
  if (ids == nullptr) RC_FAIL(std::string(kPreconditionTag) + " " + what);
  RC_FAIL(std::string(kChecksTag) + ids + "] " + what);
}

enum class Call : std::uint8_t { kEnqueue, kSignal, kDrain, kClose, kLoseDevice, kOther };

// What the test itself does to a request within a step, so that its release
// or quarantine is not taken for the queue's.
struct Own {
  void* ran = nullptr;          // the test executed or released it
  void* quarantined = nullptr;  // the test, or the registry for it, quarantined it
  QuarantineReason reason{};
  const char* ids = nullptr;  // the rule that quarantine stands on; none: a precondition
};

struct System {
  System(Adapter& under_test, Watchdog& watching, bool& stuck_flag, std::optional<std::size_t> asked,
         std::optional<std::string>& deviation_sink)
      : adapter(under_test), watchdog(watching), stuck(stuck_flag), deviation(deviation_sink) {
    harness = std::make_unique<RegistryHarness>(adapter);
    ORTMEM_CTS_RC_PRECONDITION(harness->ready());
    const auto other = issuer.issue<ProviderContextIdentity>();
    ORTMEM_CTS_RC_PRECONDITION(other.has_value());
    foreign = adapter.make_context(*other);
    ORTMEM_CTS_RC_PRECONDITION(foreign != nullptr);
    open(asked);
  }

  // A queue (bounded by `asked`, or by what it chooses) on the registered
  // context. The model starts each queue with no device work in flight;
  // whatever the queue began with, the signal makes it so.
  void open(std::optional<std::size_t> asked) {
    queue = adapter.make_queue(*harness->context, {.capacity = asked});
    ORTMEM_CTS_RC_PRECONDITION(queue != nullptr);
    seen_settled = 0;
    capacity = queue->capacity();
    queue->signal_fences();
  }
  ~System() {
    queue.reset();  // before the contexts its requests pin
    if (harness && !deviation && harness->allocator->deviation()) deviation = harness->allocator->deviation();
  }
  System(const System&) = delete;
  System& operator=(const System&) = delete;

  struct Waiting {
    int serial;
    void* address;
    Fence fence;
    bool foreign_pin;   // accepted with another context's pin
    bool before_close;  // pending when the queue was closed
  };

  [[nodiscard]] std::deque<Waiting>::iterator find(void* address) {
    return std::find_if(waiting.begin(), waiting.end(), [&](const Waiting& entry) { return entry.address == address; });
  }

  // Reconciles what `call` (made in `model`'s state) and the test's own
  // handling did with what the contract lets a queue do, then checks every
  // observable count. `accepted` is the serial of a request this call took.
  void settle(const Model& model, Call call, const Own& own = {}, int accepted = -1) {
    const bool lost = model.lost || call == Call::kLoseDevice;
    bool own_ran = false;
    bool own_quarantined = false;
    // One release that ran: the test's own, or the queue's, which must be
    // the oldest waiting request, past its fence, and not after device loss.
    const auto judge_release = [&](void* address, bool after_loss) {
      if (address == own.ran && !own_ran) {
        own_ran = true;
        return;
      }
      if (address == own.quarantined) {
        const bool frees_nothing = false;
        expect(own.ids, frees_nothing, "the request the test had quarantined reached the allocator");
      }
      const bool no_release_after_loss = !after_loss;
      ORTMEM_CTS_RC_ASSERT("DQ-012", no_release_after_loss);
      const auto entry = find(address);
      // Not waiting: run a second time, or never accepted.
      const bool ran_a_waiting_request = entry != waiting.end();
      ORTMEM_CTS_RC_ASSERT("DQ-002", ran_a_waiting_request);
      const bool its_fence_was_not_unpassed = entry->fence != Fence::kUnpassed;
      ORTMEM_CTS_RC_ASSERT("DQ-001", its_fence_was_not_unpassed);
      const bool ran_the_oldest = entry == waiting.begin();
      ORTMEM_CTS_RC_ASSERT("DQ-002", ran_the_oldest);
      waiting.pop_front();
    };
    if (harness->allocator->release_calls.load() != seen_calls) {
      seen_calls = harness->allocator->release_calls.load();
      const std::vector<void*> order = harness->allocator->release_order();
      for (std::size_t i = seen_releases; i < order.size(); ++i) judge_release(order[i], lost);
      seen_releases = order.size();
    }
    // A queue that frees memory itself (an nxmem plugin's) says what it
    // released, and which of those came after it was told of device loss.
    if (const auto settled = queue->settled_itself(); settled && settled->order.size() != seen_settled) {
      for (std::size_t i = seen_settled; i < settled->order.size(); ++i) {
        judge_release(settled->order[i], settled->after_loss[i]);
      }
      seen_settled = settled->order.size();
    }

    const MechanismSnapshot snapshot = harness->snapshot();
    if (snapshot.quarantined_allocations != seen_quarantined) {
      for (const QuarantinedAllocation& record : harness->binding->quarantined()) {
        void* const address = reinterpret_cast<void*>(record.address);
        if (!known_quarantined.insert(address).second) continue;
        if (address == own.quarantined) {
          own_quarantined = true;
          expect(own.ids, record.reason == own.reason, "the test's own quarantine has another reason");
          continue;
        }
        const auto entry = find(address);
        // A request it was given, quarantined without being accepted: dropped.
        const bool quarantined_a_waiting_request = entry != waiting.end();
        ORTMEM_CTS_RC_ASSERT("DQ-005", quarantined_a_waiting_request);
        if (lost) {
          const bool settled_as_device_lost = record.reason.kind == QuarantineReason::Kind::kDeviceLost &&
                                              record.state == AllocationReleaseState::kDeviceLost;
          ORTMEM_CTS_RC_ASSERT("DQ-012", settled_as_device_lost);
        } else if (!entry->before_close) {
          // Accepted and then settled without running: in the very enqueue
          // that took it, a refusal signalled by dropping; later, a request
          // that will never execute.
          const bool kept_until_it_ran = false;
          ORTMEM_CTS_RC_ASSERT(call == Call::kEnqueue && entry->serial == accepted ? "DQ-005" : "DQ-002",
                               kept_until_it_ran);
        }
        waiting.erase(entry);
      }
      seen_quarantined = snapshot.quarantined_allocations;
    }
    ORTMEM_CTS_RC_PRECONDITION(own.ran == nullptr || own_ran);
    if (own.quarantined != nullptr) expect(own.ids, own_quarantined, "the test's own quarantine is not listed");

    if (call == Call::kLoseDevice) {
      const bool every_pending_request_settled = waiting.empty();
      ORTMEM_CTS_RC_ASSERT("DQ-012", every_pending_request_settled);
    }
    if (call == Call::kDrain && !model.closed && !lost) {
      // A drain runs every request whose fence passed (adapter.hpp); left
      // waiting, it would not run exactly once.
      const bool ran_every_passed_fence = waiting.empty() || waiting.front().fence != Fence::kPassed;
      ORTMEM_CTS_RC_ASSERT("DQ-002", ran_every_passed_fence);
    }
    const bool pending_is_exact = queue->queue().pending() == waiting.size();
    ORTMEM_CTS_RC_ASSERT("DQ-011", pending_is_exact);
    if (capacity) {
      const bool holds_no_more_than_its_capacity = waiting.size() <= *capacity;
      ORTMEM_CTS_RC_ASSERT("DQ-011", holds_no_more_than_its_capacity);
    }
    const bool registry_counts_them_queued = snapshot.queued_releases == waiting.size() &&
                                             snapshot.live_allocations == 0 &&
                                             snapshot.active_operations >= waiting.size();
    ORTMEM_CTS_RC_ASSERT("DQ-008", registry_counts_them_queued);
  }

  // Runs an enqueue, which must not wait for device work (DQ-004). One still
  // running after the watchdog's kStuck is let go by letting all work finish
  // and running what is ready. One that waits a while and then goes on is
  // seen by its time: with work in flight, kSlowEnqueue is far beyond what an
  // enqueue costs, and a second such enqueue in one run is far beyond what a
  // loaded machine's scheduling adds. Either ends the run, and the test's
  // later runs pass at once: shrinking a sequence of waits would outlast the
  // test's time.
  template <class Call>
  void expect_unaided(const Model& model, Call&& call) {
    const std::function<void()> finish_the_work = [&] {
      queue->signal_fences();
      (void)queue->drain();
    };
    const auto started = Clock::now();
    const bool returned_by_itself = watchdog.unaided(finish_the_work, std::forward<Call>(call));
    if (model.in_flight && Clock::now() - started > kSlowEnqueue) ++slow_enqueues;
    const bool returned_without_waiting_for_the_device = returned_by_itself && slow_enqueues < 2;
    if (!returned_without_waiting_for_the_device) stuck = true;
    ORTMEM_CTS_RC_ASSERT("DQ-004", returned_without_waiting_for_the_device);
  }

  // The rejection the contract owes in `model`'s state: device-lost, then
  // closed, then full (DQ-006), judged against what the queue holds now.
  [[nodiscard]] std::optional<Rejection> owed(const Model& model) const {
    return first_rejection(model.lost, model.closed, waiting.size(), capacity);
  }

  static void judge_rejection(std::optional<Rejection> due, Rejection got) {
    if (due == Rejection::kDeviceLost || due == Rejection::kClosed) {
      const bool reports_the_most_permanent_reason = got == *due;
      ORTMEM_CTS_RC_ASSERT("DQ-006", reports_the_most_permanent_reason);
    } else if (due == Rejection::kFull) {
      const bool reports_full_or_its_own_reason = got == Rejection::kFull || got == Rejection::kRefused;
      ORTMEM_CTS_RC_ASSERT("DQ-005", reports_full_or_its_own_reason);
    } else {
      // Open, not lost, not full: only a reason of the queue's own is true.
      const bool reports_a_reason_that_holds = got == Rejection::kRefused;
      ORTMEM_CTS_RC_ASSERT("DQ-005", reports_a_reason_that_holds);
    }
  }

  void accept(const Model& model, std::optional<Rejection> owed_then, void* address, int serial, bool foreign_pin) {
    // Full may be answered by running ready work first (settle checks the
    // bound); closed and lost may not be answered by taking work.
    const bool takes_no_work_once_closed_or_lost =
        owed_then != Rejection::kDeviceLost && owed_then != Rejection::kClosed;
    ORTMEM_CTS_RC_ASSERT("DQ-006", takes_no_work_once_closed_or_lost);
    waiting.push_back({serial, address, model.in_flight ? Fence::kUnpassed : Fence::kMaybe, foreign_pin, false});
    settle(model, Call::kEnqueue, {}, serial);
  }

  void release_now(const Model& model, OwningAllocation owner, const char* ids = nullptr) {
    void* const address = owner.data();
    const auto outcome = std::move(owner).release_now();
    expect(ids, outcome.has_value() && outcome->is_complete(), "a live owner did not release Complete");
    Own own;
    own.ran = address;
    settle(model, Call::kOther, own);
  }

  void enqueue(const Model& model, const Spec& spec) {
    auto owner = harness->binding->allocate_owning(spec.bytes, kAlign);
    ORTMEM_CTS_RC_PRECONDITION(owner.has_value());
    void* const address = owner->data();
    // Requests are told apart by address: memory handed out again while a
    // request still holds it (waiting or quarantined) is the allocator's
    // overlap (ALLOC-006), which the allocator suites charge.
    const bool the_address_is_not_held = find(address) == waiting.end() && !known_quarantined.contains(address);
    ORTMEM_CTS_RC_PRECONDITION(the_address_is_not_held);
    const AllocationIdentity identity = owner->identity();
    const int serial = next_serial++;
    const auto owed_then = owed(model);
    if (spec.path == kThroughRegistry) {
      through_registry(model, std::move(*owner), identity, serial, owed_then);
      return;
    }
    auto pin = spec.path == kForeignPin ? foreign->pins().pin() : queue->queue().pin_context();
    if (spec.path == kOwnPin && model.retiring) {
      const bool refuses_the_pin = !pin.has_value();
      ORTMEM_CTS_RC_ASSERT("DQ-014", refuses_the_pin);
      const bool as_context_unavailable = pin.error().kind == ProviderContextPinError::Kind::kContextUnavailable;
      ORTMEM_CTS_RC_ASSERT("DQ-014", as_context_unavailable);
      release_now(model, std::move(*owner));
      return;
    }
    if (!pin) {
      // A queue that saw device loss may refuse even the pin; any other
      // refusal is the context's (PIN-002), which the pin suites judge.
      ORTMEM_CTS_RC_PRECONDITION(model.lost && spec.path == kOwnPin);
      release_now(model, std::move(*owner));
      return;
    }
    auto prepared = std::move(*owner).prepare_release();
    ORTMEM_CTS_RC_PRECONDITION(prepared.has_value());
    std::optional<Expected<DeferredEnqueued, DeferredEnqueueError>> answer;
    expect_unaided(model, [&] { answer.emplace(queue->queue().enqueue(std::move(*prepared), std::move(*pin))); });
    auto& result = *answer;
    if (result) {
      accept(model, owed_then, address, serial, spec.path == kForeignPin);
      return;
    }
    const Rejection rejection = result.error().rejection();
    judge_rejection(owed_then, rejection);
    const PreparedAllocationRelease& back = result.error().request();
    const bool the_very_request_comes_back =
        back.is_armed() && back.identity() == identity && back.data() == address && back.size() == spec.bytes;
    ORTMEM_CTS_RC_ASSERT("DQ-005", the_very_request_comes_back);
    Own own;
    if (spec.handling == kExecute) {
      const auto outcome = std::move(result.error()).take_request().execute();
      const bool still_the_live_request = outcome.is_complete();
      ORTMEM_CTS_RC_ASSERT("DQ-005", still_the_live_request);
      own.ran = address;
    } else if (spec.handling == kQuarantine) {
      (void)std::move(result.error()).quarantine();
      own.quarantined = address;
      own.reason = QuarantineReason::enqueue_rejected(rejection);
    } else {
      { [[maybe_unused]] const auto dropped = std::move(result); }
      own.quarantined = address;
      own.reason = QuarantineReason::of(QuarantineReason::Kind::kAbandonedRequest);
      own.ids = "OWN-003";
    }
    settle(model, Call::kEnqueue, own);
  }

  void through_registry(const Model& model, OwningAllocation owner, const AllocationIdentity& identity, int serial,
                        std::optional<Rejection> owed_then) {
    void* const address = owner.data();
    std::optional<Expected<DeferredReleaseDisposition, OwningReleaseError>> answer;
    expect_unaided(model, [&] { answer.emplace(std::move(owner).release_deferred(queue->queue())); });
    auto& disposition = *answer;
    if (!disposition) {
      if (!model.retiring) {
        ORTMEM_CTS_RC_PRECONDITION(model.lost);  // a lost queue may refuse the pin
        release_now(model, std::move(disposition.error()).take_allocation());
        return;
      }
      const BindingError& error = disposition.error().error();
      const bool refused_for_the_pin = error.kind() == BindingError::Kind::kDeferredRefused;
      ORTMEM_CTS_RC_ASSERT("DQ-014", refused_for_the_pin);
      const std::string message = error.message();
      const bool says_the_owner_stays_live = message.find("no longer accepting work") != std::string::npos &&
                                             message.find("stays live") != std::string::npos;
      ORTMEM_CTS_RC_ASSERT("DQ-016", says_the_owner_stays_live);
      OwningAllocation back = std::move(disposition.error()).take_allocation();
      const bool handed_back_live_not_quarantined = back.identity() == identity &&
                                                    harness->snapshot().live_allocations == 1 &&
                                                    harness->snapshot().quarantined_allocations == seen_quarantined;
      ORTMEM_CTS_RC_ASSERT("DQ-015", handed_back_live_not_quarantined);
      release_now(model, std::move(back), "DQ-015");
      return;
    }
    if (model.retiring) {
      // Queued is work taken (DQ-014); settled any other way, the owner was
      // not handed back live (DQ-015).
      const bool refused_for_the_pin = false;
      ORTMEM_CTS_RC_ASSERT(disposition->is_queued() ? "DQ-014" : "DQ-015", refused_for_the_pin);
    }
    if (disposition->is_queued()) {
      accept(model, owed_then, address, serial, false);
      return;
    }
    const Rejection rejection = *disposition->rejection();
    judge_rejection(owed_then, rejection);
    const auto& outcome = disposition->outcome();
    const bool quarantined_with_the_rejection =
        outcome.has_value() && outcome->residual() != nullptr &&
        outcome->residual()->reason == QuarantineReason::enqueue_rejected(rejection);
    ORTMEM_CTS_RC_ASSERT("DQ-007", quarantined_with_the_rejection);
    Own own;
    own.quarantined = address;
    own.reason = QuarantineReason::enqueue_rejected(rejection);
    own.ids = "DQ-007";
    settle(model, Call::kEnqueue, own);
  }

  Adapter& adapter;
  Watchdog& watchdog;
  // An enqueue had to be rescued: this run has failed, and the test's later
  // runs (RapidCheck shrinking it) pass at once rather than get stuck again.
  bool& stuck;
  std::optional<std::string>& deviation;
  IdentityIssuer issuer = *IdentityIssuer::create();
  std::unique_ptr<RegistryHarness> harness;
  std::unique_ptr<ContextUnderTest> foreign;  // another context, for pins that are not the queue's
  std::unique_ptr<QueueUnderTest> queue;
  std::optional<std::size_t> capacity;  // the queue's own, as capacity() reports it
  std::deque<Waiting> waiting;          // the Ledger: what the queue holds, oldest first
  int next_serial = 0;
  int slow_enqueues = 0;
  std::size_t seen_calls = 0;
  std::size_t seen_releases = 0;
  std::size_t seen_settled = 0;  // of the queue's own settlements, when it frees memory itself
  std::size_t seen_quarantined = 0;
  std::set<void*> known_quarantined;
};

using Command = rc::state::Command<Model, System>;

Model after(const Command& command, const Model& model) {
  Model next = model;
  command.apply(next);
  return next;
}

struct Enqueue final : Command {
  Spec spec;
  explicit Enqueue(const Model& model) : spec(any_spec(model)) {}
  void checkPreconditions(const Model& model) const override {
    RC_PRE(!model.retiring || (model.offers_after_retirement && spec.path != kForeignPin));
  }
  void apply(Model&) const override {}
  void run(const Model& model, System& system) const override { system.enqueue(model, spec); }
  void show(std::ostream& os) const override {
    os << "enqueue ";
    show_spec(os, spec);
  }
};

// Several enqueues in a row: what fills a bounded queue past its capacity and
// makes batches longer than eight for one drain.
struct Burst final : Command {
  std::vector<Spec> specs;
  explicit Burst(const Model& model) {
    const int count = *rc::gen::inRange(2, 14);
    for (int i = 0; i < count; ++i) specs.push_back(any_spec(model));
  }
  void checkPreconditions(const Model& model) const override {
    RC_PRE(!model.retiring ||
           (model.offers_after_retirement &&
            std::none_of(specs.begin(), specs.end(), [](const Spec& spec) { return spec.path == kForeignPin; })));
  }
  void apply(Model&) const override {}
  void run(const Model& model, System& system) const override {
    for (const Spec& spec : specs) system.enqueue(model, spec);
  }
  void show(std::ostream& os) const override {
    os << "enqueue " << specs.size() << ":";
    for (const Spec& spec : specs) {
      os << "\n    ";
      show_spec(os, spec);
    }
  }
};

struct RecordUse final : Command {
  explicit RecordUse(const Model&) {}
  void apply(Model& model) const override { model.in_flight = true; }
  void run(const Model& model, System& system) const override {
    system.queue->record_use();
    system.settle(model, Call::kOther);
  }
  void show(std::ostream& os) const override { os << "record device work"; }
};

struct Signal final : Command {
  explicit Signal(const Model&) {}
  void apply(Model& model) const override { model.in_flight = false; }
  void run(const Model& model, System& system) const override {
    system.queue->signal_fences();
    for (auto& entry : system.waiting) entry.fence = Fence::kPassed;
    system.settle(model, Call::kSignal);
  }
  void show(std::ostream& os) const override { os << "signal the fences"; }
};

struct Drain final : Command {
  explicit Drain(const Model&) {}
  void apply(Model&) const override {}
  void run(const Model& model, System& system) const override {
    (void)system.queue->drain();
    system.settle(model, Call::kDrain);
  }
  void show(std::ostream& os) const override { os << "drain"; }
};

struct Close final : HappensOnce<Command, &Model::closed> {
  explicit Close(const Model&) {}
  void run(const Model& model, System& system) const override {
    system.queue->close();
    for (auto& entry : system.waiting) entry.before_close = true;
    system.settle(model, Call::kClose);
  }
  void show(std::ostream& os) const override { os << "close"; }
};

struct LoseDevice final : HappensOnce<Command, &Model::lost> {
  explicit LoseDevice(const Model&) {}
  void run(const Model& model, System& system) const override {
    system.queue->mark_device_lost();
    system.settle(model, Call::kLoseDevice);
  }
  void show(std::ostream& os) const override { os << "mark the device lost"; }
};

struct RetireContext final : HappensOnce<Command, &Model::retiring> {
  explicit RetireContext(const Model&) {}
  void run(const Model& model, System& system) const override {
    system.harness->context->begin_retirement();
    system.settle(model, Call::kOther);
  }
  void show(std::ostream& os) const override { os << "retire the context"; }
};

// Teardown of the retiring context sees what the queue holds: every waiting
// request's pin keeps it from finishing (DQ-009), and once nothing waits the
// queue must hold no pin (DQ-013). A request taken with another context's
// pin (which a queue may accept) may or may not hold this one's, so while one
// waits and none of the queue's own does, either answer stands.
struct TeardownProbe final : Command {
  explicit TeardownProbe(const Model&) {}
  void checkPreconditions(const Model& model) const override { RC_PRE(model.retiring); }
  void apply(Model&) const override {}
  void run(const Model& model, System& system) const override {
    const bool own_pin_waits = std::any_of(system.waiting.begin(), system.waiting.end(),
                                           [](const System::Waiting& entry) { return !entry.foreign_pin; });
    bool done = system.harness->context->teardown(Clock::now());
    if (own_pin_waits) {
      const bool observes_the_queued_requests = !done;
      ORTMEM_CTS_RC_ASSERT("DQ-009", observes_the_queued_requests);
    } else if (system.waiting.empty()) {
      for (int retry = 0; !done && retry < kTeardownRetries; ++retry) {
        done = system.harness->context->teardown(Clock::now() + std::chrono::milliseconds(1));
      }
      const bool finished_once_nothing_waits = done;
      ORTMEM_CTS_RC_ASSERT("DQ-013", finished_once_nothing_waits);
    }
    system.settle(model, Call::kOther);
  }
  void show(std::ostream& os) const override { os << "teardown of the context (no wait)"; }
};

// A queue closed, lost or on a retiring context has done its work: the
// sequence goes on with a fresh context (the same registered identity) and a
// fresh queue, with a capacity of its own. What the old queue still holds is
// settled first by telling it of device loss, which is checked like any loss.
struct FreshQueue final : Command {
  int capacity = *edge_biased_capacity();
  explicit FreshQueue(const Model&) {}
  void checkPreconditions(const Model& model) const override { RC_PRE(model.closed || model.lost || model.retiring); }
  void apply(Model& model) const override {
    Model fresh;
    fresh.offers_after_retirement = model.offers_after_retirement;
    model = fresh;
  }
  void run(const Model& model, System& system) const override {
    if (!system.waiting.empty()) {
      system.queue->mark_device_lost();
      system.settle(model, Call::kLoseDevice);
    }
    system.queue.reset();
    system.harness->context = system.adapter.make_context(system.harness->context_registration.identity);
    ORTMEM_CTS_RC_PRECONDITION(system.harness->context != nullptr);
    system.open(as_capacity(capacity));
    system.settle(after(*this, model), Call::kOther);
  }
  void show(std::ostream& os) const override {
    os << "a fresh context and queue, capacity ";
    if (capacity < 0) {
      os << "none";
    } else {
      os << capacity;
    }
  }
};

// Enqueues most, device work, signals and drains often, the steps that end
// the queue's or the context's accepting life rarely, so fill, drain and
// refill cycles happen many times before a sequence closes or loses a queue.
rc::Gen<std::shared_ptr<const Command>> queue_command(const Model& model) {
  using rc::state::gen::execOneOfWithArgs;
  return rc::gen::weightedOneOf<std::shared_ptr<const Command>>({
      {8, execOneOfWithArgs<Enqueue>()(model)},
      {3, execOneOfWithArgs<Burst>()(model)},
      {3, execOneOfWithArgs<RecordUse>()(model)},
      {3, execOneOfWithArgs<Signal>()(model)},
      {3, execOneOfWithArgs<Drain>()(model)},
      {1, execOneOfWithArgs<Close>()(model)},
      {1, execOneOfWithArgs<LoseDevice>()(model)},
      {2, execOneOfWithArgs<RetireContext>()(model)},
      {6, execOneOfWithArgs<TeardownProbe>()(model)},
      {3, execOneOfWithArgs<FreshQueue>()(model)},
  });
}

// No device work is ever recorded, so no enqueue has anything to wait for,
// and the context retires early and often.
rc::Gen<std::shared_ptr<const Command>> retirement_command(const Model& model) {
  using rc::state::gen::execOneOfWithArgs;
  return rc::gen::weightedOneOf<std::shared_ptr<const Command>>({
      {6, execOneOfWithArgs<Enqueue>()(model)},
      {2, execOneOfWithArgs<Burst>()(model)},
      {2, execOneOfWithArgs<Signal>()(model)},
      {2, execOneOfWithArgs<Drain>()(model)},
      {1, execOneOfWithArgs<Close>()(model)},
      {1, execOneOfWithArgs<LoseDevice>()(model)},
      {3, execOneOfWithArgs<RetireContext>()(model)},
      {3, execOneOfWithArgs<TeardownProbe>()(model)},
      {2, execOneOfWithArgs<FreshQueue>()(model)},
  });
}

class DeferredModel : public RequiringCapability<RegistrySuite, Capability::kDeferredQueue> {
 protected:
  template <class Generate>
  void check_sequences(bool offers_after_retirement, Generate generate) {
    Watchdog watchdog;
    bool stuck = false;
    check_model([&] {
      if (stuck) return;
      System system(adapter(), watchdog, stuck, as_capacity(*edge_biased_capacity()), deviation_);
      Model initial;
      initial.offers_after_retirement = offers_after_retirement;
      const auto commands = *rc::gen::scale(kLength, rc::state::gen::commands(initial, generate));
      rc::state::runAll(commands, initial, system);
    });
    // An allocator that left the plain path makes every failure a precondition.
    if (deviation_) stands_on_broken(*deviation_);
  }

  std::optional<std::string> deviation_;
};

// Device work is in flight for much of a sequence, so an enqueue that waited
// for it would hang this test but for the watchdog; its requirements are all
// ones such a hang breaks, in case a rescue cannot let the enqueue go.
TEST_P(DeferredModel, EveryStepOfARandomSequenceMatchesTheModel) {
  covers("DQ-001", "DQ-002", "DQ-004", "DQ-005", "DQ-006", "DQ-007", "DQ-008", "DQ-009", "DQ-011", "DQ-012", "DQ-013",
         "OWN-003");
  ORTMEM_CTS_REQUIRE_CONTROL(Control::kFences);
  ORTMEM_CTS_REQUIRE_CONTROL(Control::kQueueCapacity);
  ORTMEM_CTS_REQUIRE_CONTROL(Control::kQueueClose);
  ORTMEM_CTS_REQUIRE_CONTROL(Control::kQueueDeviceLoss);
  // Teardown is how the sequence sees the pins that queued requests hold.
  expect_teardown_observes_pins();
  if (HasFatalFailure()) return;
  check_sequences(false, &queue_command);
}

TEST_P(DeferredModel, ARetiringContextRefusesEveryLaterRequestAndTheOwnerStaysLive) {
  covers("DQ-014", "DQ-015", "DQ-016", "DQ-002", "DQ-004", "DQ-005", "DQ-006", "DQ-007", "DQ-008", "DQ-009", "DQ-011",
         "DQ-012", "DQ-013", "OWN-003");
  ORTMEM_CTS_REQUIRE_CONTROL(Control::kFences);
  ORTMEM_CTS_REQUIRE_CONTROL(Control::kQueueCapacity);
  ORTMEM_CTS_REQUIRE_CONTROL(Control::kQueueClose);
  ORTMEM_CTS_REQUIRE_CONTROL(Control::kQueueDeviceLoss);
  expect_teardown_observes_pins();
  if (HasFatalFailure()) return;
  check_sequences(true, &retirement_command);
}

ORTMEM_CTS_INSTANTIATE(DeferredModel);

}  // namespace
}  // namespace ortmem::cts
