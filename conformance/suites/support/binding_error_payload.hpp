// conformance/suites/support/binding_error_payload.hpp: what a registry's
// refusal must carry (BIND-018).
//
// A caller that handles a BindingError reads its fields; one that logs it
// reads message(). Both must name the same thing: the subject of the refusal
// (which handle, which device, which mechanism, how many views), so a check
// of the kind alone passes an error that lost its payload on one path, or a
// message that names the wrong context.
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <optional>
#include <string>

#include "ortmem/ortmem.hpp"

namespace ortmem::cts {

// The kind a refusal must have and the fields of that kind the test knows;
// a field left empty is not checked.
struct ExpectedBindingError {
  BindingError::Kind kind;
  std::optional<std::string> subject{};
  std::optional<DeviceKey> expected_device{};
  std::optional<DeviceKey> actual_device{};
  std::optional<ProviderContextIdentity> context{};
  std::optional<AuthorityIdentity> authority{};
  std::optional<MechanismIdentity> mechanism{};
  std::optional<MechanismLifecycle> lifecycle{};
  std::optional<BindingId> expected_binding{};
  std::optional<BindingId> actual_binding{};
  std::optional<AllocationIdentity> allocation{};
  std::optional<std::size_t> count{};
  std::optional<std::string> loss_reason{};
  std::optional<std::size_t> allocation_bytes{};
  std::optional<std::size_t> retained_bytes{};
  std::optional<std::size_t> view_offset{};
  std::optional<std::size_t> view_end{};
};

// Success when each given field of `error` equals the expectation and
// message() names it in words (an identity by its to_string, a count by its
// digits); otherwise every difference. An error of another kind passes: the
// kind is the refusing rule's to check, and charging it here as well would
// blame one broken rule on two requirements.
inline ::testing::AssertionResult Names(const BindingError& error, const ExpectedBindingError& expected) {
  if (error.kind() != expected.kind) return ::testing::AssertionSuccess();
  std::string problems;
  const std::string message = error.message();
  const auto check = [&](const char* field, bool equal, const std::string& words) {
    if (!equal) problems += std::string("; its ") + field + " is wrong";
    if (message.find(words) == std::string::npos) {
      problems += std::string("; its message does not name the ") + field + " (" + words + ")";
    }
  };
  // What every error of a kind carries, whatever the test knows: a named
  // subject (the handle kind, the registering object, the refused
  // operation), the pin refusal or the mechanism's own error it wraps, and a
  // loss reason that is always text.
  using Kind = BindingError::Kind;
  const Kind kind = error.kind();
  if ((kind == Kind::kForeignRegistry || kind == Kind::kDeviceMismatch || kind == Kind::kInactiveMechanism) &&
      (error.subject().empty() || message.find(error.subject()) == std::string::npos)) {
    problems += "; it names no subject, or its message omits it";
  }
  if (kind == Kind::kDeferredRefused && (!error.pin_error() || error.context() != error.pin_error()->context ||
                                         message.find(error.pin_error()->message()) == std::string::npos)) {
    problems += "; it does not carry the pin refusal and its context";
  }
  if (kind == Kind::kMemory && (!error.memory_error() || message != error.memory_error()->message())) {
    problems += "; it does not carry the mechanism's own error as its message";
  }
  if (error.loss_reason().empty()) problems += "; its loss reason is empty";
  if (expected.subject) check("subject", error.subject() == *expected.subject, *expected.subject);
  if (expected.expected_device) {
    check("expected device", error.expected_device() == *expected.expected_device,
          to_string(*expected.expected_device));
  }
  if (expected.actual_device) {
    check("device", error.actual_device() == *expected.actual_device, to_string(*expected.actual_device));
  }
  if (expected.context) check("provider context", error.context() == *expected.context, to_string(*expected.context));
  if (expected.authority) check("authority", error.authority() == *expected.authority, to_string(*expected.authority));
  if (expected.mechanism) check("mechanism", error.mechanism() == *expected.mechanism, to_string(*expected.mechanism));
  if (expected.lifecycle) {
    check("lifecycle", error.lifecycle() == *expected.lifecycle, std::string(lifecycle_name(*expected.lifecycle)));
  }
  if (expected.expected_binding) {
    check("expected binding", error.expected_binding() == *expected.expected_binding,
          to_string(*expected.expected_binding));
  }
  if (expected.actual_binding) {
    check("binding", error.actual_binding() == *expected.actual_binding, to_string(*expected.actual_binding));
  }
  if (expected.allocation) {
    check("allocation", error.allocation() == *expected.allocation, to_string(*expected.allocation));
  }
  if (expected.count) check("count", error.count() == *expected.count, std::to_string(*expected.count));
  if (expected.loss_reason) check("loss reason", error.loss_reason() == *expected.loss_reason, *expected.loss_reason);
  if (expected.allocation_bytes) {
    check("allocation's size", error.allocation_bytes() == *expected.allocation_bytes,
          std::to_string(*expected.allocation_bytes));
  }
  if (expected.view_offset) {
    check("view's offset", error.offset() == *expected.view_offset, std::to_string(*expected.view_offset) + "..");
  }
  if (expected.view_end)
    check("view's end", error.end() == *expected.view_end, ".." + std::to_string(*expected.view_end));
  if (expected.retained_bytes) {
    check("retained bytes", error.residual().retained_bytes == *expected.retained_bytes,
          std::to_string(*expected.retained_bytes) + " byte");
  }
  if (problems.empty()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "a " << kind_name(expected.kind) << " refusal:" << problems.substr(1)
                                       << "; the message is \"" << message << '"';
}

}  // namespace ortmem::cts

// Checks `error` against an ExpectedBindingError (a braced list or a named one), charged to
// BIND-018 alone: a refusal of the right kind whose payload is wrong breaks
// that rule, not the rule that made the refusal.
#define ORTMEM_CTS_EXPECT_NAMES(error, ...)                                              \
  do {                                                                                   \
    ORTMEM_CTS_CHECKING("BIND-018");                                                     \
    const ::testing::AssertionResult named =                                             \
        ::ortmem::cts::Names((error), ::ortmem::cts::ExpectedBindingError(__VA_ARGS__)); \
    if (!named) ADD_FAILURE() << named.message();                                        \
  } while (false)

// Ends the test unless `result` (an Expected whose error is a BindingError)
// was refused, saying `what` succeeded; then expects the refusal's kind,
// charged to the requirement being checked (Names() lets another kind pass,
// so the kind is held to here), and its payload, charged to BIND-018.
#define ORTMEM_CTS_ASSERT_REFUSED(result, what, ...)                                                                \
  do {                                                                                                              \
    const auto& ortmem_cts_refused = (result);                                                                      \
    const ::ortmem::cts::ExpectedBindingError ortmem_cts_expected(__VA_ARGS__);                                     \
    ASSERT_FALSE(ortmem_cts_refused) << (what);                                                                     \
    EXPECT_EQ(ortmem_cts_refused.error().kind(), ortmem_cts_expected.kind) << ortmem_cts_refused.error().message(); \
    ORTMEM_CTS_EXPECT_NAMES(ortmem_cts_refused.error(), ortmem_cts_expected);                                       \
  } while (false)
