// Registry rules that need a fault or a capability the adapter may not have:
// the kit wraps the adapter's real allocator in small, named test doubles that
// add only the missing piece, so the rule is checked on every adapter.
#include <atomic>
#include <functional>
#include <memory>

#include "support/binding_error_payload.hpp"
#include "support/calling_back_allocator.hpp"
#include "support/registry_harness.hpp"
#include "support/suite.hpp"

namespace ortmem::cts {
namespace {

// Test double: forwards allocation and release to the adapter's allocator,
// and adds a virtual backing and a shared mapping that only count the calls
// that reach them and answer with numbers no real capability would give (or,
// when told to, refuse with a reason of their own). It proves what the
// registry lets through and hands back, not what a real capability does (the
// VB and SM suites check that).
class CapabilityProbe final : public CallingBackAllocator, public VirtualBacking, public SharedMapping {
 public:
  using CallingBackAllocator::CallingBackAllocator;

  AllocationReleaseOutcome release(void* ptr, std::size_t bytes, std::size_t align) noexcept override {
    if (!scripted_release) return CallingBackAllocator::release(ptr, bytes, align);
    if (on_release) on_release();
    return scripted_release(ptr, bytes, align);
  }
  VirtualBacking* as_virtual_backing() noexcept override { return this; }
  SharedMapping* as_shared_mapping() noexcept override { return this; }

  static constexpr std::string_view kRefusal = "capability probe: refused as told";
  static constexpr std::uint64_t kUnmapped = 4093;
  static constexpr std::size_t kCommitted = 8191;
  static constexpr SharedPrefixCommitInfo kCommitInfo{
      .additional_owned_bytes = 3, .newly_mapped_bytes = 4099, .granules = 7};

  [[nodiscard]] MemoryError refusal(std::size_t bytes) const {
    return MemoryError::allocation_failed(Tier::kDevice, bytes, std::string(kRefusal));
  }

  Expected<void*, MemoryError> allocate_committed(std::size_t bytes, std::size_t align,
                                                  std::span<const ByteRange>) noexcept override {
    ++calls;
    if (refuse) return tl::unexpected(refusal(bytes));
    return inner().allocate(bytes, align);
  }
  Expected<void, MemoryError> commit_allocation_range(void*, std::size_t, std::size_t, std::size_t,
                                                      std::size_t bytes) noexcept override {
    ++calls;
    if (refuse) return tl::unexpected(refusal(bytes));
    return {};
  }
  Expected<std::uint64_t, MemoryError> decommit_allocation_range(void*, std::size_t, std::size_t, std::size_t,
                                                                 std::size_t bytes) noexcept override {
    ++calls;
    if (refuse) return tl::unexpected(refusal(bytes));
    return kUnmapped;
  }
  Expected<std::uint64_t, MemoryError> mapped_bytes_for_allocation(std::size_t bytes,
                                                                   std::size_t) const noexcept override {
    ++queries;
    if (refuse) return tl::unexpected(refusal(bytes));
    return bytes;
  }
  Expected<std::uint64_t, MemoryError> mapped_bytes_for_allocation_ranges(
      std::span<const AllocationCommitRange>) const noexcept override {
    return std::uint64_t{0};
  }
  std::size_t allocation_committed_bytes(void*, std::size_t, std::size_t) const noexcept override {
    ++queries;
    return kCommitted;
  }

  struct Prefix final : SharedDevicePrefix {
    std::uint64_t device_ptr() const noexcept override { return 0; }
    std::uint64_t committed_physical_bytes() const noexcept override { return 0; }
    std::size_t mapped_bytes() const noexcept override { return 0; }
    std::size_t requested_bytes() const noexcept override { return 0; }
  };
  Expected<std::unique_ptr<SharedDevicePrefix>, MemoryError> create_shared_prefix(std::size_t bytes) noexcept override {
    ++queries;
    if (refuse) return tl::unexpected(refusal(bytes));
    return std::unique_ptr<SharedDevicePrefix>(std::make_unique<Prefix>());
  }
  Expected<std::uint64_t, MemoryError> incremental_owned_bytes_for_shared_prefix(
      const SharedDevicePrefix&) const noexcept override {
    ++calls;
    if (refuse) return tl::unexpected(refusal(0));
    return kUnmapped;
  }
  Expected<SharedPrefixCommitInfo, MemoryError> commit_shared_prefix(const SharedDevicePrefix&, void*, std::size_t,
                                                                     std::size_t) noexcept override {
    ++calls;
    if (refuse) return tl::unexpected(refusal(0));
    return kCommitInfo;
  }

  mutable std::atomic<int> calls{0};    // calls that act on an allocation or a prefix
  mutable std::atomic<int> queries{0};  // answers that change nothing
  bool refuse = false;
  std::function<AllocationReleaseOutcome(void*, std::size_t, std::size_t)> scripted_release;
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
  ORTMEM_CTS_ASSERT_REFUSED(theirs.commit(*allocation, 0, 4096), "another binding's allocation was committed",
                            {.kind = BindingError::Kind::kBindingMismatch,
                             .expected_binding = other.identity().id,
                             .actual_binding = binding_->identity().id});
  EXPECT_EQ(probe_->calls.load(), 0) << "a mismatched commit reached the capability";
  ASSERT_TRUE(mine.commit(*allocation, 0, 4096));
  EXPECT_EQ(probe_->calls.load(), 1);
  const BoundAllocation stale = *allocation;
  ASSERT_TRUE(binding_->release(std::move(*allocation)));
  ORTMEM_CTS_ASSERT_REFUSED(mine.decommit(stale, 0, 4096), "a released allocation was decommitted",
                            {.kind = BindingError::Kind::kStaleAllocation, .allocation = stale.identity()});
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

// The binding's two capabilities, with an allocation and a prefix already
// made through them: what a check of every capability call acts on.
class ThroughCapabilities : public RegistryRules {
 protected:
  void SetUp() override {
    RegistryRules::SetUp();
    if (HasFatalFailure()) return;
    vb_.emplace(**binding_->virtual_backing());
    sm_.emplace(**binding_->shared_mapping());
    auto allocation = binding_->allocate(4096, 64);
    ASSERT_TRUE(allocation);
    allocation_.emplace(std::move(*allocation));
    auto prefix = sm_->create_shared_prefix(64);
    ASSERT_TRUE(prefix);
    prefix_.emplace(std::move(*prefix));
  }

  std::optional<BoundVirtualBacking> vb_;
  std::optional<BoundSharedMapping> sm_;
  std::optional<BoundAllocation> allocation_;
  std::optional<BoundSharedPrefix> prefix_;
};

TEST_P(ThroughCapabilities, BoundCapabilitiesHandBackTheCapabilitysAnswersAndRefusals) {
  covers("BIND-016", "BIND-018");
  {
    // Once checked, a call acts, and its answer is the capability's.
    ORTMEM_CTS_CHECKING("BIND-016");
    EXPECT_EQ(vb_->committed_bytes(*allocation_), CapabilityProbe::kCommitted);
    EXPECT_EQ(vb_->decommit(*allocation_, 0, 4096), CapabilityProbe::kUnmapped);
    EXPECT_EQ(vb_->mapped_bytes_for_allocation(12345, 64), 12345U);
    EXPECT_EQ(sm_->incremental_owned_bytes(*prefix_), CapabilityProbe::kUnmapped);
    EXPECT_EQ(sm_->commit_shared_prefix(*prefix_, *allocation_, 0), CapabilityProbe::kCommitInfo);
    auto committed = vb_->allocate_committed(8192, 64, {});
    ASSERT_TRUE(committed) << committed.error().message();
    EXPECT_EQ(registry_->snapshot(mechanism_)->live_allocations, 2U) << "reserved memory was not adopted";
    ASSERT_TRUE(std::move(*committed).release_now());
  }
  // A refusal is the capability's own error, passed on whole.
  probe_->refuse = true;
  const auto passed_on = [](const auto& refused) {
    ASSERT_FALSE(refused);
    EXPECT_EQ(refused.error().kind(), BindingError::Kind::kMemory) << refused.error().message();
    ASSERT_TRUE(refused.error().memory_error().has_value());
    EXPECT_EQ(refused.error().memory_error()->reason(), CapabilityProbe::kRefusal);
    ORTMEM_CTS_EXPECT_NAMES(refused.error(), {.kind = BindingError::Kind::kMemory});
  };
  ORTMEM_CTS_CHECKING("BIND-018");
  passed_on(vb_->commit(*allocation_, 0, 4096));
  passed_on(vb_->decommit(*allocation_, 0, 4096));
  passed_on(vb_->mapped_bytes_for_allocation(4096, 64));
  passed_on(vb_->allocate_committed(8192, 64, {}));
  passed_on(sm_->create_shared_prefix(64));
  passed_on(sm_->incremental_owned_bytes(*prefix_));
  passed_on(sm_->commit_shared_prefix(*prefix_, *allocation_, 0));
  EXPECT_EQ(registry_->snapshot(mechanism_)->live_allocations, 1U) << "a refused reservation left a record";
  probe_->refuse = false;
  ASSERT_TRUE(binding_->release(std::move(*allocation_)));
}

TEST_P(RegistryRules, AReservationThatCannotBeRecordedIsGivenBack) {
  covers("BIND-003");
  // Room for a context, an authority, a mechanism and a binding, and none for
  // the reservation's generation: the capability reserved, the registry
  // cannot adopt, so the memory must go straight back.
  auto counting = watched_allocator();
  auto probe = std::make_shared<CapabilityProbe>(counting);
  auto registry = *BindingRegistry::create({.first_serial = UINT64_MAX - 5});
  auto context = *registry.register_provider_context(info().device);
  auto authority = *registry.register_authority(info().device);
  ASSERT_TRUE(registry.register_allocator(context, authority, probe));
  auto binding = registry.bind(info().device);
  ASSERT_TRUE(binding);
  auto reserved = (**binding->virtual_backing()).allocate_committed(4096, 64, {});
  ASSERT_FALSE(reserved) << "memory was adopted under an identity past the end of the space";
  EXPECT_EQ(reserved.error().kind(), BindingError::Kind::kIdentityExhausted);
  EXPECT_EQ(probe->calls.load(), 1);
  EXPECT_EQ(counting->release_calls.load(), counting->allocate_calls.load())
      << "the reservation the registry could not record was not given back";
}

TEST_P(RegistryRules, AnAllocationOfAnotherRegistryIsForeignToACapability) {
  covers("BIND-001");
  // Refused as foreign before anything else: the other registry's binding
  // ids may even equal ours, so a binding mismatch would be the wrong name.
  auto other = *BindingRegistry::create();
  auto context = *other.register_provider_context(info().device);
  auto authority = *other.register_authority(info().device);
  ASSERT_TRUE(other.register_allocator(context, authority, watched_allocator()));
  auto other_binding = *other.bind(info().device);
  auto theirs = other_binding.allocate(4096, 64);
  ASSERT_TRUE(theirs);
  const int calls = probe_->calls.load();
  auto committed = (**binding_->virtual_backing()).commit(*theirs, 0, 64);
  ASSERT_FALSE(committed);
  // Names() passes an error of another kind, so the kind is asserted first.
  EXPECT_EQ(committed.error().kind(), BindingError::Kind::kForeignRegistry) << committed.error().message();
  ORTMEM_CTS_EXPECT_NAMES(committed.error(), {.kind = BindingError::Kind::kForeignRegistry, .subject = "allocation"});
  EXPECT_EQ(probe_->calls.load(), calls) << "another registry's allocation reached the capability";
  ORTMEM_CTS_PRECONDITION();
  ASSERT_TRUE(other_binding.release(std::move(*theirs)));
}

TEST_P(RegistryRules, APrefixOfAnotherRegistryIsForeign) {
  covers("BIND-001");
  auto other = *BindingRegistry::create();
  auto context = *other.register_provider_context(info().device);
  auto authority = *other.register_authority(info().device);
  ASSERT_TRUE(other.register_allocator(context, authority, std::make_shared<CapabilityProbe>(watched_allocator())));
  auto theirs = (**other.bind(info().device)->shared_mapping()).create_shared_prefix(64);
  ASSERT_TRUE(theirs);
  auto mine = **binding_->shared_mapping();
  auto target = binding_->allocate(4096, 64);
  ASSERT_TRUE(target);
  const int calls = probe_->calls.load();
  auto priced = mine.incremental_owned_bytes(*theirs);
  ASSERT_FALSE(priced);
  EXPECT_EQ(priced.error().kind(), BindingError::Kind::kForeignRegistry) << priced.error().message();
  EXPECT_EQ(priced.error().subject(), "shared prefix");
  auto mapped = mine.commit_shared_prefix(*theirs, *target, 0);
  ASSERT_FALSE(mapped);
  EXPECT_EQ(mapped.error().kind(), BindingError::Kind::kForeignRegistry) << mapped.error().message();
  EXPECT_EQ(probe_->calls.load(), calls) << "another registry's prefix reached the capability";
  ASSERT_TRUE(binding_->release(std::move(*target)));
}

TEST_P(ThroughCapabilities, NoCapabilityIsAskedAnythingAfterDeviceLoss) {
  covers("TEAR-004");
  auto view = allocation_->view(0, 64);
  ASSERT_TRUE(view);
  ASSERT_TRUE(registry_->invalidate_device(info().device, "test: lost under a capability"));
  const int calls = probe_->calls.load();
  const int queries = probe_->queries.load();
  const auto lost = [](const auto& refused) {
    ASSERT_FALSE(refused) << "a capability call on a lost device succeeded";
    EXPECT_EQ(refused.error().kind(), BindingError::Kind::kDeviceLost) << refused.error().message();
    EXPECT_EQ(refused.error().loss_reason(), "test: lost under a capability");
  };
  lost(vb_->allocate_committed(4096, 64, {}));
  lost(vb_->commit(*allocation_, 0, 4096));
  lost(vb_->decommit(*allocation_, 0, 4096));
  lost(vb_->committed_bytes(*allocation_));
  lost(vb_->mapped_bytes_for_allocation(4096, 64));
  lost(sm_->create_shared_prefix(64));
  lost(sm_->incremental_owned_bytes(*prefix_));
  lost(sm_->commit_shared_prefix(*prefix_, *allocation_, 0));
  EXPECT_EQ(probe_->calls.load(), calls) << "a capability acted on a lost device";
  EXPECT_EQ(probe_->queries.load(), queries) << "a capability was asked about a lost device";
  // Nor is the binding's own path to memory open: discovery, views, adoption.
  lost(binding_->virtual_backing());
  lost(binding_->shared_mapping());
  lost(allocation_->view(0, 64));
  bool called = false;
  lost(binding_->with_view(*view, [&](ValidatedMemoryView) { called = true; }));
  EXPECT_FALSE(called) << "a view of a lost device reached its callback";
  void* raw = nullptr;
  {
    ORTMEM_CTS_PRECONDITION();
    auto memory = probe_->inner().allocate(64, 8);
    ASSERT_TRUE(memory);
    raw = *memory;
  }
  lost(binding_->adopt_allocation(raw, 64, 8));
  ORTMEM_CTS_PRECONDITION();
  EXPECT_TRUE(probe_->inner().release(raw, 64, 8).is_complete());
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
  ORTMEM_CTS_EXPECT_NAMES(
      released.error().error(),
      {.kind = BindingError::Kind::kReleaseQuarantined, .allocation = copy.identity(), .retained_bytes = 4096});
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
  ORTMEM_CTS_EXPECT_NAMES(again.error().error(),
                          {.kind = BindingError::Kind::kStaleAllocation, .allocation = copy.identity()});
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
ORTMEM_CTS_INSTANTIATE(ThroughCapabilities);

}  // namespace
}  // namespace ortmem::cts
