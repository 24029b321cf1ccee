// child_protocol.hpp: how a test child tells the parent what it is doing.
//
// An isolated run's children write one JSON line per event to an inherited
// pipe: {"start": ID} before a test runs and {"end": RESULT} after it. The
// parent needs the start line to know which test a crash or a hang belongs
// to and when that test's deadline began; it needs nothing else from the
// child, so the child's stdout goes nowhere and its stderr only feeds the
// message of a crash.
#pragma once

#include <string>
#include <variant>

#include "ortmem/expected.hpp"
#include "result_collector.hpp"

namespace ortmem::cts {

// The fd a child writes its events to.
inline constexpr int kChildEventFd = 3;

// The child's side: a sink writing events to kChildEventFd.
class ChildEventWriter final : public ResultSink {
 public:
  void test_started(const std::string& id) override;
  void test_finished(const report::TestResult& result) override;
};

struct TestStarted {
  std::string id;
};
using ChildEvent = std::variant<TestStarted, report::TestResult>;

// The parent's side: one line (without its newline) back into an event.
[[nodiscard]] Expected<ChildEvent, std::string> parse_child_event(const std::string& line);

}  // namespace ortmem::cts
