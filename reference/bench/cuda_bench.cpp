// Benchmarks of the CUDA reference, each read as a ratio against the raw
// runtime or driver calls it is built on, in the same run:
//   CudaAllocator allocate + release      vs  cudaMallocAsync + cudaFreeAsync
//   owning allocate + release_now (CUDA)  vs  the same raw pair
//   CudaVirtualAllocator allocate+release vs  reserve, create, map, set access and back, by hand
//   deferred enqueue + drain (events)     vs  cudaEventRecord + cudaEventQuery
// Without a device every benchmark reports the reason and is skipped.
#include <benchmark/benchmark.h>
#include <cuda_runtime_api.h>

#include <memory>
#include <string>

#include "owning_cycles.hpp"
#include "ortmem/cuda/cuda_allocator.hpp"
#include "ortmem/cuda/cuda_device.hpp"
#include "ortmem/cuda/cuda_event_fences.hpp"
#include "ortmem/cuda/cuda_provider_context.hpp"
#include "ortmem/cuda/cuda_virtual_allocator.hpp"
#include "ortmem/cuda/cuda_vmm_driver.hpp"
#include "ortmem/mechanism/fenced_deferred_queue.hpp"
#include "ortmem/ortmem.hpp"

namespace ortmem::cuda {
namespace {

constexpr int kOrdinal = 0;

bool has_device(benchmark::State& state) {
  static const auto probed = probe_cuda_device(kOrdinal);
  if (!probed) state.SkipWithError(probed.error().c_str());
  return probed.has_value();
}

// One registry, context, authority and mechanism over a CudaAllocator, bound once.
struct BoundCudaAllocator {
  BoundCudaAllocator()
      : registry(*BindingRegistry::create()), context(*registry.register_provider_context(kDevice)),
        authority(*registry.register_authority(kDevice)),
        mechanism(*registry.register_allocator(context, authority, *CudaAllocator::create(kOrdinal))),
        binding(*registry.bind(kDevice)) {}

  static constexpr DeviceKey kDevice = DeviceKey::device(kOrdinal);
  BindingRegistry registry;
  RegisteredProviderContext context;
  RegisteredAuthority authority;
  RegisteredMechanism mechanism;
  MemoryBinding binding;
};

void BM_CudaRawMallocFree(benchmark::State& state) {
  if (!has_device(state)) return;
  cudaSetDevice(kOrdinal);
  cudaStream_t stream = nullptr;
  cudaStreamCreate(&stream);
  const auto bytes = static_cast<std::size_t>(state.range(0));
  for (auto _ : state) {
    void* ptr = nullptr;
    cudaMallocAsync(&ptr, bytes, stream);
    cudaFreeAsync(ptr, stream);
  }
  cudaStreamSynchronize(stream);
  cudaStreamDestroy(stream);
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_CudaRawMallocFree)->Arg(64);

void BM_CudaAllocatorAllocRelease(benchmark::State& state) {
  if (!has_device(state)) return;
  auto allocator = *CudaAllocator::create(kOrdinal);
  const auto bytes = static_cast<std::size_t>(state.range(0));
  for (auto _ : state) {
    void* ptr = *allocator->allocate(bytes, 256);
    benchmark::DoNotOptimize(allocator->release(ptr, bytes, 256));
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_CudaAllocatorAllocRelease)->Arg(64);

void BM_CudaOwningAllocRelease(benchmark::State& state) {
  if (!has_device(state)) return;
  BoundCudaAllocator bound;
  bench::owning_cycles(state, bound.binding, static_cast<std::size_t>(state.range(0)), 256);
}
BENCHMARK(BM_CudaOwningAllocRelease)->Arg(64);

// The same steps CudaVirtualAllocator takes for one fully committed granule,
// with none of its bookkeeping.
void BM_CudaRawVmmGranule(benchmark::State& state) {
  if (!has_device(state)) return;
  auto loaded = load_cuda_vmm_driver(kOrdinal);
  if (!loaded) return state.SkipWithError(loaded.error().c_str());
  VmmDriver& driver = **loaded;
  const std::size_t granule = driver.granularity();
  for (auto _ : state) {
    const DevicePtr address = *driver.reserve(granule, granule);
    const PhysicalHandle handle = *driver.create(granule);
    (void)driver.map(address, granule, handle);
    (void)driver.set_access(address, granule, Access::kReadWrite);
    (void)driver.unmap(address, granule);
    (void)driver.release(handle);
    (void)driver.free_reservation(address, granule);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_CudaRawVmmGranule);

void BM_CudaVmmAllocRelease(benchmark::State& state) {
  if (!has_device(state)) return;
  auto loaded = load_cuda_vmm_driver(kOrdinal);
  if (!loaded) return state.SkipWithError(loaded.error().c_str());
  auto allocator = *CudaVirtualAllocator::create(*loaded, {});
  const std::size_t granule = allocator->granularity();
  for (auto _ : state) {
    void* ptr = *allocator->allocate(granule, 256);
    benchmark::DoNotOptimize(allocator->release(ptr, granule, 256));
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_CudaVmmAllocRelease);

void BM_CudaRawEventRecordQuery(benchmark::State& state) {
  if (!has_device(state)) return;
  cudaSetDevice(kOrdinal);
  cudaStream_t stream = nullptr;
  cudaStreamCreate(&stream);
  cudaEvent_t event = nullptr;
  cudaEventCreateWithFlags(&event, cudaEventDisableTiming);
  for (auto _ : state) {
    cudaEventRecord(event, stream);
    while (cudaEventQuery(event) == cudaErrorNotReady) {
    }
  }
  cudaEventDestroy(event);
  cudaStreamDestroy(stream);
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_CudaRawEventRecordQuery);

// Per request: allocate_owning, release_deferred onto the event-fenced queue,
// then poll until it ran.
void BM_CudaDeferredEnqueueDrain(benchmark::State& state) {
  if (!has_device(state)) return;
  BoundCudaAllocator bound;
  auto provider = *CudaProviderContext::create(bound.context.identity, kOrdinal);
  mechanism::FencedDeferredQueue queue(provider, std::make_shared<CudaEventFences>(kOrdinal, provider->stream()));
  for (auto _ : state) {
    auto owner = bound.binding.allocate_owning(64, 256);
    auto disposition = std::move(*owner).release_deferred(queue);
    if (!disposition || !disposition->is_queued()) return state.SkipWithError("the queue refused the request");
    // The fence needs nothing but the stream's earlier work: it passes within
    // microseconds. A bound keeps a broken device from spinning forever.
    std::size_t polls = 0;
    while (queue.poll() == 0) {
      if (++polls == 100'000'000) return state.SkipWithError("a fenced request never ran");
    }
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_CudaDeferredEnqueueDrain);

}  // namespace
}  // namespace ortmem::cuda

BENCHMARK_MAIN();
