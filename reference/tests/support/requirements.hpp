// support/requirements.hpp: how a test names the requirements it checks.
//
// Call covers("ALLOC-001", "ALLOC-004") at the top of a test. The ids are
// recorded as the test's "requirements" property (in GoogleTest's XML and JSON
// output, which the report reads) and stay greppable in the source, where
// spec/tests/check_references.py verifies that every id named exists.
#pragma once

#include <gtest/gtest.h>

#include <string>

namespace ortmem::test_support {

template <class... Ids>
void covers(const char* first, Ids... rest) {
  std::string joined = first;
  ((joined += ' ', joined += rest), ...);
  ::testing::Test::RecordProperty("requirements", joined);
}

}  // namespace ortmem::test_support
