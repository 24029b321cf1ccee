// PluginAllocator's VirtualBacking: each call becomes one call of the
// plugin's virtual-backing vtable, naming the allocation by the kit's record
// (id, address, size, alignment). A call naming no live allocation is
// refused here, without calling the plugin.
#include <vector>

#include "plugin/plugin_allocator.hpp"

namespace ortmem::plugin {

Expected<void*, MemoryError> PluginAllocator::allocate_committed(std::size_t bytes, std::size_t align,
                                                                 std::span<const ByteRange> committed) noexcept {
  return issue(virtual_backing_.allocate_committed, virtual_backing_.ctx, "allocate_committed", bytes, align,
               committed);
}

namespace {

NxmemRangeRequest range_request(const NxmemAllocation& allocation, std::size_t offset, std::size_t bytes) {
  NxmemRangeRequest request{};
  request.struct_size = sizeof request;
  request.allocation = allocation;
  request.range = NxmemByteRange{offset, bytes};
  return request;
}

}  // namespace

Expected<void, MemoryError> PluginAllocator::commit_allocation_range(void* ptr, std::size_t allocation_bytes,
                                                                     std::size_t align, std::size_t offset,
                                                                     std::size_t bytes) noexcept {
  const auto record = find(ptr, allocation_bytes, align);
  if (!record) return fail(not_live(ptr, allocation_bytes));
  const NxmemRangeRequest request = range_request(name_of(ptr, *record), offset, bytes);
  const PluginStatus status = read_status(virtual_backing_.commit_range(virtual_backing_.ctx, &request));
  if (!status.ok()) return fail(refusal(bytes, "commit_range", status));
  return {};
}

Expected<std::uint64_t, MemoryError> PluginAllocator::decommit_allocation_range(void* ptr, std::size_t allocation_bytes,
                                                                                std::size_t align, std::size_t offset,
                                                                                std::size_t bytes) noexcept {
  const auto record = find(ptr, allocation_bytes, align);
  if (!record) return fail(not_live(ptr, allocation_bytes));
  const NxmemRangeRequest request = range_request(name_of(ptr, *record), offset, bytes);
  std::uint64_t unmapped = 0;
  const PluginStatus status = read_status(virtual_backing_.decommit_range(virtual_backing_.ctx, &request, &unmapped));
  if (!status.ok()) return fail(refusal(bytes, "decommit_range", status));
  return unmapped;
}

Expected<std::uint64_t, MemoryError> PluginAllocator::mapped_bytes_for_allocation(std::size_t bytes,
                                                                                  std::size_t align) const noexcept {
  // An estimate names no allocation: allocation id 0.
  NxmemAllocRequest request{};
  request.struct_size = sizeof request;
  request.mechanism_id = vtable_.mechanism_id;
  request.device = vtable_.device;
  request.bytes = bytes;
  request.align = align;
  std::uint64_t mapped = 0;
  const PluginStatus status =
      read_status(virtual_backing_.mapped_bytes_for_allocation(virtual_backing_.ctx, &request, &mapped));
  if (!status.ok()) return fail(refusal(bytes, "mapped_bytes_for_allocation", status));
  return mapped;
}

Expected<std::uint64_t, MemoryError> PluginAllocator::mapped_bytes_for_allocation_ranges(
    std::span<const AllocationCommitRange> ranges) const noexcept {
  std::vector<NxmemRangeRequest> requests;
  try {
    requests.reserve(ranges.size());
    for (const AllocationCommitRange& range : ranges) {
      const auto record = find(range.ptr, range.allocation_bytes, range.align);
      if (!record) return fail(not_live(range.ptr, range.allocation_bytes));
      requests.push_back(range_request(name_of(range.ptr, *record), range.offset, range.bytes));
    }
  } catch (const std::bad_alloc&) {
    return fail(MemoryError::allocation_failed(device_.tier, 0, "the host is out of memory for the range requests"));
  }
  std::uint64_t mapped = 0;
  const PluginStatus status = read_status(virtual_backing_.mapped_bytes_for_ranges(
      virtual_backing_.ctx, requests.empty() ? nullptr : requests.data(), requests.size(), &mapped));
  if (!status.ok()) return fail(refusal(0, "mapped_bytes_for_ranges", status));
  return mapped;
}

std::size_t PluginAllocator::allocation_committed_bytes(void* ptr, std::size_t allocation_bytes,
                                                        std::size_t align) const noexcept {
  // The interface has no error channel: what is not a live allocation has
  // nothing committed.
  const auto record = find(ptr, allocation_bytes, align);
  if (!record) return 0;
  const NxmemAllocation allocation = name_of(ptr, *record);
  std::uint64_t committed = 0;
  if (!read_status(virtual_backing_.committed_bytes(virtual_backing_.ctx, &allocation, &committed)).ok()) return 0;
  return committed;
}

}  // namespace ortmem::plugin
