// ortmem/cts/reference_parts.hpp: the kit's reference parts an adapter may
// borrow for what its own implementation does not have.
//
// Every core check binds the allocator under test to a registry, and a
// registry binding needs a provider context; an allocator that comes without
// contexts of its own (most host allocators) certifies over the reference
// context. The same goes for a deferred queue and for host memory access.
// Borrowing a part does not certify it for you: an adapter that declares
// kContextPins or kDeferredQueue over a borrowed context or queue is judged
// on the reference's behaviour, which says nothing of yours. Declare a
// capability only for a part your implementation provides.
//
// Example (the core profile over an allocator of one's own):
//
//   std::unique_ptr<ContextUnderTest> make_context(ProviderContextIdentity id, ContextOptions options) override {
//     return ortmem::cts::make_reference_context(id, options);
//   }
//   MemoryAccess& memory() override { return ortmem::cts::host_memory_access(); }
//
// Provided by ortmem::cts (the archive ortmem_cts_add_certification links).
#pragma once

#include <memory>

#include "ortmem/cts/adapter.hpp"

namespace ortmem::cts {

// A fresh reference provider context named `identity`, honouring `options`.
[[nodiscard]] std::unique_ptr<ContextUnderTest> make_reference_context(ProviderContextIdentity identity,
                                                                       ContextOptions options);

// A fresh reference deferred queue pinning through `context`, which must come
// from make_reference_context (null otherwise), honouring `options`.
[[nodiscard]] std::unique_ptr<QueueUnderTest> make_reference_queue(ContextUnderTest& context, QueueOptions options);

// Reads and writes memory the CPU addresses directly (memcpy, memset); one
// object for the whole process, safe to use from any thread.
[[nodiscard]] MemoryAccess& host_memory_access();

}  // namespace ortmem::cts
