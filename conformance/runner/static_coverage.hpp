// conformance/runner/static_coverage.hpp: the requirement ids each suite test names,
// read from the suites' source at build time.
//
// A test normally records its ids when it calls covers(); one that fails
// before that (in SetUp, by crashing, by hanging) would otherwise be charged
// to nothing. The runner falls back to this table, keyed "Suite.Name".
#pragma once

#include <map>
#include <string_view>

namespace ortmem::cts {

[[nodiscard]] const std::map<std::string_view, std::string_view>& static_coverage();

}  // namespace ortmem::cts
