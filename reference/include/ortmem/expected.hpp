// ortmem/expected.hpp: how every fallible operation of the contract reports.
//
// Errors are values. No exception crosses the contract API, so a result is an
// `Expected<T, E>`: either the value or the error that says why there is none.
// It is tl::expected (Debian's libexpected-dev), which builds with g++, clang
// and nvcc alike; std::expected would tie the headers to C++23.
#pragma once

#include <tl/expected.hpp>

namespace ortmem {

template <class T, class E>
using Expected = tl::expected<T, E>;

template <class E>
using Unexpected = tl::unexpected<E>;

// Builds the error side of an Expected: `return fail(MemoryError::...)`.
template <class E>
[[nodiscard]] Unexpected<std::decay_t<E>> fail(E&& error) {
  return Unexpected<std::decay_t<E>>(std::forward<E>(error));
}

}  // namespace ortmem
