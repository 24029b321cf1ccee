// Provider-context pins as a state machine (RapidCheck rc::state): random
// sequences of pin, drop, retire, device loss, teardown and concurrent pin
// traffic over the adapter's own ContextUnderTest, each step compared with a
// model of what an observer may see.
//
// The model is the set of outstanding pins, the context's lifecycle (active,
// retiring, lost, torn down) and its cap (ContextOptions). The count is
// observed through behaviour: teardown must refuse exactly while a pin is
// left and finish once none is, because an adapter may decline to report
// outstanding_pins(); when it does report, the figure must equal the model
// after every step. Every pin and every refusal must name the context, and
// refusals must be of the kind, and in the words, the contract gives.
//
// When a context is torn down the sequence goes on with a fresh one (new
// identity, new cap), so one sequence passes through many lifecycles. One
// test tears down from a thread that holds no pin, the other from the thread
// that holds them all (PIN-008).
//
// The adapter contract leaves choices open, and the model allows each:
// outstanding_pins() may be declined; teardown may wait until its deadline or
// report busy at once, may refuse at once on a thread that holds a pin, may
// finish on a later call rather than the first once no pin is left, and may
// or may not retire the context when it cannot finish.
// GoogleTest first: rapidcheck/gtest.h uses its macros.
#include "support/model_check.hpp"
#include "support/suite.hpp"
#include "support/watchdog.hpp"

#include <rapidcheck.h>
#include <rapidcheck/gtest.h>
#include <rapidcheck/state.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "ortmem/identity.hpp"

namespace ortmem::cts {
namespace {

using Clock = std::chrono::steady_clock;
using PinResult = Expected<ProviderContextPin, ProviderContextPinError>;
using Kind = ProviderContextPinError::Kind;

// A pin can only be moved, so a claim cannot be duplicated behind the
// counter's back, and it offers nothing but its identity (PIN-003).
static_assert(!std::is_copy_constructible_v<ProviderContextPin> && !std::is_copy_assignable_v<ProviderContextPin>);

// Pins held at once on a context without a cap: enough to be far from any
// cap an adapter might keep for itself, few enough to stay cheap.
constexpr std::size_t kUncappedHeld = 40;
// How long a teardown may run past its deadline before it counts as not
// honouring it: far above scheduling noise on a loaded machine. (One that
// runs for the watchdog's kStuck is rescued by dropping every pin.)
constexpr auto kDeadlineSlack = std::chrono::milliseconds(400);
// A teardown with no pin left completes "now or on a later call" (adapter.hpp);
// these are the later calls it gets.
constexpr int kTeardownRetries = 3;
// Sequences this many times RapidCheck's length, so that one default run
// passes hundreds of pins, refusals, teardowns and churns.
constexpr double kLength = 3.0;
// The most threads that pin at once.
constexpr int kCrew = 4;

// Threads kept for the whole test, so that pins taken and dropped elsewhere,
// concurrent churn and teardown from a thread of its own cost a hand-over
// rather than a thread start.
class Crew {
 public:
  explicit Crew(int size) {
    for (int member = 0; member < size; ++member) threads_.emplace_back([this, member] { work(member); });
  }
  ~Crew() {
    {
      const std::lock_guard lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    for (auto& thread : threads_) thread.join();
  }
  Crew(const Crew&) = delete;
  Crew& operator=(const Crew&) = delete;

  // Runs task(member) on members 0..count-1 at once; returns when all are done.
  void run(int count, const std::function<void(int)>& task) {
    std::unique_lock lock(mutex_);
    task_ = &task;
    members_ = count;
    finished_ = 0;
    ++round_;
    wake_.notify_all();
    done_.wait(lock, [&] { return finished_ == members_; });
    task_ = nullptr;
  }
  // Runs `task` on one thread of the crew (never the caller's).
  void elsewhere(const std::function<void()>& task) {
    run(1, [&](int) { task(); });
  }

 private:
  void work(int member) {
    std::uint64_t seen = 0;
    std::unique_lock lock(mutex_);
    for (;;) {
      wake_.wait(lock, [&] { return stop_ || round_ != seen; });
      if (stop_) return;
      seen = round_;
      if (member >= members_) continue;
      const std::function<void(int)>* task = task_;
      lock.unlock();
      (*task)(member);
      lock.lock();
      if (++finished_ == members_) done_.notify_one();
    }
  }

  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable done_;
  const std::function<void(int)>* task_ = nullptr;
  int members_ = 0;
  int finished_ = 0;
  std::uint64_t round_ = 0;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

// No cap (-1), a cap of 0 (every pin overflows), small caps a sequence
// reaches over and over, and one above what the churn takes at once. Drawn
// as a number so that a counterexample prints it.
rc::Gen<int> edge_biased_cap() {
  return rc::gen::weightedOneOf<int>({
      {2, rc::gen::just(-1)},
      {1, rc::gen::just(0)},
      {6, rc::gen::inRange(1, 5)},
      {1, rc::gen::just(9)},
  });
}

std::optional<std::uint64_t> as_cap(int drawn) {
  return drawn < 0 ? std::nullopt : std::optional<std::uint64_t>(static_cast<std::uint64_t>(drawn));
}

enum class Lifecycle : std::uint8_t { kActive, kRetiring, kLost, kTornDown };

std::string cap_name(std::optional<std::uint64_t> cap) { return cap ? std::to_string(*cap) : "none"; }

struct Model {
  std::set<int> pins;  // outstanding, by the order they were taken in
  Lifecycle lifecycle = Lifecycle::kActive;
  // A teardown that did not finish was tried on the active context. Whether
  // teardown retires the context is the adapter's choice (the reference's
  // does, adapter.hpp does not say), so from then on a pin may be granted or
  // refused as context-unavailable; the test keeps no pin granted then.
  bool teardown_tried = false;
  std::optional<std::uint64_t> cap;
  int next = 0;
  // Teardown runs on the test's own thread, which holds every pin (the
  // PIN-008 test), rather than on a thread of its own.
  bool on_holder = false;

  [[nodiscard]] bool at_cap() const { return cap && pins.size() >= *cap; }
  // Whether pin() must succeed, and the model keep the pin.
  [[nodiscard]] bool grants() const { return lifecycle == Lifecycle::kActive && !teardown_tried && !at_cap(); }
};

struct System {
  System(Adapter& under_test, Crew& helpers, Crew& bystanding, Watchdog& watching, bool& stuck_flag,
         std::optional<std::uint64_t> cap)
      : adapter(under_test), crew(helpers), bystander(bystanding), watchdog(watching), stuck(stuck_flag) {
    open(cap);
  }
  ~System() {
    held.clear();  // pins go before their context
    context.reset();
  }
  System(const System&) = delete;
  System& operator=(const System&) = delete;

  void open(std::optional<std::uint64_t> cap) {
    held.clear();
    context.reset();
    const auto issued = issuer.issue<ProviderContextIdentity>();
    ORTMEM_CTS_RC_PRECONDITION(issued.has_value());
    identity = *issued;
    context = adapter.make_context(identity, {.max_outstanding_pins = cap});
    ORTMEM_CTS_RC_PRECONDITION(context != nullptr);
    refused_since_teardown = false;
    churn_unseen = false;
  }

  Adapter& adapter;
  Crew& crew;       // threads that take, drop and churn pins
  Crew& bystander;  // a thread that never takes or holds a pin, for teardown
  Watchdog& watchdog;
  // A teardown had to be rescued: this run has failed, and the test's later
  // runs (RapidCheck shrinking it) pass at once rather than get stuck again.
  bool& stuck;
  IdentityIssuer issuer = *IdentityIssuer::create();
  ProviderContextIdentity identity;
  std::unique_ptr<ContextUnderTest> context;
  std::map<int, ProviderContextPin> held;
  // Learned: the adapter's teardown retired the context (a pin was refused as
  // context-unavailable after it), so no later pin may be granted (PIN-004).
  bool refused_since_teardown = false;
  // Concurrent pin traffic ran while the adapter declined to report its
  // count, so the only check of that count is the next teardown: a teardown
  // answering against the model is then the count's failure (PIN-009).
  bool churn_unseen = false;
};

using Command = rc::state::Command<Model, System>;

Model after(const Command& command, const Model& model) {
  Model next = model;
  command.apply(next);
  return next;
}

PinResult pin_on_another_thread(System& system) {
  std::optional<PinResult> taken;
  system.crew.elsewhere([&] { taken.emplace(system.context->pins().pin()); });
  return std::move(*taken);
}

// What is observable after every step: the identity the source and every
// held pin name, and the count when the adapter reports one. `count_ids` is
// the rule the step's count stands on.
void observe(const Model& model, System& system, const char* count_ids = "PIN-009") {
  const bool the_source_names_its_context = system.context->pins().context() == system.identity;
  ORTMEM_CTS_RC_ASSERT("PIN-001", the_source_names_its_context);
  const bool every_held_pin_names_it = std::all_of(system.held.begin(), system.held.end(), [&](const auto& held) {
    return held.second.context() == system.identity;
  });
  ORTMEM_CTS_RC_ASSERT("PIN-001", every_held_pin_names_it);
  if (const auto outstanding = system.context->outstanding_pins()) {
    const bool the_reported_count_is_the_models = *outstanding == model.pins.size();
    ORTMEM_CTS_RC_ASSERT(count_ids, the_reported_count_is_the_models);
  }
}

// A refusal names the context and says why in the contract's words; the kind
// and the naming are the rule that refused (`rule`), the words PIN-010's.
void expect_refusal(const PinResult& refused, Kind kind, const System& system, const char* rule) {
  const bool refused_as_this_kind = refused.error().kind == kind;
  ORTMEM_CTS_RC_ASSERT(rule, refused_as_this_kind);
  const bool the_refusal_names_the_context = refused.error().context == system.identity;
  ORTMEM_CTS_RC_ASSERT(rule, the_refusal_names_the_context);
  const std::string message = refused.error().message();
  const bool says_it_in_the_contracts_words =
      message.find(kind == Kind::kContextUnavailable ? "is no longer accepting work"
                                                     : "has too many outstanding pins") != std::string::npos;
  ORTMEM_CTS_RC_ASSERT("PIN-010", says_it_in_the_contracts_words);
}

// Judges one pin() answer given in `model`'s state; a pin the model keeps is
// held under `id`, any other granted pin is dropped at once.
void judge_pin(const Model& model, System& system, PinResult got, int id) {
  if (model.lifecycle != Lifecycle::kActive) {
    const bool refused_once_not_accepting_work = !got.has_value();
    ORTMEM_CTS_RC_ASSERT("PIN-004", refused_once_not_accepting_work);
    expect_refusal(got, Kind::kContextUnavailable, system, "PIN-004");
    return;
  }
  if (model.teardown_tried) {
    if (got) {
      // The teardown did not retire the context; but one refusal since it
      // said it did, and a context never goes back to accepting work.
      const bool never_granted_after_a_refusal = !system.refused_since_teardown;
      ORTMEM_CTS_RC_ASSERT("PIN-004", never_granted_after_a_refusal);
      const bool granted_below_the_cap = !model.at_cap();
      ORTMEM_CTS_RC_ASSERT("PIN-005", granted_below_the_cap);
      const bool the_pin_names_the_context = got->context() == system.identity;
      ORTMEM_CTS_RC_ASSERT("PIN-001", the_pin_names_the_context);
      return;
    }
    if (got.error().kind == Kind::kContextUnavailable) {
      expect_refusal(got, Kind::kContextUnavailable, system, "PIN-004");
      system.refused_since_teardown = true;
      return;
    }
    // Overflow says the context still accepts work, so only a full counter explains it.
    const bool overflowed_only_at_the_cap = model.at_cap();
    ORTMEM_CTS_RC_ASSERT("PIN-002", overflowed_only_at_the_cap);
    expect_refusal(got, Kind::kPinCountOverflow, system, "PIN-005");
    return;
  }
  if (model.at_cap()) {
    const bool refused_one_past_the_cap = !got.has_value();
    ORTMEM_CTS_RC_ASSERT("PIN-005", refused_one_past_the_cap);
    expect_refusal(got, Kind::kPinCountOverflow, system, "PIN-005");
    return;
  }
  const bool granted_while_accepting_below_the_cap = got.has_value();
  ORTMEM_CTS_RC_ASSERT("PIN-002", granted_while_accepting_below_the_cap);
  const bool the_pin_names_the_context = got->context() == system.identity;
  ORTMEM_CTS_RC_ASSERT("PIN-001", the_pin_names_the_context);
  system.held.emplace(id, std::move(*got));
}

// One pin, or a few in a row (each judged on its own), so that small caps
// are reached and passed often.
struct TakePins final : Command {
  int count = *rc::gen::weightedOneOf<int>({{3, rc::gen::just(1)}, {2, rc::gen::inRange(2, 5)}});
  bool elsewhere = *rc::gen::weightedOneOf<bool>({{3, rc::gen::just(false)}, {1, rc::gen::just(true)}});
  explicit TakePins(const Model&) {}
  void checkPreconditions(const Model& model) const override {
    RC_PRE(model.cap.has_value() || model.pins.size() + static_cast<std::size_t>(count) <= kUncappedHeld);
  }
  static void take_one(Model& model) {
    if (model.grants()) model.pins.insert(model.next);
    ++model.next;
  }
  void apply(Model& model) const override {
    for (int i = 0; i < count; ++i) take_one(model);
  }
  void run(const Model& model, System& system) const override {
    ProviderContextPinSource& source = system.context->pins();
    Model now = model;
    for (int i = 0; i < count; ++i) {
      judge_pin(now, system, elsewhere ? pin_on_another_thread(system) : source.pin(), now.next);
      // A refused overflow leaves the count as it was (PIN-005).
      const bool overflowed = now.lifecycle == Lifecycle::kActive && now.at_cap();
      take_one(now);
      observe(now, system, overflowed ? "PIN-005" : "PIN-009");
    }
  }
  void show(std::ostream& os) const override {
    os << "take " << count << (count == 1 ? " pin" : " pins") << (elsewhere ? " (on another thread)" : "");
  }
};

struct DropPin final : Command {
  int id;
  bool elsewhere = *rc::gen::weightedOneOf<bool>({{3, rc::gen::just(false)}, {1, rc::gen::just(true)}});
  explicit DropPin(const Model& model) : id(any_key(model.pins)) {}
  void checkPreconditions(const Model& model) const override { RC_PRE(model.pins.contains(id)); }
  void apply(Model& model) const override { model.pins.erase(id); }
  void run(const Model& model, System& system) const override {
    auto node = system.held.extract(id);
    ORTMEM_CTS_RC_PRECONDITION(!node.empty());
    if (elsewhere) {
      system.crew.elsewhere([&] { node.mapped().reset(); });
    } else {
      node.mapped().reset();
    }
    observe(after(*this, model), system);
  }
  void show(std::ostream& os) const override { os << "drop pin " << id << (elsewhere ? " (on another thread)" : ""); }
};

// Threads pinning and unpinning at once, each holding at most one pin at a
// time: afterwards the count is what it was (PIN-009), which the next
// teardown or reported count sees.
struct Churn final : Command {
  int threads = *rc::gen::inRange(2, kCrew + 1);
  int rounds = *rc::gen::inRange(1, 65);
  explicit Churn(const Model&) {}
  void apply(Model&) const override {}
  void run(const Model& model, System& system) const override {
    ProviderContextPinSource& source = system.context->pins();
    const ProviderContextIdentity identity = system.identity;
    std::atomic<int> started{0};
    std::atomic<int> granted{0};
    std::atomic<int> unavailable{0};
    std::atomic<int> overflowed{0};
    std::atomic<int> misnamed{0};
    system.crew.run(threads, [&](int) {
      // Start together, so the increments and decrements really interleave.
      ++started;
      while (started.load() < threads) std::this_thread::yield();
      for (int round = 0; round < rounds; ++round) {
        auto pin = source.pin();
        if (pin) {
          ++granted;
          if (pin->context() != identity) ++misnamed;
          continue;
        }
        if (pin.error().context != identity) ++misnamed;
        ++(pin.error().kind == Kind::kContextUnavailable ? unavailable : overflowed);
      }
    });
    const bool every_pin_and_refusal_named_the_context = misnamed.load() == 0;
    ORTMEM_CTS_RC_ASSERT("PIN-001", every_pin_and_refusal_named_the_context);
    if (model.lifecycle != Lifecycle::kActive) {
      const bool all_refused_as_unavailable = granted.load() == 0 && overflowed.load() == 0;
      ORTMEM_CTS_RC_ASSERT("PIN-004", all_refused_as_unavailable);
    } else if (!model.teardown_tried) {
      // With room for every thread's pin, nothing may be refused: a refusal
      // here is a count that concurrency corrupted.
      const bool none_refused_as_unavailable = unavailable.load() == 0;
      ORTMEM_CTS_RC_ASSERT("PIN-009", none_refused_as_unavailable);
      const bool room = !model.cap || model.pins.size() + static_cast<std::size_t>(threads) <= *model.cap;
      const bool no_overflow_with_room = !room || overflowed.load() == 0;
      ORTMEM_CTS_RC_ASSERT("PIN-009", no_overflow_with_room);
    } else {
      const bool never_granted_after_a_refusal = granted.load() == 0 || !system.refused_since_teardown;
      ORTMEM_CTS_RC_ASSERT("PIN-004", never_granted_after_a_refusal);
      if (unavailable.load() > 0) system.refused_since_teardown = true;
    }
    observe(model, system);
    if (!system.context->outstanding_pins()) system.churn_unseen = true;
  }
  void show(std::ostream& os) const override { os << threads << " threads pin and unpin " << rounds << " times each"; }
};

struct BeginRetirement final : Command {
  explicit BeginRetirement(const Model&) {}
  void apply(Model& model) const override {
    if (model.lifecycle == Lifecycle::kActive) model.lifecycle = Lifecycle::kRetiring;
    model.teardown_tried = false;
  }
  void run(const Model& model, System& system) const override {
    system.context->begin_retirement();
    observe(after(*this, model), system);
  }
  void show(std::ostream& os) const override { os << "begin retirement"; }
};

struct MarkDeviceLost final : Command {
  explicit MarkDeviceLost(const Model&) {}
  // A torn-down context has no device left to lose.
  void checkPreconditions(const Model& model) const override { RC_PRE(model.lifecycle != Lifecycle::kTornDown); }
  void apply(Model& model) const override {
    model.lifecycle = Lifecycle::kLost;
    model.teardown_tried = false;
  }
  void run(const Model& model, System& system) const override {
    system.context->mark_device_lost();
    observe(after(*this, model), system);
  }
  void show(std::ostream& os) const override { os << "mark device lost"; }
};

// Teardown is the kit's observer of the count: it must not finish while a
// pin is out, and must finish once none is. Its deadline is short or already
// passed, so a teardown that waits costs little and one that ignores its
// deadline shows; one stuck for the watchdog's kStuck is let go by dropping
// every pin, and charged.
struct Teardown final : Command {
  int wait_ms = *rc::gen::weightedOneOf<int>({{15, rc::gen::just(0)}, {1, rc::gen::just(1)}});
  bool elsewhere;
  explicit Teardown(const Model& model) : elsewhere(!model.on_holder) {}
  void checkPreconditions(const Model& model) const override { RC_PRE(elsewhere == !model.on_holder); }
  void apply(Model& model) const override {
    if (model.pins.empty()) {
      model.lifecycle = Lifecycle::kTornDown;
      model.teardown_tried = false;
    } else if (model.lifecycle == Lifecycle::kActive) {
      model.teardown_tried = true;
    }
  }
  void run(const Model& model, System& system) const override {
    const char* observer = system.churn_unseen ? "PIN-009" : "PIN-006";
    const auto deadline = Clock::now() + std::chrono::milliseconds(wait_ms);
    bool done = false;
    // Stuck on pins it will never see go, it is let go by dropping them all.
    const std::function<void()> drop_every_pin = [&] { system.held.clear(); };
    const bool unaided = system.watchdog.unaided(drop_every_pin, [&] {
      if (elsewhere) {
        system.bystander.elsewhere([&] { done = system.context->teardown(deadline); });
      } else {
        done = system.context->teardown(deadline);
      }
    });
    const auto returned = Clock::now();
    if (!unaided) {
      system.stuck = true;
      // The pins are this thread's: blocking on them would never end
      // (PIN-008). From another thread, a waiting teardown gives up at its
      // deadline (PIN-007).
      const bool returned_by_itself = false;
      ORTMEM_CTS_RC_ASSERT(elsewhere ? "PIN-007" : "PIN-008", returned_by_itself);
    }
    if (!model.pins.empty()) {
      const bool unfinished_while_a_pin_is_out = !done;
      ORTMEM_CTS_RC_ASSERT(observer, unfinished_while_a_pin_is_out);
      const bool returned_by_its_deadline = returned - deadline < kDeadlineSlack;
      ORTMEM_CTS_RC_ASSERT(elsewhere ? "PIN-007" : "PIN-008", returned_by_its_deadline);
    } else {
      for (int retry = 0; !done && retry < kTeardownRetries; ++retry) {
        done = system.context->teardown(Clock::now() + std::chrono::milliseconds(1));
      }
      const bool finished_once_no_pin_is_out = done;
      ORTMEM_CTS_RC_ASSERT(observer, finished_once_no_pin_is_out);
    }
    observe(after(*this, model), system);
  }
  void show(std::ostream& os) const override {
    os << "teardown, deadline in " << wait_ms << " ms"
       << (elsewhere ? ", from a thread of its own" : ", on the thread holding the pins");
  }
};

struct FreshContext final : Command {
  std::optional<std::uint64_t> cap = as_cap(*edge_biased_cap());
  explicit FreshContext(const Model&) {}
  void checkPreconditions(const Model& model) const override { RC_PRE(model.lifecycle == Lifecycle::kTornDown); }
  void apply(Model& model) const override {
    Model fresh;
    fresh.cap = cap;
    fresh.next = model.next;
    fresh.on_holder = model.on_holder;
    model = fresh;
  }
  void run(const Model& model, System& system) const override {
    system.open(cap);
    observe(after(*this, model), system);
  }
  void show(std::ostream& os) const override { os << "a fresh context, cap " << cap_name(cap); }
};

// Weighted by where the context is: an accepting one is mostly pinned and
// unpinned, one that refuses is probed a few times while its pins are
// dropped and its teardown is tried, and a torn-down one is soon replaced.
// So a context spends most of a sequence taking work.
rc::Gen<std::shared_ptr<const Command>> next_command(const Model& model) {
  using rc::state::gen::execOneOfWithArgs;
  const bool accepting = model.lifecycle == Lifecycle::kActive && !model.teardown_tried;
  const bool torn_down = model.lifecycle == Lifecycle::kTornDown;
  return rc::gen::weightedOneOf<std::shared_ptr<const Command>>({
      {accepting   ? 10U
       : torn_down ? 1U
                   : 2U,
       execOneOfWithArgs<TakePins>()(model)},
      {6, execOneOfWithArgs<DropPin>()(model)},
      {accepting ? 2U : 1U, execOneOfWithArgs<Churn>()(model)},
      {1, execOneOfWithArgs<BeginRetirement>()(model)},
      {1, execOneOfWithArgs<MarkDeviceLost>()(model)},
      {accepting ? 3U : 4U, execOneOfWithArgs<Teardown>()(model)},
      {torn_down ? 8U : 1U, execOneOfWithArgs<FreshContext>()(model)},
  });
}

class PinsModel : public AdapterSuite {
 protected:
  void SetUp() override {
    AdapterSuite::SetUp();
    ORTMEM_CTS_REQUIRE(Capability::kContextPins);
  }

  // Sequences `length` times RapidCheck's, with teardown on the thread that
  // holds every pin or on a thread of its own.
  void check_sequences(bool on_holder, double length) {
    Crew crew(kCrew);
    Crew bystander(1);
    Watchdog watchdog;
    bool stuck = false;
    check_model([&] {
      if (stuck) return;
      const auto cap = as_cap(*edge_biased_cap());
      System system(adapter(), crew, bystander, watchdog, stuck, cap);
      Model initial;
      initial.cap = cap;
      initial.on_holder = on_holder;
      const auto commands = *rc::gen::scale(length, rc::state::gen::commands(initial, &next_command));
      rc::state::runAll(commands, initial, system);
    });
  }
};

// Teardown from a thread that holds no pin, so a waiting teardown has pins
// to wait for and a deadline to honour (PIN-007).
TEST_P(PinsModel, EveryStepOfARandomSequenceMatchesTheModel) {
  covers("PIN-001", "PIN-002", "PIN-004", "PIN-005", "PIN-006", "PIN-007", "PIN-009", "PIN-010");
  check_sequences(false, kLength);
}

// The same sequences with every teardown on the thread that holds the pins.
// covers() names PIN-008 alone: a teardown that blocks for good on its own
// thread's pins hangs this test, and a hang is charged to every id covers()
// names; any other check that fails here still charges its own id.
TEST_P(PinsModel, ATeardownOnThePinHoldingThreadEndsByItsDeadline) {
  covers("PIN-008");
  check_sequences(true, 2.0);
}

ORTMEM_CTS_INSTANTIATE(PinsModel);

}  // namespace
}  // namespace ortmem::cts
