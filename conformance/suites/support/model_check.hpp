// conformance/suites/support/model_check.hpp: runs a model-based (RapidCheck) property as a
// GoogleTest check, with its failure charged to the check that saw it.
#pragma once

#include <gtest/gtest.h>
#include <rapidcheck.h>

#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "support/suite.hpp"

namespace ortmem::cts {

// A key of `items` (a map's keys, or a set's elements) chosen at random: the
// object a command acts on. Discards the command when there is none.
template <class Items>
typename Items::key_type any_key(const Items& items) {
  RC_PRE(!items.empty());
  std::vector<typename Items::key_type> keys;
  keys.reserve(items.size());
  for (const auto& item : items) {
    if constexpr (requires { item.first; }) {
      keys.push_back(item.first);
    } else {
      keys.push_back(item);
    }
  }
  return *rc::gen::elementOf(keys);
}

// A command on one live object of the model (a key of `model.live`), chosen
// when the command is made; the command is discarded once it is gone.
template <class Base>
struct OnOneLive : Base {
  using Model = typename Base::Model;
  explicit OnOneLive(const Model& model) : id(any_key(model.live)) {}
  void checkPreconditions(const Model& model) const override { RC_PRE(model.live.contains(id)); }

  int id;
};

// A command that happens at most once in a run (a close, a device loss): it
// sets `flag` in the model, and is not chosen again once the flag is set.
template <class Base, auto flag>
struct HappensOnce : Base {
  using Model = typename Base::Model;
  void checkPreconditions(const Model& model) const override { RC_PRE(!(model.*flag)); }
  void apply(Model& model) const override { model.*flag = true; }
};

// In a model's command: fails, charged to `ids` (space-separated requirement
// ids), unless `seen` is what the model `expected`; the message gives both.
inline void expect_equal(const char* ids, const char* what, std::uint64_t seen, std::uint64_t expected) {
  if (seen != expected) {
    RC_FAIL(std::string(kChecksTag) + ids + "] " + what + ": " + std::to_string(seen) + ", the model says " +
            std::to_string(expected));
  }
}

// rc::detail::checkGTest, except for a failure that RapidCheck could not
// reproduce when it ran its smallest case once more to print it (a race the
// rerun missed, or a run after a rescue, which passes at once): that failure
// is still charged to the check that saw it, by the words of the last run
// that failed, instead of to every id of covers(). Every model-based suite
// runs its properties through this.
template <class Property>
void check_model(const Property& property) {
  std::string last_failure;
  bool last_run_failed = false;
  const auto recorded = [&] {
    last_run_failed = true;
    try {
      property();
    } catch (const rc::detail::CaseResult& result) {
      if (result.type == rc::detail::CaseResult::Type::Failure) last_failure = result.description;
      throw;
    }
    last_run_failed = false;
  };
  const ::testing::TestInfo* test = ::testing::UnitTest::GetInstance()->current_test_info();
  rc::detail::TestMetadata metadata;
  metadata.id = std::string(test->test_suite_name()) + "/" + test->name();
  metadata.description = test->name();
  const auto result = rc::detail::checkTestable(recorded, metadata);
  if (result.template is<rc::detail::SuccessResult>()) return;
  std::ostringstream message;
  rc::detail::printResultMessage(result, message);
  const std::string printed = message.str();
  const bool charged =
      printed.find(kChecksTag) != std::string::npos || printed.find(kPreconditionTag) != std::string::npos;
  if (!charged && !last_run_failed && !last_failure.empty()) {
    message << "\nThat case passed when run again; the last run that failed said:\n" << last_failure;
  }
  FAIL() << message.str() << std::endl;
}

}  // namespace ortmem::cts
