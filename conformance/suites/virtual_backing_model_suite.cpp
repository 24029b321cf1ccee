// Virtual backing (VB) as a state machine (RapidCheck rc::state): random
// sequences of reserve, commit (one range or a batch), decommit, estimate,
// invalid call and release over several reserved allocations at once, each
// step compared with a model of what an observer may see.
//
// The model keeps, per reserved allocation, the committed bytes (not
// granules) with the value last written to each: two ranges that share a
// granule keep it mapped until both are decommitted, so committed bytes, what
// a decommit reports unmapped and what an estimate must cover all follow from
// it at granule level. Every committed byte holds a known value, because each
// step that commits writes what it committed; a decommitted byte holds
// nothing the kit may read (VB-006), so it leaves the model.
//
// Offsets and lengths are biased to granule edges (0, 1, granule - 1,
// granule, granule + 1, unaligned) and sizes to whole granules and a byte
// either side. After every step the committed bytes of every live allocation
// are compared with the model, and the bytes the step could have touched are
// read back; the whole allocation is read back before it is released, and the
// release is judged by its outcome's fields (ALLOC-017, VB-009).
//
// A second test injects faults (FaultInjection) into commit, decommit and
// release and judges what comes back by the facts each outcome states (VB-005,
// VB-008, ALLOC-017..020, VB-009).
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
// Address space a sequence may hold reserved at once (quarantined releases
// included), so 2 MiB granules keep resident memory modest.
constexpr std::size_t kReserveBudget = 256 * kMiB;
constexpr std::size_t kMaxGranules = 6;

struct Reservation {
  std::size_t bytes = 0;
  std::size_t align = 0;
  ByteRuns committed;    // the committed bytes, with their values
  ByteRuns decommitted;  // bytes a decommit has named: committing them again is a recommit (VB-006)
};

struct Model {
  std::size_t granule = 0;
  bool commit_faults = false;    // the adapter arms FaultPoint::kCommit
  bool decommit_faults = false;  // FaultPoint::kDecommit
  bool release_faults = false;   // and FaultPoint::kReleaseUnmap
  std::map<int, Reservation> live;
  std::size_t retired = 0;  // reserved bytes a fault-injected release may have left quarantined
  int next = 0;
  unsigned writes = 0;

  [[nodiscard]] std::size_t granules(std::size_t bytes) const { return (bytes + granule - 1) / granule; }
  [[nodiscard]] std::size_t reserved() const {
    std::size_t total = retired;
    for (const auto& [id, r] : live) total += granules(r.bytes) * granule;
    return total;
  }
  [[nodiscard]] bool mapped(const Reservation& r, std::size_t g) const {
    return r.committed.intersects(g * granule, std::min((g + 1) * granule, r.bytes));
  }
  [[nodiscard]] std::size_t mapped_granules(const Reservation& r) const {
    std::size_t count = 0;
    for (std::size_t g = 0; g < granules(r.bytes); ++g) count += mapped(r, g) ? 1 : 0;
    return count;
  }
  // What allocation_committed_bytes must say: the committed bytes rounded out to whole granules.
  [[nodiscard]] std::size_t committed_bytes(const Reservation& r) const { return mapped_granules(r) * granule; }
  [[nodiscard]] std::size_t committed_bytes(int id) const { return committed_bytes(live.at(id)); }
};

struct System {
  explicit System(Adapter& under_test)
      : adapter(under_test), allocator(under_test.make_allocator()), backing(allocator->as_virtual_backing()) {}
  ~System() {
    if (FaultInjection* faults = adapter.faults()) faults->clear();
    for (const auto& [id, held] : live) (void)allocator->release(held.ptr, held.bytes, held.align);
  }
  System(const System&) = delete;
  System& operator=(const System&) = delete;

  struct Held {
    void* ptr;
    std::size_t bytes;
    std::size_t align;
  };

  [[nodiscard]] unsigned char* at(int id, std::size_t offset) const {
    return static_cast<unsigned char*>(live.at(id).ptr) + offset;
  }
  [[nodiscard]] std::size_t committed(int id) const {
    const Held& held = live.at(id);
    return backing->allocation_committed_bytes(held.ptr, held.bytes, held.align);
  }
  [[nodiscard]] AllocationCommitRange range(int id, std::size_t offset, std::size_t length) const {
    const Held& held = live.at(id);
    return {held.ptr, held.bytes, held.align, offset, length};
  }

  // Whether all `bytes` at `ptr` read as `value`, through a buffer kept
  // between calls (multi-MiB reads must not fault in a fresh one each time).
  [[nodiscard]] bool holds(const unsigned char* ptr, std::size_t bytes, std::uint8_t value) {
    constexpr std::size_t kChunk = std::size_t{1} << 18;
    for (std::size_t done = 0; done < bytes;) {
      const std::size_t n = std::min(kChunk, bytes - done);
      if (!reads_as_into(ptr + done, n, value)) return false;
      done += n;
    }
    return true;
  }
  // Whether the model's committed bytes of `id` within [begin, end) read back as the model says.
  [[nodiscard]] bool matches(const Model& model, int id, std::size_t begin, std::size_t end) {
    bool same = true;
    model.live.at(id).committed.each(begin, end, [&](std::size_t from, std::size_t to, std::uint8_t value) {
      same = same && holds(at(id, from), to - from, value);
    });
    return same;
  }
  // The model's committed bytes in the granules [offset, offset + length)
  // touches but outside that range: a step on the range must leave them be.
  [[nodiscard]] bool neighbours_intact(const Model& model, int id, std::size_t offset, std::size_t length) {
    if (length == 0) return true;
    const std::size_t g = model.granule;
    const std::size_t first = offset / g * g;
    const std::size_t last = std::min((offset + length + g - 1) / g * g, model.live.at(id).bytes);
    return matches(model, id, first, offset) && matches(model, id, offset + length, last);
  }
  // Whether the first range of `id` that a decommit named can be committed
  // again (true when there is none); only asked once the test is failing.
  [[nodiscard]] bool recommits_a_decommitted_range(const Model& model, int id) {
    bool committed_again = true;
    bool first = true;
    const Reservation& r = model.live.at(id);
    r.decommitted.each(0, r.bytes, [&](std::size_t from, std::size_t to, std::uint8_t) {
      if (!first) return;
      first = false;
      const Held& held = live.at(id);
      committed_again = backing->commit_allocation_range(held.ptr, held.bytes, held.align, from, to - from).has_value();
    });
    return committed_again;
  }
  // Every live allocation's committed bytes against the model, charged to `ids`.
  void check_committed(const Model& model, const char* ids) const {
    for (const auto& [id, r] : model.live) {
      expect_equal(ids, "allocation_committed_bytes", committed(id), model.committed_bytes(r));
    }
  }

  Adapter& adapter;
  std::shared_ptr<DeviceAllocator> allocator;
  VirtualBacking* backing;
  std::map<int, Held> live;
  std::vector<Held> released;
  std::vector<std::uint8_t> buffer;

 private:
  bool reads_as_into(const unsigned char* ptr, std::size_t bytes, std::uint8_t value) {
    buffer.resize(std::max(buffer.size(), bytes));
    adapter.memory().read(ptr, std::span<std::uint8_t>(buffer.data(), bytes));
    return buffer[0] == value && std::memcmp(buffer.data(), buffer.data() + 1, bytes - 1) == 0;
  }
};

using Command = rc::state::Command<Model, System>;

// ---- Generators, biased to granule edges. ----

// A reservation size: whole granules, a byte either side, or anywhere inside the last granule.
std::size_t reservation_bytes(std::size_t g, std::size_t max_granules) {
  const std::size_t n =
      std::min(max_granules,
               *rc::gen::weightedElement<std::size_t>({{6, 1}, {6, 2}, {4, 3}, {3, 4}, {2, 5}, {2, kMaxGranules}}));
  switch (*rc::gen::inRange(0, 4)) {
    case 0: return n * g;
    case 1: return n * g - 1;
    case 2: return (n - 1) * g + 1;
    default: return (n - 1) * g + *rc::gen::inRange<std::size_t>(2, g - 1);
  }
}

// An offset in [0, limit), mostly on a granule edge or a byte off one.
std::size_t edge_offset(std::size_t limit, std::size_t g) {
  std::size_t offset = *rc::gen::inRange<std::size_t>(0, (limit - 1) / g + 1) * g;
  switch (*rc::gen::weightedElement<int>({{4, 0}, {2, 1}, {2, 2}, {1, 3}})) {
    case 1: offset += 1; break;
    case 2: offset = offset == 0 ? g - 1 : offset - 1; break;
    case 3: offset += *rc::gen::inRange<std::size_t>(2, g - 1); break;
    default: break;
  }
  return std::min(offset, limit - 1);
}

// A length in [0, room], mostly a granule edge or a byte off one.
std::size_t edge_length(std::size_t room, std::size_t g) {
  std::size_t length = 0;
  switch (*rc::gen::weightedElement<int>({{3, 0}, {2, 1}, {3, 2}, {2, 3}, {1, 4}, {1, 5}, {2, 6}, {1, 7}})) {
    case 0: length = 1; break;
    case 1: length = g - 1; break;
    case 2: length = g; break;
    case 3: length = g + 1; break;
    case 4: length = 2 * g; break;
    case 5: length = room; break;
    case 6: length = *rc::gen::inRange<std::size_t>(2, g); break;
    default: length = 0; break;
  }
  return std::min(length, room);
}

std::size_t any_alignment(std::size_t g) { return *rc::gen::elementOf(std::vector<std::size_t>{64, 1, 4096, g}); }

// One range of one live allocation.
struct Piece {
  int id;
  std::size_t offset;
  std::size_t length;
};

Piece any_piece(const Model& model) {
  const int id = any_key(model.live);
  const std::size_t bytes = model.live.at(id).bytes;
  const std::size_t offset = edge_offset(bytes, model.granule);
  return {id, offset, edge_length(bytes - offset, model.granule)};
}

bool fits(const Model& model, const Piece& piece) {
  const auto found = model.live.find(piece.id);
  return found != model.live.end() && piece.offset <= found->second.bytes &&
         piece.length <= found->second.bytes - piece.offset;
}

std::ostream& operator<<(std::ostream& os, const Piece& piece) {
  return os << "#" << piece.id << " [" << piece.offset << ", " << piece.offset + piece.length << ")";
}

// Granules of `r` that are unmapped in the model, and mapped.
std::vector<std::size_t> granules_where(const Model& model, const Reservation& r, bool mapped) {
  std::vector<std::size_t> found;
  for (std::size_t g = 0; g < model.granules(r.bytes); ++g) {
    if (model.mapped(r, g) == mapped) found.push_back(g);
  }
  return found;
}

// ---- Commands. ----

// Ids are fixed when a command is generated, so they stay the same while a
// failing sequence shrinks and show() can name them.
struct Reserve final : Command {
  int id;
  std::size_t bytes;
  std::size_t align;
  std::vector<ByteRange> listed;

  explicit Reserve(const Model& model)
      : id(model.next), bytes(reservation_bytes(model.granule, kMaxGranules)), align(any_alignment(model.granule)) {
    // Now and then everything, so releases also meet fully mapped allocations.
    if (*rc::gen::weightedElement<bool>({{9, false}, {1, true}})) {
      listed.push_back({0, bytes});
      return;
    }
    const std::size_t count = *rc::gen::weightedOneOf<std::size_t>(
        {{4, rc::gen::inRange<std::size_t>(0, 4)}, {1, rc::gen::inRange<std::size_t>(4, 17)}});
    // Now and then a long list only in the first and last granules, so
    // that the granules between are committed by no range.
    const std::size_t g = model.granule;
    const std::size_t last = (model.granules(bytes) - 1) * g;
    const bool ends_only = count > 3 && last >= 2 * g && *rc::gen::arbitrary<bool>();
    for (std::size_t i = 0; i < count; ++i) {
      if (ends_only) {
        const std::size_t base = i % 2 == 0 ? 0 : last;
        const std::size_t begin = base + edge_offset(std::min(bytes - base, g), g);
        listed.push_back({begin, begin + edge_length(std::min(bytes, base + g) - begin, g)});
        continue;
      }
      const std::size_t begin = edge_offset(bytes, g);
      // Many ranges are kept short: a list is about how ranges combine,
      // and each listed byte is written.
      const std::size_t room = count > 3 ? std::min(bytes - begin, g + 1) : bytes - begin;
      listed.push_back({begin, begin + edge_length(room, g)});
    }
  }
  void checkPreconditions(const Model& model) const override {
    RC_PRE(id >= model.next);
    RC_PRE(model.reserved() + model.granules(bytes) * model.granule <= kReserveBudget);
  }
  void apply(Model& model) const override {
    Reservation& r = model.live[id];
    r.bytes = bytes;
    r.align = align;
    for (std::size_t i = 0; i < listed.size(); ++i) {
      r.committed.assign(listed[i].begin, listed[i].end, value_of(model.writes + static_cast<unsigned>(i)));
    }
    model.writes += static_cast<unsigned>(listed.size());
    model.next = id + 1;
  }
  void run(const Model& model, System& system) const override {
    const Model after = nextState(model);
    auto ptr = system.backing->allocate_committed(bytes, align, listed);
    ORTMEM_CTS_RC_PRECONDITION(ptr.has_value());
    system.live[id] = {*ptr, bytes, align};
    const auto address = reinterpret_cast<std::uintptr_t>(*ptr);
    for (const auto& [other, held] : system.live) {
      if (other == id) continue;
      const auto start = reinterpret_cast<std::uintptr_t>(held.ptr);
      ORTMEM_CTS_RC_ASSERT("ALLOC-006", address + bytes <= start || start + held.bytes <= address);
    }
    // The figure must agree with what was committed (VB-005); above the
    // listed ranges rounded out it may also mean more was committed (VB-001).
    const std::size_t seen = system.committed(id);
    const std::size_t expected = after.committed_bytes(id);
    if (seen > expected) {
      // Which of the two: decommitting the granules no listed range touches
      // unmaps something only if they really were committed.
      std::uint64_t really = 0;
      for (std::size_t g : granules_where(after, after.live.at(id), false)) {
        const std::size_t begin = g * model.granule;
        const auto unmapped = system.backing->decommit_allocation_range(*ptr, bytes, align, begin,
                                                                        std::min(model.granule, bytes - begin));
        really += unmapped ? *unmapped : 0;
      }
      expect_equal(really > 0 ? "VB-001" : "VB-005", "committed bytes after allocate_committed", seen, expected);
    }
    expect_equal("VB-005", "committed bytes after allocate_committed", seen, expected);
    // Each byte once, with the value of the last range listing it.
    after.live.at(id).committed.each(0, bytes, [&](std::size_t from, std::size_t to, std::uint8_t value) {
      system.adapter.memory().fill(system.at(id, from), to - from, value);
    });
    ORTMEM_CTS_RC_ASSERT("VB-001", system.matches(after, id, 0, bytes));
    system.check_committed(after, "VB-005");
  }
  void show(std::ostream& os) const override {
    os << "#" << id << " = allocate_committed(" << bytes << ", " << align << ", {";
    for (const ByteRange& range : listed) os << " [" << range.begin << ", " << range.end << ")";
    os << " })";
  }
};

// Commits one range through commit_allocation_range, or a batch of 1 to 16
// through commit_allocation_ranges with an estimate asked first, and writes
// what was committed.
template <bool kBatch>
struct Commit final : Command {
  std::vector<Piece> pieces;

  explicit Commit(const Model& model) {
    // Batches of up to 16; long ones rarer, as each range is written in full.
    const std::size_t count = kBatch ? *rc::gen::weightedOneOf<std::size_t>({{3, rc::gen::inRange<std::size_t>(1, 5)},
                                                                             {1, rc::gen::inRange<std::size_t>(5, 17)}})
                                     : 1;
    for (std::size_t i = 0; i < count; ++i) pieces.push_back(any_piece(model));
  }
  void checkPreconditions(const Model& model) const override {
    for (const Piece& piece : pieces) RC_PRE(fits(model, piece));
  }
  void apply(Model& model) const override {
    for (std::size_t i = 0; i < pieces.size(); ++i) {
      const Piece& p = pieces[i];
      model.live.at(p.id).committed.assign(p.offset, p.offset + p.length,
                                           value_of(model.writes + static_cast<unsigned>(i)));
    }
    model.writes += static_cast<unsigned>(pieces.size());
  }
  static bool recommits(const Model& model, const Piece& p) {
    return model.live.at(p.id).decommitted.intersects(p.offset, p.offset + p.length);
  }
  void run(const Model& model, System& system) const override {
    const Model after = this->nextState(model);
    std::vector<AllocationCommitRange> ranges;
    std::set<int> touched;
    bool recommit = false;
    for (const Piece& p : pieces) {
      ranges.push_back(system.range(p.id, p.offset, p.length));
      touched.insert(p.id);
      recommit = recommit || recommits(model, p);
    }
    std::uint64_t estimate = 0;
    if constexpr (kBatch) {
      auto estimated = system.backing->mapped_bytes_for_allocation_ranges(ranges);
      ORTMEM_CTS_RC_ASSERT("VB-004", estimated.has_value());
      estimate = *estimated;
    }
    const AllocationCommitRange& one = ranges.front();
    const auto done = kBatch ? system.backing->commit_allocation_ranges(ranges)
                             : system.backing->commit_allocation_range(one.ptr, one.allocation_bytes, one.align,
                                                                       one.offset, one.bytes);
    // Committing again what was decommitted must work (VB-006). A refused
    // fresh commit breaks no rule by itself, but the model stands on it, so
    // the test ends here, as VB-006 if a decommitted range of an allocation
    // involved cannot be committed again either.
    if (recommit) ORTMEM_CTS_RC_ASSERT("VB-006", done.has_value());
    if (!done) {
      for (int id : touched) ORTMEM_CTS_RC_ASSERT("VB-006", system.recommits_a_decommitted_range(model, id));
    }
    ORTMEM_CTS_RC_PRECONDITION(done.has_value());
    std::uint64_t newly_mapped = 0;
    for (int id : touched) {
      const std::size_t seen = system.committed(id);
      const std::size_t expected = after.committed_bytes(id);
      // Short of the model, a committed range went uncounted (VB-002); over
      // it, something not committed is counted (VB-005).
      if (seen < expected) expect_equal("VB-002", "committed bytes after a commit", seen, expected);
      expect_equal("VB-005", "committed bytes after a commit", seen, expected);
      newly_mapped += expected - model.committed_bytes(id);
    }
    if constexpr (kBatch) {
      ORTMEM_CTS_RC_ASSERT("VB-004", estimate % model.granule == 0);
      if (estimate < newly_mapped)
        expect_equal("VB-004", "estimate below what the commit mapped", estimate, newly_mapped);
    }
    for (std::size_t i = 0; i < pieces.size(); ++i) {
      const Piece& p = pieces[i];
      system.adapter.memory().fill(system.at(p.id, p.offset), p.length,
                                   value_of(model.writes + static_cast<unsigned>(i)));
    }
    for (const Piece& p : pieces) {
      ORTMEM_CTS_RC_ASSERT(recommits(model, p) ? "VB-006" : "VB-002",
                           system.matches(after, p.id, p.offset, p.offset + p.length));
    }
    for (const Piece& p : pieces) {
      ORTMEM_CTS_RC_ASSERT("ALLOC-015", system.neighbours_intact(after, p.id, p.offset, p.length));
    }
    system.check_committed(after, "VB-005");
  }
  void show(std::ostream& os) const override {
    os << (kBatch ? "commit_allocation_ranges {" : "commit_allocation_range");
    for (const Piece& p : pieces) os << " " << p;
    if (kBatch) os << " }";
  }
};

struct Decommit final : Command {
  Piece piece;
  explicit Decommit(const Model& model) : piece(any_piece(model)) {}
  void checkPreconditions(const Model& model) const override { RC_PRE(fits(model, piece)); }
  void apply(Model& model) const override {
    Reservation& r = model.live.at(piece.id);
    r.committed.erase(piece.offset, piece.offset + piece.length);
    r.decommitted.assign(piece.offset, piece.offset + piece.length, 0);
  }
  void run(const Model& model, System& system) const override {
    const Model after = nextState(model);
    const AllocationCommitRange range = system.range(piece.id, piece.offset, piece.length);
    const auto unmapped = system.backing->decommit_allocation_range(range.ptr, range.allocation_bytes, range.align,
                                                                    range.offset, range.bytes);
    ORTMEM_CTS_RC_PRECONDITION(unmapped.has_value());
    // The figure first: an adapter whose committed bytes drifted earlier
    // shows it here (VB-005) before the count it returns is judged (VB-003).
    expect_equal("VB-005", "committed bytes after a decommit", system.committed(piece.id),
                 after.committed_bytes(piece.id));
    expect_equal("VB-003", "bytes the decommit reports unmapped", *unmapped,
                 model.committed_bytes(piece.id) - after.committed_bytes(piece.id));
    ORTMEM_CTS_RC_ASSERT("ALLOC-015", system.neighbours_intact(after, piece.id, piece.offset, piece.length));
    system.check_committed(after, "VB-005");
  }
  void show(std::ostream& os) const override { os << "decommit_allocation_range " << piece; }
};

// What committing would map, asked without committing.
struct Estimate final : Command {
  std::vector<Piece> pieces;  // empty: mapped_bytes_for_allocation(bytes, align)
  std::size_t bytes = 0;
  std::size_t align = 0;

  explicit Estimate(const Model& model) {
    if (model.live.empty() || *rc::gen::arbitrary<bool>()) {
      // No allocation is made, so sizes may run far past the reservation budget.
      bytes = reservation_bytes(model.granule, kMaxGranules) +
              *rc::gen::elementOf(std::vector<std::size_t>{0, 64 * model.granule, 4096 * model.granule});
      align = any_alignment(model.granule);
      return;
    }
    const std::size_t count = *rc::gen::inRange<std::size_t>(1, 17);
    for (std::size_t i = 0; i < count; ++i) pieces.push_back(any_piece(model));
  }
  void checkPreconditions(const Model& model) const override {
    for (const Piece& piece : pieces) RC_PRE(fits(model, piece));
  }
  void apply(Model&) const override {}
  void run(const Model& model, System& system) const override {
    std::uint64_t would_map = 0;
    Expected<std::uint64_t, MemoryError> estimate = std::uint64_t{0};
    if (pieces.empty()) {
      estimate = system.backing->mapped_bytes_for_allocation(bytes, align);
      would_map = model.granules(bytes) * model.granule;
    } else {
      Model committed = model;
      std::vector<AllocationCommitRange> ranges;
      for (const Piece& p : pieces) {
        ranges.push_back(system.range(p.id, p.offset, p.length));
        committed.live.at(p.id).committed.assign(p.offset, p.offset + p.length, 1);
      }
      for (const auto& [id, r] : committed.live) would_map += committed.committed_bytes(r) - model.committed_bytes(id);
      estimate = system.backing->mapped_bytes_for_allocation_ranges(ranges);
    }
    ORTMEM_CTS_RC_ASSERT("VB-004", estimate.has_value());
    ORTMEM_CTS_RC_ASSERT("VB-004", *estimate % model.granule == 0);
    if (*estimate < would_map) expect_equal("VB-004", "estimate below what committing would map", *estimate, would_map);
    system.check_committed(model, "VB-005");
  }
  void show(std::ostream& os) const override {
    if (pieces.empty()) {
      os << "mapped_bytes_for_allocation(" << bytes << ", " << align << ")";
      return;
    }
    os << "mapped_bytes_for_allocation_ranges {";
    for (const Piece& p : pieces) os << " " << p;
    os << " }";
  }
};

// A call naming a range outside its allocation or an address that is not a
// live allocation: refused, and nothing changes (VB-007), neither committed
// bytes (of any allocation) nor the named allocation's contents.
struct InvalidCall final : Command {
  enum class Kind {
    kPastEnd,          // commit a range running past the end
    kDecommitPastEnd,  // decommit a range running past the end
    kAfterEnd,         // a range starting at or after the end
    kOverflow,         // offset + bytes wraps around
    kWrongSize,        // the allocation named with another size
    kWrongAlign,       // or another alignment
    kInterior,         // an address inside a live allocation
    kNotAllocation,    // memory this mechanism never issued
    kReleased,         // an allocation already released
    kEstimatePastEnd,  // an estimate over a range running past the end
    kBatchBadFirst,    // a batch whose first range runs past the end
    kReserveOutside,   // allocate_committed listing a range outside the allocation
  };
  Kind kind;
  int id = -1;
  bool decommit = false;
  std::size_t offset = 0;
  std::size_t length = 0;
  std::size_t stated_bytes = 0;
  std::size_t stated_align = 0;
  std::size_t interior = 0;  // kInterior: how far inside
  std::vector<Piece> rest;   // the valid ranges after the bad one
  ByteRange listed;          // kReserveOutside

  explicit InvalidCall(const Model& model) {
    const std::size_t g = model.granule;
    kind = model.live.empty()
               ? *rc::gen::elementOf(std::vector<Kind>{Kind::kNotAllocation, Kind::kReleased, Kind::kReserveOutside})
               : *rc::gen::elementOf(std::vector<Kind>{
                     Kind::kPastEnd, Kind::kDecommitPastEnd, Kind::kAfterEnd, Kind::kOverflow, Kind::kWrongSize,
                     Kind::kWrongAlign, Kind::kInterior, Kind::kNotAllocation, Kind::kReleased, Kind::kEstimatePastEnd,
                     Kind::kBatchBadFirst, Kind::kReserveOutside});
    decommit = *rc::gen::arbitrary<bool>();
    if (kind == Kind::kReserveOutside) {
      stated_bytes = reservation_bytes(g, kMaxGranules);
      listed = *rc::gen::elementOf(std::vector<ByteRange>{
          {0, stated_bytes + 1}, {stated_bytes, stated_bytes + 1}, {stated_bytes - 1, stated_bytes + g}, {2, 1}});
      return;
    }
    if (kind == Kind::kNotAllocation || kind == Kind::kReleased) {
      length = 1;
      return;
    }
    id = any_key(model.live);
    const Reservation& r = model.live.at(id);
    stated_bytes = r.bytes;
    stated_align = r.align;
    switch (kind) {
      case Kind::kPastEnd:
      case Kind::kBatchBadFirst:
        decommit = false;
        offset = edge_offset(r.bytes, g);
        length = r.bytes - offset + *rc::gen::elementOf(std::vector<std::size_t>{1, 2, g});
        break;
      case Kind::kDecommitPastEnd:
      case Kind::kEstimatePastEnd:
        decommit = kind == Kind::kDecommitPastEnd;
        offset = edge_offset(r.bytes + 1, g);
        length = r.bytes - offset + *rc::gen::elementOf(std::vector<std::size_t>{1, 2, g});
        break;
      case Kind::kAfterEnd:
        offset = r.bytes + *rc::gen::elementOf(std::vector<std::size_t>{0, 1, g});
        length = *rc::gen::elementOf(std::vector<std::size_t>{1, g});
        break;
      case Kind::kOverflow: {
        const auto wrap = *rc::gen::elementOf(std::vector<std::pair<std::size_t, std::size_t>>{
            {1, SIZE_MAX}, {g, SIZE_MAX - g + 1}, {SIZE_MAX, 1}, {SIZE_MAX - g + 1, g}});
        offset = wrap.first;
        length = wrap.second;
        break;
      }
      case Kind::kWrongSize:
      case Kind::kWrongAlign: {
        if (kind == Kind::kWrongSize) {
          stated_bytes = *rc::gen::elementOf(std::vector<std::size_t>{r.bytes + 1, r.bytes + g, r.bytes - 1});
        } else {
          stated_align = r.align * 2;
        }
        // A range that would be valid under either identity.
        const std::size_t limit = std::min(stated_bytes, r.bytes);
        RC_PRE(limit > 0);
        offset = edge_offset(limit, g);
        length = std::max<std::size_t>(1, edge_length(limit - offset, g));
        break;
      }
      case Kind::kInterior: {
        RC_PRE(model.granules(r.bytes) > 1);
        interior = *rc::gen::inRange<std::size_t>(1, model.granules(r.bytes)) * g;
        stated_bytes = r.bytes - interior;
        offset = edge_offset(stated_bytes, g);
        length = std::max<std::size_t>(1, edge_length(stated_bytes - offset, g));
        break;
      }
      default: break;
    }
    if (kind == Kind::kEstimatePastEnd || kind == Kind::kBatchBadFirst) {
      const std::size_t count = *rc::gen::inRange<std::size_t>(0, 4);
      for (std::size_t i = 0; i < count; ++i) rest.push_back(any_piece(model));
    }
  }

  void checkPreconditions(const Model& model) const override {
    if (kind == Kind::kReserveOutside) {
      RC_PRE(model.reserved() + model.granules(stated_bytes) * model.granule <= kReserveBudget);
      return;
    }
    if (id < 0) return;
    RC_PRE(model.live.contains(id));
    const Reservation& r = model.live.at(id);
    RC_PRE(stated_bytes == r.bytes || kind == Kind::kWrongSize || kind == Kind::kInterior);
    RC_PRE(kind != Kind::kInterior || stated_bytes + interior == r.bytes);
    RC_PRE(kind != Kind::kWrongSize || (stated_bytes != r.bytes && stated_bytes != 0));
    RC_PRE((stated_align == r.align) == (kind != Kind::kWrongAlign));
    if (kind == Kind::kPastEnd || kind == Kind::kDecommitPastEnd || kind == Kind::kEstimatePastEnd ||
        kind == Kind::kBatchBadFirst) {
      RC_PRE(offset <= r.bytes && length > r.bytes - offset);
    }
    if (kind == Kind::kAfterEnd) RC_PRE(offset >= r.bytes);
    if (kind == Kind::kWrongSize || kind == Kind::kWrongAlign || kind == Kind::kInterior) {
      RC_PRE(offset + length <= std::min(stated_bytes, r.bytes - interior));
    }
    for (const Piece& piece : rest) RC_PRE(fits(model, piece));
  }
  void apply(Model&) const override {}

  // The (address, size, alignment) a per-allocation call names.
  struct Named {
    void* ptr;
    std::size_t bytes;
    std::size_t align;
  };
  [[nodiscard]] Named named(System& system) const {
    alignas(4096) static unsigned char not_ours[4096];
    switch (kind) {
      case Kind::kNotAllocation: return {not_ours, sizeof not_ours, 64};
      case Kind::kReleased: {
        for (auto it = system.released.rbegin(); it != system.released.rend(); ++it) {
          const bool reused = std::any_of(system.live.begin(), system.live.end(),
                                          [&](const auto& entry) { return entry.second.ptr == it->ptr; });
          if (!reused) return {it->ptr, it->bytes, it->align};
        }
        return {not_ours, sizeof not_ours, 64};
      }
      case Kind::kInterior: return {system.at(id, interior), stated_bytes, stated_align};
      default: return {system.live.at(id).ptr, stated_bytes, stated_align};
    }
  }
  // (A live address named with another size or alignment is left out: a
  // query that finds the allocation by its address alone misleads nobody.)
  [[nodiscard]] bool names_no_live_address() const {
    return kind == Kind::kNotAllocation || kind == Kind::kReleased || kind == Kind::kInterior;
  }

  // The call, true when it was refused.
  [[nodiscard]] bool refused(System& system) const {
    VirtualBacking& backing = *system.backing;
    switch (kind) {
      case Kind::kReserveOutside: {
        auto ptr = backing.allocate_committed(stated_bytes, 64, std::span<const ByteRange>(&listed, 1));
        if (!ptr) {
          // The request is the allocation's size, whatever range made it bad.
          expect_equal("ALLOC-001", "requested bytes of a refused allocate_committed", ptr.error().requested(),
                       stated_bytes);
          return true;
        }
        (void)system.allocator->release(*ptr, stated_bytes, 64);
        return false;
      }
      case Kind::kEstimatePastEnd:
      case Kind::kBatchBadFirst: {
        std::vector<AllocationCommitRange> ranges{system.range(id, offset, length)};
        for (const Piece& p : rest) ranges.push_back(system.range(p.id, p.offset, p.length));
        if (kind == Kind::kBatchBadFirst) return !backing.commit_allocation_ranges(ranges).has_value();
        return !backing.mapped_bytes_for_allocation_ranges(ranges).has_value();
      }
      default: {
        const Named call = named(system);
        return decommit
                   ? !backing.decommit_allocation_range(call.ptr, call.bytes, call.align, offset, length).has_value()
                   : !backing.commit_allocation_range(call.ptr, call.bytes, call.align, offset, length).has_value();
      }
    }
  }
  void run(const Model& model, System& system) const override {
    ORTMEM_CTS_RC_ASSERT("VB-007", refused(system));
    system.check_committed(model, "VB-007");
    if (id >= 0) ORTMEM_CTS_RC_ASSERT("VB-007", system.matches(model, id, 0, model.live.at(id).bytes));
    // The committed-bytes query cannot return an error: naming no live
    // allocation, its refusal is 0, never the bytes of whatever lies there.
    if (names_no_live_address()) {
      const Named call = named(system);
      expect_equal("VB-007", "allocation_committed_bytes of an identity that is not a live allocation",
                   system.backing->allocation_committed_bytes(call.ptr, call.bytes, call.align), std::size_t{0});
    }
  }
  void show(std::ostream& os) const override {
    static const char* const names[] = {
        "commit past the end", "decommit past the end", "range after the end",    "range that wraps",
        "wrong size",          "wrong alignment",       "interior address",       "not an allocation",
        "released allocation", "estimate past the end", "batch, bad range first", "allocate_committed outside"};
    os << "invalid call (" << names[static_cast<std::size_t>(kind)] << "): ";
    if (kind == Kind::kReserveOutside) {
      os << "allocate_committed(" << stated_bytes << ", 64, {[" << listed.begin << ", " << listed.end << ")})";
      return;
    }
    os << (decommit ? "decommit" : "commit");
    if (id >= 0) os << " #" << id << "+" << interior << " as (" << stated_bytes << ", " << stated_align << ")";
    os << " [" << offset << ", +" << length << ")";
    for (const Piece& p : rest) os << " " << p;
  }
};

// No release, Complete or Quarantined, may claim more unmapped bytes than
// the allocation's own estimate (VB-009); an estimate that is itself below
// the allocation's granules breaks VB-004 instead.
void check_release_bound(const AllocationReleaseOutcome& outcome, const System::Held& held, const Model& model,
                         const System& system) {
  const auto bound = system.backing->mapped_bytes_for_allocation(held.bytes, held.align);
  ORTMEM_CTS_RC_ASSERT("VB-004", bound.has_value());
  const std::uint64_t whole = model.granules(held.bytes) * model.granule;
  if (*bound < whole)
    expect_equal("VB-004", "mapped_bytes_for_allocation below the allocation's granules", *bound, whole);
  if (outcome.unmapped_bytes() > *bound) {
    expect_equal("VB-009", "unmapped_bytes above mapped_bytes_for_allocation", outcome.unmapped_bytes(), *bound);
  }
}

// Release outcomes, judged by the facts each states (ALLOC-017..020, VB-009).
void judge_release(const AllocationReleaseOutcome& outcome, const System::Held& held, std::uint64_t mapped,
                   const Model& model, System& system) {
  if (outcome.is_complete()) {
    ORTMEM_CTS_RC_ASSERT("ALLOC-017", outcome.state() == AllocationReleaseState::kReleased);
    expect_equal("ALLOC-017", "allocation_bytes of a complete release", outcome.accounting()->allocation_bytes,
                 held.bytes);
    // Only bounded, not exact: a Complete release may count what it unmapped
    // its own way, but never more than the allocation could have had mapped.
    check_release_bound(outcome, held, model, system);
    system.released.push_back(held);
    return;
  }
  const std::size_t granule = model.granule;
  ORTMEM_CTS_RC_ASSERT("ALLOC-019", outcome.is_quarantined());
  const ReleaseAccounting& accounting = *outcome.accounting();
  const ResidualOwnership& residual = *outcome.residual();
  expect_equal("ALLOC-019", "allocation_bytes of a quarantined release", accounting.allocation_bytes, held.bytes);
  check_release_bound(outcome, held, model, system);
  // What was really unmapped: whole granules, no more than were mapped.
  ORTMEM_CTS_RC_ASSERT("ALLOC-019", accounting.unmapped_bytes <= mapped);
  ORTMEM_CTS_RC_ASSERT("ALLOC-019", accounting.unmapped_bytes % granule == 0);
  // What it still holds is of the allocation's own memory, mapped or physical: whole granules too.
  ORTMEM_CTS_RC_ASSERT("ALLOC-019", residual.retained_bytes % granule == 0);
  const bool still_mapped = accounting.unmapped_bytes < mapped;
  ORTMEM_CTS_RC_ASSERT("ALLOC-019", residual.state == (still_mapped ? AllocationReleaseState::kPartiallyUnmapped
                                                                    : AllocationReleaseState::kQuarantined));
  ORTMEM_CTS_RC_ASSERT("ALLOC-019", outcome.state() == residual.state);
  ORTMEM_CTS_RC_ASSERT("ALLOC-019", residual.address == reinterpret_cast<std::uintptr_t>(held.ptr));
  ORTMEM_CTS_RC_ASSERT("ALLOC-019", residual.align == held.align);
  if (still_mapped)
    expect_equal("ALLOC-019", "retained_bytes", residual.retained_bytes, mapped - accounting.unmapped_bytes);
  // Quarantined is not live: it can never be released again.
  ORTMEM_CTS_RC_ASSERT("ALLOC-020", system.allocator->release(held.ptr, held.bytes, held.align).is_failed());
}

struct Release final : OnOneLive<Command> {
  using OnOneLive::OnOneLive;
  void apply(Model& model) const override { model.live.erase(id); }
  void run(const Model& model, System& system) const override {
    const Reservation& r = model.live.at(id);
    ORTMEM_CTS_RC_ASSERT("ALLOC-015", system.matches(model, id, 0, r.bytes));
    const System::Held held = system.live.at(id);
    const auto outcome = system.allocator->release(held.ptr, held.bytes, held.align);
    system.live.erase(id);
    // Decommit leaves the allocation releasable (VB-003); without injected
    // faults the model stands on every release completing.
    if (!outcome.is_complete() && !r.decommitted.intersects(0, r.bytes))
      ORTMEM_CTS_RC_PRECONDITION(outcome.is_complete());
    ORTMEM_CTS_RC_ASSERT("VB-003", outcome.is_complete());
    judge_release(outcome, held, model.committed_bytes(r), model, system);
    system.check_committed(nextState(model), "VB-005");
  }
  void show(std::ostream& os) const override { os << "release #" << id; }
};

struct CheckContent final : OnOneLive<Command> {
  using OnOneLive::OnOneLive;
  void apply(Model&) const override {}
  void run(const Model& model, System& system) const override {
    ORTMEM_CTS_RC_ASSERT("ALLOC-015", system.matches(model, id, 0, model.live.at(id).bytes));
  }
  void show(std::ostream& os) const override { os << "read back #" << id; }
};

// ---- Injected faults. ----

// The granules a decommit of `piece` unmaps, as runs of consecutive granules.
std::size_t victim_runs(const Model& model, const Piece& piece) {
  Model after = model;
  after.live.at(piece.id).committed.erase(piece.offset, piece.offset + piece.length);
  const Reservation& before_r = model.live.at(piece.id);
  const Reservation& after_r = after.live.at(piece.id);
  std::size_t runs = 0;
  bool in_run = false;
  for (std::size_t g = 0; g < model.granules(before_r.bytes); ++g) {
    const bool victim = model.mapped(before_r, g) && !after.mapped(after_r, g);
    runs += victim && !in_run ? 1 : 0;
    in_run = victim;
  }
  return runs;
}

// A decommit whose nth mapping removal fails. Removing k separate runs of
// granules takes at least k calls behind FaultPoint::kDecommit (every unmap
// call covers one contiguous range), so with nth <= k the fault is sure to
// fire: a success is then a claim that the adapter finished anyway, which
// must be true in full, and a failure must have changed nothing (VB-008).
struct FaultyDecommit final : Command {
  Piece piece;
  std::size_t nth;
  explicit FaultyDecommit(const Model& model) : piece(any_piece(model)) {
    // Often to the end, so that several runs can be cut.
    if (*rc::gen::arbitrary<bool>()) piece.length = model.live.at(piece.id).bytes - piece.offset;
    const std::size_t runs = victim_runs(model, piece);
    RC_PRE(runs > 0);
    nth = *rc::gen::inRange<std::size_t>(1, std::min<std::size_t>(runs, 3) + 1);
  }
  void checkPreconditions(const Model& model) const override {
    RC_PRE(model.decommit_faults);
    RC_PRE(fits(model, piece));
    RC_PRE(victim_runs(model, piece) >= nth);
  }
  // The bytes keep their place in the model whatever happens: a failure
  // must restore them, and a full success is undone below.
  void apply(Model& model) const override {
    model.live.at(piece.id).decommitted.assign(piece.offset, piece.offset + piece.length, 0);
  }
  void run(const Model& model, System& system) const override {
    Model decommitted = model;
    decommitted.live.at(piece.id).committed.erase(piece.offset, piece.offset + piece.length);
    const AllocationCommitRange range = system.range(piece.id, piece.offset, piece.length);
    ORTMEM_CTS_RC_PRECONDITION(system.adapter.faults()->arm(FaultPoint::kDecommit, nth));
    const auto unmapped = system.backing->decommit_allocation_range(range.ptr, range.allocation_bytes, range.align,
                                                                    range.offset, range.bytes);
    system.adapter.faults()->clear();
    if (!unmapped) {
      expect_equal("VB-008", "committed bytes after a failed decommit", system.committed(piece.id),
                   model.committed_bytes(piece.id));
      ORTMEM_CTS_RC_ASSERT("VB-008", system.matches(model, piece.id, 0, model.live.at(piece.id).bytes));
    } else {
      expect_equal("VB-008", "committed bytes after a decommit reported done despite the fault",
                   system.committed(piece.id), decommitted.committed_bytes(piece.id));
      expect_equal("VB-008", "bytes reported unmapped despite the fault", *unmapped,
                   model.committed_bytes(piece.id) - decommitted.committed_bytes(piece.id));
      // Done in full: commit the bytes back, as the model keeps them.
      bool recommitted = true;
      const auto restore = [&](std::size_t from, std::size_t to, std::uint8_t value) {
        if (!recommitted) return;
        recommitted =
            system.backing->commit_allocation_range(range.ptr, range.allocation_bytes, range.align, from, to - from)
                .has_value();
        if (recommitted) system.adapter.memory().fill(system.at(piece.id, from), to - from, value);
      };
      model.live.at(piece.id).committed.each(piece.offset, piece.offset + piece.length, restore);
      ORTMEM_CTS_RC_ASSERT("VB-006", recommitted);
      ORTMEM_CTS_RC_ASSERT("VB-006", system.matches(model, piece.id, piece.offset, piece.offset + piece.length));
    }
    system.check_committed(model, "VB-005");
  }
  void show(std::ostream& os) const override {
    os << "decommit_allocation_range " << piece << ", call " << nth << " failing";
  }
};

// How many granules a commit of `piece` must map: touched by it, mapped by
// nothing yet.
std::size_t unmapped_under(const Model& model, const Piece& piece) {
  if (piece.length == 0) return 0;
  const Reservation& r = model.live.at(piece.id);
  std::size_t unmapped = 0;
  for (std::size_t g = piece.offset / model.granule; g <= (piece.offset + piece.length - 1) / model.granule; ++g) {
    unmapped += model.mapped(r, g) ? 0 : 1;
  }
  return unmapped;
}

// A commit whose nth mapping step fails. nth is at most the granules it must
// map: the fault is sure to fire for nth up to their runs (each mapping call
// covers one contiguous range), and beyond that fires in a mechanism that
// maps granule by granule, after some are mapped, so its undo is judged. A
// failed commit is not in the sequence of successful commits committed bytes
// follow (VB-005): it must leave them, and every committed byte's value, as
// they were. A success is a claim the commit was done anyway, judged as any
// commit (VB-002); the bytes it added are then decommitted again, as the
// model never gained them.
struct FaultyCommit final : Command {
  Piece piece;
  std::size_t nth;
  explicit FaultyCommit(const Model& model) : piece(any_piece(model)) {
    // Often to the end, so that several granules need mapping.
    if (*rc::gen::arbitrary<bool>()) piece.length = model.live.at(piece.id).bytes - piece.offset;
    const std::size_t unmapped = unmapped_under(model, piece);
    RC_PRE(unmapped > 0);
    nth = *rc::gen::inRange<std::size_t>(1, std::min<std::size_t>(unmapped, 4) + 1);
  }
  void checkPreconditions(const Model& model) const override {
    RC_PRE(model.commit_faults);
    RC_PRE(fits(model, piece));
    RC_PRE(unmapped_under(model, piece) >= nth);
  }
  void apply(Model&) const override {}
  void run(const Model& model, System& system) const override {
    const AllocationCommitRange range = system.range(piece.id, piece.offset, piece.length);
    ORTMEM_CTS_RC_PRECONDITION(system.adapter.faults()->arm(FaultPoint::kCommit, nth));
    const auto done = system.backing->commit_allocation_range(range.ptr, range.allocation_bytes, range.align,
                                                              range.offset, range.bytes);
    system.adapter.faults()->clear();
    if (!done) {
      system.check_committed(model, "VB-005");
      ORTMEM_CTS_RC_ASSERT("ALLOC-015", system.matches(model, piece.id, 0, model.live.at(piece.id).bytes));
      return;
    }
    Model after = model;
    after.live.at(piece.id).committed.assign(piece.offset, piece.offset + piece.length, value_of(model.writes));
    const std::size_t seen = system.committed(piece.id);
    if (seen < after.committed_bytes(piece.id)) {
      expect_equal("VB-002", "committed bytes after a commit reported done despite the fault", seen,
                   after.committed_bytes(piece.id));
    }
    expect_equal("VB-005", "committed bytes after a commit reported done despite the fault", seen,
                 after.committed_bytes(piece.id));
    // Only the bytes the model lacked are written and taken back: those it
    // has keep their values.
    std::vector<std::pair<std::size_t, std::size_t>> gaps;
    std::size_t cursor = piece.offset;
    model.live.at(piece.id).committed.each(piece.offset, piece.offset + piece.length,
                                           [&](std::size_t from, std::size_t to, std::uint8_t) {
                                             if (from > cursor) gaps.emplace_back(cursor, from);
                                             cursor = to;
                                           });
    if (cursor < piece.offset + piece.length) gaps.emplace_back(cursor, piece.offset + piece.length);
    for (const auto& [from, to] : gaps) {
      system.adapter.memory().fill(system.at(piece.id, from), to - from, value_of(model.writes));
      ORTMEM_CTS_RC_ASSERT("VB-002", system.holds(system.at(piece.id, from), to - from, value_of(model.writes)));
    }
    ORTMEM_CTS_RC_ASSERT("ALLOC-015", system.matches(model, piece.id, 0, model.live.at(piece.id).bytes));
    for (const auto& [from, to] : gaps) {
      ORTMEM_CTS_RC_ASSERT(
          "VB-003",
          system.backing->decommit_allocation_range(range.ptr, range.allocation_bytes, range.align, from, to - from)
              .has_value());
    }
    system.check_committed(model, "VB-005");
  }
  void show(std::ostream& os) const override {
    os << "commit_allocation_range " << piece << ", call " << nth << " failing";
  }
};

// A release whose nth unmap step fails. How many steps a release takes is
// the adapter's business, so any of the three outcomes may come back; each is
// judged by what it claims, against the model's mapped bytes.
struct FaultyRelease final : OnOneLive<Command> {
  std::size_t nth;
  explicit FaultyRelease(const Model& model) : OnOneLive(model), nth(*rc::gen::inRange<std::size_t>(1, 5)) {}
  void checkPreconditions(const Model& model) const override {
    RC_PRE(model.release_faults);
    OnOneLive::checkPreconditions(model);
  }
  void apply(Model& model) const override {
    model.retired += model.granules(model.live.at(id).bytes) * model.granule;
    model.live.erase(id);
  }
  void run(const Model& model, System& system) const override {
    const Reservation& r = model.live.at(id);
    ORTMEM_CTS_RC_ASSERT("ALLOC-015", system.matches(model, id, 0, r.bytes));
    const System::Held held = system.live.at(id);
    const std::uint64_t mapped = model.committed_bytes(r);
    ORTMEM_CTS_RC_PRECONDITION(system.adapter.faults()->arm(FaultPoint::kReleaseUnmap, nth));
    auto outcome = system.allocator->release(held.ptr, held.bytes, held.align);
    system.adapter.faults()->clear();
    if (outcome.is_failed()) {
      // Failed means untouched: still live, as it was, and releasable.
      expect_equal("ALLOC-018", "committed bytes after a failed release", system.committed(id), mapped);
      ORTMEM_CTS_RC_ASSERT("ALLOC-018", system.matches(model, id, 0, r.bytes));
      outcome = system.allocator->release(held.ptr, held.bytes, held.align);
      ORTMEM_CTS_RC_ASSERT("ALLOC-018", !outcome.is_failed());
    }
    system.live.erase(id);
    judge_release(outcome, held, mapped, model, system);
    system.check_committed(nextState(model), "VB-005");
  }
  void show(std::ostream& os) const override { os << "release #" << id << ", unmap step " << nth << " failing"; }
};

// ---- The tests. ----

class VirtualBackingModel : public AdapterSuite {
 protected:
  // The granule, as the adapter counts one committed byte (VB-001: the listed
  // ranges rounded out to whole granules); null when the probe itself fails.
  std::optional<std::size_t> granule() {
    auto allocator = adapter().make_allocator();
    VirtualBacking* backing = allocator->as_virtual_backing();
    if (backing == nullptr) return std::nullopt;
    const ByteRange one{0, 1};
    auto ptr = backing->allocate_committed(1, 64, std::span<const ByteRange>(&one, 1));
    if (!ptr) return std::nullopt;
    const std::size_t g = backing->allocation_committed_bytes(*ptr, 1, 64);
    (void)allocator->release(*ptr, 1, 64);
    if (g < 4 || (g & (g - 1)) != 0) return std::nullopt;
    return g;
  }
  // Whether the adapter arms `point` (armed out of reach, then cleared).
  bool arms(FaultPoint point) {
    FaultInjection* faults = adapter().faults();
    if (faults == nullptr) return false;
    const bool armed = faults->arm(point, std::uint64_t{1} << 40);
    faults->clear();
    return armed;
  }
};

TEST_P(VirtualBackingModel, EveryStepOfARandomSequenceMatchesTheModel) {
  covers("VB-001", "VB-002", "VB-003", "VB-004", "VB-005", "VB-006", "VB-007", "VB-009", "ALLOC-001", "ALLOC-006",
         "ALLOC-015", "ALLOC-017");
  ORTMEM_CTS_REQUIRE(Capability::kVirtualBacking);
  Model initial;
  {
    ORTMEM_CTS_PRECONDITION();
    const auto g = granule();
    ASSERT_TRUE(g.has_value()) << "committing one byte of a fresh reservation does not report a granule";
    initial.granule = *g;
  }
  check_model([&] {
    System system(adapter());
    ORTMEM_CTS_RC_PRECONDITION(system.backing != nullptr);
    rc::state::check(
        initial, system,
        rc::state::gen::execOneOfWithArgs<Reserve, Reserve, Commit<false>, Commit<false>, Commit<true>, Decommit,
                                          Decommit, Estimate, InvalidCall, Release, CheckContent>());
  });
}

TEST_P(VirtualBackingModel, InjectedFaultsAreReportedHonestly) {
  covers("VB-001", "VB-002", "VB-003", "VB-004", "VB-005", "VB-006", "VB-008", "VB-009", "ALLOC-006", "ALLOC-015",
         "ALLOC-017", "ALLOC-018", "ALLOC-019", "ALLOC-020");
  ORTMEM_CTS_REQUIRE(Capability::kVirtualBacking);
  ORTMEM_CTS_REQUIRE(Capability::kFaultInjection);
  Model initial;
  {
    ORTMEM_CTS_PRECONDITION();
    const auto g = granule();
    ASSERT_TRUE(g.has_value()) << "committing one byte of a fresh reservation does not report a granule";
    initial.granule = *g;
  }
  initial.decommit_faults = arms(FaultPoint::kDecommit);
  initial.release_faults = arms(FaultPoint::kReleaseUnmap);
  initial.commit_faults = arms(FaultPoint::kCommit);
  if (!initial.decommit_faults && !initial.release_faults && !initial.commit_faults) {
    GTEST_SKIP() << kNotApplicable << "the adapter arms no commit, decommit or release fault";
  }
  check_model([&] {
    System system(adapter());
    ORTMEM_CTS_RC_PRECONDITION(system.backing != nullptr);
    rc::state::check(initial, system,
                     rc::state::gen::execOneOfWithArgs<Reserve, Reserve, Commit<false>, Commit<false>, Decommit,
                                                       FaultyCommit, FaultyDecommit, FaultyDecommit, FaultyRelease,
                                                       FaultyRelease, Release, CheckContent>());
  });
}

ORTMEM_CTS_INSTANTIATE(VirtualBackingModel);

}  // namespace
}  // namespace ortmem::cts
