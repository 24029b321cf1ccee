#include "child_protocol.hpp"

#include <unistd.h>

#include <cerrno>

#include "ortmem/report/report_json.hpp"

namespace ortmem::cts {
namespace {

void write_line(const nlohmann::json& event) {
  const std::string line = report::dump_json(event) + '\n';
  std::string_view rest = line;
  while (!rest.empty()) {
    const ssize_t written = ::write(kChildEventFd, rest.data(), rest.size());
    if (written < 0 && errno == EINTR) continue;
    if (written <= 0) return;  // the parent is gone; it will not read this anyway
    rest.remove_prefix(static_cast<std::size_t>(written));
  }
}

}  // namespace

void ChildEventWriter::test_started(const std::string& id) { write_line({{"start", id}}); }

void ChildEventWriter::test_finished(const report::TestResult& result) {
  write_line({{"end", report::to_json(result)}});
}

Expected<ChildEvent, std::string> parse_child_event(const std::string& line) {
  const auto event = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (event.is_discarded() || !event.is_object()) return fail("not a JSON object: " + line.substr(0, 200));
  if (const auto start = event.find("start"); start != event.end() && start->is_string()) {
    return ChildEvent{TestStarted{start->get<std::string>()}};
  }
  if (const auto end = event.find("end"); end != event.end()) {
    auto result = report::test_result_from_json(*end);
    if (!result) return fail(result.error());
    return ChildEvent{std::move(*result)};
  }
  return fail("neither a start nor an end event: " + line.substr(0, 200));
}

}  // namespace ortmem::cts
