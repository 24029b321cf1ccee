// ortmem-cts: the conformance runner.
//
//   ortmem-cts list adapters|requirements|tests [--adapter NAME]
//   ortmem-cts run --adapter NAME [--profile core,pins,...] [--filter GLOB]
//                  [--seed N] [--report FILE]
//
// Exit status: 0 conformant, 1 not conformant, 2 usage or infrastructure
// error (unknown adapter, adapter unavailable, unwritable report), with a
// one-line reason on stderr for 1 and 2.
#include <gtest/gtest.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <iostream>
#include <random>
#include <set>
#include <sstream>

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

constexpr int kConformant = 0;
constexpr int kNotConformant = 1;
constexpr int kUsageError = 2;

int usage_error(const std::string& reason) {
  std::cerr << "ortmem-cts: " << reason << '\n';
  return kUsageError;
}

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

std::string iso_now() {
  const auto now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm utc{};
  gmtime_r(&now, &utc);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

std::string cpu_model() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    if (line.starts_with("model name")) return line.substr(line.find(':') + 2);
  }
  return "unknown";
}

nlohmann::json environment() {
  utsname system{};
  uname(&system);
  return {{"os", system.sysname},
          {"kernel", system.release},
          {"machine", system.machine},
          {"cpu", cpu_model()},
          {"cpus", sysconf(_SC_NPROCESSORS_ONLN)},
          {"compiler", __VERSION__}};
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

// Returns the adapter, or prints why not and the known names.
std::unique_ptr<Adapter> find_adapter(const std::string& name) {
  auto adapter = make_adapter(name);
  if (!adapter) {
    usage_error("unknown adapter '" + name + "'; known adapters: " + join(registered_adapters(), ", "));
  }
  return adapter;
}

int list_adapters() {
  for (const std::string& name : registered_adapters()) {
    const auto adapter = make_adapter(name);
    const AdapterInfo info = adapter->info();
    const Availability availability = adapter->available();
    std::cout << name << "  " << info.vendor << " " << info.version << "  device " << to_string(info.device)
              << "  capabilities [" << adapter_json(info)["capabilities"].dump() << "]"
              << (availability.available ? "" : "  unavailable: " + availability.reason) << '\n';
  }
  return kConformant;
}

int list_requirements() {
  const SpecCatalog& catalog = spec_catalog();
  std::cout << "spec " << catalog.version << ", " << catalog.requirements.size() << " requirements\n";
  for (const auto& requirement : catalog.requirements) {
    std::cout << requirement.id << "  " << requirement.level << "  " << requirement.profile << "  "
              << requirement.title << '\n';
  }
  return kConformant;
}

int list_tests(const std::string& adapter_name, char* program) {
  const std::string name = adapter_name.empty() ? "host" : adapter_name;
  if (!find_adapter(name)) return kUsageError;
  select_adapters({name});
  int argc = 2;
  std::string flag = "--gtest_list_tests";
  char* argv[] = {program, flag.data(), nullptr};
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}

struct RunOptions {
  std::string adapter;
  std::vector<std::string> profiles;
  std::string filter = "*";
  std::optional<std::uint64_t> seed;
  std::string report_path;
};

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

int run(const RunOptions& options, int argc, char** argv) {
  auto adapter = find_adapter(options.adapter);
  if (!adapter) return kUsageError;
  const Availability availability = adapter->available();
  if (!availability.available) return usage_error("adapter '" + options.adapter + "' cannot run here: " + availability.reason);
  static const std::set<std::string> kKnownProfiles = {"core", "pins", "deferred", "virtual", "shared"};
  for (const auto& profile : options.profiles) {
    if (!kKnownProfiles.contains(profile)) {
      return usage_error("unknown profile '" + profile + "'; profiles are core, pins, deferred, virtual, shared");
    }
  }
  if (!options.report_path.empty()) {
    // Fail before running anything if the report could never be written.
    std::ofstream probe(options.report_path + ".probe");
    if (!probe) return usage_error("cannot write the report to '" + options.report_path + "': check the directory exists and is writable");
    probe.close();
    std::remove((options.report_path + ".probe").c_str());
  }

  const std::uint64_t seed = options.seed.value_or(std::random_device{}() | 1);
  // RapidCheck reads its parameters from the environment on first use.
  ::setenv("RC_PARAMS", ("seed=" + std::to_string(seed) + " verbose_progress=0 verbose_shrinking=0").c_str(), 1);
  select_adapters({options.adapter});

  std::string filter_flag = "--gtest_filter=" + options.filter;
  int gtest_argc = 2;
  char* gtest_argv[] = {argv[0], filter_flag.data(), nullptr};
  ::testing::InitGoogleTest(&gtest_argc, gtest_argv);
  auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
  delete listeners.Release(listeners.default_result_printer());
  auto* collector = new ResultCollector(options.adapter, seed, isatty(STDERR_FILENO) != 0);
  listeners.Append(collector);  // owned by GoogleTest from here

  const std::string start = iso_now();
  const auto started = std::chrono::steady_clock::now();
  (void)RUN_ALL_TESTS();
  const double duration = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();

  const AdapterInfo info = adapter->info();
  std::vector<std::string> declared = {"core"};
  for (Capability capability : info.capabilities) {
    if (auto profile = profile_of(capability); !profile.empty()) declared.push_back(profile);
  }
  report::Report result;
  result.tests = collector->results();
  if (result.tests.empty()) return usage_error("the filter '" + options.filter + "' matched no test");
  result.judgement = report::judge(spec_catalog().requirements, result.tests, declared, options.profiles);
  result.kit = {{"name", "ortmem-cts"},
                {"version", ORTMEM_KIT_VERSION},
                {"git_sha", ORTMEM_GIT_SHA},
                {"spec_version", spec_catalog().version}};
  result.adapter = adapter_json(info);
  result.environment = environment();
  std::vector<std::string> command_line(argv, argv + argc);
  result.run = {{"id", std::to_string(std::chrono::system_clock::now().time_since_epoch().count()) + "-" +
                           std::to_string(getpid())},
                {"start", start},
                {"end", iso_now()},
                {"duration_s", duration},
                {"seed", seed},
                {"filter", options.filter},
                {"profiles", options.profiles.empty() ? std::vector<std::string>{"core", "pins", "deferred", "virtual", "shared"}
                                                      : options.profiles},
                {"isolation", "none"},
                {"command_line", join(command_line, " ")}};

  print_summary(result.judgement, result.tests);
  if (!options.report_path.empty()) {
    if (auto error = report::write_atomically(options.report_path, report::to_json(result))) {
      return usage_error(*error);
    }
    std::cout << "report: " << options.report_path << '\n';
  }
  if (result.judgement.verdict.overall == report::ProfileResult::kConformant) return kConformant;
  std::cerr << "ortmem-cts: adapter '" << options.adapter << "' is " << to_string(result.judgement.verdict.overall)
            << " (seed " << seed << ")\n";
  return kNotConformant;
}

}  // namespace
}  // namespace ortmem::cts

int main(int argc, char** argv) {
  using namespace ortmem::cts;
  register_builtin_adapters();

  CLI::App app{"ortmem-cts: conformance test kit for the ortmem memory contracts"};
  app.require_subcommand(1);
  auto* list = app.add_subcommand("list", "list adapters, requirements or tests");
  std::string what;
  std::string list_adapter;
  list->add_option("what", what, "adapters, requirements or tests")
      ->required()
      ->check(CLI::IsMember({"adapters", "requirements", "tests"}));
  list->add_option("--adapter", list_adapter, "adapter whose tests to list (default host)");

  RunOptions options;
  std::string profiles;
  std::uint64_t seed = 0;
  auto* run_command = app.add_subcommand("run", "certify one adapter");
  run_command->add_option("--adapter", options.adapter, "adapter name (see `list adapters`)")->required();
  run_command->add_option("--profile", profiles, "comma-separated profiles to judge (default: all)");
  run_command->add_option("--filter", options.filter, "GoogleTest filter of tests to run (default *)");
  auto* seed_option = run_command->add_option("--seed", seed, "seed for property tests (default: random, reported)");
  run_command->add_option("--report", options.report_path, "write the JSON report here");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    const int code = app.exit(error);
    return code == 0 ? 0 : 2;
  }
  if (list->parsed()) {
    if (what == "adapters") return list_adapters();
    if (what == "requirements") return list_requirements();
    return list_tests(list_adapter, argv[0]);
  }
  if (seed_option->count() > 0) options.seed = seed;
  std::stringstream stream(profiles);
  for (std::string profile; std::getline(stream, profile, ',');) {
    if (!profile.empty()) options.profiles.push_back(profile);
  }
  return run(options, argc, argv);
}
