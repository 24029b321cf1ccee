// Registry rules that need a fault or a capability the adapter may not have:
// the kit wraps the adapter's real allocator in small, named test doubles that
// add only the missing piece, so the rule is checked on every adapter.
#include <atomic>
#include <functional>
#include <memory>

#include "support/registry_harness.hpp"
#include "support/suite.hpp"

namespace ortmem::cts {
namespace {

// Test double: forwards allocation and release to the adapter's allocator,
// and adds a virtual backing and a shared mapping that only count the calls
// that reach them. It proves what the registry lets through, not what a real
// capability does (the VB and SM suites check that).
class CapabilityProbe final : public DeviceAllocator, public VirtualBacking, public SharedMapping {
 public:
  explicit CapabilityProbe(std::shared_ptr<DeviceAllocator> inner) : inner_(std::move(inner)) {}

  Expected<void*, MemoryError> allocate(std::size_t bytes, std::size_t align) noexcept override {
    return inner_->allocate(bytes, align);
  }
  AllocationReleaseOutcome release(void* ptr, std::size_t bytes, std::size_t align) noexcept override {
    if (on_release) on_release();
    return scripted_release ? scripted_release(ptr, bytes, align) : inner_->release(ptr, bytes, align);
  }
  void deallocate(void* ptr, std::size_t bytes, std::size_t align) noexcept override {
    inner_->deallocate(ptr, bytes, align);
  }
  DeviceKey device() const noexcept override { return inner_->device(); }
  VirtualBacking* as_virtual_backing() noexcept override { return this; }
  SharedMapping* as_shared_mapping() noexcept override { return this; }

  Expected<void*, MemoryError> allocate_committed(std::size_t bytes, std::size_t align,
                                                  std::span<const ByteRange>) noexcept override {
    ++calls;
    return inner_->allocate(bytes, align);
  }
  Expected<void, MemoryError> commit_allocation_range(void*, std::size_t, std::size_t, std::size_t,
                                                      std::size_t) noexcept override {
    ++calls;
    return {};
  }
  Expected<std::uint64_t, MemoryError> decommit_allocation_range(void*, std::size_t, std::size_t, std::size_t,
                                                                 std::size_t) noexcept override {
    ++calls;
    return std::uint64_t{0};
  }
  Expected<std::uint64_t, MemoryError> mapped_bytes_for_allocation(std::size_t bytes,
                                                                   std::size_t) const noexcept override {
    return bytes;
  }
  Expected<std::uint64_t, MemoryError> mapped_bytes_for_allocation_ranges(
      std::span<const AllocationCommitRange>) const noexcept override {
    return std::uint64_t{0};
  }
  std::size_t allocation_committed_bytes(void*, std::size_t, std::size_t) const noexcept override { return 0; }

  struct Prefix final : SharedDevicePrefix {
    std::uint64_t device_ptr() const noexcept override { return 0; }
    std::uint64_t committed_physical_bytes() const noexcept override { return 0; }
    std::size_t mapped_bytes() const noexcept override { return 0; }
    std::size_t requested_bytes() const noexcept override { return 0; }
  };
  Expected<std::unique_ptr<SharedDevicePrefix>, MemoryError> create_shared_prefix(std::size_t) noexcept override {
    return std::unique_ptr<SharedDevicePrefix>(std::make_unique<Prefix>());
  }
  Expected<std::uint64_t, MemoryError> incremental_owned_bytes_for_shared_prefix(
      const SharedDevicePrefix&) const noexcept override {
    ++calls;
    return std::uint64_t{0};
  }
  Expected<SharedPrefixCommitInfo, MemoryError> commit_shared_prefix(const SharedDevicePrefix&, void*, std::size_t,
                                                                     std::size_t) noexcept override {
    ++calls;
    return SharedPrefixCommitInfo{};
  }

  [[nodiscard]] DeviceAllocator& inner() noexcept { return *inner_; }

  mutable std::atomic<int> calls{0};
  std::function<void()> on_release;
  std::function<AllocationReleaseOutcome(void*, std::size_t, std::size_t)> scripted_release;

 private:
  std::shared_ptr<DeviceAllocator> inner_;
};

class RegistryRules : public AdapterSuite {
 protected:
  void SetUp() override {
    AdapterSuite::SetUp();
    probe_ = std::make_shared<CapabilityProbe>(watched_allocator());
    registry_ = *BindingRegistry::create();
    context_ = *registry_->register_provider_context(info().device);
    auto authority = *registry_->register_authority(info().device);
    mechanism_ = *registry_->register_allocator(context_, authority, probe_);
    binding_ = *registry_->bind(info().device);
  }

  std::shared_ptr<CapabilityProbe> probe_;
  std::optional<BindingRegistry> registry_;
  RegisteredProviderContext context_;
  RegisteredMechanism mechanism_;
  std::optional<MemoryBinding> binding_;
};

TEST_P(RegistryRules, BoundCapabilitiesRevalidateOnEveryCall) {
  covers("BIND-016", "BIND-011");
  auto other = *registry_->bind(info().device);
  auto allocation = binding_->allocate(4096, 64);
  ASSERT_TRUE(allocation);
  auto mine = **binding_->virtual_backing();
  auto theirs = **other.virtual_backing();
  auto mismatch = theirs.commit(*allocation, 0, 4096);
  ASSERT_FALSE(mismatch);
  EXPECT_EQ(mismatch.error().kind(), BindingError::Kind::kBindingMismatch);
  EXPECT_EQ(probe_->calls.load(), 0) << "a mismatched commit reached the capability";
  ASSERT_TRUE(mine.commit(*allocation, 0, 4096));
  EXPECT_EQ(probe_->calls.load(), 1);
  const BoundAllocation stale = *allocation;
  ASSERT_TRUE(binding_->release(std::move(*allocation)));
  auto after = mine.decommit(stale, 0, 4096);
  ASSERT_FALSE(after);
  EXPECT_EQ(after.error().kind(), BindingError::Kind::kStaleAllocation);
  EXPECT_EQ(probe_->calls.load(), 1) << "a stale decommit reached the capability";

  auto shared = **binding_->shared_mapping();
  auto other_shared = **other.shared_mapping();
  auto prefix = shared.create_shared_prefix(64);
  ASSERT_TRUE(prefix);
  auto target = binding_->allocate(4096, 64);
  ASSERT_TRUE(target);
  auto foreign = other_shared.incremental_owned_bytes(*prefix);
  ASSERT_FALSE(foreign);
  EXPECT_EQ(foreign.error().kind(), BindingError::Kind::kBindingMismatch);
  auto foreign_commit = other_shared.commit_shared_prefix(*prefix, *target, 0);
  ASSERT_FALSE(foreign_commit);
  EXPECT_EQ(foreign_commit.error().kind(), BindingError::Kind::kBindingMismatch);
  EXPECT_EQ(probe_->calls.load(), 1) << "a prefix from another binding reached the capability";
  ASSERT_TRUE(binding_->release(std::move(*target)));
}

TEST_P(RegistryRules, ReleaseRunsUnlockedAndCompleteBecomesReleased) {
  covers("REL-005", "REL-008", "REL-001", "LOCK-002");
  bool reentered = false;
  probe_->on_release = [&] {
    // Re-entering the registry from the release callback must not deadlock.
    const auto snapshot = registry_->snapshot(mechanism_);
    reentered = snapshot.has_value() && snapshot->queued_releases == 1 && snapshot->active_operations == 1;
  };
  auto owner = binding_->allocate_owning(256, 16);
  ASSERT_TRUE(owner);
  auto outcome = std::move(*owner).release_now();
  ASSERT_TRUE(outcome);
  EXPECT_TRUE(reentered) << "the release callback did not see the request counted as queued";
  EXPECT_EQ(outcome->state(), AllocationReleaseState::kReleased);
  EXPECT_FALSE(retains_ownership(outcome->state()));
  EXPECT_TRUE(is_terminal(outcome->state()));
  EXPECT_FALSE(permits_allocator_call(outcome->state()));
}

TEST_P(RegistryRules, AnAllocatorQuarantineIsRecordedWithItsResidual) {
  covers("REL-009", "REL-011", "REL-012", "REL-001");
  // The adapter's allocator really releases; the double then reports a
  // partial unmap, as a VMM allocator whose unmap failed part-way would.
  probe_->scripted_release = [this](void* ptr, std::size_t bytes, std::size_t align) {
    (void)probe_->inner().release(ptr, bytes, align);
    return AllocationReleaseOutcome::quarantined(
        {bytes, bytes / 2},
        {AllocationReleaseState::kPartiallyUnmapped, QuarantineReason::of(QuarantineReason::Kind::kPartialRelease),
         bytes / 2, reinterpret_cast<std::uintptr_t>(ptr), align});
  };
  auto allocation = binding_->allocate(8192, 64);
  ASSERT_TRUE(allocation);
  const BoundAllocation copy = *allocation;
  auto released = binding_->release(std::move(*allocation));
  ASSERT_FALSE(released);
  EXPECT_EQ(released.error().error().kind(), BindingError::Kind::kReleaseQuarantined);
  ASSERT_TRUE(released.error().is_quarantined());
  EXPECT_EQ(released.error().state(), AllocationReleaseState::kPartiallyUnmapped);
  EXPECT_TRUE(retains_ownership(released.error().state()));
  EXPECT_FALSE(permits_allocator_call(released.error().state()));
  const MechanismSnapshot snapshot = *registry_->snapshot(mechanism_);
  EXPECT_EQ(snapshot.quarantined_allocations, 1U);
  EXPECT_EQ(snapshot.quarantined_bytes, 4096U);
  const auto records = binding_->quarantined();
  ASSERT_EQ(records.size(), 1U);
  EXPECT_EQ(records[0].state, AllocationReleaseState::kPartiallyUnmapped);
  EXPECT_EQ(records[0].retained_bytes, 4096U);
  // The metadata is dead: a second release is stale, not quarantined again.
  auto again = binding_->release(copy);
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error().error().kind(), BindingError::Kind::kStaleAllocation);
  EXPECT_EQ(registry_->snapshot(mechanism_)->quarantined_allocations, 1U);
  probe_->scripted_release = nullptr;
}

TEST_P(RegistryRules, AnAllocatorFailureAfterPrepareIsQuarantinedNeverFailed) {
  covers("REL-010", "REL-001");
  // Nothing is released (the adapter's allocator frees it when destroyed).
  probe_->scripted_release = [](void*, std::size_t, std::size_t) {
    return AllocationReleaseOutcome::failed("test double: refused after prepare");
  };
  auto owner = binding_->allocate_owning(128, 16);
  ASSERT_TRUE(owner);
  auto outcome = std::move(*owner).release_now();
  ASSERT_TRUE(outcome);
  EXPECT_FALSE(outcome->is_failed()) << "execute returned Failed";
  ASSERT_TRUE(outcome->is_quarantined());
  EXPECT_EQ(outcome->residual()->reason.kind, QuarantineReason::Kind::kAllocatorRefused);
  EXPECT_EQ(outcome->state(), AllocationReleaseState::kQuarantined);
  probe_->scripted_release = nullptr;
}

TEST_P(RegistryRules, ReleaseUsesExactlyTheRecordedSizeAndAlignment) {
  covers("REL-013");
  // Handles carry their record's size and alignment and cannot be altered, so
  // the observable part of the rule is that release passes exactly those.
  std::size_t seen_bytes = 0;
  std::size_t seen_align = 0;
  void* seen_ptr = nullptr;
  probe_->scripted_release = [this, &seen_bytes, &seen_align, &seen_ptr](void* ptr, std::size_t bytes,
                                                                        std::size_t align) {
    seen_ptr = ptr;
    seen_bytes = bytes;
    seen_align = align;
    return probe_->inner().release(ptr, bytes, align);
  };
  auto allocation = binding_->allocate(1000, 128);
  ASSERT_TRUE(allocation);
  EXPECT_EQ(allocation->size(), 1000U);
  EXPECT_EQ(allocation->alignment(), 128U);
  void* const ptr = allocation->data();
  const BoundAllocation copy = *allocation;
  EXPECT_EQ(copy.size(), 1000U);
  EXPECT_EQ(copy.alignment(), 128U);
  ASSERT_TRUE(binding_->release(copy));
  EXPECT_EQ(seen_ptr, ptr);
  EXPECT_EQ(seen_bytes, 1000U);
  EXPECT_EQ(seen_align, 128U);
  probe_->scripted_release = nullptr;
}

ORTMEM_CTS_INSTANTIATE(RegistryRules);

}  // namespace
}  // namespace ortmem::cts
