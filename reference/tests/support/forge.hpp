// support/forge.hpp: TEST DOUBLE for caller-side metadata corruption.
//
// BoundAllocation and BoundMemoryView cannot be built or altered through the
// public API, which is exactly why the registry can trust nothing about them
// but their generation. To check that the registry still matches address,
// size and alignment against its live record, a test must produce metadata
// that lies about them, as a caller that memcpy'd or corrupted a handle
// would. This header reaches the private fields through the one legal door:
// access checks do not apply to the template arguments of an explicit
// instantiation ([temp.spec.general]/6).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "ortmem/binding.hpp"

namespace ortmem::test_support::forge {

template <class Tag, typename Tag::type Member>
struct Grant {
  friend typename Tag::type member(Tag) { return Member; }
};

#define ORTMEM_FORGE_FIELD(NAME, CLASS, TYPE, FIELD) \
  struct NAME {                                      \
    using type = TYPE CLASS::*;                      \
    friend type member(NAME);                        \
  };                                                 \
  template struct Grant<NAME, &CLASS::FIELD>;

ORTMEM_FORGE_FIELD(AllocationPtr, BoundAllocation, void*, ptr_)
ORTMEM_FORGE_FIELD(AllocationBytes, BoundAllocation, std::size_t, bytes_)
ORTMEM_FORGE_FIELD(AllocationAlign, BoundAllocation, std::size_t, align_)
ORTMEM_FORGE_FIELD(ViewPtr, BoundMemoryView, void*, allocation_ptr_)
ORTMEM_FORGE_FIELD(ViewBytes, BoundMemoryView, std::size_t, allocation_bytes_)
ORTMEM_FORGE_FIELD(ViewAlign, BoundMemoryView, std::size_t, align_)

#undef ORTMEM_FORGE_FIELD

// A copy of `allocation` that claims another address, size or alignment.
inline BoundAllocation with_ptr(BoundAllocation allocation, void* ptr) {
  allocation.*member(AllocationPtr{}) = ptr;
  return allocation;
}
inline BoundAllocation with_size(BoundAllocation allocation, std::size_t bytes) {
  allocation.*member(AllocationBytes{}) = bytes;
  return allocation;
}
inline BoundAllocation with_alignment(BoundAllocation allocation, std::size_t align) {
  allocation.*member(AllocationAlign{}) = align;
  return allocation;
}
inline BoundMemoryView with_ptr(BoundMemoryView view, void* ptr) {
  view.*member(ViewPtr{}) = ptr;
  return view;
}
inline BoundMemoryView with_size(BoundMemoryView view, std::size_t bytes) {
  view.*member(ViewBytes{}) = bytes;
  return view;
}
inline BoundMemoryView with_alignment(BoundMemoryView view, std::size_t align) {
  view.*member(ViewAlign{}) = align;
  return view;
}

}  // namespace ortmem::test_support::forge
