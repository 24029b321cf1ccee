// Property-based checks with RapidCheck: random operation sequences against a
// model, over the adapter's own objects.
//
// The seed comes from the runner (--seed, or a random one it reports); a
// failure prints RapidCheck's shrunk counterexample and the report carries
// the command that reproduces it.
// GoogleTest first: rapidcheck/gtest.h uses its macros.
#include "support/binding_error_payload.hpp"
#include "support/registry_harness.hpp"
#include "support/model_check.hpp"
#include "support/suite.hpp"

#include <rapidcheck.h>
#include <rapidcheck/gtest.h>
#include <rapidcheck/state.h>

#include <algorithm>
#include <map>
#include <vector>

namespace ortmem::cts {
namespace {

// ORTMEM_CTS_EXPECT_NAMES inside a model's command.
void rc_expect_names(const BindingError& error, const ExpectedBindingError& expected) {
  if (const auto named = Names(error, expected); !named) {
    RC_FAIL(std::string(kChecksTag) + "BIND-018] " + named.message());
  }
}

class Property : public AdapterSuite {};

// ---- The allocator alone: random allocate / release / check sequences. ----

TEST_P(Property, RandomAllocateReleaseSequencesKeepTheAllocatorContract) {
  covers("ALLOC-005", "ALLOC-006", "ALLOC-007", "ALLOC-015", "ALLOC-017");
  check_model([this] {
    auto allocator = adapter().make_allocator();
    struct Block {
      void* ptr;
      std::size_t bytes;
      std::size_t align;
      std::uint8_t pattern;
    };
    std::vector<Block> live;
    const auto release_all = [&] {
      for (const Block& block : live) (void)allocator->release(block.ptr, block.bytes, block.align);
      live.clear();
    };
    const int steps = *rc::gen::inRange(1, 60);
    for (int step = 0; step < steps; ++step) {
      if (live.empty() || *rc::gen::inRange(0, 3) != 0) {
        const auto bytes = static_cast<std::size_t>(*rc::gen::inRange(0, 1 << 16));
        const std::size_t align = std::size_t{1} << *rc::gen::inRange(0, 13);
        auto ptr = allocator->allocate(bytes, align);
        if (bytes == 0 && !ptr) {
          // Refusing zero bytes is allowed, as invalid-request only.
          ORTMEM_CTS_RC_ASSERT("ALLOC-007", ptr.error().kind() == MemoryError::Kind::kInvalidRequest);
          continue;
        }
        if (!ptr) release_all();
        ORTMEM_CTS_RC_ASSERT("ALLOC-005", ptr.has_value());
        const auto address = reinterpret_cast<std::uintptr_t>(*ptr);
        ORTMEM_CTS_RC_ASSERT("ALLOC-005", address != 0U);
        ORTMEM_CTS_RC_ASSERT("ALLOC-005", address % align == 0U);
        const auto pattern = static_cast<std::uint8_t>(step * 31 + 7);
        adapter().memory().fill(*ptr, bytes, pattern);
        live.push_back({*ptr, bytes, align, pattern});
      } else {
        const auto index = static_cast<std::size_t>(*rc::gen::inRange<int>(0, static_cast<int>(live.size())));
        const Block block = live[index];
        const bool intact = reads_as(adapter().memory(), block.ptr, block.bytes, block.pattern);
        live.erase(live.begin() + static_cast<std::ptrdiff_t>(index));
        const auto outcome = allocator->release(block.ptr, block.bytes, block.align);
        if (!intact || !outcome.is_complete()) release_all();
        ORTMEM_CTS_RC_ASSERT("ALLOC-015", intact);
        ORTMEM_CTS_RC_PRECONDITION(outcome.is_complete());
        ORTMEM_CTS_RC_ASSERT("ALLOC-017", outcome.accounting()->allocation_bytes == block.bytes);
      }
    }
    // No two live blocks overlap.
    auto sorted = live;
    std::sort(sorted.begin(), sorted.end(), [](const Block& a, const Block& b) { return a.ptr < b.ptr; });
    bool disjoint = true;
    for (std::size_t i = 1; i < sorted.size(); ++i) {
      disjoint &= reinterpret_cast<std::uintptr_t>(sorted[i - 1].ptr) + sorted[i - 1].bytes <=
                  reinterpret_cast<std::uintptr_t>(sorted[i].ptr);
    }
    release_all();
    ORTMEM_CTS_RC_ASSERT("ALLOC-006", disjoint);
  });
}

// ---- The binding lifecycle as a state machine. ----

struct LifecycleModel {
  struct Allocation {
    std::size_t bytes;
    std::size_t align;
    std::uint8_t pattern;
    int views = 0;
  };
  std::map<int, Allocation> live;  // by slot
  int next_slot = 0;
  bool retired = false;
  bool lost = false;
  bool terminated = false;
  std::size_t queued = 0;
  std::size_t quarantined = 0;
  std::uint64_t quarantined_bytes = 0;
  std::size_t allocator_allocations = 0;
  std::size_t allocator_releases = 0;  // releases that ran: the allocator's calls, or the queue's own
  std::vector<std::uint64_t> queued_bytes;
  // The queue frees memory itself (an nxmem plugin's): it performed each
  // release it was handed, whatever the registry later says of the device.
  bool queue_frees_itself = false;

  [[nodiscard]] bool active() const { return !retired && !lost; }
  [[nodiscard]] bool releasable() const { return !lost; }
};

struct LifecycleSut {
  explicit LifecycleSut(Adapter& under_test) : adapter(under_test), harness(under_test) {
    queue = adapter.make_queue(*harness.context, {});
  }
  Adapter& adapter;
  RegistryHarness harness;
  std::unique_ptr<QueueUnderTest> queue;
  std::map<int, OwningAllocation> owners;
  std::map<int, std::vector<OwnedView>> views;
};

using LifecycleCommand = rc::state::Command<LifecycleModel, LifecycleSut>;

// After every command the registry's own view must equal the model's.
void check_against_model(const LifecycleModel& model, LifecycleSut& sut) {
  const MechanismSnapshot snapshot = sut.harness.snapshot();
  ORTMEM_CTS_RC_ASSERT("OWN-002", snapshot.live_allocations == (model.terminated ? 0 : model.live.size()));
  ORTMEM_CTS_RC_ASSERT("DQ-008", snapshot.queued_releases == model.queued);
  ORTMEM_CTS_RC_ASSERT("OWN-008", snapshot.quarantined_allocations == model.quarantined);
  ORTMEM_CTS_RC_ASSERT("OWN-008", snapshot.quarantined_bytes == model.quarantined_bytes);
  ORTMEM_CTS_RC_ASSERT("OWN-002", sut.harness.allocator->allocate_calls.load() == model.allocator_allocations);
  ORTMEM_CTS_RC_ASSERT("DQ-002", sut.harness.releases_run(*sut.queue) == model.allocator_releases);
  if (model.terminated) return;
  for (const auto& [slot, allocation] : model.live) {
    // The bytes are the allocator's to keep (ALLOC-015), whatever the binding did.
    ORTMEM_CTS_RC_ASSERT(
        "ALLOC-015", reads_as(sut.adapter.memory(), sut.owners.at(slot).data(), allocation.bytes, allocation.pattern));
  }
}

struct Allocate final : LifecycleCommand {
  std::size_t bytes = static_cast<std::size_t>(*rc::gen::inRange(1, 8192));
  std::size_t align = std::size_t{1} << *rc::gen::inRange(0, 9);
  explicit Allocate(const LifecycleModel&) {}
  void checkPreconditions(const LifecycleModel& model) const override { RC_PRE(model.active()); }
  void apply(LifecycleModel& model) const override {
    model.live[model.next_slot] = {bytes, align, static_cast<std::uint8_t>(model.next_slot * 13 + 1)};
    ++model.next_slot;
    ++model.allocator_allocations;
  }
  void run(const LifecycleModel& model, LifecycleSut& sut) const override {
    auto owner = sut.harness.binding->allocate_owning(bytes, align);
    ORTMEM_CTS_RC_PRECONDITION(owner.has_value());
    sut.adapter.memory().fill(owner->data(), bytes, static_cast<std::uint8_t>(model.next_slot * 13 + 1));
    sut.owners.emplace(model.next_slot, std::move(*owner));
    check_against_model(nextState(model), sut);
  }
  void show(std::ostream& os) const override { os << "allocate_owning(" << bytes << ", " << align << ")"; }
};

struct LendView final : LifecycleCommand {
  int slot;
  explicit LendView(const LifecycleModel& model) : slot(any_key(model.live)) {}
  void checkPreconditions(const LifecycleModel& model) const override {
    RC_PRE(model.live.contains(slot) && model.active());
  }
  void apply(LifecycleModel& model) const override { ++model.live.at(slot).views; }
  void run(const LifecycleModel& model, LifecycleSut& sut) const override {
    auto view = sut.owners.at(slot).view(0, model.live.at(slot).bytes);
    ORTMEM_CTS_RC_ASSERT("OWN-005", view.has_value());
    sut.views[slot].push_back(std::move(*view));
    check_against_model(nextState(model), sut);
  }
  void show(std::ostream& os) const override { os << "view(slot " << slot << ")"; }
};

struct DropView final : LifecycleCommand {
  int slot;
  explicit DropView(const LifecycleModel& model) : slot(any_key(model.live)) {}
  void checkPreconditions(const LifecycleModel& model) const override {
    RC_PRE(model.live.contains(slot) && model.live.at(slot).views > 0);
  }
  void apply(LifecycleModel& model) const override { --model.live.at(slot).views; }
  void run(const LifecycleModel& model, LifecycleSut& sut) const override {
    sut.views.at(slot).pop_back();
    check_against_model(nextState(model), sut);
  }
  void show(std::ostream& os) const override { os << "drop view(slot " << slot << ")"; }
};

// A release of one live slot's owner: refused, the owner handed back live,
// while views of it are out (OWN-005).
struct ReleaseOfASlot : OnOneLive<LifecycleCommand> {
  using OnOneLive::OnOneLive;
  void checkPreconditions(const LifecycleModel& model) const override {
    OnOneLive::checkPreconditions(model);
    RC_PRE(model.releasable() && !model.terminated);
  }
};

struct ReleaseNow final : ReleaseOfASlot {
  using ReleaseOfASlot::ReleaseOfASlot;
  void apply(LifecycleModel& model) const override {
    if (model.live.at(id).views > 0) return;  // refused, handed back live
    model.live.erase(id);
    ++model.allocator_releases;
  }
  void run(const LifecycleModel& model, LifecycleSut& sut) const override {
    const int views = model.live.at(id).views;
    auto node = sut.owners.extract(id);
    auto outcome = std::move(node.mapped()).release_now();
    if (views > 0) {
      ORTMEM_CTS_RC_ASSERT("OWN-005", !outcome.has_value());
      ORTMEM_CTS_RC_ASSERT("OWN-005", outcome.error().error().kind() == BindingError::Kind::kOutstandingViews);
      ORTMEM_CTS_RC_ASSERT("OWN-005", outcome.error().error().count() == static_cast<std::size_t>(views));
      rc_expect_names(outcome.error().error(), {.kind = BindingError::Kind::kOutstandingViews,
                                                .allocation = outcome.error().allocation().identity(),
                                                .count = static_cast<std::size_t>(views)});
      sut.owners.emplace(id, std::move(outcome.error()).take_allocation());
    } else {
      ORTMEM_CTS_RC_ASSERT("REL-008", outcome.has_value());
      // The allocator's own outcome is ALLOC's to judge; the binding passes it on.
      ORTMEM_CTS_RC_PRECONDITION(outcome->is_complete());
    }
    check_against_model(nextState(model), sut);
  }
  void show(std::ostream& os) const override { os << "release_now(slot " << id << ")"; }
};

struct ReleaseDeferred final : ReleaseOfASlot {
  using ReleaseOfASlot::ReleaseOfASlot;
  void apply(LifecycleModel& model) const override {
    if (model.live.at(id).views > 0) return;
    model.queued_bytes.push_back(model.live.at(id).bytes);
    model.live.erase(id);
    ++model.queued;
  }
  void run(const LifecycleModel& model, LifecycleSut& sut) const override {
    const int views = model.live.at(id).views;
    sut.queue->record_use();
    auto node = sut.owners.extract(id);
    auto disposition = std::move(node.mapped()).release_deferred(sut.queue->queue());
    if (views > 0) {
      ORTMEM_CTS_RC_ASSERT("OWN-005", !disposition.has_value());
      ORTMEM_CTS_RC_ASSERT("OWN-005", disposition.error().error().kind() == BindingError::Kind::kOutstandingViews);
      rc_expect_names(disposition.error().error(),
                      {.kind = BindingError::Kind::kOutstandingViews, .count = static_cast<std::size_t>(views)});
      sut.owners.emplace(id, std::move(disposition.error()).take_allocation());
    } else {
      ORTMEM_CTS_RC_ASSERT("DQ-008", disposition.has_value());
      ORTMEM_CTS_RC_ASSERT("DQ-008", disposition->is_queued());
    }
    check_against_model(nextState(model), sut);
  }
  void show(std::ostream& os) const override { os << "release_deferred(slot " << id << ")"; }
};

struct SignalAndDrain final : LifecycleCommand {
  explicit SignalAndDrain(const LifecycleModel&) {}
  void apply(LifecycleModel& model) const override {
    if (model.lost && !model.queue_frees_itself) {
      // The gate is device-lost: queued requests settle as quarantine, no call.
      model.quarantined += model.queued;
      for (std::uint64_t bytes : model.queued_bytes) model.quarantined_bytes += bytes;
    } else {
      model.allocator_releases += model.queued;
    }
    model.queued = 0;
    model.queued_bytes.clear();
  }
  void run(const LifecycleModel& model, LifecycleSut& sut) const override {
    sut.queue->signal_fences();
    ORTMEM_CTS_RC_ASSERT("DQ-001", sut.queue->drain() == model.queued);
    check_against_model(nextState(model), sut);
  }
  void show(std::ostream& os) const override { os << "signal fences and drain"; }
};

struct DropOwner final : LifecycleCommand {
  int slot;
  explicit DropOwner(const LifecycleModel& model) : slot(any_key(model.live)) {}
  void checkPreconditions(const LifecycleModel& model) const override {
    RC_PRE(model.live.contains(slot) && !model.terminated && !model.lost);
  }
  void apply(LifecycleModel& model) const override {
    ++model.quarantined;
    model.quarantined_bytes += model.live.at(slot).bytes;
    model.live.erase(slot);
  }
  void run(const LifecycleModel& model, LifecycleSut& sut) const override {
    sut.owners.erase(slot);  // the destructor quarantines; views (if any) become stale
    check_against_model(nextState(model), sut);
  }
  void show(std::ostream& os) const override { os << "drop owner(slot " << slot << ")"; }
};

struct Retire final : LifecycleCommand {
  explicit Retire(const LifecycleModel&) {}
  void checkPreconditions(const LifecycleModel& model) const override { RC_PRE(!model.retired && !model.lost); }
  void apply(LifecycleModel& model) const override { model.retired = true; }
  void run(const LifecycleModel& model, LifecycleSut& sut) const override {
    ORTMEM_CTS_RC_PRECONDITION(sut.harness.registry.retire(sut.harness.mechanism).has_value());
    ORTMEM_CTS_RC_PRECONDITION(!sut.harness.binding->allocate(8, 8).has_value());
    check_against_model(nextState(model), sut);
  }
  void show(std::ostream& os) const override { os << "retire"; }
};

struct Invalidate final : HappensOnce<LifecycleCommand, &LifecycleModel::lost> {
  explicit Invalidate(const LifecycleModel&) {}
  void run(const LifecycleModel& model, LifecycleSut& sut) const override {
    ORTMEM_CTS_RC_PRECONDITION(
        sut.harness.registry.invalidate_device(sut.adapter.info().device, "property: lost").has_value());
    check_against_model(nextState(model), sut);
  }
  void show(std::ostream& os) const override { os << "invalidate device"; }
};

struct ConfirmTermination final : LifecycleCommand {
  explicit ConfirmTermination(const LifecycleModel&) {}
  void apply(LifecycleModel& model) const override {
    if (!model.lost || model.queued != 0) return;  // refused
    model.terminated = true;
    model.quarantined = 0;
    model.quarantined_bytes = 0;
  }
  void run(const LifecycleModel& model, LifecycleSut& sut) const override {
    const bool allowed = model.lost && model.queued == 0;
    const auto confirmed = sut.harness.registry.confirm_context_terminated(sut.harness.context_registration);
    ORTMEM_CTS_RC_ASSERT("TEAR-011", confirmed.has_value() == allowed);
    if (!allowed && model.lost) {
      ORTMEM_CTS_RC_ASSERT("TEAR-011", confirmed.error().kind() == BindingError::Kind::kContextNotQuiescent);
      rc_expect_names(confirmed.error(), {.kind = BindingError::Kind::kContextNotQuiescent,
                                          .context = sut.harness.context_registration.identity,
                                          .count = static_cast<std::size_t>(model.queued)});
    }
    check_against_model(nextState(model), sut);
  }
  void show(std::ostream& os) const override { os << "confirm context terminated"; }
};

struct Remove final : LifecycleCommand {
  explicit Remove(const LifecycleModel&) {}
  void checkPreconditions(const LifecycleModel& model) const override { RC_PRE(!model.terminated); }
  void run(const LifecycleModel& model, LifecycleSut& sut) const override {
    // Nothing in this machine is ever removable before termination: either the
    // mechanism is active, or ownership remains, or it is not quiescent.
    const bool retains = !model.live.empty() || model.queued != 0 || model.quarantined != 0;
    const auto removed = sut.harness.registry.remove(sut.harness.mechanism);
    if (retains || (!model.retired && !model.lost)) {
      ORTMEM_CTS_RC_ASSERT("TEAR-013", !removed.has_value());
      if (model.quarantined != 0) {
        ORTMEM_CTS_RC_ASSERT("TEAR-014", removed.error().kind() == BindingError::Kind::kQuarantinedOwnership);
        rc_expect_names(removed.error(), {.kind = BindingError::Kind::kQuarantinedOwnership,
                                          .mechanism = sut.harness.mechanism.identity,
                                          .count = static_cast<std::size_t>(model.quarantined)});
      }
    } else {
      ORTMEM_CTS_RC_ASSERT("TEAR-013", removed.has_value());
      RC_DISCARD("removed: nothing further to check");
    }
    check_against_model(model, sut);
  }
  void show(std::ostream& os) const override { os << "remove mechanism"; }
};

TEST_P(Property, TheBindingLifecycleMatchesItsModel) {
  covers("OWN-002", "OWN-003", "OWN-005", "OWN-008", "REL-008", "DQ-001", "DQ-002", "DQ-008", "TEAR-011", "TEAR-013",
         "TEAR-014");
  ORTMEM_CTS_REQUIRE(Capability::kDeferredQueue);
  ORTMEM_CTS_REQUIRE_CONTROL(Control::kFences);
  check_model([this] {
    LifecycleSut sut(adapter());
    ORTMEM_CTS_RC_PRECONDITION(sut.harness.ready());
    // Pins naming another context make every queued request unusable: PIN-001's failure.
    auto pin = sut.harness.context->pins().pin();
    ORTMEM_CTS_RC_PRECONDITION(pin && pin->context() == sut.harness.context_registration.identity);
    pin->reset();
    LifecycleModel initial;
    initial.queue_frees_itself = sut.queue->settled_itself().has_value();
    rc::state::check(
        initial, sut,
        rc::state::gen::execOneOfWithArgs<Allocate, Allocate, LendView, DropView, ReleaseNow, ReleaseDeferred,
                                          SignalAndDrain, DropOwner, Retire, Invalidate, ConfirmTermination, Remove>());
  });
}

ORTMEM_CTS_INSTANTIATE(Property);

}  // namespace
}  // namespace ortmem::cts
