// ortmem/cuda/cuda_vmm_driver.hpp: VmmDriver on a real CUDA device.
//
// Driver entry points are resolved through cudaGetDriverEntryPointByVersion,
// never by linking libcuda, so a binary holding this code still loads where
// there is no driver; load() is where it finds out and says so.
//
// Physical memory is pinned device memory on the driver's recommended
// allocation granularity for the device (2 MiB when the driver gives none).
// Each call first makes the device's primary context current on the calling
// thread, since callers may be any thread.
#pragma once

#include <memory>
#include <string>

#include "ortmem/cuda/vmm_driver.hpp"

namespace ortmem::cuda {

// The device's driver, or why it cannot be used ("no CUDA device: ...", or
// that the device lacks virtual memory management, or a missing entry point).
[[nodiscard]] Expected<std::shared_ptr<VmmDriver>, std::string> load_cuda_vmm_driver(int ordinal) noexcept;

}  // namespace ortmem::cuda
