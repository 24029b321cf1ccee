// support/binding_fixture.hpp: shared set-up and assertions for the binding tests.
//
// BindingTest owns one registry and registers mechanisms over a
// CountingAllocator (test double); helpers compare error kinds and snapshot
// counts with readable failure messages, and within() turns a deadlock into a
// prompt test failure instead of a hang.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <utility>

#include "ortmem/binding_error.hpp"
#include "ortmem/mechanism_snapshot.hpp"
#include "ortmem/registry.hpp"
#include "support/counting_allocator.hpp"

namespace ortmem::test_support {

// Runs `fn` on another thread; if it has not returned within `limit` the test
// process aborts naming `what`. Used around every call that would deadlock if
// a registry or mechanism lock were held across a callback.
template <class Fn>
void within(std::chrono::seconds limit, const char* what, Fn&& fn) {
  std::promise<void> done;
  auto finished = done.get_future();
  std::thread worker([&] {
    fn();
    done.set_value();
  });
  if (finished.wait_for(limit) != std::future_status::ready) {
    std::fprintf(stderr, "DEADLOCK: %s did not finish within %lld s\n", what, static_cast<long long>(limit.count()));
    std::abort();
  }
  worker.join();
}
inline constexpr std::chrono::seconds kDeadlockLimit{20};

inline ::testing::AssertionResult is_kind(const BindingError& error, BindingError::Kind expected) {
  if (error.kind() == expected) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "expected " << kind_name(expected) << ", got " << kind_name(error.kind())
                                       << ": " << error.message();
}

// Snapshot counters in the order the contract lists them.
struct Counts {
  std::size_t live = 0;
  std::size_t active = 0;
  std::size_t queued = 0;
  std::size_t quarantined = 0;
  std::uint64_t quarantined_bytes = 0;
};

inline ::testing::AssertionResult has_counts(const MechanismSnapshot& snapshot, Counts expected) {
  const Counts actual{snapshot.live_allocations, snapshot.active_operations, snapshot.queued_releases,
                      snapshot.quarantined_allocations, snapshot.quarantined_bytes};
  if (actual.live == expected.live && actual.active == expected.active && actual.queued == expected.queued &&
      actual.quarantined == expected.quarantined && actual.quarantined_bytes == expected.quarantined_bytes) {
    return ::testing::AssertionSuccess();
  }
  auto render = [](const Counts& c) {
    std::ostringstream out;
    out << "{live " << c.live << ", active " << c.active << ", queued " << c.queued << ", quarantined " << c.quarantined
        << ", quarantined_bytes " << c.quarantined_bytes << "}";
    return out.str();
  };
  return ::testing::AssertionFailure() << "snapshot counts " << render(actual) << ", expected " << render(expected);
}

// One registered mechanism and what it was registered from.
struct Registered {
  RegisteredProviderContext context;
  RegisteredAuthority authority;
  std::shared_ptr<CountingAllocator> allocator;
  RegisteredMechanism mechanism;
};

class BindingTest : public ::testing::Test {
 protected:
  // Registers a fresh context, authority and CountingAllocator for `device`.
  Registered add(DeviceKey device = DeviceKey::host(), std::shared_ptr<CountingAllocator> allocator = nullptr,
                 bool trusted_composite = false) {
    if (!allocator) allocator = std::make_shared<CountingAllocator>(device);
    auto context = registry_.register_provider_context(device);
    auto authority = registry_.register_authority(device);
    EXPECT_TRUE(context && authority);
    auto mechanism = trusted_composite ? registry_.register_trusted_composite(*context, *authority, allocator)
                                       : registry_.register_allocator(*context, *authority, allocator);
    EXPECT_TRUE(mechanism) << mechanism.error().message();
    return Registered{*context, *authority, std::move(allocator), *mechanism};
  }

  MemoryBinding bind(const Registered& registered) {
    auto binding = registry_.bind_registered(registered.mechanism);
    EXPECT_TRUE(binding) << binding.error().message();
    return *binding;
  }

  MechanismSnapshot snapshot(const Registered& registered) {
    auto snapshot = registry_.snapshot(registered.mechanism);
    EXPECT_TRUE(snapshot) << snapshot.error().message();
    return snapshot ? *snapshot : MechanismSnapshot{};
  }

  BindingRegistry registry_ = *BindingRegistry::create();
};

}  // namespace ortmem::test_support
