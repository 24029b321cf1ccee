// The loader's defensive filter, on its own: what the kit refuses or gives
// back before, or instead of, trusting a plugin.
//
// The plugin here is a test double, named as one: a spy in this process,
// loaded through PluginModule::from_exports, that counts every call it gets
// and can be told to answer allocate with a null or misaligned address. The
// ABI probes (conformance/suites/abi_suite.cpp) judge real plugins' own
// checks with raw calls; this judges the kit's side of the same boundary.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <vector>

#include "plugin/plugin_allocator.hpp"
#include "plugin/plugin_module.hpp"

namespace ortmem::plugin {
namespace {

constexpr std::uint64_t kMechanism = 7;

enum class Answer { kHonest, kNull, kMisaligned };

// Everything the spy saw; reset by each test.
struct Spy {
  Answer answer = Answer::kHonest;
  int deallocate_calls = 0;
  std::vector<std::uint64_t> allocation_ids;  // as the host named them in allocate
  int opened = 0;
  int released = 0;
};
Spy spy;

NxmemStatus ok() { return NxmemStatus{}; }

NxmemStatus spy_allocate(void*, const NxmemAllocRequest* request, NxmemAllocResult* result) {
  spy.allocation_ids.push_back(request->allocation_id);
  auto* memory = static_cast<std::uint8_t*>(std::aligned_alloc(request->align < 64 ? 64 : request->align, 4096));
  switch (spy.answer) {
    case Answer::kHonest: result->ptr = memory; break;
    case Answer::kNull:
      std::free(memory);
      result->ptr = nullptr;
      break;
    case Answer::kMisaligned: result->ptr = memory + 1; break;
  }
  result->owned_bytes = request->bytes;
  return ok();
}

NxmemStatus spy_deallocate(void*, const NxmemAllocation* allocation, std::uint64_t* unmapped) {
  ++spy.deallocate_calls;
  // A misaligned answer is given back at the address the spy gave.
  auto address = reinterpret_cast<std::uintptr_t>(allocation->ptr);
  std::free(reinterpret_cast<void*>(address - address % 64));
  *unmapped = 0;
  return ok();
}

void spy_retain(void*) {}
void spy_release(void*) { ++spy.released; }

const NxmemAllocatorVtable kAllocator = [] {
  NxmemAllocatorVtable vtable{};
  vtable.struct_size = sizeof vtable;
  vtable.abi_minor = 1;
  vtable.mechanism_id = kMechanism;
  vtable.device = {NXMEM_TIER_HOST, 0};
  vtable.capability_flags = NXMEM_CAP_ALLOCATOR;
  vtable.allocate = spy_allocate;
  vtable.deallocate = spy_deallocate;
  vtable.retain = spy_retain;
  vtable.release = spy_release;
  return vtable;
}();

NxmemStatus spy_open(void*, const NxmemOpenRequest*, const NxmemAllocatorVtable** out) {
  ++spy.opened;
  *out = &kAllocator;
  return ok();
}
void spy_factory_release(void*) {}

const NxmemAllocatorFactoryVtable kFactory = [] {
  NxmemAllocatorFactoryVtable vtable{};
  vtable.struct_size = sizeof vtable;
  vtable.abi_minor = 1;
  vtable.name = reinterpret_cast<const std::uint8_t*>("spy");
  vtable.device = {NXMEM_TIER_HOST, 0};
  vtable.capability_flags = NXMEM_CAP_ALLOCATOR;
  vtable.open_allocator = spy_open;
  vtable.release = spy_factory_release;
  return vtable;
}();

NxmemStatus spy_negotiate(const NxmemNegotiateRequest* request, NxmemNegotiateResponse* response) {
  std::memset(response, 0, sizeof *response);
  response->struct_size = sizeof *response;
  response->plugin_range = {1, 1, 0, 1};
  response->agreed_major = 1;
  response->agreed_minor = request->host_range.minor_max < 1 ? request->host_range.minor_max : 1;
  response->capability_flags = NXMEM_CAP_ALLOCATOR;
  return ok();
}
NxmemStatus spy_factories(const NxmemAllocatorFactoryVtable** out, std::uint64_t, std::uint64_t* count) {
  out[0] = &kFactory;
  *count = 1;
  return ok();
}
NxmemStatus spy_unload(NxmemUnloadReport* report) {
  std::memset(report, 0, sizeof *report);
  report->struct_size = sizeof *report;
  return ok();
}

class PluginFilter : public ::testing::Test {
 protected:
  void SetUp() override {
    spy = Spy{};
    auto module = PluginModule::from_exports({spy_negotiate, spy_factories, spy_unload}, "spy");
    ASSERT_TRUE(module) << module.error();
    auto opened = PluginAllocator::open(*module, (*module)->factories().front());
    ASSERT_TRUE(opened) << opened.error();
    allocator_ = std::move(*opened);
  }
  std::shared_ptr<PluginAllocator> allocator_;
};

TEST_F(PluginFilter, AReleaseNamingNoLiveAllocationNeverReachesThePlugin) {
  void* ptr = *allocator_->allocate(256, 64);
  auto* inside = static_cast<std::uint8_t*>(ptr) + 64;
  EXPECT_TRUE(allocator_->release(inside, 256, 64).is_failed()) << "an address inside the allocation";
  EXPECT_TRUE(allocator_->release(ptr, 128, 64).is_failed()) << "another size";
  EXPECT_TRUE(allocator_->release(ptr, 256, 128).is_failed()) << "another alignment";
  EXPECT_EQ(spy.deallocate_calls, 0) << "the filter let a call through to the plugin";
  EXPECT_TRUE(allocator_->release(ptr, 256, 64).is_complete()) << "the refusals changed the record";
  EXPECT_TRUE(allocator_->release(ptr, 256, 64).is_failed()) << "a second release";
  EXPECT_EQ(spy.deallocate_calls, 1);
}

TEST_F(PluginFilter, AllocationIdsAreTheHostsCountingFromOneNeverTheAddress) {
  std::vector<void*> made;
  for (int i = 0; i < 3; ++i) made.push_back(*allocator_->allocate(64, 64));
  EXPECT_EQ(spy.allocation_ids, (std::vector<std::uint64_t>{1, 2, 3}));
  for (void* ptr : made) EXPECT_TRUE(allocator_->release(ptr, 64, 64).is_complete());
}

TEST_F(PluginFilter, ANullAnswerFailsTheAllocation) {
  spy.answer = Answer::kNull;
  const auto answer = allocator_->allocate(64, 64);
  ASSERT_FALSE(answer);
  EXPECT_EQ(spy.deallocate_calls, 0) << "there was nothing to give back";
}

TEST_F(PluginFilter, AMisalignedAnswerFailsTheAllocationAndIsGivenBack) {
  spy.answer = Answer::kMisaligned;
  const auto answer = allocator_->allocate(64, 64);
  ASSERT_FALSE(answer);
  EXPECT_NE(answer.error().message().find("not aligned"), std::string::npos) << answer.error().message();
  EXPECT_EQ(spy.deallocate_calls, 1) << "the plugin still holds what it answered: the kit must give it back";
}

TEST_F(PluginFilter, TheAllocatorIsReleasedExactlyOnceWithWhatIsLiveGivenBackFirst) {
  (void)*allocator_->allocate(64, 64);
  allocator_.reset();
  EXPECT_EQ(spy.deallocate_calls, 1) << "a live allocation was not given back before the final release";
  EXPECT_EQ(spy.released, 1);
}

}  // namespace
}  // namespace ortmem::plugin
