// The deferred queues' FIFO: order, reuse of its storage, compaction, and
// entries that cannot be copied.
#include "mechanism/reusable_fifo.hpp"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

namespace ortmem::mechanism::detail {
namespace {

std::vector<int> contents(ReusableFifo<std::unique_ptr<int>>& fifo) {
  std::vector<int> values;
  for (const auto& item : fifo) values.push_back(*item);
  return values;
}

TEST(ReusableFifo, PopsInTheOrderItemsWereAppended) {
  ReusableFifo<std::unique_ptr<int>> fifo;
  for (int i = 0; i < 5; ++i) fifo.emplace_back(std::make_unique<int>(i));
  EXPECT_EQ(fifo.size(), 5U);
  EXPECT_EQ(*fifo.pop_front(), 0);
  EXPECT_EQ(*fifo.pop_front(), 1);
  EXPECT_EQ(contents(fifo), (std::vector<int>{2, 3, 4})) << "iteration must cover exactly the entries not yet popped";
  EXPECT_EQ(*fifo.front(), 2);
}

TEST(ReusableFifo, AQueueThatDrainsKeepsOneSlotNotAGrowingArray) {
  ReusableFifo<std::unique_ptr<int>> fifo;
  // Fill one, drain one, many times: the storage is reused, never walked forward.
  for (int i = 0; i < 100000; ++i) {
    fifo.emplace_back(std::make_unique<int>(i));
    ASSERT_EQ(*fifo.pop_front(), i);
    ASSERT_TRUE(fifo.empty());
  }
  EXPECT_LE(fifo.capacity(), 1U) << "a FIFO that empties after every entry must not keep growing";
  EXPECT_TRUE(contents(fifo).empty());
}

TEST(ReusableFifo, ABacklogThatNeverDrainsStaysInOrderThroughCompaction) {
  ReusableFifo<std::unique_ptr<int>> fifo;
  int next_in = 0;
  int next_out = 0;
  constexpr int kBacklog = 100;
  for (; next_in < kBacklog; ++next_in) fifo.emplace_back(std::make_unique<int>(next_in));
  // One in, one out: the FIFO never empties, so only compaction reclaims what was popped.
  for (int round = 0; round < 100000; ++round) {
    fifo.emplace_back(std::make_unique<int>(next_in++));
    ASSERT_EQ(*fifo.pop_front(), next_out++);
    ASSERT_LE(fifo.capacity(), 4U * kBacklog + 256U) << "popped entries were never reclaimed (round " << round << ")";
  }
  std::vector<int> expected;
  for (int i = next_out; i < next_in; ++i) expected.push_back(i);
  EXPECT_EQ(contents(fifo), expected);
}

TEST(ReusableFifo, SwapHandsOverOnlyTheLiveEntries) {
  ReusableFifo<std::unique_ptr<int>> fifo;
  for (int i = 0; i < 4; ++i) fifo.emplace_back(std::make_unique<int>(i));
  (void)fifo.pop_front();
  ReusableFifo<std::unique_ptr<int>> taken;
  taken.swap(fifo);
  EXPECT_TRUE(fifo.empty());
  EXPECT_EQ(contents(taken), (std::vector<int>{1, 2, 3}));
}

}  // namespace
}  // namespace ortmem::mechanism::detail
