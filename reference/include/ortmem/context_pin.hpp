// ortmem/context_pin.hpp: keeping a provider context observable across an
// outstanding deferred release.
//
// A deferred release promises that someone frees device memory later, and
// whoever does it needs the context the memory was allocated against to still
// exist: a stream-ordered free that runs after its context was torn down is
// undefined behaviour in the driver, not an error anyone can catch.
//
// The guarantee runs one way. A pin does not ask the context to stay alive; it
// makes the context's teardown observe the outstanding work: teardown never
// finishes while a pin lives. So a pin must be refused once the context is
// retiring, lost or terminated, and a caller whose pin was refused must not
// queue the release.
//
// A ProviderContextPin is a move-only RAII claim: destroying it releases the
// claim. It exposes the identity of its context and nothing else, so a holder
// cannot extend, transfer or interrogate the context through it. Acquiring and
// releasing pins is safe from any number of threads.
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include "ortmem/expected.hpp"
#include "ortmem/identity.hpp"

namespace ortmem {

struct ProviderContextPinError {
  enum class Kind : std::uint8_t {
    // Retiring, lost or terminated: no new work may be attached.
    kContextUnavailable,
    // The outstanding-pin counter cannot represent one more: refused, never wrapped.
    kPinCountOverflow,
  };
  Kind kind;
  ProviderContextIdentity context;

  // "provider context ... is no longer accepting work" /
  // "provider context ... has too many outstanding pins", each with what to do.
  [[nodiscard]] std::string message() const;
  friend bool operator==(const ProviderContextPinError&, const ProviderContextPinError&) = default;
};

// What a pin source implements to count its claims. release_pin() is called
// exactly once per claim the anchor granted, from whichever thread destroys the
// pin; it must not block.
class PinAnchor {
 public:
  [[nodiscard]] virtual ProviderContextIdentity context() const noexcept = 0;
  virtual void release_pin() noexcept = 0;

 protected:
  ~PinAnchor() = default;
};

class ProviderContextPin {
 public:
  // Wraps a claim the anchor has already counted. Only pin sources call this.
  [[nodiscard]] static ProviderContextPin adopt_counted_claim(PinAnchor& anchor) noexcept {
    return ProviderContextPin(&anchor);
  }

  ProviderContextPin(const ProviderContextPin&) = delete;
  ProviderContextPin& operator=(const ProviderContextPin&) = delete;
  ProviderContextPin(ProviderContextPin&& other) noexcept : anchor_(std::exchange(other.anchor_, nullptr)) {}
  ProviderContextPin& operator=(ProviderContextPin&& other) noexcept {
    if (this != &other) {
      reset();
      anchor_ = std::exchange(other.anchor_, nullptr);
    }
    return *this;
  }
  ~ProviderContextPin() { reset(); }

  // The context this pin holds. A moved-from pin holds nothing.
  [[nodiscard]] ProviderContextIdentity context() const noexcept {
    return anchor_ != nullptr ? anchor_->context() : ProviderContextIdentity{};
  }
  [[nodiscard]] bool holds_claim() const noexcept { return anchor_ != nullptr; }

  // Releases the claim now rather than at end of scope.
  void reset() noexcept {
    if (auto* anchor = std::exchange(anchor_, nullptr)) anchor->release_pin();
  }

 private:
  explicit ProviderContextPin(PinAnchor* anchor) noexcept : anchor_(anchor) {}
  PinAnchor* anchor_;
};

// Hands out pins for exactly one context.
class ProviderContextPinSource {
 public:
  virtual ~ProviderContextPinSource() = default;
  // The one context this source pins; every pin it issues reports it.
  [[nodiscard]] virtual ProviderContextIdentity context() const noexcept = 0;
  // Claims the context until the pin is destroyed, or says why not. A refusal
  // means "do not queue the release", never "proceed unpinned".
  [[nodiscard]] virtual Expected<ProviderContextPin, ProviderContextPinError> pin() noexcept = 0;
};

}  // namespace ortmem
