// adapters/plugin/plugin_completion_desk.hpp (internal): the host's side of
// release_completed for one plugin allocator.
//
// The plugin frees a queued allocation itself and says so through the
// callback table the host gave it at open, from any thread: a worker of its
// own, inside drain_releases, inside enqueue_release (before the host has
// even learnt the ticket), or inside the allocator's final release. The desk
// keeps what each accepted enqueue is waiting for, in enqueue order, and
// matches every completion to one of them by allocation id (the host's, so
// the plugin cannot forge a match by address). Nothing a completion says is
// trusted beyond that match: a completion for no waiting release (unknown,
// or a second one), one for another mechanism, one that overtakes an
// earlier ticket or names another ticket than enqueue returned is kept as a
// violation. The waiting release's own callback runs with no lock held,
// since it settles the kit's record and may re-enter anything.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "plugin/plugin_allocator.hpp"

namespace ortmem::plugin {

class PluginAllocator::CompletionDesk {
 public:
  // `abi_minor`: the negotiated minor, which the callback table declares.
  explicit CompletionDesk(std::uint32_t abi_minor) noexcept;
  CompletionDesk(const CompletionDesk&) = delete;
  CompletionDesk& operator=(const CompletionDesk&) = delete;

  // What the plugin is given at open; valid for the desk's life.
  [[nodiscard]] const NxmemHostCallbacks* callbacks() const noexcept { return &callbacks_; }
  // The validated vtable's identity and re-entry slot, once open succeeded.
  void bind(const NxmemAllocatorVtable& vtable) noexcept;

  struct Waiting {
    std::uint64_t allocation_id;
    void* ptr;
    Record record;
    Completion completed;
    std::optional<std::uint64_t> ticket;  // known once enqueue_release returned
  };
  // Before enqueue_release is called: the plugin may answer inside the call.
  void expect(Waiting waiting);
  // After enqueue_release answered OK with `ticket`.
  void accepted(std::uint64_t allocation_id, std::uint64_t ticket);
  // After enqueue_release refused: the waiting entry back, or nullopt when a
  // completion already consumed it (itself a violation, kept).
  [[nodiscard]] std::optional<Waiting> refused(std::uint64_t allocation_id);

  [[nodiscard]] std::size_t outstanding() const;
  [[nodiscard]] std::vector<std::string> violations() const;

 private:
  static NxmemStatus on_release_completed(void* host_ctx, const NxmemReleaseCompletion* completion) noexcept;
  static NxmemStatus on_request_reclaim(void* host_ctx, const NxmemReclaimRequest* request,
                                        std::uint64_t* reclaimed) noexcept;
  NxmemStatus complete(const NxmemReleaseCompletion& completion) noexcept;
  void violation(std::string what);  // mutex_ held

  NxmemHostCallbacks callbacks_{};
  std::uint64_t mechanism_id_ = 0;
  NxmemStatus (*pending_release_count_)(void*, std::uint64_t*) = nullptr;
  void* ctx_ = nullptr;

  mutable std::mutex mutex_;
  std::deque<Waiting> waiting_;                   // guarded by mutex_; in enqueue order
  std::map<std::uint64_t, std::uint64_t> early_;  // guarded by mutex_; allocation id -> ticket completed inside enqueue
  std::vector<std::string> violations_;           // guarded by mutex_
};

}  // namespace ortmem::plugin
