#include "run.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <future>
#include <iostream>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include "child_protocol.hpp"
#include "environment.hpp"
#include "inherited_settings.hpp"
#include "isolated_run.hpp"
#include "kit_identity.hpp"
#include "ortmem/cts/adapter_registry.hpp"
#include "spec_catalog.hpp"
#include "ortmem/report/expectations.hpp"
#include "ortmem/report/formats.hpp"
#include "ortmem/report/integrity.hpp"
#include "ortmem/report/journal.hpp"
#include "ortmem/report/report_file.hpp"
#include "ortmem/report/report_json.hpp"
#include "result_collector.hpp"
#include "run_recorder.hpp"
#include "stress_load.hpp"

namespace ortmem::cts {
namespace {

using Clock = std::chrono::steady_clock;

std::string join(const std::vector<std::string>& parts, const std::string& separator) {
  std::string joined;
  for (const auto& part : parts) joined += (joined.empty() ? "" : separator) + part;
  return joined;
}

std::string profile_of_requirement(std::string_view id) {
  static const std::map<std::string, std::string, std::less<>> profiles = [] {
    std::map<std::string, std::string, std::less<>> map;
    for (const auto& requirement : spec_catalog().requirements) map[requirement.id] = requirement.profile;
    return map;
  }();
  const auto found = profiles.find(id);
  return found == profiles.end() ? "" : found->second;
}

report::AdapterSection adapter_section(const AdapterInfo& info) {
  std::vector<std::string> capabilities;
  for (Capability capability : info.capabilities) capabilities.emplace_back(capability_name(capability));
  std::optional<report::AdapterOrigin> origin;
  if (const auto& from = info.loaded_from) {
    std::vector<std::string> controls;
    for (Control control : from->controls) controls.emplace_back(control_name(control));
    origin = report::AdapterOrigin{from->interface, from->path, from->sha256, from->mechanism, std::move(controls)};
  }
  return {info.name, info.version, info.vendor, to_string(info.device), capabilities, origin};
}

std::string isolation_name(Isolation isolation) {
  switch (isolation) {
    case Isolation::kNone: return "none";
    case Isolation::kGroup: return "group";
    case Isolation::kTest: return "test";
  }
  return "group";
}

// Everything known before the first test runs.
struct RunContext {
  const RunOptions& options;
  report::Report header;  // the report without tests
  Clock::time_point started;
  RunRecorder* recorder = nullptr;
  std::optional<report::SigningKey> signing_key;
  // Hashing the runner takes as long as certifying a host adapter, so it runs beside the tests.
  std::shared_future<std::string> binary_sha256;
};

bool report_to_stdout(const RunOptions& options) { return options.report_path == "-"; }

// The JUnit and CTRF views the run was asked for; the first error, if any.
std::optional<std::string> write_views(const RunOptions& options, const report::Report& result) {
  if (options.junit_path) {
    if (auto error = write_output(*options.junit_path, report::to_junit_xml(result))) return "--junit: " + *error;
  }
  if (options.ctrf_path) {
    if (auto error = write_output(*options.ctrf_path, report::dump_json(report::to_ctrf(result), 2) + '\n')) {
      return "--ctrf: " + *error;
    }
  }
  return std::nullopt;
}

// Judges, prints, writes the report and returns the exit status. The
// in-process watchdog calls it while a test is stuck: it takes the
// collector's and recorder's locks, which the stuck test does not hold (they
// are held only inside the listener's and sink's own calls).
int finish(const RunContext& context, std::vector<report::TestResult> tests, const std::string& interruption) {
  const RunOptions& options = context.options;
  report::Report result = context.header;
  result.tests = report::combine_repeats(tests);
  for (auto& test : result.tests) {
    if (test.runs > 1 && test.reproduce) *test.reproduce += " --repeat " + std::to_string(test.runs);
  }
  result.run.end = iso_now();
  result.run.duration_s = std::chrono::duration<double>(Clock::now() - context.started).count();
  result.run.scope.incomplete = !interruption.empty();
  result.run.interruption = interruption;
  result.kit.binary_sha256 = context.binary_sha256.get();
  // The expectations travel in the header's waivers (so a journal keeps them too).
  result = report::replay_waivers(result);
  report::judge_report(spec_catalog().requirements, result);

  std::ostream& out = report_to_stdout(options) ? std::cerr : std::cout;
  print_summary(result, out);
  bool keep_journal = false;
  int code = exit_code_for(result.judgement.verdict.overall);
  if (report_to_stdout(options)) {
    std::cout << report::sealed_report_text(result, context.signing_key);
  } else if (options.report_path) {
    if (auto error = report::write_report_file(*options.report_path, result, context.signing_key)) {
      keep_journal = true;  // the results survive in the journal
      code = usage_error(*error);
    } else {
      out << "report: " << *options.report_path << '\n';
    }
  }
  if (auto error = write_views(options, result)) code = usage_error(*error);
  if (context.recorder != nullptr) context.recorder->close(keep_journal);
  std::cout.flush();
  if (code != kExitConformant && code != kExitUsage) {
    std::cerr << "ortmem-cts: adapter '" << options.adapter << "' is " << to_string(result.judgement.verdict.overall)
              << " (seed " << result.run.seed << ")\n";
  }
  return code;
}

int run_in_process(RunContext& context, const std::vector<std::string>& tests, const ReproduceCommand& reproduce) {
  ::testing::GTEST_FLAG(filter) = join(tests, ":");
  ::testing::GTEST_FLAG(repeat) = context.options.repeat;
  auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
  delete listeners.Release(listeners.default_result_printer());
  auto* collector = new ResultCollector(reproduce, context.recorder);
  listeners.Append(collector);  // owned by GoogleTest from here
  std::atomic<bool> done{false};
  // The watchdog ends the whole run at the first test past its deadline: a
  // blocked test cannot be stopped from inside the process, but the report
  // can still be written and say which test hung.
  std::thread watchdog([&] {
    while (!done.load()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      context.recorder->heartbeat();
      const auto running = collector->running();
      if (!running) continue;
      const double elapsed = std::chrono::duration<double>(Clock::now() - running->started).count();
      if (elapsed < context.options.timeout_s) continue;
      if (!collector->record_timeout(running->id, context.options.timeout_s)) continue;  // it ended meanwhile
      // The tests after it never run: the run is incomplete as well as failed.
      std::_Exit(finish(context, collector->results(),
                        "stopped at " + running->id + ", past its deadline in one process (--isolate none)"));
    }
  });
  // The verdict comes from the collected results, not GoogleTest's status.
  {
    std::optional<StressLoad> load;
    if (context.options.stress) load.emplace();
    [[maybe_unused]] const int gtest_status = RUN_ALL_TESTS();
  }
  done = true;
  watchdog.join();
  return finish(context, collector->results(), "");
}

int run_isolated_mode(RunContext& context, const std::vector<std::string>& tests, const ReproduceCommand& reproduce) {
  const RunOptions& options = context.options;
  IsolatedPlan plan;
  plan.child_arguments = {"child",
                          "--adapter",
                          options.adapter,
                          "--seed",
                          std::to_string(context.header.run.seed),
                          "--parent",
                          std::to_string(::getpid()),
                          "--memory-limit",
                          std::to_string(options.memory_limit_mib)};
  if (options.stress) plan.child_arguments.push_back("--stress");
  plan.child_arguments.insert(plan.child_arguments.end(), {"--abi-minor", std::to_string(options.abi_minor)});
  for (const std::string& id : tests) {
    const bool same_group = options.isolation == Isolation::kGroup && !plan.groups.empty() &&
                            suite_of(plan.groups.back().back()) == suite_of(id);
    if (!same_group) plan.groups.emplace_back();
    plan.groups.back().push_back(id);
  }
  plan.timeout_s = options.timeout_s;
  plan.jobs = options.jobs;
  plan.reproduce = reproduce;
  // --repeat runs the whole plan again, in fresh children: a race that shows
  // once in N runs needs N independent chances, not N runs in one process.
  std::vector<report::TestResult> results;
  std::string interruption;
  for (int round = 0; round < options.repeat && interruption.empty(); ++round) {
    IsolatedOutcome outcome =
        run_isolated(plan, *context.recorder, [&](const std::string& group) { context.recorder->group_done(group); });
    results.insert(results.end(), std::make_move_iterator(outcome.results.begin()),
                   std::make_move_iterator(outcome.results.end()));
    if (outcome.interrupted_by != 0) {
      interruption = std::string("interrupted by ") + sigabbrev_np(outcome.interrupted_by) + " after " +
                     std::to_string(results.size()) + " of " + std::to_string(tests.size() * options.repeat) +
                     " test runs";
    }
  }
  return finish(context, std::move(results), interruption);
}

}  // namespace

int run(const RunOptions& options) {
  auto adapter = make_adapter(options.adapter);
  if (!adapter) {
    return usage_error("unknown adapter '" + options.adapter +
                       "'; known adapters: " + join(registered_adapters(), ", "));
  }
  for (const auto& profile : options.profiles) {
    const auto& known = report::all_profiles();
    if (std::find(known.begin(), known.end(), profile) == known.end()) {
      return usage_error("unknown profile '" + profile + "'; profiles are " + join(known, ", "));
    }
  }
  if (!(options.timeout_s > 0) || options.timeout_s > 7 * 86400) {
    return usage_error("--timeout must be a number of seconds above 0 and at most a week (604800)");
  }
  if (options.jobs < 1) return usage_error("--jobs must be at least 1");
  if (options.repeat < 1) return usage_error("--repeat must be at least 1");
  int to_stdout = 0;
  for (const auto& [path, option] :
       {std::pair{&options.report_path, "--report"}, std::pair{&options.junit_path, "--junit"},
        std::pair{&options.ctrf_path, "--ctrf"}}) {
    if (!*path) continue;
    if (auto problem = report::check_output_path(**path, option)) return usage_error(*problem);
    to_stdout += **path == "-" ? 1 : 0;
  }
  if (to_stdout > 1) return usage_error("only one of --report, --junit and --ctrf can go to standard output ('-')");
  const Availability availability = adapter->available();
  if (!availability.available) {
    return usage_error("adapter '" + options.adapter + "' cannot run here: " + availability.reason);
  }
  std::optional<report::SigningKey> signing_key;
  if (auto problem = load_signing_key(options.signing_key_path, signing_key)) return usage_error(*problem);
  std::vector<report::Expectation> expectations;
  if (options.expectations_path) {
    auto text = report::read_regular_file(*options.expectations_path);
    if (!text) return usage_error("--expectations: " + text.error());
    auto parsed = report::parse_expectations(*text, *options.expectations_path);
    if (!parsed) return usage_error("--expectations: " + parsed.error());
    expectations = std::move(*parsed);
  }
  if (options.run_id && options.run_id->empty()) return usage_error("--run-id needs a non-empty id");
  auto settings = take_inherited_settings(options.seed, options.shard, {options.model_runs, options.model_length},
                                          std::random_device{}() | 1u);
  if (!settings) return usage_error(settings.error());
  for (const std::string& note : settings->notes) std::cerr << "ortmem-cts: " << note << '\n';

  select_adapters({options.adapter});
  std::string program = options.command_line.empty() ? "ortmem-cts" : options.command_line.front();
  int gtest_argc = 1;
  char* gtest_argv[] = {program.data(), nullptr};
  ::testing::InitGoogleTest(&gtest_argc, gtest_argv);
  const Selection selection =
      select_tests(registered_tests(), {options.filter, options.profiles, settings->shard}, profile_of_requirement);
  if (selection.tests.empty()) {
    return usage_error("the filter '" + options.filter + "' (with the profile and shard given) selects no test; " +
                       "see `ortmem-cts list tests --adapter " + options.adapter + "`");
  }

  RunContext context{options, {}, Clock::now(), nullptr, std::nullopt, {}};
  context.signing_key = signing_key;
  context.binary_sha256 = std::async(std::launch::async, [] {
                            auto digest = report::sha256_of_file("/proc/self/exe");
                            return digest ? *digest : std::string("unknown: ") + digest.error();
                          }).share();
  report::Report& header = context.header;
  header.kit = kit_section();
  header.adapter = adapter_section(adapter->info());
  header.environment = describe_environment();
  header.run.id = options.run_id.value_or(std::to_string(std::chrono::system_clock::now().time_since_epoch().count()) +
                                          "-" + std::to_string(::getpid()));
  header.run.start = header.run.end = iso_now();
  header.run.seed = settings->seed;
  header.run.model_runs = settings->budget.runs;
  header.run.model_length = settings->budget.length;
  header.run.filter = options.filter;
  header.run.profiles = options.profiles.empty() ? report::all_profiles() : options.profiles;
  if (settings->shard)
    header.run.shard = std::to_string(settings->shard->index) + "/" + std::to_string(settings->shard->count);
  header.run.isolation = isolation_name(options.isolation);
  header.run.jobs = options.isolation == Isolation::kNone ? 1 : options.jobs;
  header.run.timeout_s = options.timeout_s;
  header.run.repeat = options.repeat;
  header.run.stress = options.stress;
  header.run.command_line = join(options.command_line, " ");
  header.run.scope.subset = selection.subset;
  header.run.scope.filtered = selection.filtered;
  report::apply_expectations(expectations, header);  // no tests yet: every entry recorded, stale

  std::optional<report::Journal> journal;
  if (options.report_path && !report_to_stdout(options)) {
    // From here until the end the report says "incomplete", so an older
    // report can never be mistaken for this run's.
    report::Report placeholder = header;
    placeholder.run.scope.incomplete = true;
    placeholder.run.interruption = "the run has not finished; if its runner was killed, `ortmem-cts report recover " +
                                   report::journal_path_for(*options.report_path) +
                                   "` turns what it finished into a report";
    report::judge_report(spec_catalog().requirements, placeholder);
    if (auto error = report::write_report_file(*options.report_path, placeholder)) return usage_error(*error);
    auto created = report::Journal::create(*options.report_path, header);
    if (!created) return usage_error(created.error());
    journal.emplace(std::move(*created));
  }
  RunRecorder recorder(std::move(journal), selection.tests.size() * options.repeat, options.quiet,
                       options.isolation == Isolation::kNone);
  context.recorder = &recorder;
  const ReproduceCommand reproduce{program, options.adapter, settings->seed, settings->budget};
  if (options.isolation == Isolation::kNone) return run_in_process(context, selection.tests, reproduce);
  return run_isolated_mode(context, selection.tests, reproduce);
}

int run_child(const ChildOptions& options, char* program) {
  prepare_child(options.parent, options.memory_limit_mib);
  select_adapters({options.adapter});
  int gtest_argc = 1;
  char* gtest_argv[] = {program, nullptr};
  ::testing::InitGoogleTest(&gtest_argc, gtest_argv);
  ::testing::GTEST_FLAG(filter) = options.tests;
  auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
  delete listeners.Release(listeners.default_result_printer());
  static ChildEventWriter events;
  listeners.Append(new ResultCollector({program, options.adapter, options.seed}, &events));
  std::optional<StressLoad> load;
  if (options.stress) load.emplace();
  [[maybe_unused]] const int gtest_status = RUN_ALL_TESTS();
  return 0;
}

}  // namespace ortmem::cts
