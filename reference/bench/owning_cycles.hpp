// reference/bench/owning_cycles.hpp: the registry's hot path, an owning
// allocate followed by release_now, timed the same way over any mechanism
// so that ratios between suites compare like with like.
#pragma once

#include <benchmark/benchmark.h>

#include <cstddef>
#include <utility>

#include "ortmem/ortmem.hpp"

namespace ortmem::bench {

inline void owning_cycles(benchmark::State& state, const MemoryBinding& binding, std::size_t bytes, std::size_t align) {
  for (auto _ : state) {
    auto owner = binding.allocate_owning(bytes, align);
    benchmark::DoNotOptimize(std::move(*owner).release_now());
  }
  state.SetItemsProcessed(state.iterations());
}

}  // namespace ortmem::bench
