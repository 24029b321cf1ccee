// ortmem/mechanism/stream_fences.hpp: fences on a stream, as the deferred
// release queue sees them.
//
// record() marks "everything submitted to the stream so far"; query() says,
// without blocking, whether the stream has passed a mark. On CUDA a fence is
// an event recorded on the stream that used the memory (CudaEventFences);
// the interface is what lets the queue's ordering and settling rules be
// tested on a machine with no GPU.
#pragma once

#include <cstdint>
#include <string>

#include "ortmem/expected.hpp"

namespace ortmem::mechanism {

using FenceToken = std::uint64_t;

enum class FenceState : std::uint8_t {
  kPending,  // the stream has not reached the mark yet
  kPassed,   // every piece of work before the mark has finished
  kBroken,   // the device reported an error: the mark will never be passed
};

class StreamFences {
 public:
  virtual ~StreamFences() = default;
  // Why not, when the mark could not be recorded.
  [[nodiscard]] virtual Expected<FenceToken, std::string> record() noexcept = 0;
  // Never blocks and never synchronizes the device.
  [[nodiscard]] virtual FenceState query(FenceToken fence) noexcept = 0;
  // The fence is no longer needed (passed, or its request settled otherwise).
  virtual void discard(FenceToken fence) noexcept = 0;
  // True when record() and query() are a few atomic operations that never
  // block and never call out (a host stream): a queue may then make them
  // under its own lock, and accept or execute a request with one lock. Events
  // are driver calls, made outside any lock (the default).
  [[nodiscard]] virtual bool callable_under_lock() const noexcept { return false; }
};

}  // namespace ortmem::mechanism
