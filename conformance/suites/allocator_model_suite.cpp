// The allocator contract as a state machine (RapidCheck rc::state): random
// command sequences over the adapter's own allocator, each step compared with
// a model of what an observer may see. The model is the live set (size,
// alignment, byte pattern per block); the allocator's addresses are facts of
// the system under test, checked against each other after every allocate.
//
// Sizes and alignments are biased to the edges where allocators switch
// strategy (pages, 64 KiB, 1 and 2 MiB, up to 4 MiB alignment, sizes past
// the address space); a failure shrinks to a minimal sequence, and the
// report gives the seed and the command that replays it.
// GoogleTest first: rapidcheck/gtest.h uses its macros.
#include "support/model_check.hpp"
#include "support/suite.hpp"

#include <rapidcheck.h>
#include <rapidcheck/gtest.h>
#include <rapidcheck/state.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace ortmem::cts {
namespace {

constexpr std::size_t kMiB = std::size_t{1} << 20;
// The live bytes a sequence may hold at once, so a long one stays cheap.
constexpr std::size_t kLiveBudget = 192 * kMiB;

// Past 70000 bytes up to 6 MiB, spread evenly over the powers of two
// between: as many sizes near 100 KiB as near 4 MiB. Drawn uniformly over
// bytes, nine in ten would be past 600 KiB, and their first touch (every
// page faulted in, then filled and read back) made this the slowest test of
// a certification, where the allocator's strategies change at smaller sizes.
rc::Gen<std::size_t> past_small_sizes() {
  return rc::gen::mapcat(rc::gen::inRange(16, 23), [](int shift) {
    const std::size_t low = std::max<std::size_t>(70000, std::size_t{1} << shift);
    const std::size_t high = std::min<std::size_t>(6 * kMiB, std::size_t{1} << (shift + 1));
    return rc::gen::inRange<std::size_t>(low, high);
  });
}

rc::Gen<std::size_t> edge_biased_size() {
  static const std::vector<std::size_t> edges = {1,
                                                 7,
                                                 4095,
                                                 4096,
                                                 4097,
                                                 65535,
                                                 65536,
                                                 65537,
                                                 kMiB - 1,
                                                 kMiB,
                                                 kMiB + 1,
                                                 2 * kMiB - 1,
                                                 2 * kMiB,
                                                 2 * kMiB + 1,
                                                 2 * kMiB + 65536,
                                                 4 * kMiB + 1};
  return rc::gen::weightedOneOf<std::size_t>({
      {3, rc::gen::elementOf(edges)},
      {3, rc::gen::inRange<std::size_t>(1, 70000)},
      {1, past_small_sizes()},
  });
}

rc::Gen<std::size_t> any_alignment() {
  return rc::gen::map(rc::gen::inRange(0, 23), [](int shift) { return std::size_t{1} << shift; });
}

struct Model {
  struct Block {
    std::size_t bytes;
    std::size_t align;
    std::uint8_t pattern;
  };
  std::map<int, Block> live;
  int next = 0;

  [[nodiscard]] std::size_t live_bytes() const {
    std::size_t total = 0;
    for (const auto& [id, block] : live) total += block.bytes;
    return total;
  }
};

struct System {
  System(Adapter& under_test) : adapter(under_test), allocator(under_test.make_allocator()) {}
  ~System() {
    for (const auto& [id, ptr] : ptrs) (void)allocator->release(ptr, sizes.at(id).first, sizes.at(id).second);
  }
  System(const System&) = delete;
  System& operator=(const System&) = delete;

  [[nodiscard]] bool intact(int id, std::uint8_t pattern) {
    return reads_as(adapter.memory(), ptrs.at(id), sizes.at(id).first, pattern);
  }

  Adapter& adapter;
  std::shared_ptr<DeviceAllocator> allocator;
  std::map<int, void*> ptrs;
  std::map<int, std::pair<std::size_t, std::size_t>> sizes;
};

using Command = rc::state::Command<Model, System>;

struct Allocate final : Command {
  std::size_t bytes = *edge_biased_size();
  std::size_t align = *any_alignment();
  explicit Allocate(const Model&) {}
  void checkPreconditions(const Model& model) const override { RC_PRE(model.live_bytes() + bytes <= kLiveBudget); }
  void apply(Model& model) const override {
    model.live[model.next] = {bytes, align, static_cast<std::uint8_t>(model.next * 37 + 11)};
    ++model.next;
  }
  void run(const Model& model, System& system) const override {
    auto ptr = system.allocator->allocate(bytes, align);
    ORTMEM_CTS_RC_PRECONDITION(ptr.has_value());
    const auto address = reinterpret_cast<std::uintptr_t>(*ptr);
    system.ptrs[model.next] = *ptr;
    system.sizes[model.next] = {bytes, align};
    ORTMEM_CTS_RC_ASSERT("ALLOC-005", address != 0U);
    ORTMEM_CTS_RC_ASSERT("ALLOC-005", address % align == 0U);
    for (const auto& [id, other] : system.ptrs) {
      if (id == model.next) continue;
      const auto start = reinterpret_cast<std::uintptr_t>(other);
      ORTMEM_CTS_RC_ASSERT("ALLOC-006", address + bytes <= start || start + system.sizes.at(id).first <= address);
    }
    system.adapter.memory().fill(*ptr, bytes, static_cast<std::uint8_t>(model.next * 37 + 11));
  }
  void show(std::ostream& os) const override { os << "allocate(" << bytes << ", " << align << ")"; }
};

struct Check final : OnOneLive<Command> {
  using OnOneLive::OnOneLive;
  void apply(Model&) const override {}
  void run(const Model& model, System& system) const override {
    ORTMEM_CTS_RC_ASSERT("ALLOC-015", system.intact(id, model.live.at(id).pattern));
  }
  void show(std::ostream& os) const override { os << "check block " << id; }
};

struct Release final : OnOneLive<Command> {
  using OnOneLive::OnOneLive;
  void apply(Model& model) const override { model.live.erase(id); }
  void run(const Model& model, System& system) const override {
    const Model::Block& block = model.live.at(id);
    ORTMEM_CTS_RC_ASSERT("ALLOC-015", system.intact(id, block.pattern));
    void* ptr = system.ptrs.at(id);
    auto outcome = system.allocator->release(ptr, block.bytes, block.align);
    if (outcome.is_failed()) {
      // Nothing changed, so the same release must still work.
      outcome = system.allocator->release(ptr, block.bytes, block.align);
      ORTMEM_CTS_RC_ASSERT("ALLOC-018", !outcome.is_failed());
    }
    system.ptrs.erase(id);
    system.sizes.erase(id);
    if (const ResidualOwnership* residual = outcome.residual()) {
      ORTMEM_CTS_RC_ASSERT("ALLOC-019", residual->address == reinterpret_cast<std::uintptr_t>(ptr));
      ORTMEM_CTS_RC_ASSERT("ALLOC-019", residual->align == block.align);
      ORTMEM_CTS_RC_ASSERT("ALLOC-019", residual->retained_bytes <= block.bytes);
      return;
    }
    ORTMEM_CTS_RC_ASSERT("ALLOC-017", outcome.accounting() != nullptr);
    ORTMEM_CTS_RC_ASSERT("ALLOC-017", outcome.accounting()->allocation_bytes == block.bytes);
    // Released now: a second release of it names no live allocation. (Done
    // at once, before anything else could reuse the address.)
    ORTMEM_CTS_RC_ASSERT("ALLOC-021", system.allocator->release(ptr, block.bytes, block.align).is_failed());
  }
  void show(std::ostream& os) const override { os << "release block " << id; }
};

struct MismatchedRelease final : OnOneLive<Command> {
  int how = *rc::gen::inRange(0, 4);
  using OnOneLive::OnOneLive;
  void apply(Model&) const override {}
  void run(const Model& model, System& system) const override {
    const Model::Block& block = model.live.at(id);
    auto* ptr = static_cast<unsigned char*>(system.ptrs.at(id));
    std::size_t bytes = block.bytes;
    std::size_t align = block.align;
    void* target = ptr;
    switch (how) {
      case 0: bytes += 1; break;
      case 1: bytes = bytes > 1 ? bytes - 1 : 2; break;
      case 2: align = align * 2; break;
      default:
        target = ptr + (block.bytes > 1 ? 1 : 0);
        bytes = block.bytes > 1 ? block.bytes - 1 : 2;
        break;
    }
    const auto outcome = system.allocator->release(target, bytes, align);
    ORTMEM_CTS_RC_ASSERT("ALLOC-020", outcome.is_failed());
    ORTMEM_CTS_RC_ASSERT("ALLOC-018", system.intact(id, block.pattern));
  }
  void show(std::ostream& os) const override { os << "mismatched release (" << how << ") of block " << id; }
};

struct ImpossibleRequest final : Command {
  std::size_t bytes = *rc::gen::elementOf(
      std::vector<std::size_t>{(std::size_t{1} << 48) + 3, (std::size_t{1} << 50) + 12345, SIZE_MAX - 4095, SIZE_MAX});
  std::size_t align = *any_alignment();
  explicit ImpossibleRequest(const Model&) {}
  void apply(Model&) const override {}
  void run(const Model&, System& system) const override {
    auto ptr = system.allocator->allocate(bytes, align);
    if (ptr) system.allocator->deallocate(*ptr, bytes, align);
    ORTMEM_CTS_RC_ASSERT(bytes > SIZE_MAX - 8 * kMiB ? "ALLOC-008" : "ALLOC-009", !ptr.has_value());
    ORTMEM_CTS_RC_ASSERT("ALLOC-001", ptr.error().requested() == bytes);
    ORTMEM_CTS_RC_ASSERT("ALLOC-003", ptr.error().message().find(std::to_string(bytes)) != std::string::npos);
  }
  void show(std::ostream& os) const override { os << "allocate(" << bytes << ", " << align << ") (cannot fit)"; }
};

using AllocatorModel = AdapterSuite;

TEST_P(AllocatorModel, EveryStepOfARandomSequenceMatchesTheModel) {
  covers("ALLOC-001", "ALLOC-003", "ALLOC-005", "ALLOC-006", "ALLOC-008", "ALLOC-009", "ALLOC-015", "ALLOC-017",
         "ALLOC-018", "ALLOC-019", "ALLOC-020", "ALLOC-021");
  check_model([this] {
    System system(adapter());
    rc::state::check(Model{}, system,
                     rc::state::gen::execOneOfWithArgs<Allocate, Allocate, Allocate, Check, Release, Release,
                                                       MismatchedRelease, ImpossibleRequest>());
  });
}

ORTMEM_CTS_INSTANTIATE(AllocatorModel);

}  // namespace
}  // namespace ortmem::cts
