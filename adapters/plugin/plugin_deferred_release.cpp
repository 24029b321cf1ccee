// Deferred release through a plugin's own queue (enqueue_release,
// drain_releases, release_completed), and the desk that matches completions.
#include <algorithm>
#include <cstring>

#include "plugin/plugin_completion_desk.hpp"

namespace ortmem::plugin {
namespace {

NxmemStatus status(std::uint32_t code, const char* message) noexcept {
  NxmemStatus made{};
  made.code = code;
  const std::size_t length = std::min<std::size_t>(std::strlen(message), NXMEM_STATUS_MESSAGE_MAX);
  std::memcpy(made.message, message, length);
  made.message_len = static_cast<std::uint32_t>(length);
  return made;
}

}  // namespace

PluginAllocator::CompletionDesk::CompletionDesk(std::uint32_t abi_minor) noexcept {
  callbacks_.struct_size = sizeof callbacks_;
  callbacks_.abi_minor = abi_minor;
  callbacks_.host_ctx = this;
  callbacks_.request_reclaim = &on_request_reclaim;
  callbacks_.release_completed = &on_release_completed;
}

void PluginAllocator::CompletionDesk::bind(const NxmemAllocatorVtable& vtable) noexcept {
  const std::lock_guard lock(mutex_);
  mechanism_id_ = vtable.mechanism_id;
  pending_release_count_ = vtable.pending_release_count;
  ctx_ = vtable.ctx;
}

// The kit holds nothing it could give back on a plugin's request.
NxmemStatus PluginAllocator::CompletionDesk::on_request_reclaim(void*, const NxmemReclaimRequest*,
                                                                std::uint64_t* reclaimed) noexcept {
  if (reclaimed != nullptr) *reclaimed = 0;
  return status(NXMEM_STATUS_OK, "");
}

NxmemStatus PluginAllocator::CompletionDesk::on_release_completed(void* host_ctx,
                                                                  const NxmemReleaseCompletion* completion) noexcept {
  auto* desk = static_cast<CompletionDesk*>(host_ctx);
  if (!readable_struct(completion) || completion->struct_size < sizeof(NxmemReleaseCompletion)) {
    const std::lock_guard lock(desk->mutex_);
    desk->violation("release_completed was given a NULL, misaligned or short completion; it was ignored");
    return status(NXMEM_STATUS_SHORT_STRUCT, "the completion is NULL, misaligned or shorter than 328 bytes");
  }
  NxmemReleaseCompletion copy{};
  std::memcpy(&copy, completion, sizeof copy);
  return desk->complete(copy);
}

void PluginAllocator::CompletionDesk::violation(std::string what) {
  try {
    violations_.push_back(std::move(what));
  } catch (const std::bad_alloc&) {
    // Losing the text of one violation must not lose the completion.
  }
}

NxmemStatus PluginAllocator::CompletionDesk::complete(const NxmemReleaseCompletion& completion) noexcept {
  std::optional<Waiting> matched;
  {
    const std::lock_guard lock(mutex_);
    const std::string named = "the completion of ticket " + std::to_string(completion.ticket) + " (allocation id " +
                              std::to_string(completion.allocation_id) + ")";
    if (completion.mechanism_id != mechanism_id_) {
      violation(named + " names mechanism " + std::to_string(completion.mechanism_id) + ", not the allocator's " +
                std::to_string(mechanism_id_) + "; it was ignored");
      return status(NXMEM_STATUS_WRONG_MECHANISM, "the completion names another mechanism");
    }
    const auto found = std::find_if(waiting_.begin(), waiting_.end(), [&](const Waiting& each) {
      return each.allocation_id == completion.allocation_id;
    });
    if (found == waiting_.end()) {
      violation(named + " answers no release waiting for one (never enqueued, or completed already); it was ignored");
      return status(NXMEM_STATUS_UNKNOWN_ALLOCATION, "no release of this allocation is waiting for a completion");
    }
    if (found != waiting_.begin()) {
      violation(named + " arrived before the completion of allocation id " +
                std::to_string(waiting_.front().allocation_id) + ", which was enqueued earlier");
    }
    if (found->ticket && *found->ticket != completion.ticket) {
      violation(named + " names another ticket than enqueue_release returned (" + std::to_string(*found->ticket) + ")");
    }
    if (!found->ticket) early_[completion.allocation_id] = completion.ticket;
    matched = std::move(*found);
    waiting_.erase(found);
  }
  // Re-entering the plugin from its own callback: a plugin that delivers
  // completions while holding its lock deadlocks here, which the isolated
  // run reports as a hang of this test instead of a silent pass.
  if (pending_release_count_ != nullptr) {
    std::uint64_t pending = 0;
    (void)pending_release_count_(ctx_, &pending);
  }
  const bool by_device_loss = completion.outcome.state == NXMEM_RELEASE_QUARANTINED &&
                              completion.outcome.failure.code == NXMEM_STATUS_DEVICE_ERROR &&
                              completion.outcome.unmapped_bytes == 0;
  matched->completed(outcome_of(completion.outcome, matched->ptr, matched->record, "release_completed"),
                     by_device_loss);
  return status(NXMEM_STATUS_OK, "");
}

void PluginAllocator::CompletionDesk::expect(Waiting waiting) {
  const std::lock_guard lock(mutex_);
  waiting_.push_back(std::move(waiting));
}

void PluginAllocator::CompletionDesk::accepted(std::uint64_t allocation_id, std::uint64_t ticket) {
  const std::lock_guard lock(mutex_);
  for (Waiting& each : waiting_) {
    if (each.allocation_id == allocation_id) {
      each.ticket = ticket;
      return;
    }
  }
  // Completed inside enqueue_release: the ticket it named must be this one.
  if (const auto early = early_.find(allocation_id); early != early_.end()) {
    if (early->second != ticket) {
      violation("the completion delivered inside enqueue_release named ticket " + std::to_string(early->second) +
                ", but enqueue_release returned ticket " + std::to_string(ticket));
    }
    early_.erase(early);
  }
}

std::optional<PluginAllocator::CompletionDesk::Waiting> PluginAllocator::CompletionDesk::refused(
    std::uint64_t allocation_id) {
  const std::lock_guard lock(mutex_);
  const auto found = std::find_if(waiting_.begin(), waiting_.end(),
                                  [&](const Waiting& each) { return each.allocation_id == allocation_id; });
  if (found == waiting_.end()) {
    early_.erase(allocation_id);
    violation("enqueue_release of allocation id " + std::to_string(allocation_id) +
              " answered an error, but the plugin had already completed it");
    return std::nullopt;
  }
  Waiting back = std::move(*found);
  waiting_.erase(found);
  return back;
}

std::size_t PluginAllocator::CompletionDesk::outstanding() const {
  const std::lock_guard lock(mutex_);
  return waiting_.size();
}

std::vector<std::string> PluginAllocator::CompletionDesk::violations() const {
  const std::lock_guard lock(mutex_);
  return violations_;
}

Expected<void, PluginStatus> PluginAllocator::enqueue_release(void* ptr, std::size_t bytes, std::size_t align,
                                                              Completion completed) {
  if (!releases_deferred()) {
    return fail(PluginStatus{NXMEM_STATUS_INVALID_ARGUMENT, "the plugin allocator offers no deferred release"});
  }
  Record record{};
  {
    // The record leaves first, exactly as for release(): two racing final
    // releases never both reach the plugin, and a completion delivered
    // inside the call finds nothing of the allocation still live.
    const std::lock_guard lock(mutex_);
    const auto found = locate_locked(ptr, bytes, align);
    if (found == live_.end()) {
      return fail(PluginStatus{NXMEM_STATUS_INVALID_ARGUMENT,
                               "no live allocation of this plugin allocator has this address, size and alignment; "
                               "the plugin was not called"});
    }
    record = found->second;
    live_.erase(found);
  }
  desk_->expect(CompletionDesk::Waiting{record.id, ptr, record, std::move(completed), std::nullopt});
  const NxmemAllocation allocation = name_of(ptr, record);
  std::uint64_t ticket = 0;
  const PluginStatus answer = read_status(vtable_.enqueue_release(vtable_.ctx, &allocation, &ticket));
  if (answer.ok()) {
    desk_->accepted(record.id, ticket);
    return {};
  }
  // A refused enqueue changed nothing: the allocation is live again. (A
  // plugin that completed it anyway has released it: the completion
  // settled it, and the violation is on record.)
  if (desk_->refused(record.id)) {
    const std::lock_guard lock(mutex_);
    live_.emplace(reinterpret_cast<std::uintptr_t>(ptr), record);
    return fail(answer);
  }
  return {};
}

Expected<std::uint64_t, std::string> PluginAllocator::drain_releases() {
  std::uint64_t retired = 0;
  const PluginStatus answer = read_status(vtable_.drain_releases(vtable_.ctx, UINT64_MAX, &retired));
  if (!answer.ok()) return fail("the plugin's drain_releases answered " + answer.describe());
  return retired;
}

std::size_t PluginAllocator::outstanding_releases() const { return desk_->outstanding(); }

std::vector<std::string> PluginAllocator::completion_violations() const { return desk_->violations(); }

}  // namespace ortmem::plugin
