#include "run.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <set>
#include <thread>

#include "environment.hpp"
#include "isolation.hpp"
#include "ortmem/cts/adapter_registry.hpp"
#include "ortmem/cts/spec_catalog.hpp"
#include "ortmem/report/report.hpp"
#include "result_collector.hpp"

#ifndef ORTMEM_KIT_VERSION
#define ORTMEM_KIT_VERSION "unknown"
#endif
#ifndef ORTMEM_GIT_SHA
#define ORTMEM_GIT_SHA "unknown"
#endif

namespace ortmem::cts {
namespace {

std::string join(const std::vector<std::string>& parts, const std::string& separator) {
  std::string joined;
  for (const auto& part : parts) joined += (joined.empty() ? "" : separator) + part;
  return joined;
}

std::string profile_of(Capability capability) {
  switch (capability) {
    case Capability::kVirtualBacking: return "virtual";
    case Capability::kSharedMapping: return "shared";
    case Capability::kContextPins: return "pins";
    case Capability::kDeferredQueue: return "deferred";
    case Capability::kFaultInjection: return "";
  }
  return "";
}

nlohmann::json adapter_json(const AdapterInfo& info) {
  std::vector<std::string> capabilities;
  for (Capability capability : info.capabilities) capabilities.emplace_back(capability_name(capability));
  return {{"name", info.name},
          {"version", info.version},
          {"vendor", info.vendor},
          {"device", to_string(info.device)},
          {"capabilities", capabilities}};
}

void print_summary(const report::Judgement& judgement, const std::vector<report::TestResult>& tests) {
  std::cout << "verdict: " << to_string(judgement.verdict.overall) << '\n';
  for (const auto& profile : judgement.verdict.profiles) {
    std::cout << "  " << profile.name << ": " << to_string(profile.result);
    for (const auto& [status, count] : profile.counts) std::cout << "  " << status << " " << count;
    if (!profile.note.empty()) std::cout << "  (" << profile.note << ")";
    std::cout << '\n';
  }
  for (const auto& requirement : judgement.requirements) {
    if (requirement.status != report::RequirementStatus::kFail) continue;
    std::string first_failure;
    for (const auto& test : tests) {
      const bool names = std::find(test.requirements.begin(), test.requirements.end(), requirement.requirement.id) !=
                         test.requirements.end();
      if (names && !test.failures.empty()) {
        first_failure = test.id + ": " + test.failures.front().message.substr(0, 300);
        break;
      }
    }
    std::cout << "  FAIL " << requirement.requirement.id << " (" << requirement.requirement.title << ") "
              << first_failure << '\n';
  }
}

// Everything the report needs that is known before the first test runs.
struct RunContext {
  const RunOptions& options;
  AdapterInfo info;
  std::uint64_t seed;
  std::string start;
  std::chrono::steady_clock::time_point started;
};

// Judges, prints, writes the report and returns the exit status. Safe to call
// from the watchdog thread: it touches nothing a stuck test could hold.
int finish(const RunContext& context, std::vector<report::TestResult> tests) {
  const RunOptions& options = context.options;
  if (tests.empty()) return usage_error("the filter '" + options.filter + "' matched no test");
  std::vector<std::string> declared = {"core"};
  for (Capability capability : context.info.capabilities) {
    if (auto profile = profile_of(capability); !profile.empty()) declared.push_back(profile);
  }
  report::Report result;
  result.tests = std::move(tests);
  result.judgement = report::judge(spec_catalog().requirements, result.tests, declared, options.profiles);
  result.kit = {{"name", "ortmem-cts"},
                {"version", ORTMEM_KIT_VERSION},
                {"git_sha", ORTMEM_GIT_SHA},
                {"spec_version", spec_catalog().version}};
  result.adapter = adapter_json(context.info);
  result.environment = describe_environment();
  result.run = {
      {"id", std::to_string(std::chrono::system_clock::now().time_since_epoch().count()) + "-" + std::to_string(getpid())},
      {"start", context.start},
      {"end", iso_now()},
      {"duration_s", std::chrono::duration<double>(std::chrono::steady_clock::now() - context.started).count()},
      {"seed", context.seed},
      {"filter", options.filter},
      {"profiles", options.profiles.empty() ? report::all_profiles() : options.profiles},
      {"isolation", options.isolate ? "test" : "none"},
      {"timeout_s", options.timeout_s},
      {"command_line", join(options.command_line, " ")}};

  print_summary(result.judgement, result.tests);
  if (!options.report_path.empty()) {
    if (auto error = report::write_atomically(options.report_path, report::to_json(result))) return usage_error(*error);
    std::cout << "report: " << options.report_path << '\n';
  }
  std::cout.flush();
  if (result.judgement.verdict.overall == report::ProfileResult::kConformant) return kExitConformant;
  std::cerr << "ortmem-cts: adapter '" << options.adapter << "' is " << to_string(result.judgement.verdict.overall)
            << " (seed " << context.seed << ")\n";
  return kExitNotConformant;
}

// '*' and '?' wildcards, as in GoogleTest filters.
bool glob_matches(std::string_view pattern, std::string_view text) {
  if (pattern.empty()) return text.empty();
  if (pattern.front() == '*') {
    for (std::size_t skip = 0; skip <= text.size(); ++skip) {
      if (glob_matches(pattern.substr(1), text.substr(skip))) return true;
    }
    return false;
  }
  return !text.empty() && (pattern.front() == '?' || pattern.front() == text.front()) &&
         glob_matches(pattern.substr(1), text.substr(1));
}

bool any_matches(std::string_view patterns, std::string_view text) {
  while (!patterns.empty()) {
    const std::size_t colon = patterns.find(':');
    if (glob_matches(patterns.substr(0, colon), text)) return true;
    if (colon == std::string_view::npos) break;
    patterns.remove_prefix(colon + 1);
  }
  return false;
}

// GoogleTest's filter semantics: POSITIVE[-NEGATIVE], each ':'-separated globs.
bool filter_selects(std::string_view filter, std::string_view id) {
  const std::size_t dash = filter.find('-');
  std::string_view positive = filter.substr(0, dash);
  if (positive.empty()) positive = "*";
  const std::string_view negative = dash == std::string_view::npos ? std::string_view{} : filter.substr(dash + 1);
  return any_matches(positive, id) && !any_matches(negative, id);
}

// The tests the filter selects, in run order.
std::vector<std::string> selected_tests(const std::string& filter) {
  std::vector<std::string> ids;
  const auto& unit = *::testing::UnitTest::GetInstance();
  for (int i = 0; i < unit.total_test_suite_count(); ++i) {
    const auto& suite = *unit.GetTestSuite(i);
    for (int j = 0; j < suite.total_test_count(); ++j) {
      std::string id = test_id(*suite.GetTestInfo(j));
      if (filter_selects(filter, id)) ids.push_back(std::move(id));
    }
  }
  return ids;
}

int run_isolated(const RunContext& context) {
  const RunOptions& options = context.options;
  std::vector<report::TestResult> results;
  const std::string scratch = std::filesystem::temp_directory_path() / ("ortmem-cts-" + std::to_string(getpid()));
  const std::vector<std::string> tests = selected_tests(options.filter);
  const bool progress = isatty(STDERR_FILENO) != 0;
  for (std::size_t i = 0; i < tests.size(); ++i) {
    const std::string report_path = scratch + "-" + std::to_string(i) + ".json";
    ChildRun child{{"run", "--adapter", options.adapter, "--filter", tests[i], "--seed", std::to_string(context.seed),
                    "--timeout", std::to_string(options.timeout_s), "--report", report_path},
                   report_path,
                   tests[i],
                   // The child stops itself at its own timeout; the margin covers its start-up.
                   options.timeout_s + 5};
    for (auto& result : run_in_child(child)) results.push_back(std::move(result));
    if (progress) std::cerr << "\r" << i + 1 << "/" << tests.size() << " tests" << std::flush;
  }
  if (progress) std::cerr << '\n';
  return finish(context, std::move(results));
}

int run_in_process(const RunContext& context, ResultCollector& collector) {
  std::atomic<bool> done{false};
  // The watchdog ends the whole run at the first test past its deadline: a
  // blocked test cannot be stopped from inside the process, but the report
  // can still be written and say which test hung.
  std::thread watchdog([&] {
    while (!done.load()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      const auto running = collector.running();
      if (!running) continue;
      const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - running->started).count();
      if (elapsed < context.options.timeout_s) continue;
      collector.record_timeout(context.options.timeout_s);
      std::_Exit(finish(context, collector.results()) == kExitUsage ? kExitUsage : kExitNotConformant);
    }
  });
  // The verdict comes from the collected results, not GoogleTest's status.
  [[maybe_unused]] const int gtest_status = RUN_ALL_TESTS();
  done = true;
  watchdog.join();
  return finish(context, collector.results());
}

}  // namespace

int usage_error(const std::string& reason) {
  std::cerr << "ortmem-cts: " << reason << '\n';
  return kExitUsage;
}

int run(const RunOptions& options) {
  auto adapter = make_adapter(options.adapter);
  if (!adapter) {
    return usage_error("unknown adapter '" + options.adapter + "'; known adapters: " + join(registered_adapters(), ", "));
  }
  const Availability availability = adapter->available();
  if (!availability.available) {
    return usage_error("adapter '" + options.adapter + "' cannot run here: " + availability.reason);
  }
  for (const auto& profile : options.profiles) {
    const auto& known = report::all_profiles();
    if (std::find(known.begin(), known.end(), profile) == known.end()) {
      return usage_error("unknown profile '" + profile + "'; profiles are " + join(known, ", "));
    }
  }
  if (!(options.timeout_s > 0)) return usage_error("--timeout must be a positive number of seconds");
  if (!options.report_path.empty()) {
    // Refuse before running anything if the report could never be written.
    const std::string probe_path = options.report_path + ".probe";
    if (!std::ofstream(probe_path)) {
      return usage_error("cannot write the report to '" + options.report_path +
                         "': check that the directory exists and is writable");
    }
    std::remove(probe_path.c_str());
  }

  RunContext context{options, adapter->info(), options.seed.value_or(std::random_device{}() | 1u), iso_now(),
                     std::chrono::steady_clock::now()};
  // RapidCheck reads its parameters from the environment on first use.
  ::setenv("RC_PARAMS", ("seed=" + std::to_string(context.seed) + " verbose_progress=0 verbose_shrinking=0").c_str(), 1);
  select_adapters({options.adapter});

  std::string program = options.command_line.empty() ? "ortmem-cts" : options.command_line.front();
  std::string filter_flag = "--gtest_filter=" + options.filter;
  int gtest_argc = 2;
  char* gtest_argv[] = {program.data(), filter_flag.data(), nullptr};
  ::testing::InitGoogleTest(&gtest_argc, gtest_argv);
  if (options.isolate) return run_isolated(context);

  auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
  delete listeners.Release(listeners.default_result_printer());
  auto* collector = new ResultCollector(options.adapter, context.seed, isatty(STDERR_FILENO) != 0);
  listeners.Append(collector);  // owned by GoogleTest from here
  return run_in_process(context, *collector);
}

}  // namespace ortmem::cts
