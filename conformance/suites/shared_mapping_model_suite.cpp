// Shared mapping (SM) as a state machine (RapidCheck rc::state): random
// sequences that create prefixes, write them through their owner windows,
// map them into target allocations (several mappings per prefix, several
// prefixes per target), ask what a mapping costs, drop prefix handles and
// release targets, each step compared with a model of what an observer may
// see.
//
// The model keeps each prefix's geometry, the value last written to each of
// its bytes and who still holds its physical memory (the handle, and each
// mapping until its target is released), and each target's granules: free,
// committed privately, or holding a mapping. Whether a commit must be refused
// (SM-005, SM-006) and what a successful one reports (SM-004) follow from it;
// the bytes are read back through every mapping a step could have changed,
// and through every holder left when another holder goes (SM-009), in
// whichever order handles and targets go. A write through a mapping is
// probed the way the adapter's memory allows (SM-008), and with virtual
// backing a target's release may not claim more unmapped bytes than the
// allocation could have had mapped (VB-009).
//
// Targets come from virtual backing when the adapter has it, reserved with
// nothing or a few ranges committed; without it every target is fully
// committed by allocate(), so every placement is refused (SM-005) and the
// sequence checks refusals, prefixes and their lifetime only.
// GoogleTest first: rapidcheck/gtest.h uses its macros.
#include "support/byte_runs.hpp"
#include "support/model_check.hpp"
#include "support/suite.hpp"

#include <rapidcheck.h>
#include <rapidcheck/gtest.h>
#include <rapidcheck/state.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "ortmem/capability.hpp"

namespace ortmem::cts {
namespace {

constexpr std::size_t kMiB = std::size_t{1} << 20;
// What a sequence may hold at once, so 2 MiB granules keep resident memory modest.
constexpr std::size_t kTargetBudget = 160 * kMiB;
constexpr std::size_t kPrefixBudget = 64 * kMiB;
constexpr std::size_t kMaxTargetGranules = 6;

constexpr int kFree = -1;
constexpr int kPrivate = -2;

struct Target {
  std::size_t bytes = 0;
  std::vector<int> granules;  // kFree, kPrivate, or the id of the mapping there
  // Granules a refused commit named: a mapping it left behind would sit
  // there, so a later valid commit refused there is charged to SM-003.
  std::vector<bool> named;
};

struct Prefix {
  std::size_t requested = 0;
  std::size_t mapped = 0;
  bool handle = true;  // the handle is alive (only it can write, or be mapped again)
  ByteRuns content;    // [0, requested)
  std::set<int> mappings;
};

struct Mapping {
  int prefix;
  int target;
  std::size_t offset;
};

struct Model {
  std::size_t granule = 0;
  bool virtual_targets = false;  // targets are reserved through virtual backing
  bool map_faults = false;       // the adapter arms FaultPoint::kPrefixMap
  std::map<int, Target> targets;
  std::map<int, Prefix> prefixes;  // those whose physical memory someone still holds
  std::map<int, Mapping> mappings;
  int next = 0;          // the next target or prefix id
  int next_mapping = 0;  // the next mapping id
  unsigned writes = 0;

  [[nodiscard]] std::size_t round_up(std::size_t bytes) const { return (bytes + granule - 1) / granule * granule; }
  [[nodiscard]] std::size_t target_bytes() const {
    std::size_t total = 0;
    for (const auto& [id, t] : targets) total += t.granules.size() * granule;
    return total;
  }
  [[nodiscard]] std::size_t prefix_bytes() const {
    std::size_t total = 0;
    for (const auto& [id, p] : prefixes) total += p.mapped;
    return total;
  }
};

// Where a prefix would go: what the contract says a commit there must do.
enum class Placement {
  kValid,
  kUnaligned,   // refused (SM-005)
  kDoesNotFit,  // refused (SM-005)
  kOccupied,    // refused (SM-005)
  kUnclear,     // the prefix's bytes fit, its last granule runs past the allocation's last byte
};

Placement place(const Model& model, const Target& target, const Prefix& prefix, std::size_t offset) {
  if (offset % model.granule != 0) return Placement::kUnaligned;
  if (offset > target.bytes || prefix.requested > target.bytes - offset) return Placement::kDoesNotFit;
  if (prefix.mapped > target.bytes - offset) return Placement::kUnclear;
  const std::size_t first = offset / model.granule;
  for (std::size_t g = first; g < first + prefix.mapped / model.granule; ++g) {
    if (target.granules[g] != kFree) return Placement::kOccupied;
  }
  return Placement::kValid;
}

const char* placement_name(Placement placement) {
  switch (placement) {
    case Placement::kValid: return "valid";
    case Placement::kUnaligned: return "unaligned";
    case Placement::kDoesNotFit: return "does not fit";
    case Placement::kOccupied: return "occupied";
    case Placement::kUnclear: return "unclear";
  }
  return "?";
}

// Marks the granules a refused commit at `offset` could have left a mapping in.
void name_granules(const Model& model, Target& target, std::size_t offset, std::size_t mapped) {
  const std::size_t first = offset / model.granule;
  const std::size_t last = std::min(target.granules.size(), first + mapped / model.granule + 1);
  for (std::size_t g = first; g < last; ++g) target.named[g] = target.named[g] || target.granules[g] == kFree;
}

// Adds the mapping a successful commit made.
void add_mapping(Model& model, int prefix, int target, std::size_t offset) {
  const int id = model.next_mapping++;
  model.mappings[id] = {prefix, target, offset};
  model.prefixes.at(prefix).mappings.insert(id);
  Target& t = model.targets.at(target);
  const std::size_t first = offset / model.granule;
  for (std::size_t g = first; g < first + model.prefixes.at(prefix).mapped / model.granule; ++g) t.granules[g] = id;
}

struct System {
  explicit System(Adapter& under_test)
      : adapter(under_test), allocator(under_test.make_allocator()), other(under_test.make_allocator()),
        mapping(allocator->as_shared_mapping()), backing(allocator->as_virtual_backing()) {}
  ~System() {
    if (FaultInjection* faults = adapter.faults()) faults->clear();
    for (const auto& [id, held] : targets) (void)allocator->release(held.ptr, held.bytes, 64);
  }
  System(const System&) = delete;
  System& operator=(const System&) = delete;

  struct Held {
    void* ptr;
    std::size_t bytes;
  };

  [[nodiscard]] const unsigned char* window(int prefix) const {
    return reinterpret_cast<const unsigned char*>(handles.at(prefix)->device_ptr());
  }
  [[nodiscard]] unsigned char* at(const Mapping& m) const {
    return static_cast<unsigned char*>(targets.at(m.target).ptr) + m.offset;
  }

  // Whether all `bytes` at `ptr` read as `value`, through a buffer kept
  // between calls (multi-MiB reads must not fault in a fresh one each time).
  [[nodiscard]] bool holds(const unsigned char* ptr, std::size_t bytes, std::uint8_t value) {
    constexpr std::size_t kChunk = std::size_t{1} << 18;
    for (std::size_t done = 0; done < bytes;) {
      const std::size_t n = std::min(kChunk, bytes - done);
      buffer.resize(std::max(buffer.size(), n));
      adapter.memory().read(ptr + done, std::span<std::uint8_t>(buffer.data(), n));
      if (buffer[0] != value || std::memcmp(buffer.data(), buffer.data() + 1, n - 1) != 0) return false;
      done += n;
    }
    return true;
  }
  // Whether `base` (a mapping of `prefix`, or its owner window) shows the prefix's bytes.
  [[nodiscard]] bool shows(const Prefix& prefix, const unsigned char* base) {
    bool same = true;
    prefix.content.each([&](std::size_t from, std::size_t to, std::uint8_t value) {
      same = same && holds(base + from, to - from, value);
    });
    return same;
  }
  // Every holder of `prefix` left in `model` still shows its bytes (SM-009).
  void check_holders(const Model& model, int prefix) {
    const auto found = model.prefixes.find(prefix);
    if (found == model.prefixes.end()) return;
    if (found->second.handle) ORTMEM_CTS_RC_ASSERT("SM-009", shows(found->second, window(prefix)));
    for (int id : found->second.mappings)
      ORTMEM_CTS_RC_ASSERT("SM-009", shows(found->second, at(model.mappings.at(id))));
  }
  // Ends the test where the model says a commit fits but it was refused.
  // Either a refused commit that named these granules left a mapping there
  // (SM-003), or the target holds more privately committed memory than it
  // was given, so the refusal is right and what put it there is charged
  // elsewhere, or the adapter refuses valid placements: what the model
  // stands on.
  void refused_valid_commit(const Model& model, int target, bool named) const {
    const Target& t = model.targets.at(target);
    if (model.virtual_targets) {
      // Whether mapped prefix granules count as committed is open, so both
      // are allowed for; only more than that is private memory too many.
      const auto used = static_cast<std::size_t>(
          std::count_if(t.granules.begin(), t.granules.end(), [](int g) { return g != kFree; }));
      const std::size_t seen = backing->allocation_committed_bytes(targets.at(target).ptr, t.bytes, 64);
      ORTMEM_CTS_RC_PRECONDITION(seen <= used * model.granule);
    }
    ORTMEM_CTS_RC_ASSERT("SM-003", !named);
    RC_FAIL(std::string(kPreconditionTag) + " a commit the model says fits was refused");
  }
  // Each live handle still reports the geometry it was created with.
  void check_geometry(const Model& model) const {
    for (const auto& [id, p] : model.prefixes) {
      if (!p.handle) continue;
      expect_equal("SM-001", "requested_bytes", handles.at(id)->requested_bytes(), p.requested);
      expect_equal("SM-001", "mapped_bytes", handles.at(id)->mapped_bytes(), p.mapped);
    }
  }

  Adapter& adapter;
  std::shared_ptr<DeviceAllocator> allocator;
  std::shared_ptr<DeviceAllocator> other;  // another mechanism instance: its prefixes are foreign here
  SharedMapping* mapping;
  VirtualBacking* backing;
  std::unique_ptr<SharedDevicePrefix> foreign;
  std::map<int, std::unique_ptr<SharedDevicePrefix>> handles;
  std::map<int, Held> targets;
  std::vector<Held> released;
  std::vector<std::uint8_t> buffer;
};

using Command = rc::state::Command<Model, System>;

// ---- Generators, biased to granule edges. ----

// A prefix size: a granule or a byte either side most often, then a few
// bytes, then two or three granules (each byte is written, so big ones are rarer).
std::size_t any_prefix_size(std::size_t g) {
  return *rc::gen::weightedOneOf<std::size_t>({
      {6, rc::gen::elementOf(std::vector<std::size_t>{g, g - 1, g + 1})},
      {4, rc::gen::elementOf(std::vector<std::size_t>{1, 7})},
      {1, rc::gen::elementOf(std::vector<std::size_t>{2 * g - 7, 2 * g, 2 * g + 1, 3 * g - 1})},
      {1, rc::gen::inRange<std::size_t>(1, 2 * g)},
  });
}

std::size_t any_target_size(std::size_t g) {
  const std::size_t n =
      *rc::gen::weightedElement<std::size_t>({{3, 1}, {4, 2}, {4, 3}, {3, 4}, {1, 5}, {1, kMaxTargetGranules}});
  switch (*rc::gen::weightedElement<int>({{4, 0}, {1, 1}, {1, 2}})) {
    case 1: return n * g + 1 - g;  // one byte into the last granule
    case 2: return n * g - 1;
    default: return n * g;
  }
}

// An offset into a target of `bytes`: mostly a granule edge, sometimes a
// byte or half a granule off one, sometimes past the end.
std::size_t any_offset(std::size_t bytes, std::size_t g) {
  std::size_t offset = *rc::gen::inRange<std::size_t>(0, bytes / g + 2) * g;
  switch (*rc::gen::weightedElement<int>({{6, 0}, {1, 1}, {1, 2}, {1, 3}})) {
    case 1: offset += 1; break;
    case 2: offset += g / 2; break;
    case 3: offset += g - 1; break;
    default: break;
  }
  return offset;
}

template <class Table, class Pred>
int pick_where(const Table& table, Pred pred) {
  std::vector<int> ids;
  for (const auto& [id, value] : table) {
    if (pred(value)) ids.push_back(id);
  }
  RC_PRE(!ids.empty());
  return *rc::gen::elementOf(ids);
}

int any_handle(const Model& model) {
  return pick_where(model.prefixes, [](const Prefix& p) { return p.handle; });
}
int any_target(const Model& model) {
  return pick_where(model.targets, [](const Target&) { return true; });
}

// A granule-aligned offset of `target` where `prefix` fits on free granules, if any.
std::optional<std::size_t> free_placement(const Model& model, const Target& target, const Prefix& prefix) {
  std::vector<std::size_t> offsets;
  for (std::size_t g = 0; g < target.granules.size(); ++g) {
    if (place(model, target, prefix, g * model.granule) == Placement::kValid) offsets.push_back(g * model.granule);
  }
  if (offsets.empty()) return std::nullopt;
  return *rc::gen::elementOf(offsets);
}

// ---- Commands. ----

// Ids are fixed when a command is generated, so they stay the same while a
// failing sequence shrinks and show() can name them.
// A command that makes a new target or prefix, numbered when the command is
// made: a shrunk run in which that number is already taken discards it.
struct MakesNew : Command {
  explicit MakesNew(const Model& model) : id(model.next) {}
  void checkPreconditions(const Model& model) const override { RC_PRE(id >= model.next); }
  void apply(Model& model) const override { model.next = id + 1; }

  int id;
};

struct ReserveTarget final : MakesNew {
  std::size_t bytes;
  std::vector<ByteRange> committed;  // with virtual backing: committed privately at once

  explicit ReserveTarget(const Model& model) : MakesNew(model), bytes(any_target_size(model.granule)) {
    if (!model.virtual_targets) return;
    const std::size_t count = *rc::gen::weightedElement<std::size_t>({{4, 0}, {2, 1}, {1, 2}});
    for (std::size_t i = 0; i < count; ++i) {
      const std::size_t begin = *rc::gen::inRange<std::size_t>(0, bytes);
      committed.push_back(
          {begin, begin + *rc::gen::inRange<std::size_t>(1, std::min(bytes - begin, model.granule) + 1)});
    }
  }
  void checkPreconditions(const Model& model) const override {
    MakesNew::checkPreconditions(model);
    RC_PRE(model.target_bytes() + model.round_up(bytes) <= kTargetBudget);
  }
  void apply(Model& model) const override {
    MakesNew::apply(model);
    Target& t = model.targets[id];
    t.bytes = bytes;
    t.granules.assign(model.round_up(bytes) / model.granule, model.virtual_targets ? kFree : kPrivate);
    t.named.assign(t.granules.size(), false);
    for (const ByteRange& range : committed) {
      for (std::size_t g = range.begin / model.granule; g <= (range.end - 1) / model.granule; ++g)
        t.granules[g] = kPrivate;
    }
  }
  void run(const Model& model, System& system) const override {
    auto ptr = model.virtual_targets ? system.backing->allocate_committed(bytes, 64, committed)
                                     : system.allocator->allocate(bytes, 64);
    ORTMEM_CTS_RC_PRECONDITION(ptr.has_value());
    system.targets[id] = {*ptr, bytes};
  }
  void show(std::ostream& os) const override {
    os << "target #" << id << " of " << bytes << " bytes";
    for (const ByteRange& range : committed) os << ", [" << range.begin << ", " << range.end << ") committed";
  }
};

struct CreatePrefix final : MakesNew {
  std::size_t bytes;
  explicit CreatePrefix(const Model& model) : MakesNew(model), bytes(any_prefix_size(model.granule)) {}
  void checkPreconditions(const Model& model) const override {
    MakesNew::checkPreconditions(model);
    RC_PRE(model.prefix_bytes() + model.round_up(bytes) <= kPrefixBudget);
  }
  void apply(Model& model) const override {
    MakesNew::apply(model);
    Prefix& p = model.prefixes[id];
    p.requested = bytes;
    p.mapped = model.round_up(bytes);
    p.content.assign(0, bytes, value_of(model.writes++));
  }
  void run(const Model& model, System& system) const override {
    auto created = system.mapping->create_shared_prefix(bytes);
    ORTMEM_CTS_RC_PRECONDITION(created.has_value() && *created != nullptr);
    const SharedDevicePrefix& prefix = **created;
    system.handles[id] = std::move(*created);
    expect_equal("SM-001", "requested_bytes", prefix.requested_bytes(), bytes);
    expect_equal("SM-001", "mapped_bytes", prefix.mapped_bytes(), model.round_up(bytes));
    ORTMEM_CTS_RC_ASSERT("SM-001", prefix.device_ptr() != 0U);
    ORTMEM_CTS_RC_ASSERT("SM-001", prefix.committed_physical_bytes() >= bytes);
    // The owner window is where the bytes are placed; reading them back
    // there is what the rest of the model stands on.
    system.adapter.memory().fill(reinterpret_cast<void*>(prefix.device_ptr()), bytes, value_of(model.writes));
    ORTMEM_CTS_RC_PRECONDITION(system.shows(nextState(model).prefixes.at(id), system.window(id)));
  }
  void show(std::ostream& os) const override { os << "prefix #" << id << " = create_shared_prefix(" << bytes << ")"; }
};

// The owner writes part of its prefix: every mapping shows it at once.
struct WritePrefix final : Command {
  int prefix;
  std::size_t begin;
  std::size_t end;
  explicit WritePrefix(const Model& model) : prefix(any_handle(model)) {
    const std::size_t requested = model.prefixes.at(prefix).requested;
    begin = *rc::gen::elementOf(std::vector<std::size_t>{0, requested - 1, requested / 2});
    end = std::min(requested, begin + *rc::gen::elementOf(std::vector<std::size_t>{1, model.granule, requested}));
  }
  void checkPreconditions(const Model& model) const override {
    const auto found = model.prefixes.find(prefix);
    // One condition a line: RC_PRE captures && operands, so they would not short-circuit.
    RC_PRE(found != model.prefixes.end());
    RC_PRE(found->second.handle);
    RC_PRE(end <= found->second.requested);
    RC_PRE(begin < end);
  }
  void apply(Model& model) const override {
    model.prefixes.at(prefix).content.assign(begin, end, value_of(model.writes++));
  }
  void run(const Model& model, System& system) const override {
    const Model after = nextState(model);
    system.adapter.memory().fill(reinterpret_cast<void*>(system.handles.at(prefix)->device_ptr() + begin), end - begin,
                                 value_of(model.writes));
    const Prefix& p = after.prefixes.at(prefix);
    ORTMEM_CTS_RC_PRECONDITION(system.holds(system.window(prefix) + begin, end - begin, value_of(model.writes)));
    for (int id : p.mappings) {
      ORTMEM_CTS_RC_ASSERT("SM-007",
                           system.holds(system.at(after.mappings.at(id)) + begin, end - begin, value_of(model.writes)));
    }
    system.check_geometry(after);
  }
  void show(std::ostream& os) const override {
    os << "owner writes [" << begin << ", " << end << ") of prefix #" << prefix;
  }
};

// Checks a commit that the model says succeeded: what it reports (SM-004)
// and what the new mapping shows (SM-007).
void check_mapped(const Model& after, System& system, const Expected<SharedPrefixCommitInfo, MemoryError>& info,
                  int prefix, int mapping) {
  const Prefix& p = after.prefixes.at(prefix);
  expect_equal("SM-004", "additional_owned_bytes", info->additional_owned_bytes, 0);
  expect_equal("SM-004", "newly_mapped_bytes", info->newly_mapped_bytes, p.mapped);
  expect_equal("SM-004", "granules", info->granules, p.mapped / after.granule);
  ORTMEM_CTS_RC_ASSERT("SM-007", system.shows(p, system.at(after.mappings.at(mapping))));
}

// commit_shared_prefix of a prefix this capability made, at any offset:
// refused unless the placement is valid (SM-005), and transactional
// (SM-003): a refused commit leaves nothing in the granules it named.
struct Map final : Command {
  int prefix;
  int target;
  std::size_t offset;
  explicit Map(const Model& model)
      : prefix(any_handle(model)), target(any_target(model)),
        offset(any_offset(model.targets.at(target).bytes, model.granule)) {}
  void checkPreconditions(const Model& model) const override {
    const auto p = model.prefixes.find(prefix);
    RC_PRE(p != model.prefixes.end());
    RC_PRE(p->second.handle);
    RC_PRE(model.targets.contains(target));
    RC_PRE(place(model, model.targets.at(target), p->second, offset) != Placement::kUnclear);
  }
  void apply(Model& model) const override {
    const Prefix& p = model.prefixes.at(prefix);
    Target& t = model.targets.at(target);
    if (place(model, t, p, offset) == Placement::kValid) {
      add_mapping(model, prefix, target, offset);
    } else if (offset < t.bytes) {
      name_granules(model, t, offset, p.mapped);
    }
  }
  void run(const Model& model, System& system) const override {
    const Model after = nextState(model);
    const Target& t = model.targets.at(target);
    const Placement where = place(model, t, model.prefixes.at(prefix), offset);
    // Asked first, as a planner would. The figure for a prefix of this
    // capability is not bound (SM-002 judges refusals only), but whatever the
    // query remembers must not change what it says of a foreign prefix later.
    (void)system.mapping->incremental_owned_bytes_for_shared_prefix(*system.handles.at(prefix));
    auto info = system.mapping->commit_shared_prefix(*system.handles.at(prefix), system.targets.at(target).ptr, t.bytes,
                                                     offset);
    if (where != Placement::kValid) {
      if (info)
        RC_FAIL(std::string(kChecksTag) + "SM-005] a commit at a placement that is " + placement_name(where) +
                " was accepted");
      system.check_geometry(after);
      return;
    }
    if (!info) {
      const std::size_t first = offset / model.granule;
      bool named = false;
      for (std::size_t g = first; g < first + model.prefixes.at(prefix).mapped / model.granule; ++g)
        named = named || t.named[g];
      system.refused_valid_commit(model, target, named);
    }
    check_mapped(after, system, info, prefix, model.next_mapping);
    system.check_geometry(after);
  }
  void show(std::ostream& os) const override {
    os << "commit_shared_prefix(prefix #" << prefix << ", target #" << target << ", offset " << offset << ")";
  }
};

// commit_shared_prefix into something that is not a live allocation of
// exactly the stated size: refused (SM-006).
struct MapWrongTarget final : Command {
  enum class Kind { kLarger, kGranuleLarger, kSmaller, kInterior, kNotAllocation, kReleased };
  int prefix;
  int target = -1;
  Kind kind;
  explicit MapWrongTarget(const Model& model) : prefix(any_handle(model)) {
    kind = model.targets.empty()
               ? *rc::gen::elementOf(std::vector<Kind>{Kind::kNotAllocation, Kind::kReleased})
               : *rc::gen::elementOf(std::vector<Kind>{Kind::kLarger, Kind::kGranuleLarger, Kind::kSmaller,
                                                       Kind::kInterior, Kind::kNotAllocation, Kind::kReleased});
    if (kind != Kind::kNotAllocation && kind != Kind::kReleased) target = any_target(model);
  }
  void checkPreconditions(const Model& model) const override {
    const auto p = model.prefixes.find(prefix);
    RC_PRE(p != model.prefixes.end());
    RC_PRE(p->second.handle);
    if (target < 0) return;
    RC_PRE(model.targets.contains(target));
    // (RapidCheck captures && and || operands, so neither short-circuits here.)
    if (kind == Kind::kSmaller) RC_PRE(model.targets.at(target).bytes > 1);
    if (kind == Kind::kInterior) RC_PRE(model.targets.at(target).bytes > model.granule);
  }
  void apply(Model& model) const override {
    if (target < 0) return;
    Target& t = model.targets.at(target);
    name_granules(model, t, kind == Kind::kInterior ? model.granule : 0, model.prefixes.at(prefix).mapped);
  }
  void run(const Model& model, System& system) const override {
    alignas(4096) static unsigned char not_ours[4096];
    void* ptr = not_ours;
    std::size_t bytes = sizeof not_ours;
    if (target >= 0) {
      const System::Held& held = system.targets.at(target);
      ptr = held.ptr;
      switch (kind) {
        case Kind::kLarger: bytes = held.bytes + 1; break;
        case Kind::kGranuleLarger: bytes = held.bytes + model.granule; break;
        case Kind::kSmaller: bytes = held.bytes - 1; break;
        default:
          ptr = static_cast<unsigned char*>(held.ptr) + model.granule;
          bytes = held.bytes - model.granule;
          break;
      }
    } else if (kind == Kind::kReleased) {
      for (auto it = system.released.rbegin(); it != system.released.rend(); ++it) {
        const bool reused = std::any_of(system.targets.begin(), system.targets.end(),
                                        [&](const auto& entry) { return entry.second.ptr == it->ptr; });
        if (reused) continue;
        ptr = it->ptr;
        bytes = it->bytes;
        break;
      }
    }
    ORTMEM_CTS_RC_ASSERT("SM-006",
                         !system.mapping->commit_shared_prefix(*system.handles.at(prefix), ptr, bytes, 0).has_value());
    system.check_geometry(model);
  }
  void show(std::ostream& os) const override {
    static const char* const names[] = {"size + 1",         "size + granule",    "size - 1",
                                        "interior address", "not an allocation", "released target"};
    os << "commit_shared_prefix(prefix #" << prefix << ", target #" << target << " as "
       << names[static_cast<std::size_t>(kind)] << ", offset 0)";
  }
};

// A prefix of another mechanism instance, the one made at the start or one
// made now: the cost query refuses it as commit does (SM-002), and commit
// refuses it (SM-006).
struct MapForeign final : Command {
  int target = -1;
  std::size_t offset = 0;
  bool fresh = *rc::gen::arbitrary<bool>();
  explicit MapForeign(const Model& model) {
    // Where a prefix of one granule could go, so foreignness is the only reason to refuse.
    Prefix one;
    one.requested = model.granule;
    one.mapped = model.granule;
    std::vector<std::pair<int, std::size_t>> free;
    for (const auto& [id, t] : model.targets) {
      for (std::size_t g = 0; g < t.granules.size(); ++g) {
        if (place(model, t, one, g * model.granule) == Placement::kValid) free.emplace_back(id, g * model.granule);
      }
    }
    if (free.empty()) return;
    const auto chosen = *rc::gen::elementOf(free);
    target = chosen.first;
    offset = chosen.second;
  }
  void checkPreconditions(const Model& model) const override {
    if (target < 0) return;
    RC_PRE(model.targets.contains(target));
    const Target& t = model.targets.at(target);
    RC_PRE(offset + model.granule <= t.bytes);
    RC_PRE(t.granules[offset / model.granule] == kFree);
  }
  void apply(Model& model) const override {
    if (target >= 0) name_granules(model, model.targets.at(target), offset, model.granule);
  }
  void run(const Model& model, System& system) const override {
    std::unique_ptr<SharedDevicePrefix> made;
    if (fresh) {
      auto created = system.other->as_shared_mapping()->create_shared_prefix(model.granule);
      ORTMEM_CTS_RC_PRECONDITION(created.has_value() && *created != nullptr);
      made = std::move(*created);
    }
    const SharedDevicePrefix& foreign = fresh ? *made : *system.foreign;
    const auto cost = system.mapping->incremental_owned_bytes_for_shared_prefix(foreign);
    ORTMEM_CTS_RC_ASSERT("SM-002", !cost.has_value());
    if (target < 0) return;
    const System::Held& held = system.targets.at(target);
    const auto info = system.mapping->commit_shared_prefix(foreign, held.ptr, held.bytes, offset);
    ORTMEM_CTS_RC_ASSERT("SM-006", !info.has_value());
    ORTMEM_CTS_RC_ASSERT("SM-002", cost.error().kind() == info.error().kind());
    system.check_geometry(model);
  }
  void show(std::ostream& os) const override {
    os << (fresh ? "new " : "") << "foreign prefix: cost, then commit into target #" << target << " at " << offset;
  }
};

// A valid commit whose mapping call fails (FaultPoint::kPrefixMap, the very
// next call, so it is sure to fire): whatever it reports, the same commit
// without the fault must then succeed, since nothing of the failed one may
// remain (SM-003).
struct FaultyMap final : Command {
  int prefix;
  int target;
  std::size_t offset;
  // Which mapping call fails, up to one per granule of the prefix: a
  // mechanism that maps granule by granule must then take back the granules
  // it mapped before the failure, newest first; one that maps the prefix in
  // a single call meets no fault past the first and is judged as any commit.
  std::uint64_t nth;
  explicit FaultyMap(const Model& model) : prefix(any_handle(model)), target(any_target(model)) {
    const auto where = free_placement(model, model.targets.at(target), model.prefixes.at(prefix));
    RC_PRE(where.has_value());
    offset = *where;
    const std::size_t granules = std::max<std::size_t>(1, model.prefixes.at(prefix).mapped / model.granule);
    nth = *rc::gen::inRange<std::uint64_t>(1, granules + 1);
  }
  void checkPreconditions(const Model& model) const override {
    RC_PRE(model.map_faults);
    const auto p = model.prefixes.find(prefix);
    RC_PRE(p != model.prefixes.end());
    RC_PRE(p->second.handle);
    RC_PRE(model.targets.contains(target));
    RC_PRE(place(model, model.targets.at(target), p->second, offset) == Placement::kValid);
  }
  void apply(Model& model) const override { add_mapping(model, prefix, target, offset); }
  void run(const Model& model, System& system) const override {
    const Model after = nextState(model);
    const System::Held& held = system.targets.at(target);
    const SharedDevicePrefix& handle = *system.handles.at(prefix);
    ORTMEM_CTS_RC_PRECONDITION(system.adapter.faults()->arm(FaultPoint::kPrefixMap, nth));
    auto info = system.mapping->commit_shared_prefix(handle, held.ptr, held.bytes, offset);
    system.adapter.faults()->clear();
    if (!info) {
      info = system.mapping->commit_shared_prefix(handle, held.ptr, held.bytes, offset);
      if (!info) system.refused_valid_commit(model, target, true);
    }
    check_mapped(after, system, info, prefix, model.next_mapping);
    system.check_geometry(after);
  }
  void show(std::ostream& os) const override {
    os << "commit_shared_prefix(prefix #" << prefix << ", target #" << target << ", offset " << offset
       << ") with mapping call " << nth << " failing";
  }
};

// The handle goes: every mapping keeps showing the bytes (SM-009).
struct DropHandle final : Command {
  int prefix;
  explicit DropHandle(const Model& model) : prefix(any_handle(model)) {}
  void checkPreconditions(const Model& model) const override {
    const auto p = model.prefixes.find(prefix);
    RC_PRE(p != model.prefixes.end());
    RC_PRE(p->second.handle);
  }
  void apply(Model& model) const override {
    Prefix& p = model.prefixes.at(prefix);
    p.handle = false;
    if (p.mappings.empty()) model.prefixes.erase(prefix);
  }
  void run(const Model& model, System& system) const override {
    const Model after = nextState(model);
    system.handles.erase(prefix);
    system.check_holders(after, prefix);
    system.check_geometry(after);
  }
  void show(std::ostream& os) const override { os << "drop the handle of prefix #" << prefix; }
};

// A target goes, and its mappings with it: every holder left of each prefix
// it mapped keeps showing the bytes (SM-009).
struct ReleaseTarget final : Command {
  int target;
  explicit ReleaseTarget(const Model& model) : target(any_target(model)) {}
  void checkPreconditions(const Model& model) const override { RC_PRE(model.targets.contains(target)); }
  void apply(Model& model) const override {
    for (auto it = model.mappings.begin(); it != model.mappings.end();) {
      if (it->second.target != target) {
        ++it;
        continue;
      }
      Prefix& p = model.prefixes.at(it->second.prefix);
      p.mappings.erase(it->first);
      if (!p.handle && p.mappings.empty()) model.prefixes.erase(it->second.prefix);
      it = model.mappings.erase(it);
    }
    model.targets.erase(target);
  }
  void run(const Model& model, System& system) const override {
    const Model after = nextState(model);
    const System::Held held = system.targets.at(target);
    const auto outcome = system.allocator->release(held.ptr, held.bytes, 64);
    system.targets.erase(target);
    ORTMEM_CTS_RC_PRECONDITION(outcome.is_complete());
    system.released.push_back(held);
    if (model.virtual_targets) {
      // Prefixes mapped in or not, a release unmaps no more than the
      // allocation could have had mapped (VB-009), by an estimate that
      // itself covers the allocation's granules (VB-004).
      const auto bound = system.backing->mapped_bytes_for_allocation(held.bytes, 64);
      ORTMEM_CTS_RC_ASSERT("VB-004", bound.has_value());
      const std::uint64_t whole = model.round_up(held.bytes);
      if (*bound < whole)
        expect_equal("VB-004", "mapped_bytes_for_allocation below the allocation's granules", *bound, whole);
      if (outcome.unmapped_bytes() > *bound) {
        expect_equal("VB-009", "unmapped_bytes above mapped_bytes_for_allocation", outcome.unmapped_bytes(), *bound);
      }
    }
    std::set<int> mapped;
    for (const auto& [id, m] : model.mappings) {
      if (m.target == target) mapped.insert(m.prefix);
    }
    for (int prefix : mapped) system.check_holders(after, prefix);
    system.check_geometry(after);
  }
  void show(std::ostream& os) const override { os << "release target #" << target; }
};

// A write through a mapping, probed the way the adapter's memory can be
// (a forked child's write for host memory): the system refuses it, and the
// prefix's bytes are as they were everywhere (SM-008).
struct WriteThroughMapping final : Command {
  int mapping;
  std::size_t offset;
  explicit WriteThroughMapping(const Model& model)
      : mapping(pick_where(model.mappings, [](const Mapping&) { return true; })),
        offset(*rc::gen::elementOf(
            std::vector<std::size_t>{0, model.prefixes.at(model.mappings.at(mapping).prefix).requested - 1})) {}
  void checkPreconditions(const Model& model) const override {
    const auto found = model.mappings.find(mapping);
    RC_PRE(found != model.mappings.end());
    RC_PRE(offset < model.prefixes.at(found->second.prefix).requested);
  }
  void apply(Model&) const override {}
  void run(const Model& model, System& system) const override {
    const Mapping& m = model.mappings.at(mapping);
    const WriteProbe probe = system.adapter.memory().probe_write(system.at(m) + offset, value_of(model.writes));
    if (probe.outcome != WriteProbe::Outcome::kUnknown) {
      if (probe.outcome != WriteProbe::Outcome::kRefused) {
        RC_FAIL(std::string(kChecksTag) + "SM-008] a write through a mapping was not refused: " + probe.detail);
      }
      const Prefix& p = model.prefixes.at(m.prefix);
      if (p.handle) ORTMEM_CTS_RC_ASSERT("SM-008", system.shows(p, system.window(m.prefix)));
      for (int id : p.mappings) ORTMEM_CTS_RC_ASSERT("SM-008", system.shows(p, system.at(model.mappings.at(id))));
    }
    system.check_geometry(model);
  }
  void show(std::ostream& os) const override { os << "write through mapping " << mapping << " at " << offset; }
};

// Every mapping and owner window against the model.
struct CheckAll final : Command {
  explicit CheckAll(const Model&) {}
  void apply(Model&) const override {}
  void run(const Model& model, System& system) const override {
    for (const auto& [id, m] : model.mappings) {
      ORTMEM_CTS_RC_ASSERT("SM-007", system.shows(model.prefixes.at(m.prefix), system.at(m)));
    }
    for (const auto& [id, p] : model.prefixes) {
      if (p.handle) ORTMEM_CTS_RC_ASSERT("SM-009", system.shows(p, system.window(id)));
    }
    system.check_geometry(model);
  }
  void show(std::ostream& os) const override { os << "read back every mapping and owner window"; }
};

// ---- The test. ----

class SharedMappingModel : public AdapterSuite {};

TEST_P(SharedMappingModel, EveryStepOfARandomSequenceMatchesTheModel) {
  // With virtual backing, releases of targets that held mappings are also
  // judged by the allocation's estimate (VB-009, VB-004); without it the
  // test checks nothing of that profile and names none of its rules.
  if (info().declares(Capability::kVirtualBacking)) {
    covers("SM-001", "SM-002", "SM-003", "SM-004", "SM-005", "SM-006", "SM-007", "SM-008", "SM-009", "VB-004",
           "VB-009");
  } else {
    covers("SM-001", "SM-002", "SM-003", "SM-004", "SM-005", "SM-006", "SM-007", "SM-008", "SM-009");
  }
  ORTMEM_CTS_REQUIRE(Capability::kSharedMapping);
  Model initial;
  {
    ORTMEM_CTS_PRECONDITION();
    auto allocator = adapter().make_allocator();
    SharedMapping* mapping = allocator->as_shared_mapping();
    ASSERT_NE(mapping, nullptr) << "the adapter declares shared mapping but its allocator has none";
    // A prefix of one byte maps exactly one granule (SM-001, checked in the sequence).
    auto probe = mapping->create_shared_prefix(1);
    ASSERT_TRUE(probe && *probe) << (probe ? "" : probe.error().message());
    initial.granule = (*probe)->mapped_bytes();
    ASSERT_GE(initial.granule, 4U);
    initial.virtual_targets =
        info().declares(Capability::kVirtualBacking) && allocator->as_virtual_backing() != nullptr;
  }
  if (FaultInjection* faults = adapter().faults()) {
    initial.map_faults = faults->arm(FaultPoint::kPrefixMap, std::uint64_t{1} << 40);
    faults->clear();
  }
  check_model([&] {
    System system(adapter());
    ORTMEM_CTS_RC_PRECONDITION(system.mapping != nullptr);
    ORTMEM_CTS_RC_PRECONDITION(!initial.virtual_targets || system.backing != nullptr);
    SharedMapping* foreign = system.other->as_shared_mapping();
    ORTMEM_CTS_RC_PRECONDITION(foreign != nullptr);
    auto made = foreign->create_shared_prefix(initial.granule);
    ORTMEM_CTS_RC_PRECONDITION(made.has_value() && *made != nullptr);
    system.foreign = std::move(*made);
    rc::state::check(
        initial, system,
        rc::state::gen::execOneOfWithArgs<ReserveTarget, ReserveTarget, CreatePrefix, CreatePrefix, WritePrefix, Map,
                                          Map, Map, MapWrongTarget, MapForeign, FaultyMap, WriteThroughMapping,
                                          DropHandle, ReleaseTarget, CheckAll>());
  });
}

ORTMEM_CTS_INSTANTIATE(SharedMappingModel);

}  // namespace
}  // namespace ortmem::cts
