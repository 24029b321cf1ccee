// ortmem/identity.hpp: opaque, registry-scoped identities.
//
// Provider contexts, authorities, mechanisms and bindings are named by
// identities that an IdentityIssuer hands out. Each identity carries the issuer
// (registry) that made it, so a handle from another registry can be refused as
// foreign before anything runs, and a serial that is never derived from an
// address: a reused address can never make old metadata current again.
// Running out of serials is an error (identity-exhausted), never a wrap.
#pragma once

#include <atomic>
#include <compare>
#include <cstdint>
#include <functional>
#include <string>

#include "ortmem/expected.hpp"

namespace ortmem {

namespace detail {
class AllocationName;
}  // namespace detail

// The registry an identity came from and its serial there. Both are non-zero
// for every issued identity; a default-constructed value names nothing.
class OpaqueIdentity {
 public:
  constexpr OpaqueIdentity() noexcept = default;
  [[nodiscard]] constexpr std::uint64_t issuer() const noexcept { return issuer_; }
  [[nodiscard]] constexpr std::uint64_t serial() const noexcept { return serial_; }
  [[nodiscard]] constexpr bool is_issued() const noexcept { return serial_ != 0; }
  friend constexpr bool operator==(OpaqueIdentity, OpaqueIdentity) noexcept = default;
  friend constexpr auto operator<=>(OpaqueIdentity, OpaqueIdentity) noexcept = default;

 private:
  friend class IdentityIssuer;
  friend class detail::AllocationName;  // keeps three ids of one issuer as one issuer and three serials
  friend class IdentityBlock;
  constexpr OpaqueIdentity(std::uint64_t issuer, std::uint64_t serial) noexcept : issuer_(issuer), serial_(serial) {}
  std::uint64_t issuer_ = 0;
  std::uint64_t serial_ = 0;
};

// One identity type per kind of thing, so a mechanism id can never be passed
// where a context id is expected.
template <class Tag>
class Identity {
 public:
  constexpr Identity() noexcept = default;
  constexpr explicit Identity(OpaqueIdentity opaque) noexcept : opaque_(opaque) {}
  [[nodiscard]] constexpr OpaqueIdentity opaque() const noexcept { return opaque_; }
  [[nodiscard]] constexpr std::uint64_t issuer() const noexcept { return opaque_.issuer(); }
  [[nodiscard]] constexpr bool is_issued() const noexcept { return opaque_.is_issued(); }
  friend constexpr bool operator==(Identity, Identity) noexcept = default;
  friend constexpr auto operator<=>(Identity, Identity) noexcept = default;

 private:
  OpaqueIdentity opaque_;
};

using ProviderContextIdentity = Identity<struct ProviderContextTag>;
using AuthorityIdentity = Identity<struct AuthorityTag>;
using MechanismIdentity = Identity<struct MechanismTag>;
using BindingId = Identity<struct BindingTag>;
// Generations order metadata of one binding / one allocation slot in time.
using BindingGeneration = Identity<struct BindingGenerationTag>;
using AllocationGeneration = Identity<struct AllocationGenerationTag>;

// "context#3@1" (serial 3 of registry 1); stable enough for logs and reports.
[[nodiscard]] std::string to_string(ProviderContextIdentity identity);
[[nodiscard]] std::string to_string(AuthorityIdentity identity);
[[nodiscard]] std::string to_string(MechanismIdentity identity);
[[nodiscard]] std::string to_string(BindingId identity);

struct IdentityExhausted {
  [[nodiscard]] std::string message() const;
};

// Issues identities for one registry. Thread-safe and lock-free.
// A run of serials an issuer reserved for one holder, which hands them out
// itself without touching the issuer's shared counter (a record shard issues
// allocation generations this way, under its own lock). Serials from a block
// are as unique as any other; they increase within the block, not across
// blocks of different holders. Not thread-safe: its holder serialises it.
class IdentityBlock {
 public:
  constexpr IdentityBlock() noexcept = default;

  // Writes the block's next identity into `identity`; false, writing
  // nothing, once the block is used up.
  template <class Id>
  [[nodiscard]] bool take(Id& identity) noexcept {
    if (next_ == end_) return false;
    identity = Id(OpaqueIdentity(issuer_, next_++));
    return true;
  }

 private:
  friend class IdentityIssuer;
  constexpr IdentityBlock(std::uint64_t issuer, std::uint64_t first, std::uint64_t end) noexcept
      : issuer_(issuer), next_(first), end_(end) {}

  std::uint64_t issuer_ = 0;
  std::uint64_t next_ = 0;
  std::uint64_t end_ = 0;
};

class IdentityIssuer {
 public:
  // Takes the next process-wide issuer number; fails only when those run out.
  [[nodiscard]] static Expected<IdentityIssuer, IdentityExhausted> create();
  // For tests of exhaustion: an issuer whose next serial is `next_serial`.
  [[nodiscard]] static Expected<IdentityIssuer, IdentityExhausted> create_starting_at(std::uint64_t next_serial);

  IdentityIssuer(const IdentityIssuer&) = delete;
  IdentityIssuer& operator=(const IdentityIssuer&) = delete;
  IdentityIssuer(IdentityIssuer&& other) noexcept
      : issuer_(other.issuer_), next_(other.next_.load(std::memory_order_relaxed)) {}

  [[nodiscard]] std::uint64_t issuer() const noexcept { return issuer_; }

  // The next never-issued identity of this issuer, or exhaustion. Serials are
  // shared by every kind, so an identity is unique across kinds too.
  template <class Id>
  [[nodiscard]] Expected<Id, IdentityExhausted> issue() noexcept {
    auto opaque = next();
    if (!opaque) return fail(opaque.error());
    return Id(*opaque);
  }

  // Reserves up to `wanted` consecutive serials (fewer only near exhaustion),
  // or reports exhaustion when none are left.
  [[nodiscard]] Expected<IdentityBlock, IdentityExhausted> reserve(std::uint64_t wanted) noexcept;

  // Whether `identity` came from this issuer (not foreign).
  template <class Tag>
  [[nodiscard]] bool issued(Identity<Tag> identity) const noexcept {
    return identity.is_issued() && identity.issuer() == issuer_;
  }

 private:
  IdentityIssuer(std::uint64_t issuer, std::uint64_t next_serial) noexcept : issuer_(issuer), next_(next_serial) {}
  [[nodiscard]] Expected<OpaqueIdentity, IdentityExhausted> next() noexcept;

  std::uint64_t issuer_;
  std::atomic<std::uint64_t> next_;
};

}  // namespace ortmem

template <class Tag>
struct std::hash<ortmem::Identity<Tag>> {
  std::size_t operator()(ortmem::Identity<Tag> identity) const noexcept {
    const auto opaque = identity.opaque();
    return std::hash<std::uint64_t>{}(opaque.serial() * 0x9E3779B97F4A7C15ULL ^ opaque.issuer());
  }
};
