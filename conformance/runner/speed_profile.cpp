#include "speed_profile.hpp"

#include <benchmark/benchmark.h>

#include <cstdio>
#include <iomanip>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "run_output.hpp"
#include "ortmem/cts/adapter_registry.hpp"
#include "ortmem/report/report_file.hpp"

namespace ortmem::cts {
namespace {

// Sizes from a small tensor's header to a large activation, all at one
// alignment a device allocator would give.
constexpr std::size_t kSizes[] = {64, 4096, 65536, std::size_t{1} << 20};
constexpr std::size_t kAlign = 64;
constexpr std::size_t kScalingSize = 64;
constexpr const char* kReference = "host";

// One allocate+release per iteration. An allocator shared by two threads is
// what two-thread scaling measures: both call the same object, as a runtime's
// threads do.
void cycle(benchmark::State& state, DeviceAllocator* allocator, std::size_t bytes) {
  for (auto _ : state) {
    auto ptr = allocator->allocate(bytes, kAlign);
    if (!ptr) {
      state.SkipWithError("the allocator refused an allocation");
      break;
    }
    benchmark::DoNotOptimize(*ptr);
    (void)allocator->release(*ptr, bytes, kAlign);
  }
  state.SetItemsProcessed(state.iterations());
}

// Keeps the median of each benchmark's repetitions, by name, and prints
// nothing: the table below is the output.
class Medians final : public benchmark::BenchmarkReporter {
 public:
  bool ReportContext(const Context&) override { return true; }
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& run : runs) {
      if (run.error_occurred) errors_.push_back(run.benchmark_name() + ": " + run.error_message);
      if (run.run_type != Run::RT_Aggregate || run.aggregate_name != "median") continue;
      const auto rate = run.counters.find("items_per_second");
      if (rate != run.counters.end()) items_per_second_[run.run_name.function_name + threads(run)] = rate->second;
    }
  }
  [[nodiscard]] double rate(const std::string& name) const {
    const auto found = items_per_second_.find(name);
    return found == items_per_second_.end() ? 0 : found->second.value;
  }
  [[nodiscard]] const std::vector<std::string>& errors() const { return errors_; }

  static std::string threads(const Run& run) {
    return run.threads > 1 ? "/threads:" + std::to_string(run.threads) : "";
  }

 private:
  std::map<std::string, benchmark::Counter> items_per_second_;
  std::vector<std::string> errors_;
};

std::string cycle_name(const std::string& who, std::size_t bytes) { return who + "/cycle/" + std::to_string(bytes); }

}  // namespace

int speed_profile(const SpeedProfileOptions& options) {
  // Checked before anything is measured: a bad path costs nothing.
  if (options.output && *options.output != "-") {
    if (auto problem = report::check_output_path(*options.output, "--output")) return usage_error(*problem);
  }
  std::unique_ptr<Adapter> adapter = make_adapter(options.adapter);
  if (adapter == nullptr)
    return usage_error("no adapter named '" + options.adapter + "'; see `ortmem-cts list adapters`");
  if (const Availability availability = adapter->available(); !availability.available) {
    return usage_error("adapter '" + options.adapter + "' cannot run here: " + availability.reason);
  }
  std::unique_ptr<Adapter> reference = make_adapter(kReference);
  const std::shared_ptr<DeviceAllocator> measured = adapter->make_allocator();
  const std::shared_ptr<DeviceAllocator> baseline = reference->make_allocator();
  if (measured == nullptr || baseline == nullptr) return usage_error("an adapter gave no allocator to measure");

  // Google Benchmark reads its settings from a command line: this one is ours.
  std::ostringstream min_time;
  min_time << "--benchmark_min_time=" << options.min_time_s;
  std::string program = "ortmem-cts profile";
  std::string min_time_flag = min_time.str();
  std::string repetitions = "--benchmark_repetitions=5";
  std::string aggregates = "--benchmark_report_aggregates_only=true";
  std::vector<char*> arguments = {program.data(), min_time_flag.data(), repetitions.data(), aggregates.data()};
  int count = static_cast<int>(arguments.size());
  benchmark::Initialize(&count, arguments.data());
  // Interleaved, the adapter and the reference at each size in turn, so a
  // change in the machine's speed during the run lands on both.
  for (const std::size_t bytes : kSizes) {
    for (const auto& [who, allocator] :
         {std::pair{"adapter", measured.get()}, std::pair{"reference", baseline.get()}}) {
      benchmark::RegisterBenchmark(cycle_name(who, bytes).c_str(), cycle, allocator, bytes)->UseRealTime();
    }
  }
  for (const auto& [who, allocator] : {std::pair{"adapter", measured.get()}, std::pair{"reference", baseline.get()}}) {
    benchmark::RegisterBenchmark((std::string(who) + "/scaling").c_str(), cycle, allocator, kScalingSize)
        ->Threads(1)
        ->Threads(2)
        ->UseRealTime();
  }
  Medians medians;
  benchmark::RunSpecifiedBenchmarks(&medians);
  benchmark::ClearRegisteredBenchmarks();
  if (!medians.errors().empty()) return usage_error("measuring failed: " + medians.errors().front());

  nlohmann::json sizes = nlohmann::json::array();
  std::ostringstream table;
  table << "speed profile of " << options.adapter << " beside the reference '" << kReference
        << "' (informational: not part of any certification)\n"
        << "  bytes     adapter ns/op  reference ns/op  adapter ÷ reference\n";
  for (const std::size_t bytes : kSizes) {
    const double adapter_ns = 1e9 / medians.rate(cycle_name("adapter", bytes));
    const double reference_ns = 1e9 / medians.rate(cycle_name("reference", bytes));
    sizes.push_back({{"bytes", bytes},
                     {"adapter_ns", adapter_ns},
                     {"reference_ns", reference_ns},
                     {"ratio", adapter_ns / reference_ns}});
    table << "  " << std::left << std::setw(10) << bytes << std::right << std::fixed << std::setprecision(1)
          << std::setw(13) << adapter_ns << std::setw(17) << reference_ns << std::setprecision(2) << std::setw(21)
          << adapter_ns / reference_ns << '\n';
  }
  const auto scaling = [&](const std::string& who) {
    return medians.rate(who + "/scaling/threads:2") / medians.rate(who + "/scaling");
  };
  table << "  two threads ÷ one, items/s at " << kScalingSize << " bytes: adapter " << std::setprecision(2)
        << scaling("adapter") << ", reference " << scaling("reference") << '\n';
  // With the JSON on stdout, the table goes to stderr.
  (options.output == "-" ? std::cerr : std::cout) << table.str();
  if (options.output) {
    const nlohmann::json profile = {
        {"kind", "ortmem-cts speed profile"},
        {"adapter", options.adapter},
        {"reference", kReference},
        {"alignment", kAlign},
        {"repetitions", 5},
        {"statistic", "median"},
        {"sizes", sizes},
        {"two_thread_scaling",
         {{"bytes", kScalingSize}, {"adapter", scaling("adapter")}, {"reference", scaling("reference")}}},
    };
    if (auto error = write_output(*options.output, profile.dump(2) + "\n")) return usage_error("--output: " + *error);
  }
  return kExitConformant;
}

}  // namespace ortmem::cts
