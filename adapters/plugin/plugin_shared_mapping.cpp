// PluginAllocator's SharedMapping. A prefix the plugin created is held as a
// Prefix: the plugin's handle plus a reference to the allocator, released
// through release_shared_prefix exactly once, when the kit drops it. The
// host never calls retain_shared_prefix: one kit object is one reference.
#include "plugin/plugin_allocator.hpp"

namespace ortmem::plugin {

class PluginAllocator::Prefix final : public SharedDevicePrefix {
 public:
  Prefix(std::shared_ptr<const PluginAllocator> owner, const NxmemSharedPrefixHandle& handle)
      : owner_(std::move(owner)), handle_(handle) {}
  Prefix(const Prefix&) = delete;
  Prefix& operator=(const Prefix&) = delete;
  ~Prefix() override {
    // Nothing to do with a refusal here: the plugin keeps what it will not let go.
    (void)owner_->shared_mapping_.release_shared_prefix(owner_->shared_mapping_.ctx, &handle_);
  }

  std::uint64_t device_ptr() const noexcept override { return handle_.device_ptr; }
  std::uint64_t committed_physical_bytes() const noexcept override { return handle_.committed_physical_bytes; }
  std::size_t mapped_bytes() const noexcept override { return handle_.mapped_bytes; }
  std::size_t requested_bytes() const noexcept override { return handle_.requested_bytes; }

  [[nodiscard]] const PluginAllocator* owner() const noexcept { return owner_.get(); }
  [[nodiscard]] const NxmemSharedPrefixHandle& handle() const noexcept { return handle_; }

 private:
  std::shared_ptr<const PluginAllocator> owner_;
  NxmemSharedPrefixHandle handle_;
};

Expected<std::unique_ptr<SharedDevicePrefix>, MemoryError> PluginAllocator::create_shared_prefix(
    std::size_t bytes) noexcept {
  NxmemSharedPrefixHandle handle{};
  handle.struct_size = sizeof handle;
  const PluginStatus status =
      read_status(shared_mapping_.create_shared_prefix(shared_mapping_.ctx, vtable_.mechanism_id, bytes, &handle));
  if (!status.ok()) return fail(refusal(bytes, "create_shared_prefix", status));
  if (handle.handle == 0) {
    return fail(MemoryError::allocation_failed(device_.tier, bytes,
                                               "the plugin's create_shared_prefix answered OK with handle 0"));
  }
  try {
    return std::unique_ptr<SharedDevicePrefix>(std::make_unique<Prefix>(shared_from_this(), handle));
  } catch (const std::bad_alloc&) {
    (void)shared_mapping_.release_shared_prefix(shared_mapping_.ctx, &handle);
    return fail(MemoryError::allocation_failed(device_.tier, bytes, "the host is out of memory for the prefix"));
  }
}

Expected<const PluginAllocator::Prefix*, MemoryError> PluginAllocator::plugin_prefix(const SharedDevicePrefix& prefix,
                                                                                     std::size_t bytes) const {
  // A prefix of another plugin allocator is passed on: refusing a foreign
  // prefix is the plugin's own check (SM-002). One that no plugin made has
  // no handle to pass.
  const auto* ours = dynamic_cast<const Prefix*>(&prefix);
  if (ours == nullptr) {
    return fail(MemoryError::invalid_request(
        device_.tier, bytes, "the prefix was not made by an nxmem plugin allocator; the plugin was not called"));
  }
  return ours;
}

Expected<std::uint64_t, MemoryError> PluginAllocator::incremental_owned_bytes_for_shared_prefix(
    const SharedDevicePrefix& prefix) const noexcept {
  const auto ours = plugin_prefix(prefix, prefix.requested_bytes());
  if (!ours) return fail(ours.error());
  std::uint64_t owned = 0;
  const PluginStatus status =
      read_status(shared_mapping_.incremental_owned_bytes(shared_mapping_.ctx, &(*ours)->handle(), &owned));
  if (!status.ok()) return fail(refusal(prefix.requested_bytes(), "incremental_owned_bytes", status));
  return owned;
}

Expected<SharedPrefixCommitInfo, MemoryError> PluginAllocator::commit_shared_prefix(const SharedDevicePrefix& prefix,
                                                                                    void* ptr,
                                                                                    std::size_t allocation_bytes,
                                                                                    std::size_t byte_offset) noexcept {
  const auto ours = plugin_prefix(prefix, allocation_bytes);
  if (!ours) return fail(ours.error());
  const auto record = find(ptr, allocation_bytes, std::nullopt);
  if (!record) return fail(not_live(ptr, allocation_bytes));
  NxmemSharedPrefixCommitRequest request{};
  request.struct_size = sizeof request;
  request.prefix = (*ours)->handle();
  request.allocation = name_of(ptr, *record);
  request.byte_offset = byte_offset;
  NxmemSharedPrefixCommitInfo info{};
  info.struct_size = sizeof info;
  const PluginStatus status = read_status(shared_mapping_.commit_shared_prefix(shared_mapping_.ctx, &request, &info));
  if (!status.ok()) return fail(refusal(allocation_bytes, "commit_shared_prefix", status));
  return SharedPrefixCommitInfo{info.additional_owned_bytes, info.newly_mapped_bytes, info.granules};
}

}  // namespace ortmem::plugin
