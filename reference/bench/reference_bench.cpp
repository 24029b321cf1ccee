// Benchmarks of the reference's hot paths, each read as a ratio against a
// baseline in the same run (scripts/bench.sh prints them against issue 20's
// targets). The baselines are the floors a path cannot beat:
//   a bare aligned_alloc + free        the cost any allocator pays for the block
//   one atomic increment and decrement what a shared counter costs one thread
//   a per-thread counter, 1 and 2 threads  the machine's own scaling ceiling
// and one floor, printed with no target: the bare block plus the lock round
// trips an owning cycle that keeps the contract cannot do without.
#include <benchmark/benchmark.h>

#include <malloc.h>

#include <array>
#include <atomic>
#include <cstdlib>
#include <memory>
#include <vector>

#include "owning_cycles.hpp"
#include "ortmem/detail/spin_lock.hpp"
#include "ortmem/host/host_allocator.hpp"
#include "ortmem/mechanism/fenced_deferred_queue.hpp"
#include "ortmem/mechanism/host_stream.hpp"
#include "ortmem/mechanism/provider_context.hpp"
#include "ortmem/ortmem.hpp"

namespace ortmem {
namespace {

// One registry, context, authority and mechanism over a HostAllocator, bound once.
struct Bound {
  Bound()
      : allocator(std::make_shared<host::HostAllocator>()), registry(*BindingRegistry::create()),
        context(*registry.register_provider_context(DeviceKey::host())),
        authority(*registry.register_authority(DeviceKey::host())),
        mechanism(*registry.register_allocator(context, authority, allocator)),
        binding(*registry.bind(DeviceKey::host())) {}

  std::shared_ptr<host::HostAllocator> allocator;
  BindingRegistry registry;
  RegisteredProviderContext context;
  RegisteredAuthority authority;
  RegisteredMechanism mechanism;
  MemoryBinding binding;
};

void BM_BareAlignedAllocFree(benchmark::State& state) {
  const auto bytes = static_cast<std::size_t>(state.range(0));
  for (auto _ : state) {
    void* ptr = std::aligned_alloc(16, bytes);
    benchmark::DoNotOptimize(ptr);
    std::free(ptr);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_BareAlignedAllocFree)->Arg(64);

// The bare block plus the six uncontended lock round trips that an owning
// cycle keeping the contract takes: the registry's four (open the operation,
// record, take the record for release, settle it) and the host allocator's
// two (record the block, erase it). No target: the floor that the owning
// cycle's ratio to bare is read against.
struct alignas(64) PaddedLock {
  detail::SpinLock lock;
  std::size_t count = 0;
};
std::array<PaddedLock, 6> cycle_locks;
void round_trip(PaddedLock& padded) {
  padded.lock.lock();
  benchmark::DoNotOptimize(++padded.count);
  padded.lock.unlock();
}
void BM_LockFloor(benchmark::State& state) {
  const auto bytes = static_cast<std::size_t>(state.range(0));
  for (auto _ : state) {
    round_trip(cycle_locks[0]);  // open the operation
    void* ptr = std::aligned_alloc(16, bytes);
    benchmark::DoNotOptimize(ptr);
    round_trip(cycle_locks[1]);  // the host allocator records the block
    round_trip(cycle_locks[2]);  // the registry records it
    round_trip(cycle_locks[3]);  // take the record for release
    round_trip(cycle_locks[4]);  // the host allocator erases the block
    std::free(ptr);
    round_trip(cycle_locks[5]);  // settle
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_LockFloor)->Arg(64);

void BM_RawHostAllocRelease(benchmark::State& state) {
  host::HostAllocator allocator;
  const auto bytes = static_cast<std::size_t>(state.range(0));
  for (auto _ : state) {
    void* ptr = *allocator.allocate(bytes, 16);
    benchmark::DoNotOptimize(ptr);
    benchmark::DoNotOptimize(allocator.release(ptr, bytes, 16));
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_RawHostAllocRelease)->Arg(64);

void BM_OwningAllocRelease(benchmark::State& state) {
  Bound bound;
  bench::owning_cycles(state, bound.binding, static_cast<std::size_t>(state.range(0)), 16);
}
BENCHMARK(BM_OwningAllocRelease)->Arg(64);

std::size_t heap_in_use() { return mallinfo2().uordblks; }

// The same cycle while N other allocations stay live in the same mechanism.
// Also reports the heap each live owning allocation costs beyond what the raw
// host allocator spends on the same allocation: the registry's bookkeeping
// (`registry_bytes_per_live`), not counting the owner handle the caller holds
// (`handle_bytes`).
void BM_OwningAllocRelease_Live(benchmark::State& state) {
  const auto count = static_cast<std::size_t>(state.range(0));
  std::size_t raw_per_allocation = 0;
  {
    host::HostAllocator raw;
    std::vector<void*> blocks;
    blocks.reserve(count);
    const std::size_t before = heap_in_use();
    for (std::size_t i = 0; i < count; ++i) blocks.push_back(*raw.allocate(64, 16));
    raw_per_allocation = (heap_in_use() - before) / count;
    for (void* block : blocks) (void)raw.release(block, 64, 16);
  }
  Bound bound;
  std::vector<OwningAllocation> live;
  live.reserve(count);
  const std::size_t before = heap_in_use();
  for (std::size_t i = 0; i < count; ++i) live.push_back(*bound.binding.allocate_owning(64, 16));
  const std::size_t owning_per_allocation = (heap_in_use() - before) / count;
  state.counters["registry_bytes_per_live"] =
      static_cast<double>(owning_per_allocation) - static_cast<double>(raw_per_allocation);
  state.counters["handle_bytes"] = static_cast<double>(sizeof(OwningAllocation));
  bench::owning_cycles(state, bound.binding, 64, 16);
  for (auto& owner : live) (void)std::move(owner).release_now();
}
BENCHMARK(BM_OwningAllocRelease_Live)->Arg(100)->Arg(10000)->Arg(1000000);

// Several threads on one host allocator: how far the baseline itself scales.
std::unique_ptr<host::HostAllocator> shared_allocator;
void BM_RawHostAllocRelease_Threads(benchmark::State& state) {
  if (state.thread_index() == 0) shared_allocator = std::make_unique<host::HostAllocator>();
  for (auto _ : state) {
    void* ptr = *shared_allocator->allocate(64, 16);
    benchmark::DoNotOptimize(ptr);
    benchmark::DoNotOptimize(shared_allocator->release(ptr, 64, 16));
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_RawHostAllocRelease_Threads)->Threads(1)->Threads(2)->UseRealTime();

// Several threads on one binding (one mechanism).
std::unique_ptr<Bound> shared_bound;
void BM_OwningAllocRelease_Threads(benchmark::State& state) {
  if (state.thread_index() == 0) shared_bound = std::make_unique<Bound>();
  // Google Benchmark starts the timed loop on every thread together.
  for (auto _ : state) {
    auto owner = shared_bound->binding.allocate_owning(64, 16);
    benchmark::DoNotOptimize(std::move(*owner).release_now());
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_OwningAllocRelease_Threads)->Threads(1)->Threads(2)->UseRealTime();

void BM_DeferredEnqueueDrain(benchmark::State& state) {
  Bound bound;
  auto context = std::make_shared<mechanism::ProviderContext>(bound.context.identity);
  auto stream = std::make_shared<mechanism::HostStream>();
  mechanism::FencedDeferredQueue queue(context, stream);
  const auto bytes = static_cast<std::size_t>(state.range(0));
  for (auto _ : state) {
    auto owner = bound.binding.allocate_owning(bytes, 16);
    benchmark::DoNotOptimize(std::move(*owner).release_deferred(queue));
    stream->complete_all();
    benchmark::DoNotOptimize(queue.poll());
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_DeferredEnqueueDrain)->Arg(64);

std::atomic<std::uint64_t> counter{0};
void BM_AtomicIncDec(benchmark::State& state) {
  for (auto _ : state) {
    counter.fetch_add(1, std::memory_order_acq_rel);
    counter.fetch_sub(1, std::memory_order_acq_rel);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_AtomicIncDec);

// Each thread counts on a cache line of its own: what two threads can gain
// when they share nothing, the ceiling for the scaling ratios.
struct alignas(64) PaddedCounter {
  std::atomic<std::uint64_t> value{0};
};
std::array<PaddedCounter, 2> per_thread;
void BM_PerThreadCounter(benchmark::State& state) {
  auto& mine = per_thread.at(static_cast<std::size_t>(state.thread_index()));
  for (auto _ : state) {
    mine.value.fetch_add(1, std::memory_order_acq_rel);
    mine.value.fetch_sub(1, std::memory_order_acq_rel);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_PerThreadCounter)->Threads(1)->Threads(2)->UseRealTime();

std::unique_ptr<mechanism::ProviderContext> shared_context;
void BM_PinAcquireRelease(benchmark::State& state) {
  if (state.thread_index() == 0) {
    auto issuer = *IdentityIssuer::create();
    shared_context = std::make_unique<mechanism::ProviderContext>(*issuer.issue<ProviderContextIdentity>());
  }
  for (auto _ : state) {
    auto pin = shared_context->pin();
    benchmark::DoNotOptimize(pin);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_PinAcquireRelease)->Threads(1)->Threads(2)->UseRealTime();

// A capped context grants each pin under its mutex to keep the cap exact
// (PIN-005): what that costs, beside the uncapped figures above.
std::unique_ptr<mechanism::ProviderContext> capped_context;
void BM_PinAcquireRelease_Capped(benchmark::State& state) {
  if (state.thread_index() == 0) {
    auto issuer = *IdentityIssuer::create();
    capped_context = std::make_unique<mechanism::ProviderContext>(*issuer.issue<ProviderContextIdentity>(),
                                                                  mechanism::ProviderContext::Options{1 << 20});
  }
  for (auto _ : state) {
    auto pin = capped_context->pin();
    benchmark::DoNotOptimize(pin);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_PinAcquireRelease_Capped)->Threads(1)->Threads(2)->UseRealTime();

void BM_Snapshot_Quarantined(benchmark::State& state) {
  Bound bound;
  for (std::int64_t i = 0; i < state.range(0); ++i) {
    auto owner = bound.binding.allocate_owning(16, 16);  // dropped: quarantined
  }
  for (auto _ : state) benchmark::DoNotOptimize(bound.registry.snapshot(bound.mechanism));
  state.SetItemsProcessed(state.iterations());
  state.counters["quarantined"] =
      static_cast<double>(bound.registry.snapshot(bound.mechanism)->quarantined_allocations);
}
BENCHMARK(BM_Snapshot_Quarantined)->Arg(0)->Arg(100000);

}  // namespace
}  // namespace ortmem

BENCHMARK_MAIN();
