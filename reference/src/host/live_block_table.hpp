// src/host/live_block_table.hpp (internal): the host allocator's live
// blocks, by address.
//
// An open-addressing table: one array of slots, probed linearly from the
// address's hash, with a power-of-two capacity. Why not std::unordered_map:
// it allocates a node per block and reduces every hash modulo a prime, so a
// 64-byte allocate and release paid two mallocs, two frees and two integer
// divisions for the bookkeeping around one malloc and one free. Here the
// bookkeeping allocates only when the table grows, and a lookup is a
// multiply, a shift and usually one slot.
//
// Removal shifts the following entries of the run back (no tombstones), so a
// table that churns at a steady size never fills with dead slots and a
// lookup never walks past the run its address hashes into.
//
// Not thread-safe: the allocator's shard lock guards each table.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <utility>

namespace ortmem::detail {

class LiveBlockTable {
 public:
  struct Block {
    std::uintptr_t address;  // 0 marks a free slot: no block lives at address 0
    std::size_t bytes;
    std::size_t align;
  };

  LiveBlockTable() = default;
  LiveBlockTable(const LiveBlockTable&) = delete;
  LiveBlockTable& operator=(const LiveBlockTable&) = delete;

  [[nodiscard]] std::size_t size() const noexcept { return size_; }

  // The live block at `address`, or null.
  [[nodiscard]] Block* find(std::uintptr_t address) noexcept {
    if (size_ == 0) return nullptr;
    for (std::size_t index = home_of(address);; index = next(index)) {
      Block& slot = slots_[index];
      if (slot.address == address) return &slot;
      if (slot.address == 0) return nullptr;
    }
  }

  // Records a block whose address is not in the table. False, with nothing
  // changed, when the table had to grow and the host had no memory for it.
  [[nodiscard]] bool insert(const Block& block) noexcept {
    if ((size_ + 1) * 4 > capacity_ * 3 && !grow()) return false;
    place(block);
    ++size_;
    return true;
  }

  // Removes a block find() returned.
  void erase(Block* block) noexcept {
    std::size_t hole = static_cast<std::size_t>(block - slots_.get());
    // Each later entry of the run moves into the hole unless its own home
    // lies cyclically in (hole, index]: there it is still reachable.
    for (std::size_t index = next(hole); slots_[index].address != 0; index = next(index)) {
      const std::size_t home = home_of(slots_[index].address);
      const bool reachable_without_hole =
          hole <= index ? (hole < home && home <= index) : (hole < home || home <= index);
      if (!reachable_without_hole) {
        slots_[hole] = slots_[index];
        hole = index;
      }
    }
    slots_[hole].address = 0;
    --size_;
  }

  // Calls fn(block) for every live block.
  template <class Fn>
  void for_each(Fn&& fn) const {
    for (std::size_t index = 0; index < capacity_; ++index) {
      if (slots_[index].address != 0) fn(slots_[index]);
    }
  }

  void swap(LiveBlockTable& other) noexcept {
    std::swap(slots_, other.slots_);
    std::swap(capacity_, other.capacity_);
    std::swap(size_, other.size_);
    std::swap(shift_, other.shift_);
  }

 private:
  static constexpr std::size_t kFirstCapacity = 16;

  // Blocks are at least 16-byte aligned, so the low bits say nothing; a
  // Fibonacci multiply spreads the rest over the table's top bits.
  [[nodiscard]] std::size_t home_of(std::uintptr_t address) const noexcept {
    const std::uint64_t mixed = (static_cast<std::uint64_t>(address) >> 4) * 0x9E3779B97F4A7C15ULL;
    return static_cast<std::size_t>(mixed >> shift_);
  }
  [[nodiscard]] std::size_t next(std::size_t index) const noexcept { return (index + 1) & (capacity_ - 1); }

  void place(const Block& block) noexcept {
    std::size_t index = home_of(block.address);
    while (slots_[index].address != 0) index = next(index);
    slots_[index] = block;
  }

  // Out of line: it runs a logarithmic number of times in a table's life,
  // and inlined its loop took the registers of every insert's probe.
  [[gnu::cold, gnu::noinline]] bool grow() noexcept {
    const std::size_t capacity = capacity_ == 0 ? kFirstCapacity : capacity_ * 2;
    std::unique_ptr<Block[]> slots(new (std::nothrow) Block[capacity]());
    if (!slots) return false;
    std::unique_ptr<Block[]> old = std::exchange(slots_, std::move(slots));
    const std::size_t old_capacity = std::exchange(capacity_, capacity);
    shift_ = 64 - static_cast<unsigned>(std::countr_zero(capacity));
    for (std::size_t index = 0; index < old_capacity; ++index) {
      if (old[index].address != 0) place(old[index]);
    }
    return true;
  }

  std::unique_ptr<Block[]> slots_;
  std::size_t capacity_ = 0;  // zero or a power of two
  std::size_t size_ = 0;
  unsigned shift_ = 64;  // 64 - log2(capacity_): home_of keeps the hash's top bits
};

}  // namespace ortmem::detail
