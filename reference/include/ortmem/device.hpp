// ortmem/device.hpp: where bytes live (Tier) and which device serves them
// (DeviceKey).
//
// A Tier says how far away memory is; a DeviceKey says which device within the
// tier. Two GPUs share the device tier and are still different keys, because
// an allocation from one can never be released by the other's allocator.
#pragma once

#include <array>
#include <compare>
#include <cstdint>
#include <string>
#include <string_view>

namespace ortmem {

// Ordered fastest first, which is also the order memory is demoted in.
enum class Tier : std::uint8_t { kDevice = 0, kHost = 1, kDisk = 2 };

inline constexpr std::array<Tier, 3> kAllTiers = {Tier::kDevice, Tier::kHost, Tier::kDisk};

// The stable names reports and error messages use: "device", "host", "disk".
[[nodiscard]] constexpr std::string_view tier_name(Tier tier) noexcept {
  switch (tier) {
    case Tier::kDevice: return "device";
    case Tier::kHost: return "host";
    case Tier::kDisk: return "disk";
  }
  return "unknown";
}

struct DeviceKey {
  Tier tier = Tier::kHost;
  std::uint32_t index = 0;

  // Host memory is always (host, 0): there is one host address space.
  [[nodiscard]] static constexpr DeviceKey host() noexcept { return {Tier::kHost, 0}; }
  // Accelerator `ordinal`, e.g. CUDA device n.
  [[nodiscard]] static constexpr DeviceKey device(std::uint32_t ordinal) noexcept { return {Tier::kDevice, ordinal}; }

  friend constexpr bool operator==(DeviceKey, DeviceKey) noexcept = default;
  friend constexpr auto operator<=>(DeviceKey, DeviceKey) noexcept = default;
};

// "host:0", "device:1".
[[nodiscard]] std::string to_string(DeviceKey key);

}  // namespace ortmem
