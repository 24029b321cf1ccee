#include "ortmem/identity.hpp"

#include <algorithm>
#include <limits>

namespace ortmem {
namespace {

// Issuer numbers are process-wide so identities from two registries never compare equal.
std::atomic<std::uint64_t> next_issuer{1};

// A run [first, end) of values of `counter`.
struct Taken {
  std::uint64_t first;
  std::uint64_t end;
};

// Takes up to `wanted` (at least 1) consecutive values of `counter`, refusing
// (rather than wrapping) at the top: the maximum itself is never handed out,
// so a counter that reached it stays exhausted.
Expected<Taken, IdentityExhausted> take_run(std::atomic<std::uint64_t>& counter, std::uint64_t wanted) noexcept {
  constexpr std::uint64_t kTop = std::numeric_limits<std::uint64_t>::max();
  std::uint64_t value = counter.load(std::memory_order_relaxed);
  std::uint64_t granted = 0;
  do {
    if (value == 0 || value == kTop) return fail(IdentityExhausted{});
    granted = std::min(wanted, kTop - value);
  } while (!counter.compare_exchange_weak(value, value + granted, std::memory_order_relaxed));
  return Taken{value, value + granted};
}

Expected<std::uint64_t, IdentityExhausted> take_next(std::atomic<std::uint64_t>& counter) noexcept {
  auto taken = take_run(counter, 1);
  if (!taken) return fail(taken.error());
  return taken->first;
}

template <class Tag>
std::string render(std::string_view kind, Identity<Tag> identity) {
  if (!identity.is_issued()) return std::string(kind) + "#none";
  return std::string(kind) + "#" + std::to_string(identity.opaque().serial()) + "@" + std::to_string(identity.issuer());
}

}  // namespace

std::string IdentityExhausted::message() const {
  return "the identity space of this registry is exhausted; no further contexts, mechanisms, "
         "bindings or allocations can be named; create a new registry";
}

Expected<IdentityIssuer, IdentityExhausted> IdentityIssuer::create() { return create_starting_at(1); }

Expected<IdentityIssuer, IdentityExhausted> IdentityIssuer::create_starting_at(std::uint64_t next_serial) {
  auto issuer = take_next(next_issuer);
  if (!issuer) return fail(issuer.error());
  return IdentityIssuer(*issuer, next_serial == 0 ? 1 : next_serial);
}

Expected<OpaqueIdentity, IdentityExhausted> IdentityIssuer::next() noexcept {
  auto serial = take_next(next_);
  if (!serial) return fail(serial.error());
  return OpaqueIdentity(issuer_, *serial);
}

Expected<IdentityBlock, IdentityExhausted> IdentityIssuer::reserve(std::uint64_t wanted) noexcept {
  auto taken = take_run(next_, wanted == 0 ? 1 : wanted);
  if (!taken) return fail(taken.error());
  return IdentityBlock(issuer_, taken->first, taken->end);
}

std::string to_string(ProviderContextIdentity identity) { return render("context", identity); }
std::string to_string(AuthorityIdentity identity) { return render("authority", identity); }
std::string to_string(MechanismIdentity identity) { return render("mechanism", identity); }
std::string to_string(BindingId identity) { return render("binding", identity); }

}  // namespace ortmem
