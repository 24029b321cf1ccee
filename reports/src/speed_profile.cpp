#include "ortmem/report/speed_profile.hpp"

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <sstream>

#include "ortmem/report/formats.hpp"

namespace ortmem::report {
namespace {

constexpr int kBarWidth = 20;  // characters of the longest bar, at four times the reference's cost
constexpr double kBarScale = 4.0;

bool positive(const nlohmann::json& value) {
  return value.is_number() && value.get<double>() > 0 && std::isfinite(value.get<double>());
}

std::string fixed(double value, int digits) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(digits) << value;
  return out.str();
}

int bar_length(double ratio) {
  return static_cast<int>(std::lround(std::min(ratio, kBarScale) / kBarScale * kBarWidth));
}

}  // namespace

Expected<SpeedProfile, std::string> read_speed_profile(const nlohmann::json& json) {
  if (!json.is_object() || json.value("kind", "") != "ortmem-cts speed profile") {
    return fail(
        std::string("not a speed profile: its \"kind\" is not \"ortmem-cts speed profile\" (make one with "
                    "`ortmem-cts profile --adapter X --output FILE`)"));
  }
  SpeedProfile profile;
  if (!json.contains("adapter") || !json["adapter"].is_string() || !json.contains("reference") ||
      !json["reference"].is_string()) {
    return fail(std::string("the speed profile does not name its adapter and reference"));
  }
  profile.adapter = json["adapter"].get<std::string>();
  profile.reference = json["reference"].get<std::string>();
  if (!json.contains("sizes") || !json["sizes"].is_array() || json["sizes"].empty()) {
    return fail(std::string("the speed profile has no sizes"));
  }
  for (const auto& size : json["sizes"]) {
    if (!size.is_object() || !size.contains("bytes") || !size["bytes"].is_number_unsigned() ||
        !positive(size.value("adapter_ns", nlohmann::json())) ||
        !positive(size.value("reference_ns", nlohmann::json())) || !positive(size.value("ratio", nlohmann::json()))) {
      return fail("a size of the speed profile is not bytes with three positive figures: " + size.dump());
    }
    profile.sizes.push_back({size["bytes"].get<std::uint64_t>(), size["adapter_ns"].get<double>(),
                             size["reference_ns"].get<double>(), size["ratio"].get<double>()});
  }
  const auto& scaling = json.value("two_thread_scaling", nlohmann::json());
  if (!scaling.is_object() || !scaling.contains("bytes") || !scaling["bytes"].is_number_unsigned() ||
      !positive(scaling.value("adapter", nlohmann::json())) ||
      !positive(scaling.value("reference", nlohmann::json()))) {
    return fail(std::string("the speed profile's two_thread_scaling is not bytes with two positive figures"));
  }
  profile.scaling_bytes = scaling["bytes"].get<std::uint64_t>();
  profile.adapter_scaling = scaling["adapter"].get<double>();
  profile.reference_scaling = scaling["reference"].get<double>();
  return profile;
}

bool profiles_adapter_of(const SpeedProfile& profile, const Report& report) {
  if (profile.adapter == report.adapter.name) return true;
  const auto& origin = report.adapter.origin;
  return origin && profile.adapter == origin->path + "#" + origin->mechanism;
}

std::string speed_profile_markdown(const SpeedProfile& profile) {
  std::ostringstream out;
  out << "\n## Speed profile (informational)\n\n"
      << "Allocate+release, median ns per cycle, beside the reference `" << profile.reference
      << "` in the same run; not part of the verdict. A bar is the adapter's cost relative to the reference, "
      << "full at " << fixed(kBarScale, 0) << "×.\n\n"
      << "| bytes | adapter ns | reference ns | adapter ÷ reference | |\n|---|---|---|---|---|\n";
  for (const auto& size : profile.sizes) {
    const int length = bar_length(size.ratio);
    std::string bar;
    for (int i = 0; i < kBarWidth; ++i) bar += i < length ? "█" : "░";
    out << "| " << size.bytes << " | " << fixed(size.adapter_ns, 1) << " | " << fixed(size.reference_ns, 1) << " | "
        << fixed(size.ratio, 2) << " | `" << bar << "` |\n";
  }
  out << "\nTwo threads ÷ one, items/s at " << profile.scaling_bytes << " bytes: adapter "
      << fixed(profile.adapter_scaling, 2) << ", reference " << fixed(profile.reference_scaling, 2) << ".\n";
  return out.str();
}

std::string speed_profile_html(const SpeedProfile& profile) {
  const auto e = [](std::string_view text) { return xml_escape(text); };
  std::ostringstream out;
  out << "<h2>Speed profile (informational)</h2>\n<p>Allocate+release, median ns per cycle, beside the reference <code>"
      << e(profile.reference) << "</code> in the same run; not part of the verdict. A bar is the adapter's cost "
      << "relative to the reference, full at " << fixed(kBarScale, 0) << "&times;.</p>\n"
      << "<table id=\"speed-profile\">\n<tr><th>bytes</th><th>adapter ns</th><th>reference ns</th>"
      << "<th>adapter &divide; reference</th><th></th></tr>\n";
  for (const auto& size : profile.sizes) {
    const int percent = bar_length(size.ratio) * 100 / kBarWidth;
    out << "<tr><td>" << size.bytes << "</td><td>" << fixed(size.adapter_ns, 1) << "</td><td>"
        << fixed(size.reference_ns, 1) << "</td><td>" << fixed(size.ratio, 2)
        << "</td><td><div style=\"width:10em;background:#ddd\"><div style=\"width:" << percent
        << "%;height:.8em;background:#46a\"></div></div></td></tr>\n";
  }
  out << "</table>\n<p>Two threads &divide; one, items/s at " << profile.scaling_bytes << " bytes: adapter "
      << fixed(profile.adapter_scaling, 2) << ", reference " << fixed(profile.reference_scaling, 2) << ".</p>\n";
  return out.str();
}

}  // namespace ortmem::report
