// ortmem-cts: the conformance runner.
//
//   ortmem-cts list adapters|requirements|tests [--adapter NAME]
//   ortmem-cts run --adapter NAME [--profile core,pins,...] [--filter GLOB]
//                  [--seed N] [--report FILE] [--isolate none|test] [--timeout SECONDS]
//
// Exit status: 0 conformant, 1 not conformant, 2 usage or infrastructure
// error (unknown adapter, adapter unavailable, unwritable report), with a
// one-line reason on stderr for 1 and 2.
#include <gtest/gtest.h>

#include <CLI/CLI.hpp>
#include <iostream>
#include <sstream>

#include "ortmem/cts/adapter_registry.hpp"
#include "ortmem/cts/spec_catalog.hpp"
#include "run.hpp"

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

int list_requirements() {
  const SpecCatalog& catalog = spec_catalog();
  std::cout << "spec " << catalog.version << ", " << catalog.requirements.size() << " requirements\n";
  for (const auto& requirement : catalog.requirements) {
    std::cout << requirement.id << "  " << requirement.level << "  " << requirement.profile << "  "
              << requirement.title << '\n';
  }
  return kExitConformant;
}

int list_tests(const std::string& adapter, char* program) {
  if (!make_adapter(adapter)) return usage_error("unknown adapter '" + adapter + "'");
  select_adapters({adapter});
  std::string flag = "--gtest_list_tests";
  int argc = 2;
  char* argv[] = {program, flag.data(), nullptr};
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
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
  std::string list_adapter = "host";
  list->add_option("what", what, "adapters, requirements or tests")
      ->required()
      ->check(CLI::IsMember({"adapters", "requirements", "tests"}));
  list->add_option("--adapter", list_adapter, "adapter whose tests to list (default host)");

  RunOptions options;
  options.command_line.assign(argv, argv + argc);
  std::string profiles;
  std::string isolation = "none";
  std::uint64_t seed = 0;
  auto* run_command = app.add_subcommand("run", "certify one adapter");
  run_command->add_option("--adapter", options.adapter, "adapter name (see `list adapters`)")->required();
  run_command->add_option("--profile", profiles, "comma-separated profiles to judge (default: all)");
  run_command->add_option("--filter", options.filter, "GoogleTest filter of tests to run (default *)");
  auto* seed_option = run_command->add_option("--seed", seed, "seed for property tests (default: random, reported)");
  run_command->add_option("--report", options.report_path, "write the JSON report here (atomically)");
  run_command->add_option("--isolate", isolation, "none (default) or test: each test in its own process")
      ->check(CLI::IsMember({"none", "test"}));
  run_command->add_option("--timeout", options.timeout_s, "seconds one test may take (default 60)");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    const int code = app.exit(error);
    return code == 0 ? kExitConformant : kExitUsage;
  }
  if (list->parsed()) {
    if (what == "adapters") return list_adapters();
    if (what == "requirements") return list_requirements();
    return list_tests(list_adapter, argv[0]);
  }
  if (seed_option->count() > 0) options.seed = seed;
  options.isolate = isolation == "test";
  std::stringstream stream(profiles);
  for (std::string profile; std::getline(stream, profile, ',');) {
    if (!profile.empty()) options.profiles.push_back(profile);
  }
  return run(options);
}
