// ortmem/mechanism/provider_context.hpp: the pin-counting provider context
// every reference mechanism uses (host and CUDA alike: the rules do not
// depend on where the memory lives), and its pin source.
//
// The context moves one way through its states:
//   accepting -> retiring -> device-lost -> terminated
// (any step may be skipped, none undone). Only an accepting context grants
// pins; from retiring on every pin() is refused with context-unavailable,
// forever. teardown() retires the context and then observes outstanding pins:
// it finishes (state terminated) only when none is left, and otherwise reports
// busy with the count once its deadline passes. It never finishes with a pin
// alive.
//
// "Refuse after retirement" and "count exactly" hold under any interleaving
// of pin(), pin release and teardown. The count is kept per thread, so
// threads pinning one context share no written cache line: a pin costs one
// compare-and-swap on the calling thread's shard each way. The counter may be
// capped (max_outstanding_pins); one more pin than the cap is refused with
// pin-count-overflow, never wrapped. A capped context grants pins one at a
// time under its mutex, which keeps the cap exact at the price of that
// shared lock; an uncapped one grants without it.
//
// Pins may outlive this object: the counter is freed by whichever goes last,
// the context or its final pin.
//
// Do not call teardown() from a thread that holds one of this context's pins:
// it cannot finish until that pin is released, so it will report busy at its
// deadline. Every wait therefore takes a deadline.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "ortmem/context_pin.hpp"

namespace ortmem::mechanism {

struct TeardownBusy {
  ProviderContextIdentity context;
  std::uint64_t outstanding_pins = 0;
  [[nodiscard]] std::string message() const;
};

class ProviderContext final : public ProviderContextPinSource {
 public:
  enum class State : std::uint8_t { kAccepting = 0, kRetiring = 1, kDeviceLost = 2, kTerminated = 3 };

  // The largest count the counter can hold.
  static constexpr std::uint64_t kCounterCapacity = (std::uint64_t{1} << 61) - 1;

  struct Options {
    // Pins beyond this many outstanding are refused with pin-count-overflow.
    std::uint64_t max_outstanding_pins = kCounterCapacity;
  };

  explicit ProviderContext(ProviderContextIdentity identity) : ProviderContext(identity, Options{}) {}
  ProviderContext(ProviderContextIdentity identity, Options options);
  ~ProviderContext() override;
  ProviderContext(const ProviderContext&) = delete;
  ProviderContext& operator=(const ProviderContext&) = delete;

  [[nodiscard]] ProviderContextIdentity context() const noexcept override;
  [[nodiscard]] Expected<ProviderContextPin, ProviderContextPinError> pin() noexcept override;

  [[nodiscard]] State state() const noexcept;
  [[nodiscard]] std::uint64_t outstanding_pins() const noexcept;

  // Stops granting pins. Existing pins stay valid.
  void begin_retirement() noexcept;
  // The device is gone: stops granting pins. Teardown still waits for pins,
  // because their holders may be about to settle work without the device.
  void mark_device_lost() noexcept;
  // Retires the context, then waits until no pin is outstanding (state becomes
  // terminated) or `deadline` passes (busy, with the count). Idempotent once
  // terminated.
  [[nodiscard]] Expected<void, TeardownBusy> teardown(std::chrono::steady_clock::time_point deadline) noexcept;
  // teardown() that does not wait.
  [[nodiscard]] Expected<void, TeardownBusy> try_teardown() noexcept {
    return teardown(std::chrono::steady_clock::time_point::min());
  }

 private:
  class Counter;
  Counter* counter_;  // shared with outstanding pins; see the header comment
};

[[nodiscard]] std::string_view state_name(ProviderContext::State state) noexcept;

}  // namespace ortmem::mechanism
