// ortmem/report/integrity.hpp: proving a report is the one the kit wrote.
//
// Every report file carries an "integrity" section: the SHA-256 of its
// canonical content (the report's JSON without that section, keys sorted,
// no whitespace), so any edit that does not also recompute the digest is
// caught. Recomputing it is easy, so a report that must stand as evidence is
// also signed: with `--sign KEY` the section holds an Ed25519 signature over
// the same canonical bytes and the public key, and `report verify --pubkey`
// accepts only a signature by that key. Keys are files of hex digits made by
// `ortmem-cts report keygen`. libsodium (Debian's libsodium-dev) does the
// cryptography: a vetted implementation, not ours.
#pragma once

#include <array>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "ortmem/expected.hpp"

namespace ortmem::report {

struct SigningKey {
  std::array<unsigned char, 64> secret{};
  std::array<unsigned char, 32> public_key{};
};

// A new key pair; false when the system has no randomness to give.
[[nodiscard]] Expected<SigningKey, std::string> generate_signing_key();
[[nodiscard]] std::string secret_key_text(const SigningKey& key);
[[nodiscard]] std::string public_key_text(const SigningKey& key);
[[nodiscard]] Expected<SigningKey, std::string> read_signing_key(const std::string& path);
[[nodiscard]] Expected<std::array<unsigned char, 32>, std::string> read_public_key(const std::string& path);

// The hex SHA-256 of any bytes (a binary, a plugin, a report's content).
[[nodiscard]] std::string sha256_hex(std::string_view bytes);
[[nodiscard]] Expected<std::string, std::string> sha256_of_file(const std::string& path);

// Adds the integrity section to a report document (replacing one it had).
void seal(nlohmann::json& document, const std::optional<SigningKey>& key);

// nullopt when the section matches the content (and, with `trusted`, is
// signed by that key); otherwise what is wrong.
[[nodiscard]] std::optional<std::string> check_seal(const nlohmann::json& document,
                                                    const std::optional<std::array<unsigned char, 32>>& trusted);

}  // namespace ortmem::report
