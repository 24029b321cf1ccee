// The host allocator's live-block table against a std::unordered_map model:
// long random sequences over a few addresses that collide and wrap, growth,
// removal inside runs, and growth refused for want of memory.
#include "host/live_block_table.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <unordered_map>
#include <vector>

#include "support/failing_new.hpp"

namespace ortmem::detail {
namespace {

using Block = LiveBlockTable::Block;

void expect_same(LiveBlockTable& table, const std::unordered_map<std::uintptr_t, Block>& model,
                 const std::vector<std::uintptr_t>& universe) {
  ASSERT_EQ(table.size(), model.size());
  for (const std::uintptr_t address : universe) {
    const Block* found = table.find(address);
    const auto expected = model.find(address);
    if (expected == model.end()) {
      ASSERT_EQ(found, nullptr) << "address " << address << " was removed or never inserted";
    } else {
      ASSERT_NE(found, nullptr) << "address " << address << " is live but not found";
      EXPECT_EQ(found->bytes, expected->second.bytes);
      EXPECT_EQ(found->align, expected->second.align);
    }
  }
  std::size_t visited = 0;
  table.for_each([&](const Block& block) {
    ++visited;
    EXPECT_TRUE(model.contains(block.address)) << "for_each visited a removed block " << block.address;
  });
  EXPECT_EQ(visited, model.size());
}

// Universes from a handful of addresses (every run collides and wraps in a
// 16-slot table) to thousands (the table grows many times).
class LiveBlockTableModel : public ::testing::TestWithParam<std::size_t> {};

TEST_P(LiveBlockTableModel, AgreesWithAMapOverLongRandomSequences) {
  const std::size_t distinct = GetParam();
  std::vector<std::uintptr_t> universe;
  for (std::size_t i = 1; i <= distinct; ++i) universe.push_back(i * 16);
  std::mt19937_64 random(distinct);
  LiveBlockTable table;
  std::unordered_map<std::uintptr_t, Block> model;
  for (int step = 0; step < 20000; ++step) {
    const std::uintptr_t address = universe[random() % universe.size()];
    if (Block* found = table.find(address)) {
      table.erase(found);
      model.erase(address);
    } else {
      const Block block{address, static_cast<std::size_t>(random() % 4096), std::size_t{1} << (random() % 8)};
      ASSERT_TRUE(table.insert(block));
      model.emplace(address, block);
    }
    if (step % 97 == 0) expect_same(table, model, universe);
  }
  expect_same(table, model, universe);
  // Emptied in an order of its own, every lookup still ends.
  for (const std::uintptr_t address : universe) {
    if (Block* found = table.find(address)) table.erase(found);
    model.erase(address);
  }
  expect_same(table, model, universe);
}

INSTANTIATE_TEST_SUITE_P(Universes, LiveBlockTableModel, ::testing::Values(3, 12, 40, 1000, 5000));

TEST(LiveBlockTable, AGrowthTheHostCannotAffordChangesNothing) {
  LiveBlockTable table;
  std::unordered_map<std::uintptr_t, Block> model;
  std::vector<std::uintptr_t> universe;
  // An insert is refused, changing nothing, exactly when it needed memory:
  // the first (the table has no slots yet) and the one past three quarters
  // of each capacity. Which inserts those are is the table's business, so
  // every insert is tried once without memory first.
  int refused = 0;
  for (std::uintptr_t address = 16; address <= 16 * 200; address += 16) {
    universe.push_back(address);
    test_support::fail_next_allocations_on_this_thread(1);
    const bool inserted = table.insert({address, address, 16});
    const bool needed_memory = test_support::unconsumed_allocation_failures() == 0;
    test_support::fail_next_allocations_on_this_thread(0);
    ASSERT_NE(inserted, needed_memory) << "insert of " << address;
    if (!inserted) {
      ++refused;
      expect_same(table, model, universe);
      ASSERT_TRUE(table.insert({address, address, 16})) << "with memory again, the same insert succeeds";
    }
    model.emplace(address, Block{address, address, 16});
  }
  expect_same(table, model, universe);
  EXPECT_GE(refused, 5) << "200 blocks grow a 16-slot table at least four times";
}

TEST(LiveBlockTable, SwapHandsOverEveryBlock) {
  LiveBlockTable table;
  for (std::uintptr_t address = 16; address <= 16 * 100; address += 16) ASSERT_TRUE(table.insert({address, 8, 8}));
  LiveBlockTable taken;
  taken.swap(table);
  EXPECT_EQ(table.size(), 0U);
  EXPECT_EQ(table.find(16), nullptr);
  EXPECT_EQ(taken.size(), 100U);
  EXPECT_NE(taken.find(16 * 100), nullptr);
}

}  // namespace
}  // namespace ortmem::detail
