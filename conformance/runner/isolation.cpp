#include "isolation.hpp"

#include <signal.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <iterator>
#include <thread>

#include <nlohmann/json.hpp>

#include "result_collector.hpp"

extern char** environ;

namespace ortmem::cts {
namespace {

report::TestResult single(const ChildRun& child, report::TestStatus status, std::string message, double duration) {
  report::TestResult result;
  result.id = child.test_id;
  // The child never reported, so the test's ids come from its source.
  result.requirements = static_requirements(child.test_id);
  result.status = status;
  result.duration_s = duration;
  result.failures.push_back({"", 0, std::move(message)});
  return result;
}

report::TestStatus status_from(const std::string& name) {
  using report::TestStatus;
  for (TestStatus status : {TestStatus::kPass, TestStatus::kFail, TestStatus::kNotApplicable, TestStatus::kSkipped,
                            TestStatus::kCrash, TestStatus::kTimeout, TestStatus::kWaived, TestStatus::kError}) {
    if (report::to_string(status) == name) return status;
  }
  return TestStatus::kError;
}

std::vector<report::TestResult> read_results(const std::string& path) {
  std::ifstream in(path);
  if (!in) return {};
  const auto document = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (document.is_discarded()) return {};
  std::vector<report::TestResult> results;
  for (const auto& test : document.value("tests", nlohmann::json::array())) {
    report::TestResult result;
    result.id = test.value("id", "");
    result.requirements = test.value("requirements", std::vector<std::string>{});
    result.status = status_from(test.value("status", "error"));
    result.duration_s = test.value("duration_s", 0.0);
    result.skip_reason = test.value("skip_reason", "");
    for (const auto& failure : test.value("failures", nlohmann::json::array())) {
      result.failures.push_back({failure.value("file", ""), failure.value("line", 0), failure.value("message", "")});
    }
    if (test.contains("seed")) result.seed = test["seed"].get<std::uint64_t>();
    if (test.contains("reproduce")) result.reproduce = test["reproduce"].get<std::string>();
    results.push_back(std::move(result));
  }
  return results;
}

}  // namespace

std::vector<report::TestResult> run_in_child(const ChildRun& child) {
  std::vector<std::string> arguments = {"/proc/self/exe"};
  arguments.insert(arguments.end(), child.arguments.begin(), child.arguments.end());
  std::vector<char*> argv;
  for (auto& argument : arguments) argv.push_back(argument.data());
  argv.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  // The child's own summary would interleave with ours; its report is what we read.
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  // Its stderr is kept for the failure message of a crash (sanitizer reports, aborts).
  const std::string stderr_path = child.report_path + ".stderr";
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  pid_t pid = 0;
  const auto started = std::chrono::steady_clock::now();
  const int spawned = posix_spawn(&pid, "/proc/self/exe", &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  const auto stderr_tail = [&stderr_path] {
    std::ifstream in(stderr_path);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::remove(stderr_path.c_str());
    constexpr std::size_t kTail = 2000;
    if (text.size() > kTail) text = "..." + text.substr(text.size() - kTail);
    return text.empty() ? std::string() : "; its last output:\n" + text;
  };
  if (spawned != 0) {
    std::remove(stderr_path.c_str());
    return {single(child, report::TestStatus::kError, std::string("cannot start the test process: ") + std::strerror(spawned), 0)};
  }
  const auto deadline = started + std::chrono::duration<double>(child.timeout_s);
  int status = 0;
  for (;;) {
    const pid_t done = waitpid(pid, &status, WNOHANG);
    if (done == pid) break;
    if (std::chrono::steady_clock::now() >= deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      std::remove(child.report_path.c_str());
      return {single(child, report::TestStatus::kTimeout,
                     "the test did not finish within " + std::to_string(child.timeout_s) + " s and was killed" +
                         stderr_tail(),
                     child.timeout_s)};
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  const double duration = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  if (WIFSIGNALED(status)) {
    std::remove(child.report_path.c_str());
    const int signal_number = WTERMSIG(status);
    return {single(child, report::TestStatus::kCrash,
                   std::string("the test process died of signal ") + std::to_string(signal_number) + " (" +
                       strsignal(signal_number) + ")" + stderr_tail(),
                   duration)};
  }
  auto results = read_results(child.report_path);
  std::remove(child.report_path.c_str());
  if (results.empty()) {
    return {single(child, report::TestStatus::kError,
                   "the test process exited with status " + std::to_string(WEXITSTATUS(status)) +
                       " without writing a report" + stderr_tail(),
                   duration)};
  }
  std::remove(stderr_path.c_str());
  return results;
}

}  // namespace ortmem::cts
