// A flat device-memory image. Pages are allocated lazily by the OS (calloc), so a large image costs
// only what is touched.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>

namespace tessera {

class Memory {
 public:
  explicit Memory(uint64_t size);

  uint64_t size() const { return size_; }
  bool contains(uint64_t addr, uint64_t len) const { return addr <= size_ && len <= size_ - addr; }

  // Bounds-checked access for host-side callers: throws std::out_of_range naming the range.
  void write(uint64_t addr, std::span<const uint8_t> src);
  void read(uint64_t addr, std::span<uint8_t> dst) const;

  // Unchecked views for engine models that have checked the range themselves.
  uint8_t* data() { return bytes_.get(); }
  const uint8_t* data() const { return bytes_.get(); }

  template <typename T>
  T load(uint64_t addr) const {
    T v;
    std::memcpy(&v, bytes_.get() + addr, sizeof v);
    return v;
  }
  template <typename T>
  void store(uint64_t addr, T v) {
    std::memcpy(bytes_.get() + addr, &v, sizeof v);
  }

 private:
  void check(uint64_t addr, uint64_t len) const;

  uint64_t size_;
  std::unique_ptr<uint8_t, void (*)(void*)> bytes_;
};

}  // namespace tessera
