// ortmem/mechanism/testing/fault_injecting_fences.hpp: a TEST DOUBLE of CUDA
// events: StreamFences over a HostStream that can be made to fail, so the
// event-fenced paths of a FencedDeferredQueue run, and are certified by the
// kit, on machines with no GPU.
//
// A fence is the stream's last submitted ticket and passes when the stream
// completes through it, as an event recorded on a CUDA stream does. Two
// switches produce what a real device produces only by failing: refuse the
// next records (an event that cannot be recorded) and break every fence (a
// device that reports an error instead of completing). Counts every record,
// query and discard, so a test can tell which fences went back. Thread-safe.
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "ortmem/mechanism/host_stream.hpp"
#include "ortmem/mechanism/stream_fences.hpp"

namespace ortmem::mechanism::testing {

class FaultInjectingFences final : public StreamFences {
 public:
  explicit FaultInjectingFences(std::shared_ptr<HostStream> stream) : stream_(std::move(stream)) {}

  Expected<FenceToken, std::string> record() noexcept override {
    record_calls_.fetch_add(1, std::memory_order_relaxed);
    if (refuse_records_.load(std::memory_order_acquire)) return fail(std::string("record refused (test double)"));
    recorded_.fetch_add(1, std::memory_order_relaxed);
    return stream_->submitted();
  }
  FenceState query(FenceToken fence) noexcept override {
    queries_.fetch_add(1, std::memory_order_relaxed);
    if (broken_.load(std::memory_order_acquire)) return FenceState::kBroken;
    return stream_->query(fence);
  }
  void discard(FenceToken) noexcept override { discarded_.fetch_add(1, std::memory_order_relaxed); }

  void refuse_records(bool refuse) noexcept { refuse_records_.store(refuse, std::memory_order_release); }
  void break_fences() noexcept { broken_.store(true, std::memory_order_release); }
  [[nodiscard]] std::uint64_t recorded() const noexcept { return recorded_.load(std::memory_order_relaxed); }
  // Every call on these fences: records (refused ones too), queries, discards.
  [[nodiscard]] std::uint64_t calls() const noexcept {
    return record_calls_.load(std::memory_order_relaxed) + queries() + discarded();
  }
  [[nodiscard]] std::uint64_t queries() const noexcept { return queries_.load(std::memory_order_relaxed); }
  [[nodiscard]] std::uint64_t discarded() const noexcept { return discarded_.load(std::memory_order_relaxed); }

 private:
  const std::shared_ptr<HostStream> stream_;
  std::atomic<bool> refuse_records_{false};
  std::atomic<bool> broken_{false};
  std::atomic<std::uint64_t> record_calls_{0};
  std::atomic<std::uint64_t> recorded_{0};
  std::atomic<std::uint64_t> queries_{0};
  std::atomic<std::uint64_t> discarded_{0};
};

}  // namespace ortmem::mechanism::testing
