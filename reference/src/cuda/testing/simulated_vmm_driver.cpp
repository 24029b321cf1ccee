#include "ortmem/cuda/testing/simulated_vmm_driver.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <string>

namespace ortmem::cuda::testing {
namespace {

DriverFault refused(std::string_view entry_point, std::string why) {
  return DriverFault{entry_point, "CUDA_ERROR_INVALID_VALUE (simulated: " + why + ")"};
}

DriverFault out_of_memory(std::string_view entry_point, int error) {
  return DriverFault{entry_point, "CUDA_ERROR_OUT_OF_MEMORY (simulated: " + std::string(std::strerror(error)) + ")"};
}

void* at(DevicePtr address) noexcept { return reinterpret_cast<void*>(static_cast<std::uintptr_t>(address)); }

// Puts back an inaccessible, unbacked reservation over [address, address + bytes).
// Best effort: it runs on paths that already report a failure, and a range
// it cannot re-reserve stays as it was, which that failure already describes.
void make_reserved(DevicePtr address, std::size_t bytes) noexcept {
  (void)::mmap(at(address), bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
}

}  // namespace

SimulatedVmmDriver::SimulatedVmmDriver(std::size_t granularity) : granularity_(granularity) {}

SimulatedVmmDriver::~SimulatedVmmDriver() {
  for (const auto& [address, bytes] : reservations_) ::munmap(at(address), bytes);
  for (const auto& [id, handle] : handles_) ::close(handle.fd);
}

void SimulatedVmmDriver::count(std::string_view entry_point) { ++calls_[entry_point]; }

std::uint64_t SimulatedVmmDriver::calls(std::string_view entry_point) const {
  const std::lock_guard lock(mutex_);
  const auto found = calls_.find(entry_point);
  return found == calls_.end() ? 0 : found->second;
}

std::size_t SimulatedVmmDriver::live_handles() const {
  const std::lock_guard lock(mutex_);
  return handles_.size();
}

std::size_t SimulatedVmmDriver::mappings() const {
  const std::lock_guard lock(mutex_);
  return mappings_.size();
}

std::size_t SimulatedVmmDriver::reservations() const {
  const std::lock_guard lock(mutex_);
  return reservations_.size();
}

bool SimulatedVmmDriver::reserved(DevicePtr address, std::size_t bytes) const {
  auto it = reservations_.upper_bound(address);
  if (it == reservations_.begin()) return false;
  --it;
  return address + bytes <= it->first + it->second;
}

void SimulatedVmmDriver::drop_if_unused(PhysicalHandle id) {
  const auto found = handles_.find(id);
  if (found == handles_.end() || !found->second.released || found->second.mappings != 0) return;
  ::close(found->second.fd);
  handles_.erase(found);
}

Expected<DevicePtr, DriverFault> SimulatedVmmDriver::reserve(std::size_t bytes, std::size_t alignment) noexcept {
  constexpr std::string_view kCall = "cuMemAddressReserve";
  if (bytes == 0 || bytes % granularity_ != 0 || alignment == 0 || (alignment & (alignment - 1)) != 0) {
    return fail(refused(kCall, "size must be a non-zero multiple of the granularity, alignment a power of two"));
  }
  const std::size_t boundary = std::max(alignment, granularity_);
  // No address space holds it; the real driver refuses the same way.
  if (bytes > SIZE_MAX - boundary) return fail(out_of_memory(kCall, ENOMEM));
  const std::size_t over = bytes + boundary;
  void* raw = ::mmap(nullptr, over, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (raw == MAP_FAILED) return fail(out_of_memory(kCall, errno));
  const auto start = reinterpret_cast<std::uintptr_t>(raw);
  const std::uintptr_t aligned = (start + boundary - 1) & ~(std::uintptr_t{boundary} - 1);
  if (aligned > start) ::munmap(raw, aligned - start);
  if (start + over > aligned + bytes) ::munmap(at(aligned + bytes), start + over - (aligned + bytes));
  try {
    const std::lock_guard lock(mutex_);
    reservations_.emplace(aligned, bytes);
    count(kCall);
  } catch (const std::bad_alloc&) {
    ::munmap(at(aligned), bytes);
    return fail(out_of_memory(kCall, ENOMEM));
  }
  return static_cast<DevicePtr>(aligned);
}

Expected<void, DriverFault> SimulatedVmmDriver::free_reservation(DevicePtr address, std::size_t bytes) noexcept {
  constexpr std::string_view kCall = "cuMemAddressFree";
  const std::lock_guard lock(mutex_);
  const auto found = reservations_.find(address);
  if (found == reservations_.end() || found->second != bytes) return fail(refused(kCall, "not a reservation"));
  const auto mapped = mappings_.lower_bound(address);
  if (mapped != mappings_.end() && mapped->first < address + bytes) {
    return fail(refused(kCall, "the range still has mappings"));
  }
  ::munmap(at(address), bytes);
  reservations_.erase(found);
  count(kCall);
  return {};
}

Expected<PhysicalHandle, DriverFault> SimulatedVmmDriver::create(std::size_t bytes) noexcept {
  constexpr std::string_view kCall = "cuMemCreate";
  if (bytes == 0 || bytes % granularity_ != 0) return fail(refused(kCall, "size is not a multiple of the granularity"));
  const int fd = ::memfd_create("ortmem-simulated-handle", MFD_CLOEXEC);
  if (fd < 0) return fail(out_of_memory(kCall, errno));
  if (::ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    const int error = errno;
    ::close(fd);
    return fail(out_of_memory(kCall, error));
  }
  try {
    const std::lock_guard lock(mutex_);
    const PhysicalHandle id = next_handle_++;
    handles_.emplace(id, Handle{fd, bytes});
    count(kCall);
    return id;
  } catch (const std::bad_alloc&) {
    ::close(fd);
    return fail(out_of_memory(kCall, ENOMEM));
  }
}

Expected<void, DriverFault> SimulatedVmmDriver::release(PhysicalHandle id) noexcept {
  constexpr std::string_view kCall = "cuMemRelease";
  const std::lock_guard lock(mutex_);
  const auto found = handles_.find(id);
  if (found == handles_.end() || found->second.released) return fail(refused(kCall, "not a live handle"));
  found->second.released = true;
  drop_if_unused(id);
  count(kCall);
  return {};
}

Expected<void, DriverFault> SimulatedVmmDriver::map(DevicePtr address, std::size_t bytes, PhysicalHandle id) noexcept {
  constexpr std::string_view kCall = "cuMemMap";
  try {
    const std::lock_guard lock(mutex_);
    const auto handle = handles_.find(id);
    if (handle == handles_.end() || handle->second.released) return fail(refused(kCall, "not a live handle"));
    if (handle->second.bytes != bytes) return fail(refused(kCall, "size differs from the handle's"));
    if (address % granularity_ != 0 || !reserved(address, bytes)) return fail(refused(kCall, "not a reserved range"));
    auto next = mappings_.lower_bound(address);
    if ((next != mappings_.end() && next->first < address + bytes) ||
        (next != mappings_.begin() && std::prev(next)->first + std::prev(next)->second.bytes > address)) {
      return fail(refused(kCall, "the range is already mapped"));
    }
    if (::mmap(at(address), bytes, PROT_NONE, MAP_SHARED | MAP_FIXED, handle->second.fd, 0) == MAP_FAILED) {
      const int error = errno;
      make_reserved(address, bytes);
      return fail(out_of_memory(kCall, error));
    }
    mappings_.emplace(address, Mapping{bytes, id, std::nullopt});
    ++handle->second.mappings;
    count(kCall);
    return {};
  } catch (const std::bad_alloc&) {
    make_reserved(address, bytes);
    return fail(out_of_memory(kCall, ENOMEM));
  }
}

Expected<void, DriverFault> SimulatedVmmDriver::unmap(DevicePtr address, std::size_t bytes) noexcept {
  constexpr std::string_view kCall = "cuMemUnmap";
  const std::lock_guard lock(mutex_);
  // The range must be exactly a sequence of whole, adjacent mappings.
  auto first = mappings_.find(address);
  if (first == mappings_.end()) return fail(refused(kCall, "no mapping starts at the address"));
  auto it = first;
  DevicePtr cursor = address;
  while (cursor < address + bytes) {
    if (it == mappings_.end() || it->first != cursor) return fail(refused(kCall, "the range is not wholly mapped"));
    cursor += it->second.bytes;
    ++it;
  }
  if (cursor != address + bytes) return fail(refused(kCall, "the range cuts a mapping"));
  make_reserved(address, bytes);
  for (auto victim = first; victim != it;) {
    const PhysicalHandle id = victim->second.handle;
    victim = mappings_.erase(victim);
    --handles_.at(id).mappings;
    drop_if_unused(id);
  }
  count(kCall);
  return {};
}

Expected<void, DriverFault> SimulatedVmmDriver::set_access(DevicePtr address, std::size_t bytes,
                                                           Access access) noexcept {
  constexpr std::string_view kCall = "cuMemSetAccess";
  const std::lock_guard lock(mutex_);
  DevicePtr cursor = address;
  for (auto it = mappings_.find(address); cursor < address + bytes; ++it) {
    if (it == mappings_.end() || it->first != cursor) return fail(refused(kCall, "the range is not wholly mapped"));
    cursor += it->second.bytes;
  }
  const int protection = access == Access::kReadOnly ? PROT_READ : PROT_READ | PROT_WRITE;
  if (::mprotect(at(address), bytes, protection) != 0) return fail(out_of_memory(kCall, errno));
  for (auto it = mappings_.find(address); it != mappings_.end() && it->first < address + bytes; ++it) {
    it->second.access = access;
  }
  count(kCall);
  return {};
}

Expected<std::optional<Access>, DriverFault> SimulatedVmmDriver::access(DevicePtr address) const noexcept {
  const std::lock_guard lock(mutex_);
  auto it = mappings_.upper_bound(address);
  if (it == mappings_.begin()) return fail(refused("cuMemGetAccess", "the address is not mapped"));
  --it;
  if (address >= it->first + it->second.bytes) return fail(refused("cuMemGetAccess", "the address is not mapped"));
  return it->second.access;
}

}  // namespace ortmem::cuda::testing
