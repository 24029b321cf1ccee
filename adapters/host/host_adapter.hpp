// adapters/host/host_adapter.hpp: the host reference implementation as an adapter.
//
// Eager HostAllocator, HostProviderContext pins, and a HostDeferredReleaseQueue
// whose fences follow a HostStream. Bytes are read and written with memcpy.
#pragma once

namespace ortmem::adapters {

// Registers the adapter named "host".
void register_host_adapter();

}  // namespace ortmem::adapters
