#include "ortmem/report/integrity.hpp"

#include <sodium.h>

#include "ortmem/report/report_file.hpp"
#include "ortmem/report/report_json.hpp"

namespace ortmem::report {
namespace {

bool sodium_ready() {
  static const bool ready = sodium_init() >= 0;
  return ready;
}

std::string hex(const unsigned char* bytes, std::size_t size) {
  std::string text(size * 2 + 1, '\0');
  sodium_bin2hex(text.data(), text.size(), bytes, size);
  text.pop_back();
  return text;
}

template <std::size_t N>
bool from_hex(std::string_view text, std::array<unsigned char, N>& bytes) {
  std::size_t written = 0;
  return sodium_hex2bin(bytes.data(), N, text.data(), text.size(), nullptr, &written, nullptr) == 0 && written == N &&
         text.size() == 2 * N;
}

std::string canonical(const nlohmann::json& document) {
  nlohmann::json content = document;
  content.erase("integrity");
  return dump_json(content);  // nlohmann keeps object keys sorted: one text per content
}

// A member's string value, or "" when it is absent or not a string: a
// hostile document must not make the check throw.
std::string text_at(const nlohmann::json& object, const char* key) {
  const auto found = object.find(key);
  return found != object.end() && found->is_string() ? found->get<std::string>() : std::string();
}

std::string trimmed(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ' || text.back() == '\r')) text.pop_back();
  return text;
}

}  // namespace

Expected<SigningKey, std::string> generate_signing_key() {
  if (!sodium_ready()) return fail(std::string("libsodium cannot start (no randomness?)"));
  SigningKey key;
  crypto_sign_keypair(key.public_key.data(), key.secret.data());
  return key;
}

std::string secret_key_text(const SigningKey& key) { return hex(key.secret.data(), key.secret.size()) + '\n'; }
std::string public_key_text(const SigningKey& key) { return hex(key.public_key.data(), key.public_key.size()) + '\n'; }

Expected<SigningKey, std::string> read_signing_key(const std::string& path) {
  auto text = read_regular_file(path);
  if (!text) return fail(text.error());
  SigningKey key;
  if (!sodium_ready() || !from_hex(trimmed(*text), key.secret)) {
    return fail("'" + path + "' is not an Ed25519 secret key (128 hex digits, as `ortmem-cts report keygen` writes)");
  }
  crypto_sign_ed25519_sk_to_pk(key.public_key.data(), key.secret.data());
  return key;
}

Expected<std::array<unsigned char, 32>, std::string> read_public_key(const std::string& path) {
  auto text = read_regular_file(path);
  if (!text) return fail(text.error());
  std::array<unsigned char, 32> key{};
  if (!from_hex(trimmed(*text), key)) {
    return fail("'" + path + "' is not an Ed25519 public key (64 hex digits, as `ortmem-cts report keygen` writes)");
  }
  return key;
}

std::string sha256_hex(std::string_view bytes) {
  std::array<unsigned char, crypto_hash_sha256_BYTES> digest{};
  crypto_hash_sha256(digest.data(), reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size());
  return hex(digest.data(), digest.size());
}

Expected<std::string, std::string> sha256_of_file(const std::string& path) {
  // Binaries and plugins can be large, so the file is hashed as it is read.
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) return fail("cannot read '" + path + "' to hash it");
  crypto_hash_sha256_state state;
  crypto_hash_sha256_init(&state);
  unsigned char buffer[1 << 16];
  for (std::size_t got; (got = std::fread(buffer, 1, sizeof buffer, file)) > 0;) {
    crypto_hash_sha256_update(&state, buffer, got);
  }
  const bool failed = std::ferror(file) != 0;
  std::fclose(file);
  if (failed) return fail("cannot read '" + path + "' to hash it");
  std::array<unsigned char, crypto_hash_sha256_BYTES> digest{};
  crypto_hash_sha256_final(&state, digest.data());
  return hex(digest.data(), digest.size());
}

void seal(nlohmann::json& document, const std::optional<SigningKey>& key) {
  const std::string content = canonical(document);
  nlohmann::json integrity = {{"algorithm", "sha256"}, {"digest", sha256_hex(content)}};
  if (key && sodium_ready()) {
    std::array<unsigned char, crypto_sign_BYTES> signature{};
    crypto_sign_detached(signature.data(), nullptr, reinterpret_cast<const unsigned char*>(content.data()),
                         content.size(), key->secret.data());
    integrity["signature"] = {{"algorithm", "ed25519"},
                              {"public_key", hex(key->public_key.data(), key->public_key.size())},
                              {"value", hex(signature.data(), signature.size())}};
  }
  document["integrity"] = std::move(integrity);
}

std::optional<std::string> check_seal(const nlohmann::json& document,
                                      const std::optional<std::array<unsigned char, 32>>& trusted) {
  if (!document.is_object() || !document.contains("integrity") || !document["integrity"].is_object()) {
    return "the report has no integrity section: it was not written by ortmem-cts 0.2 or later, or it was cut";
  }
  const nlohmann::json& integrity = document["integrity"];
  if (text_at(integrity, "algorithm") != "sha256" || text_at(integrity, "digest").empty()) {
    return "integrity: expected a sha256 digest";
  }
  const std::string content = canonical(document);
  if (text_at(integrity, "digest") != sha256_hex(content)) {
    return "integrity.digest does not match the content: the report was changed after it was written";
  }
  if (!trusted) return std::nullopt;
  if (!integrity.contains("signature") || !integrity["signature"].is_object()) {
    return "the report is not signed, and --pubkey asks for a signature";
  }
  const nlohmann::json& signature = integrity["signature"];
  std::array<unsigned char, 32> signer{};
  std::array<unsigned char, crypto_sign_BYTES> value{};
  if (text_at(signature, "algorithm") != "ed25519" || !from_hex(text_at(signature, "public_key"), signer) ||
      !from_hex(text_at(signature, "value"), value)) {
    return "integrity.signature: expected an ed25519 public key and value in hex";
  }
  if (signer != *trusted) return "the report is signed by another key than --pubkey";
  if (!sodium_ready() ||
      crypto_sign_verify_detached(value.data(), reinterpret_cast<const unsigned char*>(content.data()), content.size(),
                                  signer.data()) != 0) {
    return "integrity.signature does not verify: the report was changed after it was signed";
  }
  return std::nullopt;
}

}  // namespace ortmem::report
