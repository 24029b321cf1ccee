// The nxmem boundary itself (ABI): an nxmem plugin's exports, vtables and
// callbacks, called raw.
//
// Every other suite sees a plugin through the kit's bridge, whose defensive
// filter refuses a malformed call before the plugin could answer it. These
// probes bypass it: they hand the plugin the exact requests a careless or
// hostile host might and check its own answers. Each probe opens what it
// needs itself and gives back everything it took (an opened allocator is owed
// exactly one release), so the plugin's unload report ends where it began.
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "plugin/plugin_adapter.hpp"
#include "plugin/plugin_status.hpp"
#include "support/suite.hpp"
#include "ortmem/report/utf8.hpp"

namespace ortmem::cts {
namespace {

using plugin::Factory;
using plugin::PluginModule;

constexpr std::uint64_t kCertifiable =
    NXMEM_CAP_VIRTUAL_BACKING | NXMEM_CAP_SHARED_MAPPING | NXMEM_CAP_DEFERRED_RELEASE;

std::string code_name(std::uint32_t code) { return plugin::status_code_name(code); }

// What is wrong with a status as it came back, for people; empty when it is
// well formed (ABI-003).
std::string malformed(const NxmemStatus& status) {
  if (status.message_len > NXMEM_STATUS_MESSAGE_MAX) {
    return "message_len is " + std::to_string(status.message_len) + ", over 255";
  }
  if (status.message[status.message_len] != 0) return "no NUL byte follows the message's message_len bytes";
  const std::string_view message(reinterpret_cast<const char*>(status.message), status.message_len);
  if (!report::is_utf8(message)) return "the message is not valid UTF-8";
  return "";
}

std::uint64_t total(const NxmemUnloadReport& report) {
  return report.live_allocators + report.live_allocations + report.live_views + report.live_capabilities +
         report.queued_releases;
}

std::string describe(const NxmemUnloadReport& report) {
  return "allocators " + std::to_string(report.live_allocators) + ", allocations " +
         std::to_string(report.live_allocations) + ", views " + std::to_string(report.live_views) + ", capabilities " +
         std::to_string(report.live_capabilities) + ", queued " + std::to_string(report.queued_releases);
}

// The host's side of release_completed for a probe: every completion as it
// came, and whether a call back into the plugin from another thread was held
// up while the callback ran (the plugin's lock held across it).
class CompletionRecorder {
 public:
  explicit CompletionRecorder(std::uint32_t abi_minor) {
    callbacks_.struct_size = sizeof callbacks_;
    callbacks_.abi_minor = abi_minor;
    callbacks_.host_ctx = this;
    callbacks_.request_reclaim = [](void*, const NxmemReclaimRequest*, std::uint64_t* reclaimed) {
      if (reclaimed != nullptr) *reclaimed = 0;
      return NxmemStatus{};
    };
    callbacks_.release_completed = [](void* ctx, const NxmemReleaseCompletion* completion) {
      return static_cast<CompletionRecorder*>(ctx)->completed(*completion);
    };
  }
  CompletionRecorder(const CompletionRecorder&) = delete;
  CompletionRecorder& operator=(const CompletionRecorder&) = delete;
  ~CompletionRecorder() { join_probes(); }

  [[nodiscard]] const NxmemHostCallbacks* callbacks() const { return &callbacks_; }
  // The allocator whose pending_release_count the callback probes.
  void probe_reentry(const NxmemAllocatorVtable* vtable) { vtable_ = vtable; }

  // Waits until `count` completions arrived or `deadline` passed.
  bool wait_for(std::size_t count, std::chrono::steady_clock::time_point deadline) {
    std::unique_lock lock(mutex_);
    return changed_.wait_until(lock, deadline, [&] { return completions_.size() >= count; });
  }
  [[nodiscard]] std::vector<NxmemReleaseCompletion> completions() const {
    const std::lock_guard lock(mutex_);
    return completions_;
  }
  [[nodiscard]] int held_up() const {
    const std::lock_guard lock(mutex_);
    return held_up_;
  }
  void join_probes() {
    std::vector<std::thread> probes;
    {
      const std::lock_guard lock(mutex_);
      probes.swap(probes_);
    }
    for (std::thread& probe : probes) probe.join();
  }

 private:
  NxmemStatus completed(const NxmemReleaseCompletion& completion) {
    if (vtable_ != nullptr && vtable_->pending_release_count != nullptr) {
      // From another thread, so a lock held across this callback shows as a
      // wait that ends only after the callback returned, not as a deadlock
      // of this test.
      auto answered = std::make_shared<Answered>();
      std::thread probe([vtable = vtable_, answered] {
        std::uint64_t pending = 0;
        (void)vtable->pending_release_count(vtable->ctx, &pending);
        const std::lock_guard lock(answered->mutex);
        answered->done = true;
        answered->changed.notify_all();
      });
      bool in_time = false;
      {
        std::unique_lock lock(answered->mutex);
        in_time = answered->changed.wait_for(lock, std::chrono::seconds(1), [&] { return answered->done; });
      }
      const std::lock_guard lock(mutex_);
      held_up_ += in_time ? 0 : 1;
      probes_.push_back(std::move(probe));
    }
    const std::lock_guard lock(mutex_);
    completions_.push_back(completion);
    changed_.notify_all();
    return NxmemStatus{};
  }

  struct Answered {
    std::mutex mutex;
    std::condition_variable changed;
    bool done = false;
  };

  NxmemHostCallbacks callbacks_{};
  const NxmemAllocatorVtable* vtable_ = nullptr;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<NxmemReleaseCompletion> completions_;  // guarded by mutex_
  std::vector<std::thread> probes_;                  // guarded by mutex_
  int held_up_ = 0;                                  // guarded by mutex_
};

class AbiProbe : public RequiringCapability<AdapterSuite, Capability::kNxmemAbi> {
 protected:
  void SetUp() override {
    RequiringCapability::SetUp();
    if (ended()) return;
    auto found = adapters::plugin_under_test(adapter());
    ASSERT_TRUE(found) << "the adapter declares nxmem-abi but is not a plugin the kit loaded";
    plugin_ = std::move(*found);
  }

  [[nodiscard]] const PluginModule& module() const { return *plugin_.module; }
  [[nodiscard]] const Factory& factory() const { return plugin_.factory; }

  // The request the kit's loader sent, with the parts a probe changes.
  [[nodiscard]] NxmemNegotiateRequest negotiation(std::uint32_t max_minor, std::uint64_t flags) const {
    NxmemNegotiateRequest request{};
    request.struct_size = sizeof request;
    request.host_range = {NXMEM_ABI_VERSION_MAJOR, NXMEM_ABI_VERSION_MAJOR, NXMEM_ABI_VERSION_MINOR_BASELINE,
                          max_minor};
    request.host_capability_flags = flags;
    return request;
  }
  NxmemStatus negotiate(const NxmemNegotiateRequest& request, NxmemNegotiateResponse& response) {
    std::memset(&response, 0, sizeof response);
    response.struct_size = sizeof response;
    const NxmemStatus status = module().exports().negotiate(&request, &response);
    seen_.push_back(status);
    return status;
  }
  // Negotiation may set a plugin's state: a probe ends by agreeing again
  // what the loader agreed, so later tests meet the plugin as it was loaded.
  void restore_negotiation() {
    NxmemNegotiateResponse response{};
    (void)negotiate(negotiation(module().agreed_minor(), NXMEM_CAP_KNOWN_MASK), response);
  }

  // An allocator opened raw (the loader's request, `required` capabilities,
  // `callbacks`), or null with the refusal recorded as a failure.
  const NxmemAllocatorVtable* open(std::uint64_t required, const NxmemHostCallbacks* callbacks = nullptr) {
    NxmemOpenRequest request{};
    request.struct_size = sizeof request;
    request.abi_minor = module().agreed_minor();
    request.device = factory().device;
    request.required_capability_flags = required;
    request.callbacks = callbacks;
    const NxmemAllocatorVtable* vtable = nullptr;
    const NxmemStatus status = factory().vtable.open_allocator(factory().vtable.ctx, &request, &vtable);
    seen_.push_back(status);
    EXPECT_EQ(status.code, NXMEM_STATUS_OK) << "open_allocator answered " << plugin::read_status(status).describe();
    return status.code == NXMEM_STATUS_OK ? vtable : nullptr;
  }

  // An allocation the plugin made, named as the host names it.
  struct Made {
    NxmemAllocation allocation{};
    bool ok = false;
  };
  Made allocate(const NxmemAllocatorVtable& vtable, std::uint64_t id, std::uint64_t bytes = 4096,
                std::uint64_t align = 64) {
    NxmemAllocRequest request{};
    request.struct_size = sizeof request;
    request.mechanism_id = vtable.mechanism_id;
    request.allocation_id = id;
    request.device = vtable.device;
    request.bytes = bytes;
    request.align = align;
    NxmemAllocResult result{};
    result.struct_size = sizeof result;
    const NxmemStatus status = vtable.allocate(vtable.ctx, &request, &result);
    seen_.push_back(status);
    Made made;
    made.ok = status.code == NXMEM_STATUS_OK && result.ptr != nullptr;
    made.allocation.struct_size = sizeof made.allocation;
    made.allocation.mechanism_id = vtable.mechanism_id;
    made.allocation.allocation_id = id;
    made.allocation.device = vtable.device;
    made.allocation.ptr = result.ptr;
    made.allocation.bytes = bytes;
    made.allocation.align = align;
    return made;
  }
  NxmemStatus deallocate(const NxmemAllocatorVtable& vtable, const NxmemAllocation& allocation) {
    std::uint64_t unmapped = 0;
    const NxmemStatus status = vtable.deallocate(vtable.ctx, &allocation, &unmapped);
    seen_.push_back(status);
    return status;
  }
  [[nodiscard]] std::optional<NxmemUnloadReport> unload_report() const { return module().unload_report(); }

  adapters::PluginUnderTest plugin_;
  // Every status the plugin returned to this probe, for ABI-003.
  std::vector<NxmemStatus> seen_;
};

TEST_P(AbiProbe, NegotiationRefusesWhatItCannotAgreeAndStillNamesItsRange) {
  covers("ABI-001", "ABI-003");
  struct Case {
    const char* what;
    NxmemNegotiateRequest request;
    std::uint32_t expected;
  };
  NxmemNegotiateRequest short_request = negotiation(NXMEM_ABI_VERSION_MINOR, NXMEM_CAP_KNOWN_MASK);
  short_request.struct_size = 16;
  NxmemNegotiateRequest other_major = negotiation(NXMEM_ABI_VERSION_MINOR, NXMEM_CAP_KNOWN_MASK);
  other_major.host_range.major_min = other_major.host_range.major_max = NXMEM_ABI_VERSION_MAJOR + 1;
  const NxmemNegotiateRequest no_allocator =
      negotiation(NXMEM_ABI_VERSION_MINOR, NXMEM_CAP_KNOWN_MASK & ~NXMEM_CAP_ALLOCATOR);
  for (const Case& each : {Case{"a request of 16 bytes", short_request, NXMEM_STATUS_SHORT_STRUCT},
                           Case{"a host range of major 2 only", other_major, NXMEM_STATUS_VERSION_MISMATCH},
                           Case{"host flags without ALLOCATOR", no_allocator, NXMEM_STATUS_UNSUPPORTED_CAPABILITY}}) {
    NxmemNegotiateResponse response{};
    const NxmemStatus status = negotiate(each.request, response);
    ORTMEM_CTS_CHECKING("ABI-001");
    EXPECT_EQ(status.code, each.expected)
        << each.what << ": answered " << code_name(status.code) << ", not " << code_name(each.expected);
    EXPECT_NE(response.plugin_range.major_max, 0U) << each.what << ": the answer left plugin_range empty";
  }
  restore_negotiation();
  ORTMEM_CTS_CHECKING("ABI-003");
  for (const NxmemStatus& status : seen_) EXPECT_EQ(malformed(status), "") << code_name(status.code);
}

TEST_P(AbiProbe, NegotiationOffersNoMoreThanTheHostAsked) {
  covers("ABI-002");
  NxmemNegotiateResponse full{};
  ASSERT_EQ(negotiate(negotiation(NXMEM_ABI_VERSION_MINOR, NXMEM_CAP_KNOWN_MASK), full).code, NXMEM_STATUS_OK);
  const std::uint32_t plugin_max = full.plugin_range.minor_max;
  struct Case {
    const char* what;
    std::uint32_t host_max_minor;
    std::uint64_t host_flags;
  };
  for (const Case& each : {Case{"a host offering ALLOCATOR only", NXMEM_ABI_VERSION_MINOR, NXMEM_CAP_ALLOCATOR},
                           Case{"a host offering ALLOCATOR and DEFERRED_RELEASE", NXMEM_ABI_VERSION_MINOR,
                                NXMEM_CAP_ALLOCATOR | NXMEM_CAP_DEFERRED_RELEASE},
                           Case{"a host capped at minor 0", 0, NXMEM_CAP_KNOWN_MASK}}) {
    NxmemNegotiateResponse response{};
    const NxmemStatus status = negotiate(negotiation(each.host_max_minor, each.host_flags), response);
    if (status.code != NXMEM_STATUS_OK) {
      // A plugin may refuse a host it cannot serve; it then offers nothing.
      continue;
    }
    EXPECT_EQ(response.capability_flags & ~each.host_flags, 0U)
        << each.what << ": the answer offers " << plugin::capability_names(response.capability_flags & ~each.host_flags)
        << ", which the host did not offer";
    EXPECT_EQ(response.agreed_minor, std::min(each.host_max_minor, plugin_max)) << each.what;
    if (response.agreed_minor < 1) {
      EXPECT_EQ(response.capability_flags & NXMEM_CAP_STRUCTURED_RELEASE, 0U)
          << each.what << ": STRUCTURED_RELEASE offered under a minor-0 agreement";
    }
  }
  restore_negotiation();
}

TEST_P(AbiProbe, IdentityChecksRunMechanismThenDeviceThenIdAndChangeNothing) {
  covers("ABI-004", "ABI-003");
  const NxmemAllocatorVtable* vtable = open(NXMEM_CAP_ALLOCATOR);
  ASSERT_NE(vtable, nullptr);
  const Made made = allocate(*vtable, 1);
  {
    ORTMEM_CTS_PRECONDITION();
    ASSERT_TRUE(made.ok) << "allocate(4096, 64) was refused";
  }
  NxmemDeviceId other_device = vtable->device;
  ++other_device.index;
  const std::uint64_t unknown_id = 1'000'003;
  NxmemAllocation wrong_all = made.allocation;
  wrong_all.mechanism_id = vtable->mechanism_id + 1;
  wrong_all.device = other_device;
  wrong_all.allocation_id = unknown_id;
  NxmemAllocation wrong_device = made.allocation;
  wrong_device.device = other_device;
  wrong_device.allocation_id = unknown_id;
  NxmemAllocation unknown = made.allocation;
  unknown.allocation_id = unknown_id;
  NxmemAllocation other_size = made.allocation;
  other_size.bytes += 64;
  struct Case {
    const char* what;
    NxmemAllocation allocation;
    std::uint32_t expected;
  };
  {
    ORTMEM_CTS_CHECKING("ABI-004");
    for (const Case& each :
         {Case{"another mechanism, another device and an unknown id", wrong_all, NXMEM_STATUS_WRONG_MECHANISM},
          Case{"the allocator's mechanism, another device and an unknown id", wrong_device, NXMEM_STATUS_WRONG_DEVICE},
          Case{"an id the plugin never issued, at a live address", unknown, NXMEM_STATUS_UNKNOWN_ALLOCATION},
          Case{"a live allocation's id with another size", other_size, NXMEM_STATUS_UNKNOWN_ALLOCATION}}) {
      const NxmemStatus status = deallocate(*vtable, each.allocation);
      EXPECT_EQ(status.code, each.expected) << "deallocate naming " << each.what << " answered "
                                            << code_name(status.code) << ", not " << code_name(each.expected);
    }
    // Nothing changed: the allocation is still the plugin's, once.
    EXPECT_EQ(deallocate(*vtable, made.allocation).code, NXMEM_STATUS_OK)
        << "after the refused calls the allocation could not be released: one of them changed it";
  }
  vtable->release(vtable->ctx);
  ORTMEM_CTS_CHECKING("ABI-003");
  for (const NxmemStatus& status : seen_) EXPECT_EQ(malformed(status), "") << code_name(status.code);
}

TEST_P(AbiProbe, AnOpenRefusesACapabilityItsFactoryDoesNotOffer) {
  covers("ABI-005", "ABI-003");
  // The lowest capability the factory does not offer; one the ABI does not
  // define yet when it offers every one (no allocator can have that either).
  const std::uint64_t missing = kCertifiable & ~factory().capability_flags;
  const std::uint64_t lacking = missing != 0 ? missing & (~missing + 1) : (NXMEM_CAP_KNOWN_MASK + 1);
  NxmemOpenRequest request{};
  request.struct_size = sizeof request;
  request.abi_minor = module().agreed_minor();
  request.device = factory().device;
  request.required_capability_flags = NXMEM_CAP_ALLOCATOR | lacking;
  const NxmemAllocatorVtable* vtable = nullptr;
  const NxmemStatus status = factory().vtable.open_allocator(factory().vtable.ctx, &request, &vtable);
  seen_.push_back(status);
  {
    ORTMEM_CTS_CHECKING("ABI-005");
    EXPECT_EQ(status.code, NXMEM_STATUS_UNSUPPORTED_CAPABILITY)
        << "an open requiring " << plugin::capability_names(lacking) << ", which the factory does not offer, answered "
        << code_name(status.code);
  }
  // An OK open is owed exactly one release, whatever it returned.
  if (status.code == NXMEM_STATUS_OK && vtable != nullptr) vtable->release(vtable->ctx);
  ORTMEM_CTS_CHECKING("ABI-003");
  EXPECT_EQ(malformed(status), "") << code_name(status.code);
}

TEST_P(AbiProbe, TheUnloadReportIsConservativeWhileLiveAndHonestAfter) {
  covers("ABI-006");
  const auto before = unload_report();
  {
    ORTMEM_CTS_PRECONDITION();
    ASSERT_TRUE(before) << "NxmemQueryUnloadReadiness failed";
  }
  const NxmemAllocatorVtable* vtable = open(NXMEM_CAP_ALLOCATOR);
  ASSERT_NE(vtable, nullptr);
  const auto opened = unload_report();
  ASSERT_TRUE(opened) << "NxmemQueryUnloadReadiness failed with an allocator open";
  EXPECT_GT(total(*opened), total(*before)) << "with an allocator open the report still says " << describe(*opened);
  std::vector<Made> made;
  for (std::uint64_t id = 1; id <= 3; ++id) made.push_back(allocate(*vtable, id, 1024 * id));
  const auto live = unload_report();
  ASSERT_TRUE(live) << "NxmemQueryUnloadReadiness failed with allocations live";
  const auto issued =
      static_cast<std::uint64_t>(std::count_if(made.begin(), made.end(), [](const Made& m) { return m.ok; }));
  EXPECT_GE(live->live_allocations, before->live_allocations + issued)
      << issued << " allocations are live, and the report says " << describe(*live);
  for (const Made& each : made) {
    if (each.ok) {
      EXPECT_EQ(deallocate(*vtable, each.allocation).code, NXMEM_STATUS_OK);
    }
  }
  vtable->release(vtable->ctx);
  const auto after = unload_report();
  ASSERT_TRUE(after) << "NxmemQueryUnloadReadiness failed after everything was released";
  EXPECT_EQ(total(*after), total(*before)) << "after everything was released the report says " << describe(*after)
                                           << ", and before anything existed " << describe(*before);
}

class AbiDeferredProbe : public AbiProbe {
 protected:
  void SetUp() override {
    AbiProbe::SetUp();
    if (HasFatalFailure() || IsSkipped()) return;
    if ((factory().capability_flags & NXMEM_CAP_DEFERRED_RELEASE) == 0) {
      GTEST_SKIP() << std::string(kNotApplicable) << "the factory does not declare DEFERRED_RELEASE";
    }
  }

  // Enqueues `count` fresh allocations; the tickets in enqueue order, by allocation id.
  std::vector<std::pair<std::uint64_t, std::uint64_t>> enqueue(const NxmemAllocatorVtable& vtable, int count) {
    std::vector<std::pair<std::uint64_t, std::uint64_t>> tickets;
    for (int i = 1; i <= count; ++i) {
      const Made made = allocate(vtable, static_cast<std::uint64_t>(i), 256 * static_cast<std::uint64_t>(i));
      if (!made.ok) {
        ADD_FAILURE() << "allocate " << i << " was refused";
        continue;
      }
      std::uint64_t ticket = 0;
      const NxmemStatus status = vtable.enqueue_release(vtable.ctx, &made.allocation, &ticket);
      EXPECT_EQ(status.code, NXMEM_STATUS_OK) << "enqueue_release " << i << " answered " << code_name(status.code);
      if (status.code == NXMEM_STATUS_OK) tickets.emplace_back(made.allocation.allocation_id, ticket);
    }
    return tickets;
  }
  // Drains until `recorder` holds `count` completions or five seconds pass.
  static void settle(const NxmemAllocatorVtable& vtable, CompletionRecorder& recorder, std::size_t count) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (!recorder.wait_for(count, std::chrono::steady_clock::now() + std::chrono::milliseconds(1)) &&
           std::chrono::steady_clock::now() < deadline) {
      std::uint64_t retired = 0;
      (void)vtable.drain_releases(vtable.ctx, UINT64_MAX, &retired);
    }
  }
};

TEST_P(AbiDeferredProbe, NoCompletionIsDeliveredWhileThePluginHoldsItsLock) {
  covers("ABI-007");
  CompletionRecorder recorder(module().agreed_minor());
  const NxmemAllocatorVtable* vtable = open(NXMEM_CAP_ALLOCATOR | NXMEM_CAP_DEFERRED_RELEASE, recorder.callbacks());
  ASSERT_NE(vtable, nullptr);
  recorder.probe_reentry(vtable);
  const auto tickets = enqueue(*vtable, 4);
  settle(*vtable, recorder, tickets.size());
  recorder.join_probes();
  EXPECT_EQ(recorder.held_up(), 0) << recorder.held_up() << " of " << recorder.completions().size()
                                   << " completions were delivered while the plugin held the lock "
                                      "pending_release_count takes: a call from another thread waited over 1 s";
  vtable->release(vtable->ctx);
}

TEST_P(AbiDeferredProbe, EachTicketCompletesOnceInEnqueueOrderNamingItself) {
  covers("ABI-008");
  CompletionRecorder recorder(module().agreed_minor());
  const NxmemAllocatorVtable* vtable = open(NXMEM_CAP_ALLOCATOR | NXMEM_CAP_DEFERRED_RELEASE, recorder.callbacks());
  ASSERT_NE(vtable, nullptr);
  const auto tickets = enqueue(*vtable, 16);
  settle(*vtable, recorder, tickets.size());
  // A second completion of any ticket would come now, if at all.
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  std::uint64_t retired = 0;
  (void)vtable->drain_releases(vtable->ctx, UINT64_MAX, &retired);
  const auto completions = recorder.completions();
  EXPECT_EQ(completions.size(), tickets.size())
      << tickets.size() << " tickets, " << completions.size() << " completions";
  for (std::size_t i = 0; i < std::min(completions.size(), tickets.size()); ++i) {
    const NxmemReleaseCompletion& completion = completions[i];
    EXPECT_EQ(completion.allocation_id, tickets[i].first)
        << "completion " << i << " is not of the " << i << "th release enqueued";
    EXPECT_EQ(completion.ticket, tickets[i].second)
        << "completion " << i << " names another ticket than enqueue returned";
    EXPECT_EQ(completion.mechanism_id, vtable->mechanism_id) << "completion " << i << " names another mechanism";
  }
  vtable->release(vtable->ctx);
}

ORTMEM_CTS_INSTANTIATE(AbiProbe);
ORTMEM_CTS_INSTANTIATE(AbiDeferredProbe);

}  // namespace
}  // namespace ortmem::cts
