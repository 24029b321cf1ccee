// conformance/runner/spec_catalog.hpp: the requirements this kit certifies against.
//
// spec/requirements.json is compiled into the runner, so a report always
// states the spec it was judged by and the runner never depends on finding
// the source tree at run time.
#pragma once

#include <string>
#include <vector>

#include "ortmem/report/report.hpp"

namespace ortmem::cts {

struct SpecCatalog {
  std::string version;
  std::vector<report::SpecRequirement> requirements;
};

[[nodiscard]] const SpecCatalog& spec_catalog();

}  // namespace ortmem::cts
