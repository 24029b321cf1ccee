// ortmem/cts/adapter.hpp: what an implementation hands the kit to be certified.
//
// An adapter supplies the objects under test (a fresh allocator, a provider
// context with its pin source, a deferred release queue) and the controls the
// suites need to drive their lifecycle (retire, tear down, lose the device,
// signal fences, drain, close), plus a way to fill and read the bytes of an
// allocation, since device memory cannot be dereferenced by the host.
//
// Declared capabilities are checked three ways: a declared capability must
// work (declared but reporting unsupported FAILS); an undeclared one must be
// absent (its tests are not-applicable); core requirements apply to everyone.
//
// Every factory returns a fresh object per call: suites never share state
// between tests.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "ortmem/allocator.hpp"
#include "ortmem/context_pin.hpp"
#include "ortmem/deferred.hpp"
#include "ortmem/device.hpp"

namespace ortmem::cts {

enum class Capability : std::uint8_t {
  kVirtualBacking,  // the allocator exposes VirtualBacking          -> profile "virtual"
  kSharedMapping,   // the allocator exposes SharedMapping           -> profile "shared"
  kContextPins,     // make_context() gives a pin source             -> profile "pins"
  kDeferredQueue,   // make_queue() gives a deferred release queue   -> profile "deferred"
  kFaultInjection,  // faults() can make mechanism calls fail
  kNxmemAbi,        // an nxmem plugin: its boundary is probed raw      -> profile "abi"
};

[[nodiscard]] std::string_view capability_name(Capability capability) noexcept;

// A control the suites drive beyond the contract's own interfaces. A
// compiled-in adapter offers every one: the interfaces below require them.
// An adapter that reaches its implementation through a narrower surface (an
// nxmem plugin: the ABI has no fence, close, capacity, device-loss or fault
// control) offers only those that surface gives, and a requirement whose
// checks need a control the surface lacks is out of its scope: the report
// says so (spec/requirements.json names each requirement's "needs").
enum class Control : std::uint8_t {
  kFences,           // QueueUnderTest::record_use and signal_fences hold and pass fences
  kQueueClose,       // QueueUnderTest::close
  kQueueCapacity,    // QueueOptions::capacity bounds a queue
  kQueueDeviceLoss,  // QueueUnderTest::mark_device_lost
  kFaultInjection,   // Adapter::faults(), when the adapter declares the capability
  // The adapter's queue runs each release through the allocator the kit
  // registered (RegistryHarness), so the kit can act inside a release. No
  // plugin surface offers it: an nxmem queue frees the plugin's own memory.
  kAllocatorInterposition,
};

[[nodiscard]] std::string_view control_name(Control control) noexcept;
// Every control, in report order.
[[nodiscard]] const std::set<Control>& all_controls();

// Where an adapter loaded from a file came from; the report carries it so a
// verdict names the exact binary and the surface it was judged through.
// Compiled-in adapters have none.
struct LoadedFrom {
  std::string interface;  // "nxmem 1.1": the ABI and the version negotiated
  std::string path;
  std::string sha256;
  std::string mechanism;
  std::set<Control> controls;  // what the surface offers; every other control is out of its scope
};

struct AdapterInfo {
  std::string name;
  std::string version;
  std::string vendor;
  DeviceKey device;
  std::set<Capability> capabilities;
  std::optional<LoadedFrom> loaded_from = std::nullopt;

  [[nodiscard]] bool declares(Capability capability) const { return capabilities.contains(capability); }
  [[nodiscard]] bool offers(Control control) const { return !loaded_from || loaded_from->controls.contains(control); }
};

// Whether the adapter can run on this machine, and if not, why (no GPU, no driver).
struct Availability {
  bool available = true;
  std::string reason;
};

// A provider context under test: its pin source plus lifecycle controls.
class ContextUnderTest {
 public:
  virtual ~ContextUnderTest() = default;
  [[nodiscard]] virtual ProviderContextPinSource& pins() = 0;
  // The exact number of outstanding pins, when the implementation can tell.
  // Declining (nullopt) costs nothing in rigour: the kit observes pins
  // through teardown() in every test, and checks a reported count as well.
  [[nodiscard]] virtual std::optional<std::uint64_t> outstanding_pins() const = 0;
  // No new pins from now on; outstanding ones stay valid.
  virtual void begin_retirement() = 0;
  // The kit's observer of pins. Never true while a pin of this context is
  // alive (including those queued requests hold); it may wait until
  // `deadline` or report busy at once, and returns true, now or on a later
  // call, once the last pin is gone (PIN-006..008). The kit checks this
  // observer on a context of its own before a test relies on it.
  [[nodiscard]] virtual bool teardown(std::chrono::steady_clock::time_point deadline) = 0;
  // The context's device is lost: pins are refused from now on (PIN-004).
  virtual void mark_device_lost() = 0;
};

// The fences of a queue whose fences are a test double (a simulated device's
// events): the kit makes them fail as only a broken device does, and counts
// every call the queue makes on them, so it can tell that a queue told of
// device loss calls its device no more (DQ-012).
class FenceFaults {
 public:
  virtual ~FenceFaults() = default;
  // While set, every record fails: an event that cannot be recorded.
  virtual void refuse_records(bool refuse) = 0;
  // From now on every fence reports the device's error instead of passing.
  virtual void break_fences() = 0;
  // Every record (refused ones too), query and discard made so far.
  [[nodiscard]] virtual std::uint64_t calls() const = 0;
};

// A deferred release queue under test plus its controls.
class QueueUnderTest {
 public:
  virtual ~QueueUnderTest() = default;
  [[nodiscard]] virtual DeferredReleaseQueue& queue() = 0;
  // Submits a piece of work that uses the memory: fences recorded after it wait for it.
  virtual void record_use() = 0;
  // Lets all submitted work finish, so every recorded fence is passed.
  virtual void signal_fences() = 0;
  // Executes every request whose fence has passed; returns how many ran. (A
  // queue may also run such requests earlier, inside enqueue: the kit keeps
  // work in flight, with record_use(), whenever it needs requests pending.)
  virtual std::size_t drain() = 0;
  // From now on enqueue refuses with kClosed (DQ-006). The contract says
  // nothing of requests already pending: the kit does not require close()
  // to run, keep or settle them, and tests only the refusal.
  virtual void close() = 0;
  // The queue saw device loss: pending requests settle without the allocator.
  virtual void mark_device_lost() = 0;
  // The bound the queue keeps, or nullopt for an unbounded queue (one that
  // never refuses for fullness). The kit trusts this over the capacity it
  // asked for in QueueOptions, and fills a bounded queue to exactly this.
  [[nodiscard]] virtual std::optional<std::size_t> capacity() const = 0;

  // What a queue whose implementation frees the memory itself reported (an
  // nxmem plugin's): the allocator is never called for its requests, so the
  // kit cannot count the calls. The addresses it settled, in settle order,
  // what each Complete one said it released, and every report that broke
  // the queue's protocol (a completion for nothing waiting, a second one,
  // one that overtook an earlier request).
  // nullopt for a queue that executes its requests through the allocator.
  struct Settlements {
    // A Complete settlement: the size released and the bytes the
    // implementation said it released (ALLOC-017 holds here too).
    struct Completed {
      std::size_t size;
      std::uint64_t allocation_bytes;
    };
    // The releases it performed, in order: a request it settled as a lost
    // device's quarantine performed nothing and is not here.
    std::vector<void*> order;
    // Per entry of `order`: performed after the queue was told of device
    // loss (mark_device_lost returned), which DQ-012 forbids. Its own
    // threads may perform a release at any moment before that.
    std::vector<bool> after_loss;
    std::vector<Completed> completed;
    std::vector<std::string> violations;
  };
  [[nodiscard]] virtual std::optional<Settlements> settled_itself() const { return std::nullopt; }

  // The queue's fences, where they are a test double the kit may fail; null
  // where they are real (the kit cannot break a real device). Shared, so the
  // kit can still count the calls made while the queue is destroyed.
  [[nodiscard]] virtual std::shared_ptr<FenceFaults> fence_faults() const { return nullptr; }
};

// How a write through a mapping that must be read-only ended (SM-008).
struct WriteProbe {
  enum class Outcome : std::uint8_t {
    kRefused,  // the system refused the write (or records the mapping read-only)
    kAllowed,  // the write went through, or the system would let it
    kUnknown,  // the probe could not tell (the check is then not run)
  };
  Outcome outcome = Outcome::kUnknown;
  std::string detail;  // how the outcome was found, for people
};

// Reading and writing allocation bytes from the host.
class MemoryAccess {
 public:
  virtual ~MemoryAccess() = default;
  virtual void fill(void* ptr, std::size_t bytes, std::uint8_t value) = 0;
  virtual void read(const void* ptr, std::span<std::uint8_t> out) = 0;
  // How a one-byte write of `value` through `ptr` ends, found without
  // harming this process. The default runs fill() in a forked child with the
  // default signal dispositions: on a read-only page the kernel kills it,
  // which is right for memory the CPU addresses. Memory a forked child cannot
  // use, or where a refused write would poison the process (a GPU's: a
  // faulting device write ends its whole context), must override this with
  // the system's own record of the mapping's protection (for CUDA,
  // cuMemGetAccess), never with what the adapter believes it asked for: an
  // override that answers kRefused without asking the system defeats SM-008.
  [[nodiscard]] virtual WriteProbe probe_write(void* ptr, std::uint8_t value);
};

// Where a fault can be injected, named by what it does to the contract rather
// than by the system or driver call behind it (munmap, cuMemUnmap, ...).
enum class FaultPoint : std::uint8_t {
  kReleaseUnmap,  // one unmap step of a multi-step release
  kCommit,        // mapping physical memory under a committed range
  kDecommit,      // removing the mapping of a decommitted range
  kPrefixMap,     // mapping a shared prefix into a target
  kPhysicalFree,  // giving one piece of physical memory back to the system (a release's or a decommit's)
  kAccessGrant,   // granting access to memory just mapped, where that is a step of its own
};

// Makes the Nth mechanism call behind a fault point fail, so partial release,
// rollback and quarantine paths run deterministically.
class FaultInjection {
 public:
  virtual ~FaultInjection() = default;
  // Arms the `nth` next call behind `point` (1 = the very next) of every
  // allocator this adapter made. False when the adapter has no such point:
  // the checks that need it are then not-applicable. A fault affects only
  // the call it was armed for; clear() disarms every point. Arming one point
  // leaves the others armed, so faults at two points can meet in one call;
  // points an adapter serves with one system call share its count, and the
  // later arm replaces the earlier.
  virtual bool arm(FaultPoint point, std::uint64_t nth) = 0;
  virtual void clear() = 0;
};

struct ContextOptions {
  // Outstanding pins beyond this many must be refused with pin-count-overflow.
  // A small cap lets the suite reach overflow; adapters must honour it.
  std::optional<std::uint64_t> max_outstanding_pins;
};

struct QueueOptions {
  std::optional<std::size_t> capacity;
};

class Adapter {
 public:
  virtual ~Adapter() = default;
  [[nodiscard]] virtual AdapterInfo info() const = 0;
  [[nodiscard]] virtual Availability available() const = 0;
  [[nodiscard]] virtual std::shared_ptr<DeviceAllocator> make_allocator() = 0;
  // A context named `identity` (registered with the suite's registry).
  [[nodiscard]] virtual std::unique_ptr<ContextUnderTest> make_context(ProviderContextIdentity identity,
                                                                       ContextOptions options = {}) = 0;
  [[nodiscard]] virtual std::unique_ptr<QueueUnderTest> make_queue(ContextUnderTest& context, QueueOptions options) = 0;
  [[nodiscard]] virtual MemoryAccess& memory() = 0;
  // Present exactly when info() declares Capability::kFaultInjection.
  [[nodiscard]] virtual FaultInjection* faults() { return nullptr; }
};

}  // namespace ortmem::cts
