// adapters/host/reference_context.hpp: a reference pin context as the kit's
// ContextUnderTest.
//
// The host's mechanism::ProviderContext and the CUDA one (which adds a device
// and a stream) answer the same pin calls; this one wrapper serves both, so a
// rule about how the kit drives a context is written once.
#pragma once

#include <chrono>
#include <memory>

#include "ortmem/cts/adapter.hpp"

namespace ortmem::adapters {

template <class Context>
class ReferenceContextUnderTest : public cts::ContextUnderTest {
 public:
  explicit ReferenceContextUnderTest(std::shared_ptr<Context> context) : context_(std::move(context)) {}

  ProviderContextPinSource& pins() override { return *context_; }
  std::optional<std::uint64_t> outstanding_pins() const override { return context_->outstanding_pins(); }
  void begin_retirement() override { context_->begin_retirement(); }
  bool teardown(std::chrono::steady_clock::time_point deadline) override {
    return context_->teardown(deadline).has_value();
  }
  void mark_device_lost() override { context_->mark_device_lost(); }

  // The reference context underneath (for adapters built on this one).
  [[nodiscard]] const std::shared_ptr<Context>& reference() const { return context_; }

 private:
  std::shared_ptr<Context> context_;
};

}  // namespace ortmem::adapters
