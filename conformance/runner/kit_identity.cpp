#include "kit_identity.hpp"

#include "spec_catalog.hpp"

#ifndef ORTMEM_KIT_VERSION
#define ORTMEM_KIT_VERSION "unknown"
#endif
#ifndef ORTMEM_GIT_SHA
#define ORTMEM_GIT_SHA "unknown"
#endif
#ifndef ORTMEM_GIT_DIRTY
#define ORTMEM_GIT_DIRTY 1
#endif
#ifndef ORTMEM_BUILD_TYPE
#define ORTMEM_BUILD_TYPE "unknown"
#endif

namespace ortmem::cts {

report::KitSection kit_section() {
  return {"ortmem-cts",
          ORTMEM_KIT_VERSION,
          ORTMEM_GIT_SHA,
          spec_catalog().version,
          ORTMEM_GIT_DIRTY != 0,
          ORTMEM_BUILD_TYPE,
          ""};
}

std::string version_line() {
  const report::KitSection kit = kit_section();
  return kit.name + " " + kit.version + " (git " + kit.git_sha + ", spec " + kit.spec_version + ")";
}

}  // namespace ortmem::cts
