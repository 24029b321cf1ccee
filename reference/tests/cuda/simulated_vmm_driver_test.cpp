// The simulated driver's record of a mapping's access (its cuMemGetAccess) is
// what the host really enforces on the memory standing in for the device's.
// SM-008's probe for device memory reads that record instead of writing, so
// this agreement is what makes the probe proven on a machine with no GPU.
#include "ortmem/cuda/testing/simulated_vmm_driver.hpp"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdint>
#include <cstring>

namespace ortmem::cuda {
namespace {

constexpr std::size_t kGranule = std::size_t{64} << 10;

// Whether a forked child's one-byte write at `address` went through (false:
// the kernel killed it for the protection).
bool child_write_goes_through(DevicePtr address) {
  const pid_t child = ::fork();
  if (child == 0) {
    std::signal(SIGSEGV, SIG_DFL);
    std::signal(SIGBUS, SIG_DFL);
    *reinterpret_cast<volatile unsigned char*>(static_cast<std::uintptr_t>(address)) = 0x5A;
    ::_exit(0);
  }
  int status = 0;
  EXPECT_EQ(::waitpid(child, &status, 0), child);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

TEST(SimulatedVmmDriver, ItsRecordOfEachMappingsAccessIsWhatTheHostEnforces) {
  testing::SimulatedVmmDriver driver(kGranule);
  auto address = driver.reserve(2 * kGranule, kGranule);
  auto first = driver.create(kGranule);
  auto second = driver.create(kGranule);
  ASSERT_TRUE(address && first && second);
  const DevicePtr read_only = *address;
  const DevicePtr read_write = *address + kGranule;
  ASSERT_TRUE(driver.map(read_only, kGranule, *first));
  ASSERT_TRUE(driver.map(read_write, kGranule, *second));

  auto none = driver.access(read_only);
  ASSERT_TRUE(none) << none.error().message();
  EXPECT_FALSE(*none) << "a fresh mapping has no access until set_access";
  EXPECT_FALSE(child_write_goes_through(read_only));

  ASSERT_TRUE(driver.set_access(read_only, kGranule, Access::kReadOnly));
  ASSERT_TRUE(driver.set_access(read_write, kGranule, Access::kReadWrite));
  auto recorded = driver.access(read_only + 100);
  ASSERT_TRUE(recorded && *recorded);
  EXPECT_EQ(**recorded, Access::kReadOnly) << "any address inside the mapping answers for it";
  EXPECT_FALSE(child_write_goes_through(read_only + 100));
  recorded = driver.access(read_write);
  ASSERT_TRUE(recorded && *recorded);
  EXPECT_EQ(**recorded, Access::kReadWrite);
  EXPECT_TRUE(child_write_goes_through(read_write));

  ASSERT_TRUE(driver.unmap(read_only, kGranule));
  EXPECT_FALSE(driver.access(read_only)) << "an unmapped address has no access to report";
  ASSERT_TRUE(driver.unmap(read_write, kGranule));
  ASSERT_TRUE(driver.release(*first));
  ASSERT_TRUE(driver.release(*second));
  ASSERT_TRUE(driver.free_reservation(*address, 2 * kGranule));
}

}  // namespace
}  // namespace ortmem::cuda
