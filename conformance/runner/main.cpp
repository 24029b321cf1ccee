// ortmem-cts: the conformance runner.
//
//   ortmem-cts list adapters|requirements|tests [--adapter NAME] [--plugin PATH.so]
//   ortmem-cts run --adapter NAME|PATH.so[#MECHANISM] [--abi-minor 0|1]
//                  [--profile core,pins,...] [--filter GLOB] [--shard I/N]
//                  [--seed N] [--model-runs N] [--model-length N]
//                  [--report FILE|DIR/|-] [--isolate group|test|none] [--jobs N]
//                  [--timeout SECONDS] [--quiet]
//                  [--sign SECRET_KEY] [--junit FILE|-] [--ctrf FILE|-]
//                  [--expectations FILE] [--run-id ID]
//   ortmem-cts report recover JOURNAL [--report FILE|-] [--sign SECRET_KEY]
//   ortmem-cts report verify REPORT [--pubkey PUBLIC_KEY]
//   ortmem-cts report merge SHARD... --report FILE|-
//   ortmem-cts report diff BASE NEW
//   ortmem-cts profile --adapter NAME|PATH.so[#MECHANISM] [--output FILE|-] [--min-time SECONDS]
//   ortmem-cts report render REPORT [--format md|html] [--output FILE] [--speed-profile FILE]
//   ortmem-cts report keygen --secret FILE --public FILE
//   ortmem-cts --version
//
// Exit status (see run.hpp): 0 conformant, 1 not conformant, 2 usage or
// infrastructure error, 3 incomplete or partial; a one-line reason on stderr
// for every status but 0.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <set>
#include <sstream>
#include <thread>

#include "plugin/plugin_adapter.hpp"
#include "plugin/plugin_allocator.hpp"
#include "ortmem/cts/adapter_registry.hpp"
#include "spec_catalog.hpp"
#include "inherited_settings.hpp"
#include "isolated_run.hpp"
#include "kit_identity.hpp"
#include "ortmem/report/report_json.hpp"
#include "result_collector.hpp"
#include "speed_profile.hpp"
#include "report_commands.hpp"
#include "run.hpp"
#include "test_selection.hpp"

namespace ortmem::cts {
namespace {

int list_adapters() {
  for (const std::string& name : registered_adapters()) {
    const auto adapter = make_adapter(name);
    const AdapterInfo info = adapter->info();
    const Availability availability = adapter->available();
    std::string capabilities;
    for (Capability capability : info.capabilities) {
      capabilities += (capabilities.empty() ? "" : ", ") + std::string(capability_name(capability));
    }
    std::cout << name << "  " << info.vendor << " " << info.version << "  device " << to_string(info.device)
              << "  capabilities: " << (capabilities.empty() ? "none" : capabilities)
              << (availability.available ? "" : "  unavailable: " + availability.reason) << '\n';
  }
  return kExitConformant;
}

// The mechanisms of one plugin, as negotiation and each factory declare them.
int list_plugin(const std::string& path, std::uint32_t abi_minor) {
  auto module = ortmem::plugin::PluginModule::load(path, {abi_minor});
  if (!module) return usage_error("nxmem plugin " + path + ": " + module.error());
  std::cout << path << "  sha256 " << (*module)->sha256() << "  nxmem 1." << (*module)->agreed_minor()
            << "  negotiated: " << ortmem::plugin::capability_names((*module)->capability_flags()) << '\n';
  for (const auto& factory : (*module)->factories()) {
    auto opened =
        ortmem::plugin::PluginAllocator::open(*module, factory, ortmem::adapters::required_capabilities(factory));
    const std::string uncertified = ortmem::adapters::uncertified_capabilities(factory.capability_flags);
    std::string controls;
    if (opened) {
      const auto table = ortmem::plugin::Controls::load((*module)->exports().controls, (*opened)->mechanism_id(),
                                                        factory.capability_flags);
      if (!table) {
        controls = "  controls refused: " + table.error();
      } else if (*table) {
        controls = "  controls: " + ortmem::adapters::control_names(**table);
      }
      if (table && factory.device.tier != NXMEM_TIER_HOST &&
          !(*table && (*table)->offers(ORTMEM_CTS_CONTROL_MEMORY_ACCESS))) {
        controls += "  unavailable: its memory is on tier " + ortmem::plugin::device_name(factory.device) +
                    " and it offers no MEMORY_ACCESS control";
      }
    }
    std::cout << "  " << path << "#" << factory.name << "  device " << ortmem::plugin::device_name(factory.device)
              << "  capabilities: " << ortmem::plugin::capability_names(factory.capability_flags)
              << (uncertified.empty() ? "" : "  not yet certified through the plugin: " + uncertified) << controls
              << (opened ? "" : "  does not open: " + opened.error()) << '\n';
  }
  return kExitConformant;
}

// An --adapter that names a plugin file loads it and registers its
// mechanisms; `adapter` becomes the first registered "path#MECHANISM" and
// `every`, when given, receives them all (a caller without it accepts only a
// plugin of one mechanism). An exit code when the plugin cannot be certified.
std::optional<int> register_named_plugin(std::string& adapter, std::uint32_t abi_minor,
                                         std::vector<std::string>* every = nullptr) {
  if (!ortmem::adapters::names_a_plugin(adapter)) return std::nullopt;
  auto selection = ortmem::adapters::register_plugin_adapters(adapter, {abi_minor});
  if (!selection) return usage_error(selection.error());
  if (every == nullptr && selection->adapters.size() != 1) {
    std::string names;
    for (const auto& each : selection->adapters) names += (names.empty() ? "" : ", ") + each;
    return usage_error("the plugin has " + std::to_string(selection->adapters.size()) +
                       " mechanisms; name one: " + names);
  }
  adapter = selection->adapters.front();
  if (every != nullptr) *every = selection->adapters;
  return std::nullopt;
}

// Whether a --report, --junit or --ctrf argument names a directory to hold
// one file per mechanism: it ends in '/' or is a directory already.
bool names_a_directory(const std::string& path) {
  std::error_code ignored;
  return path.ends_with('/') || std::filesystem::is_directory(path, ignored);
}

// The file of `mechanism` in directory `directory`: its name with every
// character a file name could misread (a separator, a dot first) replaced.
std::string file_in(const std::string& directory, const std::string& mechanism, const std::string& extension) {
  std::string name;
  for (char c : mechanism) name += std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' ? c : '_';
  return (std::filesystem::path(directory) / (name + extension)).string();
}

// "The worst of several runs" (run_output.hpp): 2 > 1 > 3 > 0.
int worse(int a, int b) {
  const auto rank = [](int code) {
    return code == kExitUsage ? 3 : code == kExitNotConformant ? 2 : code == kExitIncomplete ? 1 : 0;
  };
  return rank(a) >= rank(b) ? a : b;
}

// Certifies each mechanism of a plugin as its own adapter, into its own
// report (DIR/<mechanism>.json, and so for --junit and --ctrf), one after
// the other; the exit status is the worst of them.
int run_each_mechanism(const RunOptions& options, const std::vector<std::string>& adapters) {
  const bool several = adapters.size() > 1;
  if (several && (!options.report_path || !names_a_directory(*options.report_path))) {
    return usage_error(
        "the plugin has " + std::to_string(adapters.size()) +
        " mechanisms: give --report DIR/ for one report per mechanism, or --adapter PATH.so#NAME for one");
  }
  for (const auto& [path, flag] : {std::pair{options.junit_path, "--junit"}, std::pair{options.ctrf_path, "--ctrf"}}) {
    if (several && path && !names_a_directory(*path)) {
      return usage_error(std::string("the plugin has several mechanisms: give ") + flag +
                         " DIR/ as well, for one file each");
    }
  }
  std::vector<std::pair<std::string, RunOptions>> runs;
  std::set<std::string> files;
  for (const std::string& adapter : adapters) {
    const std::string mechanism = adapter.substr(adapter.rfind('#') + 1);
    RunOptions each = options;
    each.adapter = adapter;
    const auto place = [&](std::optional<std::string>& path, const char* extension) {
      if (path && names_a_directory(*path)) path = file_in(*path, mechanism, extension);
    };
    place(each.report_path, ".json");
    place(each.junit_path, ".xml");
    place(each.ctrf_path, ".ctrf.json");
    if (each.report_path && !files.insert(*each.report_path).second) {
      return usage_error("two mechanisms of the plugin would write the same report " + *each.report_path +
                         "; certify them one at a time with --adapter PATH.so#NAME");
    }
    runs.emplace_back(mechanism, std::move(each));
  }
  if (options.report_path && names_a_directory(*options.report_path)) {
    std::error_code error;
    std::filesystem::create_directories(*options.report_path, error);
    if (error)
      return usage_error("cannot create the report directory " + *options.report_path + ": " + error.message());
  }
  int status = kExitConformant;
  for (const auto& [mechanism, each] : runs) {
    if (several && !options.quiet) std::cout << "mechanism " << mechanism << ":" << std::endl;
    // A run owns the process's GoogleTest state (its tests are instantiated
    // for one adapter), so each mechanism runs in a process of its own.
    std::cout.flush();
    const pid_t child = fork();
    if (child < 0) return usage_error(std::string("cannot start the run of mechanism ") + mechanism + ": fork failed");
    if (child == 0) {
      const int code = run(each);
      std::cout.flush();
      std::_Exit(code);
    }
    int wait_status = 0;
    while (waitpid(child, &wait_status, 0) < 0 && errno == EINTR) {
    }
    status = worse(status, WIFEXITED(wait_status) ? WEXITSTATUS(wait_status) : kExitUsage);
  }
  return status;
}

int list_requirements() {
  const SpecCatalog& catalog = spec_catalog();
  std::cout << "spec " << catalog.version << ", " << catalog.requirements.size() << " requirements\n";
  for (const auto& requirement : catalog.requirements) {
    std::cout << requirement.id << "  " << requirement.level << "  " << requirement.profile << "  " << requirement.title
              << '\n';
  }
  return kExitConformant;
}

int list_tests(const std::string& adapter, const std::string& format, char* program) {
  if (!make_adapter(adapter)) return usage_error("unknown adapter '" + adapter + "'");
  select_adapters({adapter});
  int argc = 1;
  char* argv[] = {program, nullptr};
  ::testing::InitGoogleTest(&argc, argv);
  if (format == "json") {
    // For tools: every test with the requirement ids its source names.
    nlohmann::json tests = nlohmann::json::array();
    for (const std::string& id : registered_tests()) {
      tests.push_back({{"id", id}, {"suite", std::string(suite_of(id))}, {"requirements", static_requirements(id)}});
    }
    std::cout << report::dump_json({{"adapter", adapter}, {"tests", tests}}, 2) << '\n';
    return kExitConformant;
  }
  for (const std::string& id : registered_tests()) {
    const auto requirements = static_requirements(id);
    std::string names;
    for (const auto& requirement : requirements) names += " " + requirement;
    std::cout << id << (names.empty() ? "" : "  #" + names) << '\n';
  }
  return kExitConformant;
}

}  // namespace
}  // namespace ortmem::cts

int main(int argc, char** argv) {
  using namespace ortmem::cts;
  register_runner_adapters();

  CLI::App app{"ortmem-cts: conformance test kit for the ortmem memory contracts"};
  app.require_subcommand(1);
  app.set_version_flag("--version", version_line());

  auto* list = app.add_subcommand("list", "list adapters, requirements or tests");
  std::string what;
  std::string list_adapter = "host";
  list->add_option("what", what, "adapters, requirements or tests")
      ->required()
      ->check(CLI::IsMember({"adapters", "requirements", "tests"}));
  list->add_option("--adapter", list_adapter, "adapter whose tests to list (default host)");
  std::string list_plugin_path;
  auto* list_plugin_option =
      list->add_option("--plugin", list_plugin_path, "with `adapters`: list this nxmem plugin's mechanisms");
  std::uint32_t abi_minor = NXMEM_ABI_VERSION_MINOR;
  const auto abi_minor_help =
      "the highest nxmem minor the kit offers a plugin: 1 (default) or 0, to certify the minor-0 path";
  std::string list_format = "text";
  list->add_option("--format", list_format, "text (default) or json")->check(CLI::IsMember({"text", "json"}));
  list->add_option("--abi-minor", abi_minor, abi_minor_help)->check(CLI::Range(0, 1));

  RunOptions options;
  options.command_line.assign(argv, argv + argc);
  options.jobs = static_cast<int>(std::max(1U, std::thread::hardware_concurrency()));
  std::string profiles;
  std::string isolation = "group";
  std::string seed;
  std::string shard;
  std::string report_path;
  auto* run_command = app.add_subcommand("run", "certify one adapter");
  run_command
      ->add_option("--adapter", options.adapter,
                   "adapter name (see `list adapters`), or an nxmem plugin: PATH.so[#MECHANISM]")
      ->required();
  run_command->add_option("--abi-minor", abi_minor, abi_minor_help)->check(CLI::Range(0, 1));
  run_command->add_option("--profile", profiles, "comma-separated profiles whose tests to run (default: all)");
  run_command->add_option("--filter", options.filter, "GoogleTest filter of tests to run (default *)");
  run_command->add_option("--shard", shard, "run shard I of N (0-based), as GTEST_SHARD_INDEX/GTEST_TOTAL_SHARDS");
  auto* seed_option =
      run_command->add_option("--seed", seed, "seed for property tests, 0 to 2^64-1 (default: random, reported)");
  std::uint64_t model_runs = 0;
  std::uint64_t model_length = 0;
  auto* model_runs_option = run_command->add_option(
      "--model-runs", model_runs, "random command sequences per model-based test (default 100; more explores more)");
  auto* model_length_option =
      run_command->add_option("--model-length", model_length,
                              "the longest command sequence a model-based test tries, in commands (default 100)");
  auto* report_option = run_command->add_option(
      "--report", report_path,
      "write the JSON report to FILE, or '-' for stdout; DIR/ for one report per mechanism of a plugin");
  run_command
      ->add_option("--isolate", isolation,
                   "group (default): a child process per suite; test: per test; none: in this process")
      ->check(CLI::IsMember({"none", "group", "test"}));
  run_command->add_option("--jobs", options.jobs, "test processes at a time (default: the number of cores)");
  run_command->add_option("--timeout", options.timeout_s, "seconds one test may take (default 60)");
  run_command->add_option("--repeat", options.repeat, "run every test N times; mixed outcomes are reported flaky");
  int stress = 0;
  auto* stress_option = run_command->add_option("--stress", stress,
                                                "race hunting: --repeat N with background load shaking the scheduling");
  options.memory_limit_mib = default_memory_limit_mib();
  run_command->add_option("--memory-limit", options.memory_limit_mib,
                          "MiB of address space per test process, 0 for none (default: half the memory)");
  run_command->add_flag("--quiet", options.quiet, "no progress on stderr");
  std::string signing_key;
  auto* sign_option =
      run_command->add_option("--sign", signing_key, "sign the report with this Ed25519 secret key file");
  std::string junit_path;
  std::string ctrf_path;
  std::string expectations_path;
  std::string run_id;
  auto* expectations_option = run_command->add_option("--expectations", expectations_path,
                                                      "JSON file of expected failures: they become waived");
  auto* run_id_option = run_command->add_option("--run-id", run_id, "the run's id, the same for all its shards");
  auto* junit_option =
      run_command->add_option("--junit", junit_path, "also write the results as JUnit XML to FILE, or '-'");
  auto* ctrf_option =
      run_command->add_option("--ctrf", ctrf_path, "also write the results as CTRF JSON to FILE, or '-'");

  SpeedProfileOptions profile_options;
  auto* profile_command = app.add_subcommand(
      "profile", "measure an adapter's allocator beside the reference host allocator (informational)");
  profile_command
      ->add_option("--adapter", profile_options.adapter, "adapter name, or an nxmem plugin: PATH.so[#MECHANISM]")
      ->required();
  profile_command->add_option("--abi-minor", abi_minor, abi_minor_help)->check(CLI::Range(0, 1));
  std::string profile_output;
  auto* profile_output_option =
      profile_command->add_option("--output", profile_output, "write the JSON to FILE, or '-' for stdout");
  profile_command
      ->add_option("--min-time", profile_options.min_time_s, "seconds per measurement, at least (default 0.2)")
      ->check(CLI::PositiveNumber);

  auto* report_command = app.add_subcommand("report", "work with reports");
  report_command->require_subcommand(1);
  auto* recover_command = report_command->add_subcommand("recover", "turn the journal of a killed run into a report");
  std::string journal;
  std::string recovered_path;
  recover_command->add_option("journal", journal, "the run's REPORT.journal")->required();
  auto* recovered_option =
      recover_command->add_option("--report", recovered_path, "where to write it (default: the run's own report path)");
  std::string recover_key;
  auto* recover_sign = recover_command->add_option("--sign", recover_key, "sign the report with this secret key file");
  auto* verify_command = report_command->add_subcommand("verify", "check a report's integrity, spec and verdict");
  std::string verified_path;
  std::string public_key;
  verify_command->add_option("report", verified_path, "the report file")->required();
  auto* pubkey_option =
      verify_command->add_option("--pubkey", public_key, "require a signature by this public key file");
  auto* merge_command = report_command->add_subcommand("merge", "combine the reports of one run's shards");
  std::vector<std::string> shard_paths;
  std::string merged_path;
  merge_command->add_option("shards", shard_paths, "the shards' reports")->required();
  merge_command->add_option("--report", merged_path, "where to write the merged report, or '-'")->required();
  auto* diff_command = report_command->add_subcommand("diff", "list regressions and fixes between two reports");
  std::string base_path;
  std::string next_path;
  diff_command->add_option("base", base_path, "the earlier report")->required();
  diff_command->add_option("new", next_path, "the later report")->required();
  auto* render_command = report_command->add_subcommand("render", "render a report for people (Markdown or HTML)");
  std::string rendered_path;
  std::string render_format = "md";
  std::string render_output;
  render_command->add_option("report", rendered_path, "the report file")->required();
  render_command->add_option("--format", render_format, "md (default) or html")->check(CLI::IsMember({"md", "html"}));
  auto* render_output_option = render_command->add_option("--output", render_output, "write here instead of stdout");
  std::string render_speed_profile;
  auto* render_speed_profile_option =
      render_command->add_option("--speed-profile", render_speed_profile,
                                 "show this `ortmem-cts profile` JSON of the same adapter after the report");
  auto* keygen_command = report_command->add_subcommand("keygen", "make an Ed25519 key pair for --sign and --pubkey");
  std::string secret_path;
  std::string public_path;
  keygen_command->add_option("--secret", secret_path, "where to write the secret key (created 0600)")->required();
  keygen_command->add_option("--public", public_path, "where to write the public key")->required();

  // Started by an isolated run for each group of tests; not for people.
  auto* child = app.add_subcommand("child", "")->group("");
  ChildOptions child_options;
  child->add_option("--adapter", child_options.adapter)->required();
  child->add_option("--seed", child_options.seed)->required();
  child->add_option("--tests", child_options.tests)->required();
  child->add_option("--parent", child_options.parent)->required();
  child->add_option("--memory-limit", child_options.memory_limit_mib);
  child->add_flag("--stress", child_options.stress);
  child->add_option("--abi-minor", abi_minor);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    const int code = app.exit(error);
    return code == 0 ? kExitConformant : kExitUsage;
  }
  if (child->parsed()) {
    if (auto refused = register_named_plugin(child_options.adapter, abi_minor)) return *refused;
    return run_child(child_options, argv[0]);
  }
  if (profile_command->parsed()) {
    if (auto refused = register_named_plugin(profile_options.adapter, abi_minor)) return *refused;
    if (profile_output_option->count() > 0) profile_options.output = profile_output;
    return speed_profile(profile_options);
  }
  if (list->parsed()) {
    if (list_plugin_option->count() > 0) {
      if (what != "adapters")
        return usage_error("--plugin goes with `list adapters`; for tests give --adapter PATH.so#MECHANISM");
      return list_plugin(list_plugin_path, abi_minor);
    }
    if (what == "adapters") return list_adapters();
    if (what == "requirements") return list_requirements();
    if (auto refused = register_named_plugin(list_adapter, abi_minor)) return *refused;
    return list_tests(list_adapter, list_format, argv[0]);
  }
  const auto given = [](CLI::Option* option, const std::string& value) {
    return option->count() > 0 ? std::optional(value) : std::nullopt;
  };
  if (recover_command->parsed()) {
    return recover(journal, given(recovered_option, recovered_path), given(recover_sign, recover_key));
  }
  if (verify_command->parsed()) return verify(verified_path, given(pubkey_option, public_key));
  if (keygen_command->parsed()) return keygen(secret_path, public_path);
  if (merge_command->parsed()) return merge(shard_paths, merged_path);
  if (diff_command->parsed()) return diff(base_path, next_path);
  if (render_command->parsed()) {
    return render(rendered_path, render_format, given(render_output_option, render_output),
                  given(render_speed_profile_option, render_speed_profile));
  }
  options.junit_path = given(junit_option, junit_path);
  options.ctrf_path = given(ctrf_option, ctrf_path);
  options.expectations_path = given(expectations_option, expectations_path);
  options.run_id = given(run_id_option, run_id);
  if (stress_option->count() > 0) {
    if (stress < 1) return usage_error("--stress needs a number of runs, at least 1");
    options.stress = true;
    options.repeat = std::max(options.repeat, stress);
  }
  options.signing_key_path = given(sign_option, signing_key);
  if (seed_option->count() > 0) {
    options.seed = parse_seed(seed);
    if (!options.seed) return usage_error("--seed '" + seed + "' is not a seed: give a whole number from 0 to 2^64-1");
  }
  if (model_runs_option->count() > 0) {
    if (model_runs < 1) return usage_error("--model-runs needs at least 1 sequence");
    options.model_runs = model_runs;
  }
  if (model_length_option->count() > 0) {
    if (model_length < 1) return usage_error("--model-length needs at least 1 command");
    options.model_length = model_length;
  }
  if (!shard.empty() || run_command->count("--shard") > 0) {
    options.shard = parse_shard(shard);
    if (!options.shard) return usage_error("--shard '" + shard + "' is not a shard: give I/N with 0 <= I < N");
  }
  options.report_path = given(report_option, report_path);
  options.isolation = isolation == "none"   ? Isolation::kNone
                      : isolation == "test" ? Isolation::kTest
                                            : Isolation::kGroup;
  std::stringstream stream(profiles);
  for (std::string profile; std::getline(stream, profile, ',');) {
    if (!profile.empty()) options.profiles.push_back(profile);
  }
  options.abi_minor = abi_minor;
  std::vector<std::string> mechanisms;
  if (auto refused = register_named_plugin(options.adapter, abi_minor, &mechanisms)) return *refused;
  if (mechanisms.empty()) return run(options);
  return run_each_mechanism(options, mechanisms);
}
