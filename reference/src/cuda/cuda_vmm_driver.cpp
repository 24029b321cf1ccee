#include "ortmem/cuda/cuda_vmm_driver.hpp"

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>

#include "ortmem/cuda/cuda_device.hpp"

namespace ortmem::cuda {
namespace {

// The driver ABI these entry points were introduced with; asking for it by
// version keeps working when newer drivers add variants of the same name.
constexpr unsigned int kEntryPointVersion = 12000;

struct EntryPoints {
  PFN_cuGetErrorName_v6000 get_error_name = nullptr;
  PFN_cuDeviceGetAttribute_v2000 get_attribute = nullptr;
  PFN_cuMemGetAllocationGranularity_v10020 get_granularity = nullptr;
  PFN_cuMemAddressReserve_v10020 address_reserve = nullptr;
  PFN_cuMemAddressFree_v10020 address_free = nullptr;
  PFN_cuMemCreate_v10020 create = nullptr;
  PFN_cuMemRelease_v10020 release = nullptr;
  PFN_cuMemMap_v10020 map = nullptr;
  PFN_cuMemUnmap_v10020 unmap = nullptr;
  PFN_cuMemSetAccess_v10020 set_access = nullptr;
  PFN_cuMemGetAccess_v10020 get_access = nullptr;
};

template <class Function>
Expected<void, std::string> resolve(const char* symbol, Function& function) {
  void* address = nullptr;
  cudaDriverEntryPointQueryResult status{};
  const cudaError_t error =
      cudaGetDriverEntryPointByVersion(symbol, &address, kEntryPointVersion, cudaEnableDefault, &status);
  if (error != cudaSuccess || status != cudaDriverEntryPointSuccess || address == nullptr) {
    return fail(std::string("the CUDA driver does not provide ") + symbol + " (" +
                (error != cudaSuccess ? runtime_error_name(error) : "symbol not found for this driver version") + ")");
  }
  function = reinterpret_cast<Function>(address);
  return {};
}

class CudaVmmDriver final : public VmmDriver {
 public:
  CudaVmmDriver(int ordinal, EntryPoints entry, std::size_t granularity)
      : ordinal_(ordinal), entry_(entry), granularity_(granularity) {}

  std::size_t granularity() const noexcept override { return granularity_; }

  Expected<DevicePtr, DriverFault> reserve(std::size_t bytes, std::size_t alignment) noexcept override {
    if (auto bound = bind("cuMemAddressReserve"); !bound) return fail(bound.error());
    CUdeviceptr address = 0;
    if (const CUresult result = entry_.address_reserve(&address, bytes, alignment, 0, 0); result != CUDA_SUCCESS) {
      return fail(fault("cuMemAddressReserve", result));
    }
    return static_cast<DevicePtr>(address);
  }
  Expected<void, DriverFault> free_reservation(DevicePtr address, std::size_t bytes) noexcept override {
    return check("cuMemAddressFree", [&] { return entry_.address_free(address, bytes); });
  }
  Expected<PhysicalHandle, DriverFault> create(std::size_t bytes) noexcept override {
    if (auto bound = bind("cuMemCreate"); !bound) return fail(bound.error());
    CUmemGenericAllocationHandle handle = 0;
    const CUmemAllocationProp properties = allocation_properties(ordinal_);
    if (const CUresult result = entry_.create(&handle, bytes, &properties, 0); result != CUDA_SUCCESS) {
      return fail(fault("cuMemCreate", result));
    }
    return static_cast<PhysicalHandle>(handle);
  }
  Expected<void, DriverFault> release(PhysicalHandle handle) noexcept override {
    return check("cuMemRelease", [&] { return entry_.release(handle); });
  }
  Expected<void, DriverFault> map(DevicePtr address, std::size_t bytes, PhysicalHandle handle) noexcept override {
    return check("cuMemMap", [&] { return entry_.map(address, bytes, 0, handle, 0); });
  }
  Expected<void, DriverFault> unmap(DevicePtr address, std::size_t bytes) noexcept override {
    return check("cuMemUnmap", [&] { return entry_.unmap(address, bytes); });
  }
  Expected<void, DriverFault> set_access(DevicePtr address, std::size_t bytes, Access access) noexcept override {
    CUmemAccessDesc descriptor{};
    descriptor.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    descriptor.location.id = ordinal_;
    descriptor.flags = access == Access::kReadOnly ? CU_MEM_ACCESS_FLAGS_PROT_READ : CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    return check("cuMemSetAccess", [&] { return entry_.set_access(address, bytes, &descriptor, 1); });
  }
  Expected<std::optional<Access>, DriverFault> access(DevicePtr address) const noexcept override {
    if (auto bound = bind("cuMemGetAccess"); !bound) return fail(bound.error());
    CUmemLocation location{};
    location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    location.id = ordinal_;
    unsigned long long flags = 0;
    if (const CUresult result = entry_.get_access(&flags, &location, address); result != CUDA_SUCCESS) {
      return fail(fault("cuMemGetAccess", result));
    }
    if (flags == CU_MEM_ACCESS_FLAGS_PROT_READWRITE) return std::optional(Access::kReadWrite);
    if (flags == CU_MEM_ACCESS_FLAGS_PROT_READ) return std::optional(Access::kReadOnly);
    return std::optional<Access>();
  }

  static CUmemAllocationProp allocation_properties(int ordinal) noexcept {
    CUmemAllocationProp properties{};
    properties.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    properties.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    properties.location.id = ordinal;
    return properties;
  }

 private:
  // The calling thread may never have touched this device: make its primary
  // context current, as every driver call below needs one.
  Expected<void, DriverFault> bind(std::string_view entry_point) const noexcept {
    if (const cudaError_t error = cudaSetDevice(ordinal_); error != cudaSuccess) {
      return fail(
          DriverFault{entry_point, "cudaSetDevice(" + std::to_string(ordinal_) + "): " + runtime_error_name(error)});
    }
    return {};
  }
  template <class Call>
  Expected<void, DriverFault> check(std::string_view entry_point, Call call) const noexcept {
    if (auto bound = bind(entry_point); !bound) return bound;
    if (const CUresult result = call(); result != CUDA_SUCCESS) return fail(fault(entry_point, result));
    return {};
  }
  DriverFault fault(std::string_view entry_point, CUresult result) const {
    const char* name = nullptr;
    if (entry_.get_error_name(result, &name) != CUDA_SUCCESS || name == nullptr) name = "an unknown CUresult";
    return DriverFault{entry_point, std::string(name) + " (" + std::to_string(static_cast<int>(result)) + ")"};
  }

  const int ordinal_;
  const EntryPoints entry_;
  const std::size_t granularity_;
};

}  // namespace

Expected<std::shared_ptr<VmmDriver>, std::string> load_cuda_vmm_driver(int ordinal) noexcept {
  try {
    auto device = probe_cuda_device(ordinal);
    if (!device) return fail(device.error());
    EntryPoints entry;
    for (auto resolved :
         {resolve("cuGetErrorName", entry.get_error_name), resolve("cuDeviceGetAttribute", entry.get_attribute),
          resolve("cuMemGetAllocationGranularity", entry.get_granularity),
          resolve("cuMemAddressReserve", entry.address_reserve), resolve("cuMemAddressFree", entry.address_free),
          resolve("cuMemCreate", entry.create), resolve("cuMemRelease", entry.release), resolve("cuMemMap", entry.map),
          resolve("cuMemUnmap", entry.unmap), resolve("cuMemSetAccess", entry.set_access),
          resolve("cuMemGetAccess", entry.get_access)}) {
      if (!resolved) return fail(resolved.error());
    }
    if (const cudaError_t error = cudaSetDevice(ordinal); error != cudaSuccess) {
      return fail("cannot use CUDA device " + std::to_string(ordinal) + ": " + runtime_error_name(error));
    }
    int supported = 0;
    if (entry.get_attribute(&supported, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, ordinal) !=
            CUDA_SUCCESS ||
        supported == 0) {
      return fail("CUDA device " + std::to_string(ordinal) + " (" + device->name +
                  ") does not support virtual memory management");
    }
    std::size_t granularity = 0;
    const CUmemAllocationProp properties = CudaVmmDriver::allocation_properties(ordinal);
    if (entry.get_granularity(&granularity, &properties, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED) != CUDA_SUCCESS ||
        granularity == 0) {
      granularity = std::size_t{2} << 20;
    }
    return std::shared_ptr<VmmDriver>(std::make_shared<CudaVmmDriver>(ordinal, entry, granularity));
  } catch (const std::bad_alloc&) {
    return fail(std::string("out of host memory loading the CUDA driver"));
  }
}

}  // namespace ortmem::cuda
