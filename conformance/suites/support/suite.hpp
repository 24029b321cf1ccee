// conformance/suites/support/suite.hpp: what every conformance test stands on.
//
// Suites are GoogleTest value-parameterized tests over the adapters selected
// for the run (the parameter is the adapter's name). Each test:
//   - names the requirement ids it checks with covers(...); the runner maps
//     results to requirements through that property;
//   - charges each failed check to exactly the requirements it checks: an
//     assertion inside ORTMEM_CTS_CHECKING(ids...) counts against those ids,
//     one inside ORTMEM_CTS_PRECONDITION() against none (the adapter broke
//     something the test stands on, which another test charges), any other
//     against every id of covers(). So a test of several requirements must
//     scope its checks, or one broken rule fails them all;
//   - gets a fresh Adapter in SetUp();
//   - when it checks an optional capability the adapter does not declare,
//     ends as not-applicable through ORTMEM_CTS_REQUIRE(capability).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "ortmem/cts/adapter.hpp"
#include "ortmem/cts/adapter_registry.hpp"
#include "support/counting_allocator.hpp"
#include "ortmem/identity.hpp"
// Every suite checks the contract as a whole, through the umbrella header
// (also what the suites' precompiled header holds, so a build without one compiles too).
#include "ortmem/ortmem.hpp"

namespace ortmem::cts {

// Marks the test's requirement ids (see reference/tests/support/requirements.hpp).
template <class... Ids>
void covers(const char* first, Ids... rest) {
  std::string joined = first;
  ((joined += ' ', joined += rest), ...);
  ::testing::Test::RecordProperty("requirements", joined);
}

// Whether the `bytes` at `ptr`, read through the adapter, all equal `value`.
// Read a chunk at a time into one reused buffer: a buffer the size of the
// block would be fresh pages for every multi-MiB block, faulted in (and, under
// a sanitizer, shadowed) only to be compared once. Each chunk is compared
// against itself shifted by a byte: sanitizers see a range check, not one
// instrumented load per byte.
inline bool reads_as(MemoryAccess& memory, const void* ptr, std::size_t bytes, std::uint8_t value) {
  constexpr std::size_t kChunk = 256 * 1024;
  thread_local std::vector<std::uint8_t> seen(kChunk);
  const auto* at = static_cast<const std::uint8_t*>(ptr);
  for (std::size_t done = 0; done < bytes;) {
    const std::size_t n = std::min(kChunk, bytes - done);
    memory.read(at + done, std::span(seen.data(), n));
    if (seen.front() != value || std::memcmp(seen.data(), seen.data() + 1, n - 1) != 0) return false;
    done += n;
  }
  return true;
}

// The tags the runner reads in a failure's message (result_collector.cpp).
inline constexpr std::string_view kChecksTag = "[checks ";
inline constexpr std::string_view kPreconditionTag = "[precondition]";

// A test property: the adapter broke something the whole test stands on
// (what, in words), so all its failures are of its preconditions: they judge
// no requirement of this test, and another test charges the broken part.
inline constexpr std::string_view kPreconditionProperty = "precondition";

template <class... Ids>
std::string checks_tag(const char* first, Ids... rest) {
  std::string tag(kChecksTag);
  tag += first;
  ((tag += ' ', tag += rest), ...);
  return tag + "]";
}

// The prefix the runner reads to tell not-applicable from other skips.
inline constexpr std::string_view kNotApplicable = "not-applicable: ";

class AdapterSuite : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    adapter_ = make_adapter(GetParam());
    ASSERT_NE(adapter_, nullptr) << "adapter '" << GetParam() << "' is not registered";
    info_ = adapter_->info();
  }

  void TearDown() override {
    for (const auto& watched : watched_) {
      if (const auto deviation = watched->deviation()) stands_on_broken(*deviation);
    }
  }

  [[nodiscard]] Adapter& adapter() { return *adapter_; }
  [[nodiscard]] const AdapterInfo& info() const { return info_; }
  // Teardown is how the kit sees pins, whether or not the adapter reports a
  // count: it must refuse while a pin is held and finish once it is gone
  // (PIN-006). Checked on a context of its own, before a test trusts it.
  void expect_teardown_observes_pins();
  // `allocator`, watched: if it leaves the plain path during the test, the
  // test's failures are preconditions (counting_allocator.hpp).
  std::shared_ptr<CountingAllocator> watch(std::shared_ptr<CountingAllocator> allocator) {
    watched_.push_back(allocator);
    return allocator;
  }
  // A fresh allocator of the adapter's, watched.
  std::shared_ptr<CountingAllocator> watched_allocator() {
    return watch(std::make_shared<CountingAllocator>(adapter().make_allocator()));
  }
  // The adapter broke `what`, which this whole test stands on: every failure
  // of the test is then a precondition's. The first cause named is kept.
  void stands_on_broken(const std::string& what) {
    if (broken_) return;
    broken_ = true;
    RecordProperty(std::string(kPreconditionProperty), what);
  }

 private:
  std::unique_ptr<Adapter> adapter_;
  AdapterInfo info_;
  std::vector<std::shared_ptr<CountingAllocator>> watched_;
  bool broken_ = false;
};

// A fixture over a fresh allocator of the adapter's.
class AllocatorSuite : public AdapterSuite {
 protected:
  void SetUp() override {
    AdapterSuite::SetUp();
    if (HasFatalFailure()) return;
    allocator_ = adapter().make_allocator();
    ASSERT_NE(allocator_, nullptr);
  }

  std::shared_ptr<DeviceAllocator> allocator_;
};

// Instance names are the adapter names, with anything GoogleTest does not
// allow in a name made '_': "Allocator.AlignedNonNull/host".
struct AdapterName {
  std::string operator()(const ::testing::TestParamInfo<std::string>& info) const {
    std::string name = info.param;
    for (char& c : name) {
      if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
    }
    return name;
  }
};

}  // namespace ortmem::cts

// Ends the test as not-applicable unless the adapter declares `capability`.
#define ORTMEM_CTS_REQUIRE(capability)                                                 \
  do {                                                                                 \
    if (!info().declares(capability)) {                                                \
      GTEST_SKIP() << ::ortmem::cts::kNotApplicable << "the adapter does not declare " \
                   << ::ortmem::cts::capability_name(capability);                      \
    }                                                                                  \
  } while (false)

// Ends the test unless the adapter's surface offers `control`: the
// requirements that need it are out of that surface's scope, which the
// report derives from the spec (a test skipped here asserts nothing).
#define ORTMEM_CTS_REQUIRE_CONTROL(control)                                              \
  do {                                                                                   \
    if (!info().offers(control)) {                                                       \
      GTEST_SKIP() << ::ortmem::cts::kNotApplicable                                      \
                   << "out of scope: " << info().loaded_from->interface << " offers no " \
                   << ::ortmem::cts::control_name(control) << " control";                \
    }                                                                                    \
  } while (false)

namespace ortmem::cts {

// A fixture of Base whose tests apply only to adapters that declare
// `required`: its SetUp ends the test as not-applicable for any other. A
// SetUp of its own calls this one first and stops when the test ended.
template <class Base, Capability required>
class RequiringCapability : public Base {
 protected:
  void SetUp() override {
    Base::SetUp();
    if (this->HasFatalFailure()) return;
    ORTMEM_CTS_REQUIRE(required);
  }
  using Base::info;
  [[nodiscard]] bool ended() const { return this->IsSkipped() || this->HasFatalFailure(); }
};

}  // namespace ortmem::cts

// Failures in the rest of the enclosing scope count against these
// requirement ids only (in this thread: a worker thread opens its own).
#define ORTMEM_CTS_CHECKING(...) SCOPED_TRACE(::ortmem::cts::checks_tag(__VA_ARGS__))
// Failures in the rest of the enclosing scope are of the test's
// preconditions: they judge no requirement of this test.
#define ORTMEM_CTS_PRECONDITION() SCOPED_TRACE(std::string(::ortmem::cts::kPreconditionTag))
// RC_ASSERT for model-based checks, charged to `ids` (a string literal of
// space-separated requirement ids): the tag travels in RapidCheck's message.
#define ORTMEM_CTS_RC_ASSERT(ids, ...)                                                               \
  do {                                                                                               \
    if (!(__VA_ARGS__)) RC_FAIL(std::string(::ortmem::cts::kChecksTag) + (ids) + "] " #__VA_ARGS__); \
  } while (false)

// RC_ASSERT of a precondition of a model-based check: its failure judges no
// requirement of the test (see ORTMEM_CTS_PRECONDITION).
#define ORTMEM_CTS_RC_PRECONDITION(...)                                                           \
  do {                                                                                            \
    if (!(__VA_ARGS__)) RC_FAIL(std::string(::ortmem::cts::kPreconditionTag) + " " #__VA_ARGS__); \
  } while (false)

// Instantiates `suite` for every adapter selected for this run.
#define ORTMEM_CTS_INSTANTIATE(suite)                                                                \
  INSTANTIATE_TEST_SUITE_P(Adapters, suite, ::testing::ValuesIn(::ortmem::cts::selected_adapters()), \
                           ::ortmem::cts::AdapterName{})

namespace ortmem::cts {

inline void AdapterSuite::expect_teardown_observes_pins() {
  ORTMEM_CTS_CHECKING("PIN-006");
  auto probe = adapter().make_context(*IdentityIssuer::create()->issue<ProviderContextIdentity>());
  ASSERT_NE(probe, nullptr);
  {
    auto pin = probe->pins().pin();
    ASSERT_TRUE(pin);
    probe->begin_retirement();
    ASSERT_FALSE(probe->teardown(std::chrono::steady_clock::now())) << "teardown finished with a pin alive";
  }
  ASSERT_TRUE(probe->teardown(std::chrono::steady_clock::now() + std::chrono::seconds(5)));
}

// A fixture for a capability's own suite (virtual backing or shared
// mapping): a fresh allocator of an adapter that declares `capability`, and
// has it. At teardown any fault left armed is cleared, then every allocation
// a test recorded in live_ (address, size; alignment 64) is released.
template <Capability capability>
class CapabilitySuite : public RequiringCapability<AllocatorSuite, capability> {
 protected:
  void SetUp() override {
    RequiringCapability<AllocatorSuite, capability>::SetUp();
    if (this->ended()) return;
    // ALLOC-011 charges a declared capability that is missing.
    ORTMEM_CTS_PRECONDITION();
    const bool found = capability == Capability::kVirtualBacking ? this->allocator_->as_virtual_backing() != nullptr
                                                                 : this->allocator_->as_shared_mapping() != nullptr;
    ASSERT_TRUE(found) << "the adapter declares " << capability_name(capability) << " but its allocator has none";
  }
  // Whether the adapter can fail both points in one call (armed, then cleared).
  bool can_fail_together(FaultPoint first, FaultPoint second) {
    const bool armed = this->adapter().faults()->arm(first, std::uint64_t{1} << 40) &&
                       this->adapter().faults()->arm(second, std::uint64_t{1} << 40);
    this->adapter().faults()->clear();
    return armed;
  }
  void TearDown() override {
    AllocatorSuite::TearDown();
    if (auto* faults = this->adapter().faults()) faults->clear();
    for (const auto& [ptr, bytes] : live_) (void)this->allocator_->release(ptr, bytes, 64);
  }

  // Drops `ptr` from live_: it was released, or may never be again.
  void forget(void* ptr) {
    std::erase_if(live_, [&](const auto& entry) { return entry.first == ptr; });
  }

  std::vector<std::pair<void*, std::size_t>> live_;
};

}  // namespace ortmem::cts
