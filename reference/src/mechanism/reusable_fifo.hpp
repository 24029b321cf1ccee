// src/mechanism/reusable_fifo.hpp (internal): the fenced deferred queue's FIFO.
//
// A FIFO over one vector that keeps its storage. Why not std::deque: a queue
// that drains about as fast as it fills walks a deque through memory, and with
// entries of a few hundred bytes that is a malloc and a free every other
// request. Here a FIFO that empties (the usual case: work completes and is
// polled) reuses the same slots, and one that never empties compacts once its
// consumed prefix is as long as what is left, so each entry is moved a
// constant number of times, amortised.
//
// `T` must move without throwing: compaction moves entries over consumed
// ones, and emplace_back() must stay all-or-nothing.
#pragma once

#include <cstddef>
#include <type_traits>
#include <utility>
#include <vector>

namespace ortmem::mechanism::detail {

template <class T>
class ReusableFifo {
  static_assert(std::is_nothrow_move_constructible_v<T> && std::is_nothrow_move_assignable_v<T>);

 public:
  [[nodiscard]] bool empty() const noexcept { return head_ == items_.size(); }
  [[nodiscard]] std::size_t size() const noexcept { return items_.size() - head_; }
  [[nodiscard]] T& front() noexcept { return items_[head_]; }
  // Entries the storage holds room for, popped ones included: bounded by the
  // backlog, not by how many entries ever passed through.
  [[nodiscard]] std::size_t capacity() const noexcept { return items_.capacity(); }

  // Appends in place. Throws std::bad_alloc, with nothing changed and no
  // argument moved from, when the storage cannot grow.
  template <class... Args>
  void emplace_back(Args&&... args) {
    items_.emplace_back(std::forward<Args>(args)...);
  }

  // Moves the front out and removes it.
  [[nodiscard]] T pop_front() noexcept {
    T item(std::move(items_[head_]));
    ++head_;
    if (head_ == items_.size()) {
      items_.clear();  // keeps the capacity
      head_ = 0;
    } else if (head_ >= kCompactAfter && head_ * 2 >= items_.size()) {
      // Every entry moved onto lies in the consumed prefix, so nothing live is overwritten.
      items_.erase(items_.begin(), items_.begin() + static_cast<std::ptrdiff_t>(head_));
      head_ = 0;
    }
    return item;
  }

  // The entries not yet popped, front first.
  [[nodiscard]] auto begin() noexcept { return items_.begin() + static_cast<std::ptrdiff_t>(head_); }
  [[nodiscard]] auto end() noexcept { return items_.end(); }

  void swap(ReusableFifo& other) noexcept {
    items_.swap(other.items_);
    std::swap(head_, other.head_);
  }

 private:
  // Below this, a consumed prefix costs less to keep than to compact.
  static constexpr std::size_t kCompactAfter = 64;

  std::vector<T> items_;
  std::size_t head_ = 0;  // items_[0, head_) were popped and are moved-from
};

}  // namespace ortmem::mechanism::detail
