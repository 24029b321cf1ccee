// kit_identity.hpp: which kit this is, as --version and every report say it.
//
// The values come from the build (conformance/CMakeLists.txt passes the
// version, the git sha, whether the tree was modified when CMake configured,
// and the build type); a build without them says "unknown", and counts as
// modified.
#pragma once

#include <string>

#include "ortmem/report/report.hpp"

namespace ortmem::cts {

// The kit section of a report; binary_sha256 is left for the run to fill.
[[nodiscard]] report::KitSection kit_section();

// "ortmem-cts 0.1.0 (git abc123, spec 1.0.0)".
[[nodiscard]] std::string version_line();

}  // namespace ortmem::cts
