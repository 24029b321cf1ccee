// The reference host provider context against the PIN rules.
#include "ortmem/mechanism/provider_context.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <thread>
#include <type_traits>
#include <vector>

#include "support/requirements.hpp"

namespace ortmem::mechanism {
namespace {

using namespace std::chrono_literals;
using test_support::covers;
using State = ProviderContext::State;

class ProviderContextTest : public ::testing::Test {
 protected:
  ProviderContextIdentity new_identity() { return *issuer_.issue<ProviderContextIdentity>(); }
  IdentityIssuer issuer_ = *IdentityIssuer::create();
};

std::chrono::steady_clock::time_point in(std::chrono::milliseconds delay) {
  return std::chrono::steady_clock::now() + delay;
}

TEST_F(ProviderContextTest, SourceAndEveryPinNameTheSameContext) {
  covers("PIN-001");
  const auto identity = new_identity();
  ProviderContext context(identity);
  EXPECT_EQ(context.context(), identity);
  auto first = context.pin();
  auto second = context.pin();
  ASSERT_TRUE(first && second);
  EXPECT_EQ(first->context(), identity);
  EXPECT_EQ(second->context(), identity);
}

TEST_F(ProviderContextTest, DestroyingAPinReleasesExactlyItsClaim) {
  covers("PIN-002", "PIN-003");
  // A claim can be moved between holders but never duplicated.
  static_assert(!std::is_copy_constructible_v<ProviderContextPin>);
  static_assert(!std::is_copy_assignable_v<ProviderContextPin>);
  ProviderContext context(new_identity());
  {
    auto pin = context.pin();
    ASSERT_TRUE(pin);
    EXPECT_EQ(context.outstanding_pins(), 1U);
    ProviderContextPin moved = std::move(*pin);  // moving transfers the claim, it does not copy it
    EXPECT_FALSE(pin->holds_claim());
    EXPECT_EQ(context.outstanding_pins(), 1U);
    moved.reset();
    EXPECT_EQ(context.outstanding_pins(), 0U);
    moved.reset();  // releasing twice is a no-op, never a second decrement
    EXPECT_EQ(context.outstanding_pins(), 0U);
  }
  EXPECT_EQ(context.outstanding_pins(), 0U);
}

TEST_F(ProviderContextTest, PinsAreRefusedOnceRetiringAndNeverGrantedAgain) {
  covers("PIN-004", "PIN-010");
  const auto identity = new_identity();
  ProviderContext context(identity);
  auto held = context.pin();
  ASSERT_TRUE(held);
  context.begin_retirement();
  for (int attempt = 0; attempt < 3; ++attempt) {
    auto refused = context.pin();
    ASSERT_FALSE(refused);
    EXPECT_EQ(refused.error(), (ProviderContextPinError{ProviderContextPinError::Kind::kContextUnavailable, identity}));
    EXPECT_NE(refused.error().message().find("is no longer accepting work"), std::string::npos);
  }
  EXPECT_EQ(context.outstanding_pins(), 1U) << "refusal must not disturb outstanding pins";
  held->reset();
  ASSERT_TRUE(context.try_teardown());
  EXPECT_EQ(context.state(), State::kTerminated);
  EXPECT_FALSE(context.pin()) << "a terminated context granted a pin";
}

TEST_F(ProviderContextTest, PinsAreRefusedAfterDeviceLossAndStatesNeverMoveBack) {
  covers("PIN-004");
  ProviderContext context(new_identity());
  context.mark_device_lost();
  context.begin_retirement();  // an earlier state: must not undo the loss
  EXPECT_EQ(context.state(), State::kDeviceLost);
  auto refused = context.pin();
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().kind, ProviderContextPinError::Kind::kContextUnavailable);
}

TEST_F(ProviderContextTest, OverflowIsRefusedNeverWrapped) {
  covers("PIN-005", "PIN-010");
  const auto identity = new_identity();
  ProviderContext context(identity, {.max_outstanding_pins = 3});
  std::vector<ProviderContextPin> pins;
  for (int i = 0; i < 3; ++i) pins.push_back(*context.pin());
  auto refused = context.pin();
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error(), (ProviderContextPinError{ProviderContextPinError::Kind::kPinCountOverflow, identity}));
  EXPECT_NE(refused.error().message().find("has too many outstanding pins"), std::string::npos);
  EXPECT_EQ(context.outstanding_pins(), 3U);
  pins.pop_back();
  EXPECT_TRUE(context.pin()) << "after one release there is room again";
}

TEST_F(ProviderContextTest, TeardownReportsBusyWhileAPinIsOutstanding) {
  covers("PIN-006");
  const auto identity = new_identity();
  ProviderContext context(identity);
  auto pin = context.pin();
  ASSERT_TRUE(pin);
  auto busy = context.try_teardown();
  ASSERT_FALSE(busy);
  EXPECT_EQ(busy.error().context, identity);
  EXPECT_EQ(busy.error().outstanding_pins, 1U);
  EXPECT_NE(busy.error().message().find("1 pin(s) are still outstanding"), std::string::npos);
  EXPECT_EQ(context.state(), State::kRetiring) << "teardown must not finish with a pin alive";
  pin->reset();
  EXPECT_TRUE(context.try_teardown());
  EXPECT_EQ(context.state(), State::kTerminated);
  EXPECT_TRUE(context.try_teardown()) << "teardown is idempotent once terminated";
}

TEST_F(ProviderContextTest, WaitingTeardownFinishesOnlyAfterTheLastPinIsReleased) {
  covers("PIN-006", "PIN-007");
  ProviderContext context(new_identity());
  auto pin = context.pin();
  ASSERT_TRUE(pin);
  std::atomic<bool> released{false};
  std::thread holder([&] {
    std::this_thread::sleep_for(50ms);
    released.store(true);
    pin->reset();
  });
  const auto finished = context.teardown(in(30s));
  EXPECT_TRUE(finished);
  EXPECT_TRUE(released.load()) << "teardown returned before the pin was released";
  holder.join();
}

TEST_F(ProviderContextTest, TeardownFromAThreadHoldingAPinEndsAtItsDeadline) {
  covers("PIN-008", "PIN-007");
  ProviderContext context(new_identity());
  auto pin = context.pin();
  ASSERT_TRUE(pin);
  const auto started = std::chrono::steady_clock::now();
  auto busy = context.teardown(in(50ms));
  ASSERT_FALSE(busy) << "teardown finished while this thread holds a pin";
  EXPECT_GE(std::chrono::steady_clock::now() - started, 50ms);
  EXPECT_EQ(busy.error().outstanding_pins, 1U);
}

TEST_F(ProviderContextTest, PinsMayOutliveTheContextObject) {
  covers("PIN-002");
  const auto identity = new_identity();
  auto context = std::make_unique<ProviderContext>(identity);
  auto pin = context->pin();
  ASSERT_TRUE(pin);
  context.reset();
  EXPECT_EQ(pin->context(), identity);
  pin->reset();  // frees the counter; asan reports a leak or a use after free otherwise
}

TEST_F(ProviderContextTest, ConcurrentAcquireAndReleaseKeepAnExactCount) {
  covers("PIN-009");
  ProviderContext context(new_identity());
  constexpr int kThreads = 8;
  constexpr int kRounds = 20000;
  constexpr int kHeldPerThread = 5;
  std::atomic<int> refusals{0};
  std::atomic<int> arrived{0};
  std::atomic<bool> checked{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      std::vector<ProviderContextPin> held;
      for (int round = 0; round < kRounds; ++round) {
        auto pin = context.pin();
        if (!pin) {
          refusals.fetch_add(1);
          continue;
        }
        if (round % 3 == 0) {
          auto second = std::move(*pin);  // moved claims count once
        }
      }
      for (int i = 0; i < kHeldPerThread; ++i) held.push_back(*context.pin());
      arrived.fetch_add(1);
      while (!checked.load()) std::this_thread::yield();
    });
  }
  while (arrived.load() < kThreads) std::this_thread::yield();
  EXPECT_EQ(context.outstanding_pins(), static_cast<std::uint64_t>(kThreads * kHeldPerThread));
  checked.store(true);
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(refusals.load(), 0);
  EXPECT_EQ(context.outstanding_pins(), 0U);
}

TEST_F(ProviderContextTest, ConcurrentTeardownNeverFinishesWithAPinAlive) {
  covers("PIN-006", "PIN-009", "PIN-004");
  for (int trial = 0; trial < 20; ++trial) {
    ProviderContext context(new_identity());
    std::atomic<int> alive{0};
    std::atomic<bool> granted_after_teardown{false};
    std::atomic<bool> torn_down{false};
    std::vector<std::thread> workers;
    for (int t = 0; t < 4; ++t) {
      workers.emplace_back([&] {
        for (int round = 0; round < 2000; ++round) {
          const bool was_torn_down = torn_down.load();
          auto pin = context.pin();
          if (!pin) continue;
          if (was_torn_down) granted_after_teardown.store(true);
          alive.fetch_add(1);
          std::this_thread::yield();
          alive.fetch_sub(1);  // before the release, so teardown must see it
        }
      });
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200 * trial));
    ASSERT_TRUE(context.teardown(in(30s)));
    EXPECT_EQ(alive.load(), 0) << "teardown finished while a pin was alive (trial " << trial << ")";
    torn_down.store(true);
    for (auto& worker : workers) worker.join();
    EXPECT_FALSE(granted_after_teardown.load());
    EXPECT_EQ(context.outstanding_pins(), 0U);
  }
}

}  // namespace
}  // namespace ortmem::mechanism
