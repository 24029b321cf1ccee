#include "environment.hpp"

#include <sys/utsname.h>
#include <unistd.h>

#include <chrono>
#include <ctime>
#include <fstream>

namespace ortmem::cts {
namespace {

std::string cpu_model() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    if (line.starts_with("model name")) return line.substr(line.find(':') + 2);
  }
  return "unknown";
}

}  // namespace

std::string iso_now() {
  const auto now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm utc{};
  gmtime_r(&now, &utc);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

report::EnvironmentSection describe_environment() {
  utsname system{};
  uname(&system);
  return {system.sysname, system.release, system.machine, cpu_model(), sysconf(_SC_NPROCESSORS_ONLN), __VERSION__};
}

}  // namespace ortmem::cts
