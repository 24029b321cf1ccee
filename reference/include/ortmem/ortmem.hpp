// ortmem/ortmem.hpp: the whole portable contract in one include.
#pragma once

#include "ortmem/allocator.hpp"
#include "ortmem/binding.hpp"
#include "ortmem/binding_error.hpp"
#include "ortmem/bound_capability.hpp"
#include "ortmem/capability.hpp"
#include "ortmem/context_pin.hpp"
#include "ortmem/deferred.hpp"
#include "ortmem/device.hpp"
#include "ortmem/identity.hpp"
#include "ortmem/mechanism_snapshot.hpp"
#include "ortmem/memory_error.hpp"
#include "ortmem/owning_allocation.hpp"
#include "ortmem/registry.hpp"
#include "ortmem/release_outcome.hpp"
