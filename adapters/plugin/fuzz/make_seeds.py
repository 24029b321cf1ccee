#!/usr/bin/env python3
"""Writes the nxmem_reader fuzzer's seeds (reports/fuzz/seeds/nxmem_reader).

A seed is the plugin's answers in the order the kit asks for them, as
nxmem_reader_fuzzer.cpp reads them: one byte per choice, zero the conformant
answer, and zero for everything past the end. Each helper below emits the
bytes of one call, so a seed reads as the conversation it scripts; the
fuzzer's own comments say what each byte means.

    python3 adapters/plugin/fuzz/make_seeds.py reports/fuzz/seeds/nxmem_reader
"""
import os
import sys

OK = [0, 0]  # a status: code 0, no message


def status(code, message=b"", claimed=None, filler=0):
    """code; claimed message_len (0 = none); content length, content; filler for the rest."""
    if not message and claimed is None:
        return [code, 0]
    return [code, len(message) if claimed is None else claimed, len(message), *message, filler]


def negotiate(answer=OK, flags=0):
    # status, struct_size, agreed_major, agreed_minor, reserved, plugin_range (4), capability_flags
    return [*answer, 0, 0, 0, 0, 0, 0, 0, 0, flags]


def factory(flags=0):
    # pick (0 aligned), struct_size, abi_minor, name, tier, index, flags, open_allocator, release
    return [0, 0, 0, 0, 0, 0, flags, 0, 0]


def create(written=0, count_delta=0, factories=None):
    # status, how many slots are written (0 one, else b - 1), out_count (0 as written, else b - 0x40 more)
    out = [*OK, written, count_delta]
    for bytes_ in factories or [factory()]:
        out += bytes_
    return out


def unload():
    # status, struct_size, five counters
    return [*OK, 0, 0, 0, 0, 0, 0]


def virtual_backing():
    return [0, 0, 0] + [0] * 6  # struct_size, abi_minor, mechanism, six slots


def shared_mapping():
    return [0, 0, 0] + [0] * 5  # struct_size, abi_minor, mechanism, five slots


def open_allocator(tier=0, flags=0, vb=None, sm=None):
    # required flags, status, pick (0 a vtable), struct_size, abi_minor, mechanism, tier, index,
    # flags, name, allocate, deallocate, retain, release, virtual_backing (pick then the table),
    # shared_mapping (likewise), enqueue_release, drain_releases, pending_release_count,
    # release_allocation
    out = [0, *OK, 0, 0, 0, 0, tier, 0, flags, 0, 0, 0, 0, 0, 0]
    out += vb or []
    out += [0]
    out += sm or []
    return out + [0, 0, 0, 0]


def alloc(bytes_=0, align=0, answer=OK):
    # the drive's size (0 64, else b) and alignment (1 << ((b + 4) % 13)), then the plugin's
    # status, struct_size, owned_bytes, mapped_bytes, pointer pick (0 a real buffer)
    return [bytes_, align, *answer, 0, 0, 0, 0]


def release(answer=OK, state=0, failure=OK):
    # status, struct_size, state (0 COMPLETE, else b - 1), allocation/unmapped/residual bytes, failure
    return [*answer, 0, state, 0, 0, 0, *failure]


def dealloc(answer=OK):
    return [*answer, 0]  # status, unmapped bytes


FAILED, QUARANTINED, UNKNOWN_STATE = 3, 2, 0xfd  # state bytes: b - 1
CAPS = 0x17 + 1  # ALLOCATOR | VIRTUAL_BACKING | SHARED_MAPPING | STRUCTURED_RELEASE, as a flags byte

# Drive bytes after an open: the op count (0 one, else b % 9), then per op its kind
# (0 allocate and release, 1 allocate and keep, 2 release the oldest, 3 deallocate it,
# 4 it with another size, 5 a stranger address, 6 release twice, 7 alignment 3).
# After the last open: the drop order (0 allocators first), then the destructors' calls.
SEEDS = {
    # The conformant plugin at minor 1: load, open, allocate, structured release, drop.
    "happy-minor1.bin": [0, *negotiate(), *create(), *unload(), 0, *open_allocator(), 1, 0, *alloc(), *release(), 0],
    # The host offers minor 0 only: deallocate is the release.
    "happy-minor0-legacy.bin": [1, *negotiate(), *create(), *unload(), 0, *open_allocator(), 1, 0, *alloc(), *dealloc(), 0],
    # Two factories; the second's allocator has virtual backing and shared mapping: two kept
    # allocations, a double release, another size, a stranger, alignment 3, a deallocate and one
    # more kept; the module goes first and the destructor gives back what is left.
    "two-factories-capabilities.bin": [
        0, *negotiate(flags=CAPS), *create(written=3, factories=[factory(), factory(flags=CAPS)]), *unload(),
        0, *open_allocator(), 1, 0, *alloc(), *release(),
        0, *open_allocator(flags=CAPS, vb=virtual_backing(), sm=shared_mapping()),
        8, 1, *alloc(), 1, *alloc(bytes_=200, align=3), 6, *release(), 4, 5, 7, 3, *release(), 1, *alloc(bytes_=9, align=1),
        1, *dealloc()],
    # Release outcomes: FAILED, QUARANTINED, a non-OK status, a state the ABI does not know
    # (read as a quarantine), the FAILED one again with a failure message of invalid UTF-8
    # and no NUL, then once more, COMPLETE; the destructor gives back the one left.
    "release-outcomes.bin": [
        0, *negotiate(), *create(), *unload(), 0, *open_allocator(),
        6, 0, *alloc(), *release(state=FAILED), 0, *alloc(), *release(state=QUARANTINED),
        0, *alloc(), *release(answer=[5, 0]), 0, *alloc(), *release(state=UNKNOWN_STATE),
        2, *release(state=FAILED, failure=status(12, bytes([0xff, 0xfe, 0x80]), claimed=0xfe, filler=ord("x"))),
        2, *release(), 0, *dealloc()],
    # Three factories written, out_count 1: the two past it are the host's to release all the same.
    "past-out-count.bin": [
        0, *negotiate(), *create(written=4, count_delta=0x40 - 2, factories=[factory()] * 3), *unload(),
        0, *open_allocator(), 1, 0, *alloc(), *release(), 0],
    # A refused negotiation whose message is not UTF-8 and has no NUL.
    "negotiation-refused.bin": [0, *negotiate(answer=status(1, bytes([0xc3, 0x28, 0xa0]), claimed=0xfe, filler=0xff))],
    # An OK open of a vtable the host refuses (another device): released at once all the same.
    "open-refused-vtable.bin": [0, *negotiate(), *create(), *unload(), 0, *open_allocator(tier=1), 0],
}

if __name__ == "__main__":
    out = sys.argv[1] if len(sys.argv) > 1 else "reports/fuzz/seeds/nxmem_reader"
    os.makedirs(out, exist_ok=True)
    for name, script in SEEDS.items():
        with open(os.path.join(out, name), "wb") as seed:
            seed.write(bytes(script))
