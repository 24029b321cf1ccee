// adapters/plugin/fuzz/nxmem_reader_fuzzer.cpp: libFuzzer plays a hostile
// nxmem plugin against the kit's loader.
//
// The loader's whole job is to read what a plugin wrote (the negotiation
// response, the factory pointers and vtables, the allocator and capability
// vtables, every status, allocation result and release outcome) without
// trusting a byte of it. Here the plugin is this file: its three exports and
// every slot it hands out answer from the fuzzer's input, and the kit loads
// it through PluginModule::from_exports (no dlopen), opens an allocator from
// every factory, allocates and releases a little, reads the table of the
// kit's control extension for it, and drops everything.
//
// The input is a script read front to back, one answer at a time in the
// order the kit asks; past its end every read is zero, and zero always
// means the conformant answer (OK, the right struct_size, the factory's
// device, ...). So the empty input is a well-behaved plugin that loads,
// opens, allocates and releases, and a changed byte is a lie about one field
// (the answers after it shift only when it changes how much is read).
// FuzzedDataProvider reads integers from the end, which would make
// hand-written seeds (adapters/plugin/fuzz/make_seeds.py) unreadable.
// Pointers are never taken from the input: a pointer field is a selector
// into what the harness owns (a slot function or NULL, a vtable, misaligned,
// NULL), so every report is the kit's doing, not a wild address of ours.
//
// The harness is also the kit's referee. Every vtable it hands over is a
// heap block of exactly the bytes its struct_size declares (8 to 512), freed
// when the kit releases it, so ASan sees a read past the declared size or
// after the release. It aborts on what the ABI forbids the host: a second
// release of a factory or allocator, a release the host does not owe (a
// failed open, a table too short to hold the slot), retain, a call on a
// released allocator or factory, a request unlike the one the ABI says the
// host sends, an allocation id that is not fresh and increasing, a release
// naming an allocation the plugin does not hold (double release) or naming
// it otherwise than it was issued, and a call the host's own filter should
// have refused without reaching the plugin. At the end of each input a
// transferred factory, an OK-opened allocator or an allocation whose release
// the plugin never refused must have been given back (else a leak), and
// whatever the plugin still holds is freed, so LeakSanitizer sees only the
// kit's leaks.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "nxmem/nxmem_abi.h"
#include "plugin/plugin_allocator.hpp"
#include "plugin/plugin_controls.hpp"
#include "plugin/plugin_module.hpp"

namespace {

using ortmem::plugin::PluginAllocator;
using ortmem::plugin::PluginModule;

[[noreturn]] void kit_bug(const char* what) {
  std::fprintf(stderr, "nxmem_reader_fuzzer: KIT BUG: %s\n", what);
  std::abort();
}

// ---- the script --------------------------------------------------------

class Script {
 public:
  Script(const std::uint8_t* data, std::size_t size) : data_(data), size_(size) {}
  std::uint8_t u8() { return at_ < size_ ? data_[at_++] : 0; }
  std::uint32_t u32() {
    std::uint32_t value = 0;
    for (int i = 0; i < 4; ++i) value |= std::uint32_t{u8()} << (8 * i);
    return value;
  }
  std::uint64_t u64() { return std::uint64_t{u32()} | std::uint64_t{u32()} << 32; }
  void bytes(std::uint8_t* out, std::size_t count) {
    for (std::size_t i = 0; i < count; ++i) out[i] = u8();
  }

  // A struct_size: 0 the known size, 1..0x7f that much shorter, 0x80..0xfe
  // longer (a later minor), 0xff any u32.
  std::uint32_t size(std::uint32_t known) {
    const std::uint8_t b = u8();
    if (b == 0) return known;
    if (b < 0x80) return b < known ? known - b : 0;
    if (b < 0xff) return known + (b - 0x7f);
    return u32();
  }
  // A small number: 0 the default, 0xff any u32, else b - 1.
  std::uint32_t small(std::uint32_t fallback) {
    const std::uint8_t b = u8();
    if (b == 0) return fallback;
    if (b == 0xff) return u32();
    return b - 1u;
  }
  // Capability bits: 0 the default, 0xff any u64, else (b - 1) over the
  // five known bits and the first unknown one.
  std::uint64_t flags(std::uint64_t fallback) {
    const std::uint8_t b = u8();
    if (b == 0) return fallback;
    if (b == 0xff) return u64();
    return (b - 1u) & 0x3fu;
  }
  // A u64 quantity: 0 the default, 0xff any u64, else b - 1.
  std::uint64_t amount(std::uint64_t fallback) {
    const std::uint8_t b = u8();
    if (b == 0) return fallback;
    if (b == 0xff) return u64();
    return b - 1u;
  }
  // A function-pointer slot: the harness's function, or NULL on an odd byte.
  template <class Fn>
  Fn slot(Fn fn) {
    return (u8() & 1) != 0 ? nullptr : fn;
  }

  // A status: code byte (0xff: any u32), then the message: claimed length
  // byte (0 none, 0xff any u32), content length and bytes (any bytes,
  // invalid UTF-8 included), and the filler for the rest of the buffer
  // (0 leaves a NUL after the content, anything else leaves none).
  NxmemStatus status() {
    NxmemStatus out{};
    const std::uint8_t code = u8();
    out.code = code == 0xff ? u32() : code;
    const std::uint8_t claimed = u8();
    if (claimed == 0) return out;
    out.message_len = claimed == 0xff ? u32() : claimed;
    const std::size_t content = u8();
    bytes(out.message, content);
    const std::uint8_t filler = u8();
    std::memset(out.message + content, filler, sizeof out.message - content);
    return out;
  }

 private:
  const std::uint8_t* data_;
  std::size_t size_;
  std::size_t at_ = 0;
};

// ---- what the harness handed out ----------------------------------------

// A heap block of exactly `declared` bytes (at least 8, at most 512) holding
// the first bytes of `value`, the rest 0xa5: a struct as long as its writer
// says. `misalign` shifts the pointer by 4 bytes.
struct Block {
  void* base = nullptr;
  const void* pointer = nullptr;
};

template <class T>
Block make_block(const T& value, std::uint32_t declared, bool misalign) {
  std::size_t length = declared < 8 ? 8 : declared > 512 ? 512 : declared;
  const std::size_t shift = misalign ? 4 : 0;
  auto* base = static_cast<std::uint8_t*>(std::malloc(length + shift));
  std::memset(base, 0xa5, length + shift);
  std::memcpy(base + shift, &value, length < sizeof value ? length : sizeof value);
  return Block{base, base + shift};
}

struct Allocation {
  std::uint8_t* ptr;
  void* base;
  std::uint64_t bytes;
  std::uint64_t align;
  bool refused = false;  // the plugin refused a release of it once
};

struct AllocatorRec {
  bool owed = false;  // an OK open of a table the host can release
  int released = 0;
  std::uint64_t mechanism_id = 0;
  NxmemDeviceId device{};
  std::uint64_t last_id = 0;
  std::vector<void*> blocks;                 // the vtables; freed on the release
  std::map<std::uint64_t, Allocation> live;  // by allocation id
  std::vector<void*> kept;                   // quarantined or abandoned buffers
};

struct FactoryRec {
  bool owed = false;  // transferred, readable, long enough, release non-NULL
  int released = 0;
  NxmemDeviceId device{};
  void* block = nullptr;  // the vtable; freed on the release
};

struct Harness {
  explicit Harness(Script& s) : script(s) {}
  Script& script;
  std::deque<FactoryRec> factories;
  std::deque<AllocatorRec> allocators;
  std::vector<std::unique_ptr<std::uint8_t[]>> names;
  std::vector<void*> loose;  // blocks no one releases (refused, misaligned)
  int plugin_calls = 0;      // allocate, deallocate and release_allocation
};

Harness* g = nullptr;

AllocatorRec& live_allocator(void* ctx, const char* slot) {
  for (AllocatorRec& rec : g->allocators) {
    if (&rec != ctx) continue;
    if (rec.released != 0) {
      std::fprintf(stderr, "slot %s\n", slot);
      kit_bug("a slot of an allocator was called after its release");
    }
    return rec;
  }
  kit_bug("a slot was called with a ctx the harness never handed out");
}

// The record of the allocation the host names, which must be one the plugin
// holds, named as it was issued.
std::map<std::uint64_t, Allocation>::iterator held(AllocatorRec& rec, const NxmemAllocation* allocation) {
  if (allocation == nullptr) kit_bug("a release passed a NULL allocation");
  const auto found = rec.live.find(allocation->allocation_id);
  if (found == rec.live.end()) {
    kit_bug("a release named an allocation id the plugin does not hold (never issued, released or quarantined)");
  }
  const Allocation& a = found->second;
  if (allocation->struct_size != sizeof(NxmemAllocation) || allocation->mechanism_id != rec.mechanism_id ||
      allocation->device.tier != rec.device.tier || allocation->device.index != rec.device.index ||
      allocation->ptr != a.ptr || allocation->bytes != a.bytes || allocation->align != a.align) {
    kit_bug("a release named an allocation otherwise than it was issued");
  }
  return found;
}

void give_back(AllocatorRec& rec, std::map<std::uint64_t, Allocation>::iterator found) {
  std::free(found->second.base);
  rec.live.erase(found);
}

void keep(AllocatorRec& rec, std::map<std::uint64_t, Allocation>::iterator found) {
  rec.kept.push_back(found->second.base);
  rec.live.erase(found);
}

// ---- the allocator's slots ---------------------------------------------

NxmemStatus h_allocate(void* ctx, const NxmemAllocRequest* request, NxmemAllocResult* result) {
  AllocatorRec& rec = live_allocator(ctx, "allocate");
  ++g->plugin_calls;
  if (request == nullptr || result == nullptr) kit_bug("allocate got a NULL request or result");
  if (request->struct_size != sizeof *request || request->mechanism_id != rec.mechanism_id ||
      request->device.tier != rec.device.tier || request->device.index != rec.device.index) {
    kit_bug("allocate got a request that does not name this allocator");
  }
  if (request->align == 0 || (request->align & (request->align - 1)) != 0) {
    kit_bug("allocate was asked for an alignment that is not a power of two");
  }
  if (request->allocation_id <= rec.last_id) kit_bug("allocation ids are not fresh and increasing from 1");
  rec.last_id = request->allocation_id;
  Script& s = g->script;
  NxmemStatus status = s.status();
  result->struct_size = s.size(sizeof *result);
  result->owned_bytes = s.amount(request->bytes);
  result->mapped_bytes = s.amount(request->bytes);
  // 0 a real, aligned buffer; 1 NULL; 2 a real buffer one byte off.
  const std::uint8_t pick = s.u8() % 3;
  if (status.code == NXMEM_STATUS_OK && pick != 1 && request->bytes > (1u << 20)) {
    status.code = NXMEM_STATUS_OUT_OF_MEMORY;  // the harness does not hand out that much
  }
  if (status.code != NXMEM_STATUS_OK || pick == 1) {
    static std::uint8_t decoy[64];
    result->ptr = pick == 1 ? nullptr : decoy;  // not the kit's to keep
    return status;
  }
  const std::uint64_t align = request->align < 16 ? 16 : request->align;
  const std::uint64_t length = ((request->bytes == 0 ? 1 : request->bytes) + 1 + align - 1) / align * align;
  auto* base = static_cast<std::uint8_t*>(std::aligned_alloc(align, length));
  result->ptr = base + (pick == 2 ? 1 : 0);
  rec.live.emplace(request->allocation_id, Allocation{result->ptr, base, request->bytes, request->align});
  return status;
}

NxmemStatus h_deallocate(void* ctx, const NxmemAllocation* allocation, std::uint64_t* unmapped_out) {
  AllocatorRec& rec = live_allocator(ctx, "deallocate");
  ++g->plugin_calls;
  const auto found = held(rec, allocation);
  if (unmapped_out == nullptr) kit_bug("deallocate got a NULL unmapped_out");
  Script& s = g->script;
  const NxmemStatus status = s.status();
  *unmapped_out = s.amount(0);
  if (status.code == NXMEM_STATUS_OK) {
    give_back(rec, found);
  } else {
    found->second.refused = true;
  }
  return status;
}

NxmemStatus h_release_allocation(void* ctx, const NxmemAllocation* allocation, NxmemReleaseOutcome* outcome) {
  AllocatorRec& rec = live_allocator(ctx, "release_allocation");
  ++g->plugin_calls;
  const auto found = held(rec, allocation);
  if (outcome == nullptr) kit_bug("release_allocation got a NULL outcome");
  Script& s = g->script;
  const NxmemStatus status = s.status();
  outcome->struct_size = s.size(sizeof *outcome);
  outcome->state = s.small(NXMEM_RELEASE_COMPLETE);
  outcome->allocation_bytes = s.amount(found->second.bytes);
  outcome->unmapped_bytes = s.amount(0);
  outcome->residual_owned_bytes = s.amount(0);
  outcome->failure = s.status();
  // What the plugin now believes, by its own answer.
  if (status.code != NXMEM_STATUS_OK || outcome->state == NXMEM_RELEASE_FAILED) {
    found->second.refused = true;  // changed nothing: still live
  } else if (outcome->state == NXMEM_RELEASE_COMPLETE) {
    give_back(rec, found);
  } else {
    keep(rec, found);  // quarantined, or a state the host must read as quarantine
  }
  return status;
}

void h_retain(void*) { kit_bug("the host called retain; the ABI says it never does"); }

void h_release(void* ctx) {
  for (AllocatorRec& rec : g->allocators) {
    if (&rec != ctx) continue;
    if (!rec.owed)
      kit_bug("an allocator the host does not owe a release (failed open, or too short to hold the slot) was released");
    if (++rec.released > 1) kit_bug("an allocator was released twice");
    for (void* block : rec.blocks) std::free(block);
    rec.blocks.clear();
    return;
  }
  kit_bug("release got a ctx the harness never handed out");
}

// Slots the kit's drive here never reaches: deferred release (being added),
// and the capability vtables' calls. They refuse, with a fuzzed status that
// is never OK, so no answer of theirs can leave state behind.
NxmemStatus refusal() {
  NxmemStatus status = g->script.status();
  if (status.code == NXMEM_STATUS_OK) status.code = NXMEM_STATUS_NOT_IMPLEMENTED;
  return status;
}
NxmemStatus h_enqueue_release(void* ctx, const NxmemAllocation*, std::uint64_t*) {
  live_allocator(ctx, "enqueue_release");
  return refusal();
}
NxmemStatus h_drain_releases(void* ctx, std::uint64_t, std::uint64_t* retired) {
  live_allocator(ctx, "drain_releases");
  if (retired != nullptr) *retired = 0;
  return refusal();
}
NxmemStatus h_pending_release_count(void* ctx, std::uint64_t* count) {
  live_allocator(ctx, "pending_release_count");
  if (count != nullptr) *count = 0;
  return refusal();
}
NxmemStatus vb_allocate_committed(void* ctx, const NxmemAllocRequest*, NxmemAllocResult*) {
  live_allocator(ctx, "allocate_committed");
  return refusal();
}
NxmemStatus vb_commit_range(void* ctx, const NxmemRangeRequest*) {
  live_allocator(ctx, "commit_range");
  return refusal();
}
NxmemStatus vb_decommit_range(void* ctx, const NxmemRangeRequest*, std::uint64_t*) {
  live_allocator(ctx, "decommit_range");
  return refusal();
}
NxmemStatus vb_mapped_for_ranges(void* ctx, const NxmemRangeRequest*, std::uint64_t, std::uint64_t*) {
  live_allocator(ctx, "mapped_bytes_for_ranges");
  return refusal();
}
NxmemStatus vb_mapped_for_allocation(void* ctx, const NxmemAllocRequest*, std::uint64_t*) {
  live_allocator(ctx, "mapped_bytes_for_allocation");
  return refusal();
}
NxmemStatus vb_committed_bytes(void* ctx, const NxmemAllocation*, std::uint64_t*) {
  live_allocator(ctx, "committed_bytes");
  return refusal();
}
NxmemStatus sm_create(void* ctx, std::uint64_t, std::uint64_t, NxmemSharedPrefixHandle*) {
  live_allocator(ctx, "create_shared_prefix");
  return refusal();
}
NxmemStatus sm_retain(void*, const NxmemSharedPrefixHandle*) {
  kit_bug("the host called retain_shared_prefix; the ABI says it never does");
}
NxmemStatus sm_release(void* ctx, const NxmemSharedPrefixHandle*) {
  live_allocator(ctx, "release_shared_prefix");
  kit_bug("the host released a shared prefix this plugin never created");
}
NxmemStatus sm_incremental(void* ctx, const NxmemSharedPrefixHandle*, std::uint64_t*) {
  live_allocator(ctx, "incremental_owned_bytes");
  return refusal();
}
NxmemStatus sm_commit(void* ctx, const NxmemSharedPrefixCommitRequest*, NxmemSharedPrefixCommitInfo*) {
  live_allocator(ctx, "commit_shared_prefix");
  return refusal();
}

constexpr std::uint64_t kMechanism = 0x7a7a7566;  // "fuzz"

// A capability vtable pointer for `flag`: 0 follows the flag (a valid table
// when set, NULL when clear), 1 NULL, 2 a table, 3 a misaligned table.
template <class Vtable, class Fill>
const Vtable* capability(Script& s, AllocatorRec& rec, std::uint64_t flags, std::uint64_t flag, Fill fill) {
  const std::uint8_t pick = s.u8() % 4;
  if (pick == 1 || (pick == 0 && (flags & flag) == 0)) return nullptr;
  Vtable table{};
  const std::uint32_t declared = s.size(sizeof table);
  table.struct_size = declared;
  table.abi_minor = s.small(1);
  table.mechanism_id = s.u8() == 0 ? rec.mechanism_id : s.u64();
  table.ctx = &rec;
  fill(table);
  const Block block = make_block(table, declared, pick == 3);
  rec.blocks.push_back(block.base);
  return static_cast<const Vtable*>(block.pointer);
}

// ---- the factory's slots ------------------------------------------------

NxmemStatus h_open_allocator(void* ctx, const NxmemOpenRequest* request, const NxmemAllocatorVtable** out) {
  FactoryRec* factory = nullptr;
  for (FactoryRec& rec : g->factories) {
    if (&rec == ctx) factory = &rec;
  }
  if (factory == nullptr) kit_bug("open_allocator got a ctx the harness never handed out");
  if (factory->released != 0) kit_bug("open_allocator was called on a released factory");
  if (request == nullptr || out == nullptr) kit_bug("open_allocator got a NULL request or out pointer");
  if (request->struct_size != sizeof *request || request->abi_minor > NXMEM_ABI_VERSION_MINOR ||
      request->device.tier != factory->device.tier || request->device.index != factory->device.index) {
    kit_bug("open_allocator got a request that is not the negotiated minor and the factory's device");
  }
  if (request->callbacks != nullptr && request->callbacks->struct_size != sizeof(NxmemHostCallbacks)) {
    kit_bug("open_allocator got a callback table of another size");
  }
  Script& s = g->script;
  const NxmemStatus status = s.status();
  // 0 a vtable; 1 NULL; 2 a misaligned vtable; 3 out left untouched.
  const std::uint8_t pick = s.u8() % 4;
  if (pick == 1) *out = nullptr;
  if (pick == 1 || pick == 3) return status;

  AllocatorRec& rec = g->allocators.emplace_back();
  NxmemAllocatorVtable table{};
  const std::uint32_t declared = s.size(sizeof table);
  table.struct_size = declared;
  table.abi_minor = s.small(1);
  rec.mechanism_id = table.mechanism_id = s.u8() == 0 ? kMechanism : s.u64();
  table.device.tier = s.small(request->device.tier);
  table.device.index = s.small(request->device.index);
  rec.device = table.device;
  table.capability_flags =
      s.flags(NXMEM_CAP_ALLOCATOR | NXMEM_CAP_STRUCTURED_RELEASE | request->required_capability_flags);
  static const std::uint8_t kName[] = "fuzz allocator";
  switch (s.u8() % 3) {
    case 0: table.name = kName; break;
    case 1: table.name = nullptr; break;
    default: {  // one byte, no NUL: a reader that runs past it is caught
      auto& name = g->names.emplace_back(new std::uint8_t[1]{'x'});
      table.name = name.get();
    }
  }
  table.ctx = &rec;
  table.allocate = s.slot(&h_allocate);
  table.deallocate = s.slot(&h_deallocate);
  table.retain = s.slot(&h_retain);
  table.release = s.slot(&h_release);
  table.virtual_backing = capability<NxmemVirtualBackingVtable>(
      s, rec, table.capability_flags, NXMEM_CAP_VIRTUAL_BACKING, [&](NxmemVirtualBackingVtable& vb) {
        vb.allocate_committed = s.slot(&vb_allocate_committed);
        vb.commit_range = s.slot(&vb_commit_range);
        vb.decommit_range = s.slot(&vb_decommit_range);
        vb.mapped_bytes_for_ranges = s.slot(&vb_mapped_for_ranges);
        vb.mapped_bytes_for_allocation = s.slot(&vb_mapped_for_allocation);
        vb.committed_bytes = s.slot(&vb_committed_bytes);
      });
  table.shared_mapping = capability<NxmemSharedMappingVtable>(s, rec, table.capability_flags, NXMEM_CAP_SHARED_MAPPING,
                                                              [&](NxmemSharedMappingVtable& sm) {
                                                                sm.create_shared_prefix = s.slot(&sm_create);
                                                                sm.retain_shared_prefix = s.slot(&sm_retain);
                                                                sm.release_shared_prefix = s.slot(&sm_release);
                                                                sm.incremental_owned_bytes = s.slot(&sm_incremental);
                                                                sm.commit_shared_prefix = s.slot(&sm_commit);
                                                              });
  table.enqueue_release = s.slot(&h_enqueue_release);
  table.drain_releases = s.slot(&h_drain_releases);
  table.pending_release_count = s.slot(&h_pending_release_count);
  table.release_allocation = s.slot(&h_release_allocation);
  const Block block = make_block(table, declared, pick == 2);
  rec.blocks.push_back(block.base);
  *out = static_cast<const NxmemAllocatorVtable*>(block.pointer);
  // The ABI's debt: one release after an OK open, when the host can read the
  // slot (aligned, long enough to hold it, non-NULL).
  rec.owed = status.code == NXMEM_STATUS_OK && pick == 0 &&
             declared >= offsetof(NxmemAllocatorVtable, virtual_backing) && table.release != nullptr;
  if (!rec.owed) {
    // Nobody will release this table: it is the harness's to free at the end.
    g->loose.insert(g->loose.end(), rec.blocks.begin(), rec.blocks.end());
    rec.blocks.clear();
  }
  return status;
}

void h_factory_release(void* ctx) {
  for (FactoryRec& rec : g->factories) {
    if (&rec != ctx) continue;
    if (!rec.owed) kit_bug("a factory the host could not have read was released");
    if (++rec.released > 1) kit_bug("a factory was released twice");
    std::free(rec.block);
    rec.block = nullptr;
    return;
  }
  kit_bug("a factory release got a ctx the harness never handed out");
}

// ---- the three exports --------------------------------------------------

NxmemStatus h_negotiate(const NxmemNegotiateRequest* request, NxmemNegotiateResponse* response) {
  if (request == nullptr || response == nullptr) kit_bug("NxmemNegotiate got a NULL request or response");
  if (request->struct_size != sizeof *request || request->reserved != 0 ||
      request->host_range.major_min != NXMEM_ABI_VERSION_MAJOR ||
      request->host_range.major_max != NXMEM_ABI_VERSION_MAJOR ||
      request->host_range.minor_min != NXMEM_ABI_VERSION_MINOR_BASELINE ||
      request->host_range.minor_max > NXMEM_ABI_VERSION_MINOR ||
      (request->host_capability_flags & ~NXMEM_CAP_KNOWN_MASK) != 0) {
    kit_bug("NxmemNegotiate got a request outside the ABI");
  }
  Script& s = g->script;
  const NxmemStatus status = s.status();
  response->struct_size = s.size(sizeof *response);
  response->agreed_major = s.small(NXMEM_ABI_VERSION_MAJOR);
  response->agreed_minor = s.small(request->host_range.minor_max);
  response->reserved = s.small(0);
  response->plugin_range.major_min = s.small(1);
  response->plugin_range.major_max = s.small(1);
  response->plugin_range.minor_min = s.small(0);
  response->plugin_range.minor_max = s.small(1);
  response->capability_flags =
      s.flags(NXMEM_CAP_ALLOCATOR | (request->host_capability_flags & NXMEM_CAP_STRUCTURED_RELEASE));
  return status;
}

// A factory name: 0 "factory-N" (unique), 1 NULL, 2 fuzzed bytes then a NUL,
// 3 256 bytes with no NUL, 4 empty, 5 the previous factory's name.
const std::uint8_t* factory_name(Script& s, std::size_t index) {
  const std::uint8_t pick = s.u8() % 6;
  if (pick == 1) return nullptr;
  if (pick == 5 && !g->names.empty()) return g->names.back().get();
  auto& name = g->names.emplace_back(new std::uint8_t[300]{});
  switch (pick) {
    case 2: s.bytes(name.get(), s.u8()); break;
    case 3: std::memset(name.get(), 'n', 300); break;
    case 4: break;
    default: std::snprintf(reinterpret_cast<char*>(name.get()), 300, "factory-%zu", index); break;
  }
  return name.get();
}

NxmemStatus h_create_factories(const NxmemAllocatorFactoryVtable** out, std::uint64_t max, std::uint64_t* count) {
  if (out == nullptr || count == nullptr) kit_bug("NxmemCreateAllocatorFactories got a NULL array or count");
  Script& s = g->script;
  const NxmemStatus status = s.status();
  // How many slots to write: 0 one, else b - 1 (capped at what the host offered).
  const std::uint8_t b = s.u8();
  std::uint64_t written = b == 0 ? 1 : b - 1u;
  if (written > max) written = max;
  // out_count: 0 the number written, 0xff any u64, else b - 0x40 more (floored at 0).
  const std::uint8_t d = s.u8();
  if (d == 0) {
    *count = written;
  } else if (d == 0xff) {
    *count = s.u64();
  } else {
    const std::int64_t delta = std::int64_t{d} - 0x40;
    *count = delta < 0 && static_cast<std::uint64_t>(-delta) > written ? 0 : written + delta;
  }
  for (std::uint64_t i = 0; i < written; ++i) {
    // 0 a factory; 1 NULL; 2 a misaligned factory.
    const std::uint8_t pick = s.u8() % 3;
    if (pick == 1) {
      out[i] = nullptr;
      continue;
    }
    FactoryRec& rec = g->factories.emplace_back();
    NxmemAllocatorFactoryVtable table{};
    const std::uint32_t declared = s.size(sizeof table);
    table.struct_size = declared;
    table.abi_minor = s.small(1);
    table.name = factory_name(s, i);
    table.device.tier = s.small(NXMEM_TIER_HOST);
    table.device.index = s.small(0);
    rec.device = table.device;
    table.capability_flags = s.flags(NXMEM_CAP_ALLOCATOR | NXMEM_CAP_STRUCTURED_RELEASE);
    table.ctx = &rec;
    table.open_allocator = s.slot(&h_open_allocator);
    table.release = s.slot(&h_factory_release);
    const Block block = make_block(table, declared, pick == 2);
    rec.block = block.base;
    rec.owed = pick == 0 && declared >= sizeof table && table.release != nullptr;
    out[i] = static_cast<const NxmemAllocatorFactoryVtable*>(block.pointer);
    if (!rec.owed) {
      g->loose.push_back(rec.block);
      rec.block = nullptr;
    }
  }
  return status;
}

// ---- the control extension --------------------------------------------

NxmemStatus h_fault_slot(void* ctx) {
  (void)live_allocator(ctx, "a control slot");
  return g->script.status();
}
NxmemStatus h_arm_fault(void* ctx, std::uint32_t, std::uint64_t) { return h_fault_slot(ctx); }

// The table: status, then (on OK) where it is (0 a block, 1 NULL, else
// misaligned), its struct_size, version, mechanism id (0 the one asked
// for, else any u64), control bits (0 FAULT_INJECTION, 0xff any u64, else
// (b - 1) over the six known bits and the first unknown one), reserved, and
// a selector for each of the ten slots. Only the fault slots are ever
// called (the queue ones need a deferred allocator this harness never runs).
NxmemStatus h_controls(std::uint32_t kit_version, std::uint64_t mechanism_id, const OrtmemCtsControls** out) {
  if (kit_version != ORTMEM_CTS_CONTROLS_VERSION) kit_bug("the kit asked for a control table version it does not read");
  const NxmemStatus answer = g->script.status();
  if (answer.code != NXMEM_STATUS_OK) return answer;
  Script& s = g->script;
  const std::uint8_t where = s.u8();
  OrtmemCtsControls table{};
  table.struct_size = s.size(sizeof table);
  table.version = s.small(ORTMEM_CTS_CONTROLS_VERSION);
  table.mechanism_id = s.u8() == 0 ? mechanism_id : s.u64();
  const std::uint8_t bits = s.u8();
  table.controls = bits == 0 ? ORTMEM_CTS_CONTROL_FAULT_INJECTION : bits == 0xff ? s.u64() : (bits - 1u) & 0x7fu;
  table.reserved = s.amount(0);
  // The queue and memory slots are never called here: a call is the kit's bug.
  table.open_queue = s.slot(+[](void*, std::uint64_t) -> NxmemStatus { kit_bug("open_queue was called"); });
  table.record_use = s.slot(+[](void*) -> NxmemStatus { kit_bug("record_use was called"); });
  table.signal_fences = s.slot(+[](void*) -> NxmemStatus { kit_bug("signal_fences was called"); });
  table.close_queue = s.slot(+[](void*) -> NxmemStatus { kit_bug("close_queue was called"); });
  table.lose_device = s.slot(+[](void*) -> NxmemStatus { kit_bug("lose_device was called"); });
  table.arm_fault = s.slot(&h_arm_fault);
  table.clear_faults = s.slot(&h_fault_slot);
  table.fill =
      s.slot(+[](void*, std::uint8_t*, std::uint64_t, std::uint8_t) -> NxmemStatus { kit_bug("fill was called"); });
  table.read = s.slot(
      +[](void*, const std::uint8_t*, std::uint8_t*, std::uint64_t) -> NxmemStatus { kit_bug("read was called"); });
  table.probe_write = s.slot(
      +[](void*, std::uint8_t*, std::uint8_t, std::uint32_t*) -> NxmemStatus { kit_bug("probe_write was called"); });
  if (where == 1) {
    *out = nullptr;
    return answer;
  }
  const Block block = make_block(table, table.struct_size, where != 0);
  g->loose.push_back(block.base);
  *out = static_cast<const OrtmemCtsControls*>(block.pointer);
  return answer;
}

NxmemStatus h_query_unload(NxmemUnloadReport* report) {
  if (report == nullptr) kit_bug("NxmemQueryUnloadReadiness got a NULL report");
  Script& s = g->script;
  const NxmemStatus status = s.status();
  report->struct_size = s.size(sizeof *report);
  report->live_allocators = s.amount(0);
  report->live_allocations = s.amount(0);
  report->live_views = s.amount(0);
  report->live_capabilities = s.amount(0);
  report->queued_releases = s.amount(0);
  return status;
}

// ---- the drive ----------------------------------------------------------

struct Issued {
  void* ptr;
  std::size_t bytes;
  std::size_t align;
};

// A call the host's filter must refuse without reaching the plugin.
void expect_refused(PluginAllocator& allocator, void* ptr, std::size_t bytes, std::size_t align) {
  const int before = g->plugin_calls;
  const auto outcome = allocator.release(ptr, bytes, align);
  if (!outcome.is_failed()) kit_bug("a release of no live allocation was not refused");
  if (g->plugin_calls != before) kit_bug("a release of no live allocation reached the plugin");
}

void drive(Script& s, PluginAllocator& allocator) {
  std::vector<Issued> issued;
  const auto allocate = [&](bool keep) {
    const std::size_t bytes = s.amount(63) + 1;
    const std::size_t align = std::size_t{1} << ((s.u8() + 4) % 13);  // 0: 16
    auto got = allocator.allocate(bytes, align);
    if (!got) {
      (void)got.error().message();
      return;
    }
    if (keep) {
      issued.push_back({*got, bytes, align});
      return;
    }
    const auto outcome = allocator.release(*got, bytes, align);
    (void)outcome.describe();
    if (outcome.is_failed()) issued.push_back({*got, bytes, align});
  };
  // Ops: 0 the default one (allocate then release), else b % 9.
  const std::uint8_t count_byte = s.u8();
  const int ops = count_byte == 0 ? 1 : count_byte % 9;
  for (int op = 0; op < ops; ++op) {
    const std::uint8_t kind = s.u8() % 8;
    switch (kind) {
      case 0: allocate(false); break;
      case 1: allocate(true); break;
      case 2:  // release the oldest
      case 6:  // the same, then again: the second must be refused
        if (!issued.empty()) {
          const Issued first = issued.front();
          const auto outcome = allocator.release(first.ptr, first.bytes, first.align);
          (void)outcome.describe();
          (void)outcome.state();
          if (!outcome.is_failed()) {
            issued.erase(issued.begin());
            if (kind == 6) expect_refused(allocator, first.ptr, first.bytes, first.align);
          }
        }
        break;
      case 3:  // deallocate the oldest: no answer, so the kit's record decides
        if (!issued.empty()) {
          allocator.deallocate(issued.front().ptr, issued.front().bytes, issued.front().align);
          issued.erase(issued.begin());
        }
        break;
      case 4:  // the oldest with another size
        if (!issued.empty())
          expect_refused(allocator, issued.front().ptr, issued.front().bytes + 1, issued.front().align);
        break;
      case 5: {  // an address the kit never issued
        static std::uint8_t stranger[64];
        expect_refused(allocator, stranger, 64, 1);
        break;
      }
      default: {  // an alignment that is no power of two
        const int before = g->plugin_calls;
        if (allocator.allocate(64, 3)) kit_bug("an allocation with alignment 3 succeeded");
        if (g->plugin_calls != before) kit_bug("an allocation with alignment 3 reached the plugin");
        break;
      }
    }
  }
  // What is still issued stays live: the allocator's destructor gives it back.
}

void run(Script& s) {
  // The host's range: 0 minors 0-1, 1 minor 0 only, else an unsupported b.
  const std::uint8_t host_byte = s.u8();
  const ortmem::plugin::HostRange host{host_byte == 0 ? 1u : host_byte == 1 ? 0u : host_byte};
  auto loaded = PluginModule::from_exports({&h_negotiate, &h_create_factories, &h_query_unload}, "fuzz", host);
  if (!loaded) {
    (void)loaded.error().size();
    return;
  }
  std::shared_ptr<PluginModule> module = std::move(*loaded);
  (void)module->unload_report();
  (void)ortmem::plugin::capability_names(module->capability_flags());
  std::vector<std::shared_ptr<PluginAllocator>> allocators;
  for (const ortmem::plugin::Factory& factory : module->factories()) {
    (void)ortmem::plugin::device_name(factory.device);
    // Opens of this factory: 0 one, else b % 3.
    const std::uint8_t b = s.u8();
    const int opens = b == 0 ? 1 : b % 3;
    for (int i = 0; i < opens; ++i) {
      const std::uint64_t required = s.flags(NXMEM_CAP_ALLOCATOR);
      auto opened = PluginAllocator::open(module, factory, required);
      if (!opened) {
        (void)opened.error().size();
        continue;
      }
      drive(s, **opened);
      // The control table is read as the loader reads it, once per
      // mechanism; a table it accepts has only its fault slots called here.
      auto controls = ortmem::plugin::Controls::load(&h_controls, (*opened)->mechanism_id(), factory.capability_flags);
      if (controls && *controls && (*controls)->offers(ORTMEM_CTS_CONTROL_FAULT_INJECTION)) {
        (void)(*controls)->arm_fault((*opened)->plugin_ctx(), ORTMEM_CTS_FAULT_DECOMMIT, 1);
        (void)(*controls)->clear_faults((*opened)->plugin_ctx());
      } else if (!controls) {
        (void)controls.error().size();
      }
      allocators.push_back(std::move(*opened));
    }
  }
  // Drop order: 0 the allocators first, else the module first (the
  // allocators keep it alive until the last one goes).
  if (s.u8() == 0) {
    allocators.clear();
    module.reset();
  } else {
    module.reset();
    allocators.clear();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  Script script(data, size);
  Harness harness(script);
  g = &harness;
  run(script);
  // Everything the kit made is gone: every debt must be paid.
  for (const FactoryRec& rec : harness.factories) {
    if (rec.owed && rec.released != 1) kit_bug("a transferred factory was never released");
  }
  for (AllocatorRec& rec : harness.allocators) {
    if (rec.owed && rec.released != 1) kit_bug("an OK-opened allocator was never released");
    for (auto& [id, allocation] : rec.live) {
      if (!allocation.refused) kit_bug("an allocation the plugin never refused to release was never released");
      std::free(allocation.base);
    }
    for (void* base : rec.kept) std::free(base);
    for (void* block : rec.blocks) std::free(block);
  }
  for (const FactoryRec& rec : harness.factories) std::free(rec.block);
  for (void* block : harness.loose) std::free(block);
  g = nullptr;
  return 0;
}
