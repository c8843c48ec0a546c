#include "tessera/model/memory.hpp"

#include <cstdlib>
#include <new>

#include <fmt/format.h>

namespace tessera {

Memory::Memory(uint64_t size)
    : size_(size), bytes_(static_cast<uint8_t*>(std::calloc(size ? size : 1, 1)), &std::free) {
  if (!bytes_) throw std::bad_alloc();
}

void Memory::check(uint64_t addr, uint64_t len) const {
  if (!contains(addr, len))
    throw std::out_of_range(fmt::format("device memory access [{:#x}, {:#x}) is outside the {:#x}-byte memory",
                                        addr, addr + len, size_));
}

void Memory::write(uint64_t addr, std::span<const uint8_t> src) {
  check(addr, src.size());
  if (!src.empty()) std::memcpy(bytes_.get() + addr, src.data(), src.size());
}

void Memory::read(uint64_t addr, std::span<uint8_t> dst) const {
  check(addr, dst.size());
  if (!dst.empty()) std::memcpy(dst.data(), bytes_.get() + addr, dst.size());
}

}  // namespace tessera
