// check_result.hpp (internal): what a check on a hot path
// returns: CheckPassed, or the BindingError that refuses.
//
// Not Expected<void, BindingError>: for a void value tl::expected
// value-initialises its storage, which zeroes the whole (large) BindingError
// union on every call that succeeds. An empty value type costs nothing.
#pragma once

#include "ortmem/binding_error.hpp"
#include "ortmem/expected.hpp"

namespace ortmem::detail {

struct CheckPassed {};
using CheckResult = Expected<CheckPassed, BindingError>;

}  // namespace ortmem::detail
