// Registry-scoped opaque identities.
#include "ortmem/identity.hpp"

#include <gtest/gtest.h>

#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "support/requirements.hpp"

namespace ortmem {
namespace {

using testing::covers;

TEST(IdentityIssuer, IssuesDistinctIdentitiesThatNameTheirIssuer) {
  covers("BIND-001");
  auto issuer = *IdentityIssuer::create();
  auto other = *IdentityIssuer::create();
  const auto a = *issuer.issue<MechanismIdentity>();
  const auto b = *issuer.issue<MechanismIdentity>();
  EXPECT_NE(a, b);
  EXPECT_TRUE(issuer.issued(a));
  EXPECT_FALSE(other.issued(a)) << "an identity from another registry must read as foreign";
  EXPECT_FALSE(issuer.issued(MechanismIdentity{})) << "a default identity names nothing";
}

TEST(IdentityIssuer, ExhaustionIsAnErrorNotAWrap) {
  covers("BIND-003");
  auto issuer = *IdentityIssuer::create_starting_at(~std::uint64_t{0} - 2);
  EXPECT_TRUE(issuer.issue<BindingId>());
  EXPECT_TRUE(issuer.issue<BindingId>());
  EXPECT_FALSE(issuer.issue<BindingId>());
  EXPECT_FALSE(issuer.issue<BindingId>()) << "stays exhausted";
}

TEST(IdentityIssuer, ConcurrentIssueNeverRepeats) {
  covers("BIND-001");
  auto issuer = *IdentityIssuer::create();
  std::mutex mutex;
  std::set<std::uint64_t> serials;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      std::vector<std::uint64_t> mine;
      for (int i = 0; i < 5000; ++i) mine.push_back(issuer.issue<BindingId>()->opaque().serial());
      const std::lock_guard lock(mutex);
      serials.insert(mine.begin(), mine.end());
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(serials.size(), 20000U);
}

TEST(IdentityIssuer, ABlockIsShortenedNearExhaustionAndThenRefused) {
  covers("BIND-003");
  auto issuer = *IdentityIssuer::create_starting_at(~std::uint64_t{0} - 2);
  auto block = *issuer.reserve(256);
  AllocationGeneration first;
  AllocationGeneration second;
  AllocationGeneration none;
  ASSERT_TRUE(block.take(first));
  ASSERT_TRUE(block.take(second));
  EXPECT_FALSE(block.take(none)) << "only the two serials left before the top were granted";
  EXPECT_NE(first, second);
  EXPECT_FALSE(issuer.reserve(1)) << "nothing is left to reserve";
  EXPECT_FALSE(issuer.issue<BindingId>()) << "a block takes serials from the same space as single issues";
}

TEST(IdentityIssuer, BlocksAndSingleIssuesNeverOverlapAcrossThreads) {
  covers("BIND-001");
  auto issuer = *IdentityIssuer::create();
  std::mutex mutex;
  std::set<std::uint64_t> serials;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::vector<std::uint64_t> mine;
      for (int i = 0; i < 500; ++i) {
        if (t % 2 == 0) {
          mine.push_back(issuer.issue<BindingId>()->opaque().serial());
          continue;
        }
        auto block = *issuer.reserve(7);
        for (AllocationGeneration generation; block.take(generation);) mine.push_back(generation.opaque().serial());
      }
      const std::lock_guard lock(mutex);
      serials.insert(mine.begin(), mine.end());
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(serials.size(), 2U * 500U + 2U * 500U * 7U) << "a serial was handed out twice";
}

}  // namespace
}  // namespace ortmem
