// The release vocabulary: states, predicates and outcomes.
#include "ortmem/release_outcome.hpp"

#include <gtest/gtest.h>

#include "support/requirements.hpp"

namespace ortmem {
namespace {

using test_support::covers;
using State = AllocationReleaseState;

struct Predicates {
  State state;
  bool retains;
  bool permits_call;
  bool terminal;
};

TEST(ReleaseState, PredicatesMatchTheContractForEveryState) {
  covers("REL-001");
  const Predicates expected[] = {
      {State::kLive, true, true, false},
      {State::kQueued, true, true, false},
      {State::kPartiallyUnmapped, true, false, true},
      {State::kReleased, false, false, true},
      {State::kDeviceLost, true, false, true},
      {State::kQuarantined, true, false, true},
  };
  for (const auto& row : expected) {
    SCOPED_TRACE(std::string(state_name(row.state)));
    EXPECT_EQ(retains_ownership(row.state), row.retains);
    EXPECT_EQ(permits_allocator_call(row.state), row.permits_call);
    EXPECT_EQ(is_terminal(row.state), row.terminal);
  }
}

TEST(ReleaseOutcome, CompleteWithZeroUnmappedBytesIsASuccess) {
  covers("ALLOC-017");
  const auto outcome = AllocationReleaseOutcome::complete(ReleaseAccounting::eager(64));
  EXPECT_TRUE(outcome.is_complete());
  EXPECT_EQ(outcome.state(), State::kReleased);
  EXPECT_EQ(outcome.unmapped_bytes(), 0U);
  EXPECT_EQ(outcome.residual(), nullptr);
  EXPECT_EQ(outcome.failure(), nullptr);
}

TEST(ReleaseOutcome, FailedMeansStillLiveAndCarriesNoAccounting) {
  covers("ALLOC-018");
  const auto outcome = AllocationReleaseOutcome::failed("busy");
  EXPECT_TRUE(outcome.is_failed());
  EXPECT_EQ(outcome.state(), State::kLive);
  EXPECT_EQ(outcome.accounting(), nullptr);
  ASSERT_NE(outcome.failure(), nullptr);
  EXPECT_EQ(outcome.failure()->reason(), "busy");
  EXPECT_NE(outcome.describe().find("nothing changed"), std::string::npos);
}

TEST(ReleaseOutcome, QuarantinedTakesItsStateFromTheResidual) {
  covers("ALLOC-019");
  const ResidualOwnership residual{State::kPartiallyUnmapped,
                                   QuarantineReason::of(QuarantineReason::Kind::kPartialRelease), 4096, 0x1000, 64};
  const auto outcome = AllocationReleaseOutcome::quarantined({8192, 4096}, residual);
  EXPECT_TRUE(outcome.is_quarantined());
  EXPECT_EQ(outcome.state(), State::kPartiallyUnmapped);
  EXPECT_EQ(*outcome.residual(), residual);
  EXPECT_EQ(outcome.unmapped_bytes(), 4096U);
  EXPECT_NE(outcome.describe().find("4096 bytes retained"), std::string::npos) << outcome.describe();
}

TEST(QuarantineReason, EnqueueRejectionsAreDistinguishedAndNamed) {
  covers("DQ-007");
  const auto full = QuarantineReason::enqueue_rejected(DeferredEnqueueRejection::kFull);
  const auto closed = QuarantineReason::enqueue_rejected(DeferredEnqueueRejection::kClosed);
  EXPECT_NE(full, closed);
  EXPECT_EQ(reason_name(full), "enqueue-rejected(full)");
  EXPECT_EQ(reason_name(QuarantineReason::of(QuarantineReason::Kind::kOwnerDropped)), "owner-dropped");
  EXPECT_EQ(reason_name(QuarantineReason::of(QuarantineReason::Kind::kAllocatorRefused)), "allocator-refused");
}

TEST(DeferredEnqueueRejection, TheFirstThatAppliesIsTheMostPermanent) {
  covers("DQ-006");
  using Rejection = DeferredEnqueueRejection;
  constexpr std::optional<std::size_t> kOne = 1;
  EXPECT_EQ(first_rejection(true, true, 1, kOne), Rejection::kDeviceLost);
  EXPECT_EQ(first_rejection(true, false, 0, kOne), Rejection::kDeviceLost);
  EXPECT_EQ(first_rejection(false, true, 1, kOne), Rejection::kClosed);
  EXPECT_EQ(first_rejection(false, false, 1, kOne), Rejection::kFull);
  EXPECT_EQ(first_rejection(false, false, 0, kOne), std::nullopt);
  EXPECT_EQ(first_rejection(false, false, 1'000'000, std::nullopt), std::nullopt) << "an unbounded queue is never full";
}

}  // namespace
}  // namespace ortmem
