// ortmem/detail/check.hpp (internal): the result of a check on a hot path.
//
// Not Expected<void, BindingError>: for a void value tl::expected
// value-initialises its storage, which zeroes the whole (large) BindingError
// union on every call that succeeds. An empty value type costs nothing.
#pragma once

#include "ortmem/binding_error.hpp"
#include "ortmem/expected.hpp"

namespace ortmem::detail {

struct Passed {};
using Check = Expected<Passed, BindingError>;

}  // namespace ortmem::detail
