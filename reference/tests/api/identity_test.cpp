// Registry-scoped opaque identities.
#include "ortmem/identity.hpp"

#include <gtest/gtest.h>

#include <set>
#include <thread>
#include <vector>

#include "support/requirements.hpp"

namespace ortmem {
namespace {

using test_support::covers;

// Runs `issue(thread, mine)` on four threads at once and gathers every serial
// they were handed, repeats included.
template <class IssueSerials>
std::vector<std::uint64_t> serials_from_four_threads(IssueSerials issue) {
  constexpr int kThreads = 4;
  std::vector<std::vector<std::uint64_t>> per_thread(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) threads.emplace_back([&, t] { issue(t, per_thread[t]); });
  for (auto& thread : threads) thread.join();
  std::vector<std::uint64_t> all;
  for (const auto& mine : per_thread) all.insert(all.end(), mine.begin(), mine.end());
  return all;
}

std::size_t distinct(const std::vector<std::uint64_t>& serials) {
  return std::set<std::uint64_t>(serials.begin(), serials.end()).size();
}

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
  const auto serials = serials_from_four_threads([&](int, std::vector<std::uint64_t>& mine) {
    for (int i = 0; i < 5000; ++i) mine.push_back(issuer.issue<BindingId>()->opaque().serial());
  });
  EXPECT_EQ(serials.size(), 20000U);
  EXPECT_EQ(distinct(serials), serials.size()) << "a serial was handed out twice";
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
  // Even threads issue single serials, odd ones reserve blocks of 7, all at once.
  const auto serials = serials_from_four_threads([&](int thread, std::vector<std::uint64_t>& mine) {
    for (int i = 0; i < 500; ++i) {
      if (thread % 2 == 0) {
        mine.push_back(issuer.issue<BindingId>()->opaque().serial());
        continue;
      }
      auto block = *issuer.reserve(7);
      for (AllocationGeneration generation; block.take(generation);) mine.push_back(generation.opaque().serial());
    }
  });
  EXPECT_EQ(serials.size(), 2U * 500U + 2U * 500U * 7U);
  EXPECT_EQ(distinct(serials), serials.size()) << "a serial was handed out twice";
}

}  // namespace
}  // namespace ortmem
