// Writes NumPy .npy files (format 1.0, little-endian, C order).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace tessera {

// dtype: a NumPy type string such as "<i4", "|i1", "<f4". Throws std::runtime_error on I/O errors.
void write_npy(const std::string& path, const std::string& dtype, const std::vector<uint64_t>& shape,
               std::span<const uint8_t> data);

template <typename T>
void write_npy(const std::string& path, const std::vector<uint64_t>& shape, std::span<const T> data);

}  // namespace tessera
